//! What the several-names model sends for each operation of its plain
//! clients, its `lock_all` clients and its keepers (`CachedLock`): built in
//! one place ([`request`]), which the model's steps send (`multi_step.rs`,
//! `cached.rs`) and the conformance check compares with what the library
//! sends (`model::conform`, [`Conforms`]).

use latchkey::protocol::{fence_key, release_channel, RELEASE_REQUESTED};

use crate::model::common::process_id;
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::lock_request::{fair_queue, send, wake_set, Request};
use crate::model::multi::{Kind, MultiModel};
use crate::model::multi_scripts::token;
use crate::reply::Reply;
use crate::server::Server;

/// A request of the model, with the values that vary between clients.
pub(crate) enum Sends {
    /// Client `c`'s plain lock's (or keeper's) try on name `i`: the first
    /// (`first`) or a waiter's, which marks the holder and registers the
    /// client's process among the waiting processes; `fenced`: made
    /// `with_fencing` (a first try is then the acquire script, not `SET`).
    Try {
        c: usize,
        i: usize,
        token: String,
        first: bool,
        fenced: bool,
    },
    /// The watchdog's renewal of name `i`.
    Renew { i: usize, token: String },
    /// The release of name `i` (a keeper's give-back too).
    Release { i: usize, token: String },
    /// A keeper's local hold asking for a fencing token.
    Issue { i: usize, token: String },
    /// A `lock_all` try over the names in `mask` (the first, or a
    /// waiter's, which marks the first busy holder and registers as `*`
    /// among that name's waiting processes).
    MultiTry {
        mask: u8,
        token: String,
        first: bool,
    },
    /// A `lock_all` hold's renewal.
    MultiRenew { mask: u8, token: String },
    /// A `lock_all` hold's release.
    MultiRelease { mask: u8, token: String },
    /// `Client::request_release` of name `i`.
    Ask(usize),
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What `sends` sends: the one place the model builds its requests.
pub(crate) fn request(m: &MultiModel, sends: Sends) -> Request<'_> {
    let cfg = &m.config;
    let s = &m.scripts;
    let ttl = cfg.ttl.to_string();
    let script = |name, text, keys, args| Request {
        name,
        text: Some(text),
        keys,
        args,
    };
    // The names in key order (`lk:m0` < `lk:m1` < …), as the library
    // sorts them.
    let keys_of = |mask: u8| -> Vec<Vec<u8>> {
        (0..cfg.names)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| m.key(i))
            .collect()
    };
    let channels = |keys: &[Vec<u8>]| -> Vec<String> {
        keys.iter().map(|k| text(&release_channel(k))).collect()
    };
    match sends {
        Sends::Try {
            i,
            token,
            first: true,
            fenced: false,
            ..
        } => Request {
            name: "SET",
            text: None,
            keys: vec![m.key(i)],
            args: vec![token, "NX".into(), "PX".into(), ttl, "GET".into()],
        },
        Sends::Try {
            c,
            i,
            token,
            first,
            fenced,
        } => {
            let key = m.key(i);
            let mut args = vec![token, ttl, if fenced { "1" } else { "0" }.to_string()];
            let mut keys = vec![key.clone(), fence_key(&key)];
            match first {
                true => args.push("0".into()),
                false => {
                    args.extend([
                        "1".into(),
                        "0".into(),
                        text(&release_channel(&key)),
                        "PUBLISH".into(),
                        process_id(c),
                    ]);
                    keys.push(wake_set(&key));
                }
            }
            script("acquire.lua", &s.acquire, keys, args)
        }
        Sends::Renew { i, token } => {
            script("extend.lua", &s.extend, vec![m.key(i)], vec![token, ttl])
        }
        Sends::Release { i, token } => {
            let key = m.key(i);
            let args = vec![token, text(&release_channel(&key)), "PUBLISH".into()];
            let keys = vec![key.clone(), wake_set(&key), fair_queue(&key)];
            script("release.lua", &s.release, keys, args)
        }
        Sends::Issue { i, token } => {
            let key = m.key(i);
            let keys = vec![key.clone(), fence_key(&key)];
            script("issue_fence.lua", &s.issue_fence, keys, vec![token])
        }
        Sends::MultiTry { mask, token, first } => {
            let keys = keys_of(mask);
            let issue = if cfg.fenced { "1" } else { "0" };
            let waiting = if first { "0" } else { "1" };
            let mut args = vec![token, ttl, issue.into(), waiting.into()];
            args.push("PUBLISH".into());
            args.extend(channels(&keys));
            // Each name's key, then its fencing counter; a waiter's, then
            // each name's waiting processes.
            let mut counted: Vec<Vec<u8>> = keys
                .iter()
                .flat_map(|k| [k.clone(), fence_key(k)])
                .collect();
            if !first {
                counted.extend(keys.iter().map(|k| wake_set(k)));
            }
            script("multi_acquire.lua", &s.multi_acquire, counted, args)
        }
        Sends::MultiRenew { mask, token } => {
            let keys = keys_of(mask);
            script("multi_extend.lua", &s.multi_extend, keys, vec![token, ttl])
        }
        Sends::MultiRelease { mask, token } => {
            let keys = keys_of(mask);
            let mut args = vec![token, "PUBLISH".into()];
            args.extend(channels(&keys));
            script("multi_release.lua", &s.multi_release, keys, args)
        }
        Sends::Ask(i) => Request {
            name: "PUBLISH",
            text: None,
            keys: Vec::new(),
            args: vec![text(&release_channel(&m.key(i))), text(RELEASE_REQUESTED)],
        },
    }
}

/// Builds and sends `sends` to `server`: the script's or command's name,
/// the arguments (a command's keys first, as a trace shows them) and the
/// reply.
pub(crate) fn call(
    m: &MultiModel,
    server: &mut Server,
    sends: Sends,
) -> (String, Vec<String>, Reply) {
    let r = request(m, sends);
    let reply = send(server, &r);
    let mut args: Vec<String> = match r.text {
        Some(_) => Vec::new(),
        None => r.keys.iter().map(|k| text(k)).collect(),
    };
    args.extend(r.args);
    (r.name.to_string(), args, reply)
}

impl Conforms for MultiModel {
    /// For each kind of client the configuration has (the first of each):
    /// a plain lock's and a keeper's first try, waiter's try, renewal and
    /// release (a keeper's give-back is its release), a keeper's token;
    /// a `lock_all`'s first try, waiter's try, renewal and release; a
    /// request to release. A plain and a keeper's name is `lock 1`; a
    /// `lock_all`'s names are `lock 1`, `lock 2`, … in key order.
    fn declared(&self) -> Vec<Declared<'_>> {
        let cfg = &self.config;
        let mut out = Vec::new();
        let mut push = |op, roles: &Roles, sends| {
            out.push(Declared {
                op,
                request: request(self, sends),
                roles: roles.clone(),
            })
        };
        let plain = cfg.clients.iter().find_map(|k| match k {
            Kind::Plain(i) => Some(usize::from(*i)),
            _ => None,
        });
        if let Some(i) = plain {
            let roles = Roles::locks(&[self.key(i)], cfg.ttl);
            let t = || token(0, 1, false);
            let fenced = cfg.fenced;
            let try_ = |first| Sends::Try {
                c: 0,
                i,
                token: t(),
                first,
                fenced,
            };
            push("first try", &roles, try_(true));
            push("waiter's try", &roles, try_(false));
            push("renew", &roles, Sends::Renew { i, token: t() });
            let release = Sends::Release { i, token: t() };
            push("release", &roles, release);
            push("request release", &roles, Sends::Ask(i));
        }
        let keeper = cfg.clients.iter().find_map(|k| match k {
            Kind::Keeper(i) => Some(usize::from(*i)),
            _ => None,
        });
        if let Some(i) = keeper {
            let roles = Roles::locks(&[self.key(i)], cfg.ttl);
            let t = || token(0, 1, true);
            // A keeper is never made `with_fencing` (`plain_step`).
            let try_ = |first| Sends::Try {
                c: 0,
                i,
                token: t(),
                first,
                fenced: false,
            };
            push("keeper's first try", &roles, try_(true));
            push("keeper's waiter's try", &roles, try_(false));
            push("keeper's renew", &roles, Sends::Renew { i, token: t() });
            let give_back = Sends::Release { i, token: t() };
            push("keeper's give-back", &roles, give_back);
            push("keeper's token", &roles, Sends::Issue { i, token: t() });
        }
        let multi = cfg.clients.iter().find_map(|k| match k {
            Kind::Multi(mask) => Some(*mask),
            _ => None,
        });
        if let Some(mask) = multi {
            let keys: Vec<Vec<u8>> = (0..cfg.names)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| self.key(i))
                .collect();
            let roles = Roles::locks(&keys, cfg.ttl);
            let t = || token(0, 1, false);
            let try_ = |first| Sends::MultiTry {
                mask,
                token: t(),
                first,
            };
            push("lock_all first try", &roles, try_(true));
            push("lock_all waiter's try", &roles, try_(false));
            push(
                "lock_all renew",
                &roles,
                Sends::MultiRenew { mask, token: t() },
            );
            push(
                "lock_all release",
                &roles,
                Sends::MultiRelease { mask, token: t() },
            );
        }
        out
    }
}
