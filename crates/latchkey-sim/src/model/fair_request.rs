//! What the fair lock model sends for each operation: built in one place
//! ([`request`]), which the model's steps send (`fair_client.rs`,
//! `fair_step.rs`) and the conformance check compares with what the
//! library sends (`model::conform`, [`Conforms`]).

use crate::model::common::{process_id, token};
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::fair::{FairModel, Mode, Wait};
use crate::model::fair_step::{entry, names};
use crate::model::lock_request::{send, Request};
use crate::reply::Reply;
use crate::server::Server;

/// A fair lock request, with the values that vary between clients.
pub(crate) enum Sends {
    /// A first try (`fair_acquire.lua` in mode `try`, no entry), with the
    /// try's token.
    Try(String),
    /// A waiter's attempt with its entry and token, queueing (`wait`) or
    /// looking again once queued (`renew`).
    Attempt {
        entry: String,
        token: String,
        mode: Mode,
    },
    /// The renewal task's run (`fair_renew.lua`) for the waiters of one
    /// process: its record (by the process's id, 16 hex digits) and the
    /// own leases of the entries it sends.
    RenewLeases {
        process: String,
        entries: Vec<String>,
    },
    /// The watchdog's or the hand-off's extension (`extend.lua` on the
    /// lock key alone, as a plain lock's).
    Extend(String),
    /// A release handing on (also the armed guard's release of a first
    /// try whose reply was lost).
    Release(String),
    /// A waiter giving up, with its token and entry.
    Leave { token: String, entry: String },
    /// An operator's revocation (`fair_revoke.lua`).
    Revoke,
}

/// What `sends` sends: the one place the model builds its requests.
pub(crate) fn request(m: &FairModel, sends: Sends) -> Request<'_> {
    let cfg = &m.config;
    let (keys, stem, channel) = names(m);
    let s = &m.scripts;
    let fenced = if cfg.fenced { "1" } else { "0" };
    let acquire = |entry: String, token: String, mode: &str| Request {
        name: "fair_acquire.lua",
        text: Some(&s.acquire),
        keys: keys.clone(),
        args: vec![
            entry,
            token,
            cfg.ttl.to_string(),
            fenced.into(),
            mode.into(),
            m.entry_lease().to_string(),
            cfg.lease.to_string(),
        ],
    };
    let script = |name, text, keys, args| Request {
        name,
        text: Some(text),
        keys,
        args,
    };
    match sends {
        Sends::Try(token) => acquire(String::new(), token, "try"),
        Sends::Attempt { entry, token, mode } => {
            let mode = match mode {
                Mode::Queue => "wait",
                Mode::Renew => "renew",
            };
            acquire(entry, token, mode)
        }
        Sends::RenewLeases { process, entries } => {
            let mut args = vec![m.entry_lease().to_string(), cfg.lease.to_string(), process];
            args.extend(entries);
            // Lock, queue, leases, process records.
            let keys = vec![
                keys[0].clone(),
                keys[1].clone(),
                keys[2].clone(),
                keys[5].clone(),
            ];
            script("fair_renew.lua", &s.renew, keys, args)
        }
        Sends::Extend(token) => {
            let args = vec![token, cfg.ttl.to_string()];
            script("extend.lua", &s.extend, keys[..1].to_vec(), args)
        }
        Sends::Release(token) => {
            let args = vec![token, "PUBLISH".into(), stem, channel];
            script("fair_release.lua", &s.release, keys, args)
        }
        Sends::Leave { token, entry } => {
            let args = vec![token, "PUBLISH".into(), stem, channel, entry];
            script("fair_leave.lua", &s.leave, keys, args)
        }
        Sends::Revoke => {
            let args = vec!["PUBLISH".into(), stem, channel];
            script("fair_revoke.lua", &s.revoke, keys, args)
        }
    }
}

/// Builds and sends `sends` to `server`: its arguments and the reply.
pub(crate) fn call(m: &FairModel, server: &mut Server, sends: Sends) -> (Vec<String>, Reply) {
    let r = request(m, sends);
    let reply = send(server, &r);
    (r.args, reply)
}

impl Conforms for FairModel {
    /// Client 0's first attempt, for each operation the conformance test
    /// names (`tests/conformance.rs`); a revocation only where the
    /// configuration allows one.
    fn declared(&self) -> Vec<Declared<'_>> {
        let wait = |mode| Wait {
            token: 2,
            id: 1,
            mode,
            recheck_at: 0,
            retry: false,
            not_ours_since: 0,
        };
        let me = |mode| entry(self, 0, &wait(mode));
        let t = || token(0, 2);
        let mut ops = vec![
            ("first try", Sends::Try(token(0, 1))),
            (
                "queue",
                Sends::Attempt {
                    entry: me(Mode::Queue),
                    token: t(),
                    mode: Mode::Queue,
                },
            ),
            (
                "look again",
                Sends::Attempt {
                    entry: me(Mode::Renew),
                    token: t(),
                    mode: Mode::Renew,
                },
            ),
            (
                "renew lease",
                Sends::RenewLeases {
                    process: process_id(0),
                    entries: vec![me(Mode::Renew)],
                },
            ),
            ("renew", Sends::Extend(t())),
            ("release", Sends::Release(t())),
            ("release after a lost reply", Sends::Release(token(0, 1))),
            (
                "leave",
                Sends::Leave {
                    token: t(),
                    entry: me(Mode::Queue),
                },
            ),
        ];
        if self.config.revokes > 0 {
            ops.push(("revoke", Sends::Revoke));
        }
        let roles = Roles::fair(self.key(), self.config.ttl, self.config.lease);
        ops.into_iter()
            .map(|(op, sends)| Declared {
                op,
                request: request(self, sends),
                roles: roles.clone(),
            })
            .collect()
    }
}
