//! What the semaphore model sends for each operation: built in one place
//! ([`request`]), which the model's steps send (`sem_step.rs`) and the
//! conformance check compares with what the library sends
//! (`model::conform`, [`Conforms`]).

use latchkey::protocol::{
    primitive_key, PERMITS_FENCE_SUFFIX, PERMITS_RELEASED_SUFFIX, PERMITS_SUFFIX,
};

use crate::model::common::token;
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::lock_request::Request;
use crate::model::semaphore::{Op, SemaphoreModel};

/// The model's key prefix and name: the keys are the library's for them.
const PREFIX: &[u8] = b"lk:";
const NAME: &[u8] = b"model";

/// The semaphore's keys and channel, as the library names them.
pub(crate) struct Names {
    pub(crate) permits: Vec<u8>,
    pub(crate) fence: Vec<u8>,
    pub(crate) channel: String,
}

pub(crate) fn names() -> Names {
    let key = |suffix| primitive_key(PREFIX, NAME, suffix);
    Names {
        permits: key(PERMITS_SUFFIX),
        fence: key(PERMITS_FENCE_SUFFIX),
        channel: String::from_utf8_lossy(&key(PERMITS_RELEASED_SUFFIX)).into_owned(),
    }
}

/// What a client taking `k` permits sends for `op` with owner token
/// `token`: the one place the model builds its requests.
pub(crate) fn request(m: &SemaphoreModel, op: Op, token: String, k: u32) -> Request<'_> {
    let cfg = &m.config;
    let keys = names();
    let ttl = cfg.ttl.to_string();
    fn script<'a>(
        name: &'static str,
        text: &'a str,
        keys: Vec<Vec<u8>>,
        args: Vec<String>,
    ) -> Request<'a> {
        Request {
            name,
            text: Some(text),
            keys,
            args,
        }
    }
    let s = &m.scripts;
    match op {
        Op::Try | Op::Retry => {
            let fenced = if cfg.fenced { "1" } else { "0" };
            let args = vec![
                token,
                cfg.permits.to_string(),
                ttl,
                fenced.to_string(),
                k.to_string(),
            ];
            let keys = vec![keys.permits, keys.fence];
            script("sem_acquire.lua", &s.acquire, keys, args)
        }
        Op::Renew => {
            let args = vec![token, ttl, k.to_string()];
            script("sem_extend.lua", &s.extend, vec![keys.permits], args)
        }
        Op::Issue => script(
            "sem_fence.lua",
            &s.fence,
            vec![keys.permits, keys.fence],
            vec![token],
        ),
        Op::Release | Op::Cleanup => {
            let args = vec![token, "PUBLISH".into(), keys.channel, k.to_string()];
            script("sem_release.lua", &s.release, vec![keys.permits], args)
        }
    }
}

/// The semaphore's operations by the conformance test's names (its
/// `tables.rs`), for a hold of `k`; `None`: not sent under this model's
/// configuration. An exhaustive match, so a new operation must be named.
fn op_name(m: &SemaphoreModel, op: Op, k: u32) -> Option<&'static str> {
    let many = k > 1;
    Some(match op {
        Op::Try | Op::Retry if m.config.fenced => match many {
            true => "acquire many fenced",
            false => "acquire fenced",
        },
        Op::Try | Op::Retry if many => "acquire many",
        Op::Try | Op::Retry => "acquire",
        Op::Renew if many => "renew many",
        Op::Renew => "renew",
        Op::Issue if m.config.fenced => return None,
        Op::Issue => "issue fencing token",
        Op::Release | Op::Cleanup if many => "release many",
        Op::Release | Op::Cleanup => "release",
    })
}

impl Conforms for SemaphoreModel {
    fn declared(&self) -> Vec<Declared<'_>> {
        const OPS: [Op; 6] = [
            Op::Try,
            Op::Retry,
            Op::Renew,
            Op::Issue,
            Op::Release,
            Op::Cleanup,
        ];
        let roles = Roles::semaphore(PREFIX, NAME, self.config.ttl);
        let mut takes = self.config.takes.clone();
        takes.sort_unstable();
        takes.dedup();
        takes
            .into_iter()
            .flat_map(|k| OPS.into_iter().map(move |op| (k, op)))
            .filter_map(|(k, op)| {
                Some(Declared {
                    op: op_name(self, op, k)?,
                    request: request(self, op, token(0, 1), k),
                    roles: roles.clone(),
                })
            })
            .collect()
    }
}
