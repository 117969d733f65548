//! What the read-write lock model sends for each request: built in one
//! place ([`request`]), which the model's steps send (`rw_step.rs`) and the
//! conformance check compares with what the library sends
//! (`model::conform`, [`Conforms`]).

use latchkey::protocol::{primitive_key, RWLOCK_SUFFIXES, RWLOCK_WRITER_ACQUIRED_SUFFIX};

use crate::model::common::token;
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::lock_request::Request;
use crate::model::rwlock::{Access, RwLockModel};

/// The model's key prefix and name: the keys are the library's for them.
const PREFIX: &[u8] = b"lk:";
const NAME: &[u8] = b"model";

/// The lock's keys (`RWLOCK_SUFFIXES`, in order: writer, readers, writers
/// waiting, readers waiting, readers next, fencing counter, channel) and
/// the writer's acquired record, as the library names them.
pub(crate) fn names() -> ([Vec<u8>; 7], Vec<u8>) {
    let key = |suffix| primitive_key(PREFIX, NAME, suffix);
    (RWLOCK_SUFFIXES.map(key), key(RWLOCK_WRITER_ACQUIRED_SUFFIX))
}

/// A request a client sends, whatever step sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sends {
    /// An attempt of a wait (`rw_acquire.lua`, waiting `1`).
    Acquire,
    /// The watchdog's renewal.
    Renew,
    /// A writer's fencing token on demand.
    Issue,
    /// The release of the client's side.
    Release,
    /// A wait given up withdraws its intent (then releases).
    Forget,
}

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

/// What a client of side `access` sends for `what` with owner token
/// `token`: the one place the model builds its requests.
pub(crate) fn request(m: &RwLockModel, access: Access, what: Sends, token: String) -> Request<'_> {
    let (keys, acquired) = names();
    let ttl = m.config.ttl.to_string();
    let channel = String::from_utf8_lossy(&keys[6]).into_owned();
    let s = &m.scripts;
    match (what, access) {
        (Sends::Acquire, _) => {
            let mode = if access == Access::Write { "w" } else { "r" };
            let fenced = if m.config.fenced { "1" } else { "0" };
            let args = vec![mode.into(), token, ttl, fenced.into(), "1".into()];
            let mut script_keys = keys[..6].to_vec();
            // A writer's attempt names its acquired record too.
            if access == Access::Write {
                script_keys.push(acquired);
            }
            script("rw_acquire.lua", &s.acquire, script_keys, args)
        }
        (Sends::Renew, Access::Read) => {
            let args = vec![token, ttl, "1".into()];
            script("sem_extend.lua", &s.sem_extend, vec![keys[1].clone()], args)
        }
        (Sends::Renew, Access::Write) => {
            let args = vec![token, ttl];
            script("extend.lua", &s.extend, vec![keys[0].clone()], args)
        }
        (Sends::Issue, _) => {
            let k = vec![keys[0].clone(), keys[5].clone()];
            script("issue_fence.lua", &s.issue_fence, k, vec![token])
        }
        (Sends::Release, Access::Read) => {
            let args = vec![token, "PUBLISH".into(), channel, "1".into()];
            script(
                "sem_release.lua",
                &s.sem_release,
                vec![keys[1].clone()],
                args,
            )
        }
        (Sends::Release, Access::Write) => {
            let args = vec![token, ttl, "PUBLISH".into(), channel];
            let k = vec![keys[0].clone(), keys[3].clone(), keys[4].clone()];
            script("rw_release_write.lua", &s.release_write, k, args)
        }
        (Sends::Forget, _) => {
            let args = vec![token, "PUBLISH".into(), channel];
            let k = vec![keys[2].clone(), keys[3].clone(), keys[4].clone()];
            script("rw_forget.lua", &s.forget, k, args)
        }
    }
}

/// The conformance test's name of a request (its `tables.rs`); `None`: not
/// sent under this model's configuration. An exhaustive match.
fn op_name(m: &RwLockModel, access: Access, what: Sends) -> Option<&'static str> {
    let fenced = m.config.fenced;
    Some(match (what, access) {
        (Sends::Acquire, Access::Read) if fenced => "read waiting fenced",
        (Sends::Acquire, Access::Read) => "read waiting",
        (Sends::Acquire, Access::Write) if fenced => "write waiting fenced",
        (Sends::Acquire, Access::Write) => "write waiting",
        (Sends::Renew, Access::Read) => "read renew",
        (Sends::Renew, Access::Write) => "write renew",
        (Sends::Issue, Access::Write) if !fenced => "issue fencing token",
        (Sends::Issue, _) => return None,
        (Sends::Release, Access::Read) => "read release",
        (Sends::Release, Access::Write) => "write release",
        (Sends::Forget, _) if m.config.give_up => "forget",
        (Sends::Forget, _) => return None,
    })
}

impl Conforms for RwLockModel {
    fn declared(&self) -> Vec<Declared<'_>> {
        const SENDS: [Sends; 5] = [
            Sends::Acquire,
            Sends::Renew,
            Sends::Issue,
            Sends::Release,
            Sends::Forget,
        ];
        let roles = Roles::rwlock(PREFIX, NAME, self.config.ttl);
        [Access::Read, Access::Write]
            .into_iter()
            .filter(|a| self.config.roles.contains(a))
            .flat_map(|a| SENDS.into_iter().map(move |w| (a, w)))
            .filter_map(|(access, what)| {
                Some(Declared {
                    op: op_name(self, access, what)?,
                    request: request(self, access, what, token(0, 1)),
                    roles: roles.clone(),
                })
            })
            .collect()
    }
}
