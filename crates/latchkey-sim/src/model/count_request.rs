//! What the latch and barrier models send for each operation: built in
//! one place each ([`latch`], [`barrier`]), which the models' steps send
//! (`latch.rs`, `barrier_step.rs`) and the conformance check compares with
//! what the library sends (`model::conform`, [`Conforms`]).

use crate::model::barrier::{self as b, BarrierModel, KEEP_MS};
use crate::model::common::token;
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::latch::{self as l, LatchModel};
use crate::model::lock_request::{send, Request};
use crate::reply::Reply;
use crate::server::Server;

/// A latch request.
#[derive(Clone, Copy)]
pub(crate) enum LatchSends {
    /// `Latch::create` (the count and TTL are the configuration's).
    Create,
    /// `Latch::count_down`.
    CountDown,
    /// A waiter (or `Latch::count`) reading the count.
    Read,
}

/// What a latch's `sends` sends: the one place the model builds them.
pub(crate) fn latch(m: &LatchModel, sends: LatchSends) -> Request<'_> {
    let cfg = &m.config;
    match sends {
        LatchSends::Create => Request {
            name: "latch_create.lua",
            text: Some(&m.create),
            keys: vec![l::key()],
            args: vec![cfg.count.to_string(), cfg.ttl.to_string()],
        },
        LatchSends::CountDown => Request {
            name: "latch_count_down.lua",
            text: Some(&m.count_down),
            keys: vec![l::key()],
            args: vec!["PUBLISH".into(), l::channel()],
        },
        LatchSends::Read => Request {
            name: "GET",
            text: None,
            keys: vec![l::key()],
            args: Vec::new(),
        },
    }
}

/// A barrier request.
pub(crate) enum BarrierSends {
    /// `arrive_and_wait`'s arrival, with the party's token.
    Arrive(String),
    /// A waiting party reading the generation again.
    Recheck,
    /// A party giving up, with the barrier's id and its generation; or,
    /// without them, the undo of an arrival whose reply was lost.
    Leave(String, Option<(String, i64)>),
}

/// What a barrier's `sends` sends: the one place the model builds them.
pub(crate) fn barrier(m: &BarrierModel, sends: BarrierSends) -> Request<'_> {
    let cfg = &m.config;
    let keys = vec![b::key()];
    match sends {
        BarrierSends::Arrive(token) => Request {
            name: "barrier_arrive.lua",
            text: Some(&m.arrive),
            keys,
            args: vec![
                cfg.parties.to_string(),
                cfg.ttl.to_string(),
                "PUBLISH".into(),
                b::channel(),
                token,
                KEEP_MS.to_string(),
            ],
        },
        BarrierSends::Recheck => Request {
            name: "HMGET",
            text: None,
            keys,
            args: vec!["gen".into(), "id".into()],
        },
        BarrierSends::Leave(token, of) => Request {
            name: "barrier_leave.lua",
            text: Some(&m.leave),
            keys,
            args: match of {
                Some((id, gen)) => vec![token, id, gen.to_string()],
                None => vec![token],
            },
        },
    }
}

/// Sends `r`: the arguments as a trace shows them (a command's key
/// first) and the reply.
pub(crate) fn call(server: &mut Server, r: Request) -> (Vec<String>, Reply) {
    let reply = send(server, &r);
    let mut args: Vec<String> = match r.text {
        Some(_) => Vec::new(),
        None => r
            .keys
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect(),
    };
    args.extend(r.args);
    (args, reply)
}

impl Conforms for LatchModel {
    fn declared(&self) -> Vec<Declared<'_>> {
        let roles = Roles::latch(b"", b"model", self.config.ttl);
        [
            ("create", LatchSends::Create),
            ("count down", LatchSends::CountDown),
            ("wait", LatchSends::Read),
        ]
        .into_iter()
        .map(|(op, sends)| Declared {
            op,
            request: latch(self, sends),
            roles: roles.clone(),
        })
        .collect()
    }
}

impl Conforms for BarrierModel {
    fn declared(&self) -> Vec<Declared<'_>> {
        let roles = Roles::barrier(b"", b"model", self.config.ttl);
        [
            ("arrive", BarrierSends::Arrive(token(0, 1))),
            ("recheck", BarrierSends::Recheck),
            (
                "leave",
                BarrierSends::Leave(token(0, 1), Some((token(1, 1), 0))),
            ),
        ]
        .into_iter()
        .map(|(op, sends)| Declared {
            op,
            request: barrier(self, sends),
            roles: roles.clone(),
        })
        .collect()
    }
}
