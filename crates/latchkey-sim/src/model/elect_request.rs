//! What the election model sends for each operation: built in one place
//! ([`request`]), which the model's steps send (`elect_step.rs`) and the
//! conformance check compares with what the library sends
//! (`model::conform`, [`Conforms`]).

use crate::model::common::token;
use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::elect::ElectionModel;
use crate::model::elect_step::{channel, lease_key, state_key};
use crate::model::lock_request::{send, Request};
use crate::reply::Reply;
use crate::server::Server;

/// An election request, with the values that vary between candidates.
pub(crate) enum Sends {
    /// A campaign (the first try, or a waiting candidate's), with the
    /// candidate's token and value.
    Campaign { token: String, value: String },
    /// The leader's renewal (`extend.lua` on the lease key, as a lock's).
    Renew(String),
    /// The leader publishing a new value.
    Proclaim { token: String, value: String },
    /// The leader resigning (also the release of a campaign whose reply
    /// was lost), with no final value.
    Resign(String),
    /// Anyone reading the leader (`Election::leader`).
    Leader,
}

/// What `sends` sends: the one place the model builds its requests.
pub(crate) fn request(m: &ElectionModel, sends: Sends) -> Request<'_> {
    let s = &m.scripts;
    let keys = vec![lease_key(), state_key()];
    let ttl = m.config.ttl.to_string();
    let script = |name, text, keys, args| Request {
        name,
        text: Some(text),
        keys,
        args,
    };
    match sends {
        Sends::Campaign { token, value } => {
            let args = vec![token, ttl, value, channel(), "PUBLISH".into()];
            script("elect_campaign.lua", s.campaign.as_str(), keys, args)
        }
        Sends::Renew(token) => script(
            "extend.lua",
            s.extend.as_str(),
            keys[..1].to_vec(),
            vec![token, ttl],
        ),
        Sends::Proclaim { token, value } => {
            let args = vec![token, value, channel(), "PUBLISH".into()];
            script("elect_proclaim.lua", s.proclaim.as_str(), keys, args)
        }
        Sends::Resign(token) => {
            let args = vec![token, channel(), "PUBLISH".into(), String::new()];
            script("elect_resign.lua", s.resign.as_str(), keys, args)
        }
        Sends::Leader => script("elect_leader.lua", s.leader.as_str(), keys, Vec::new()),
    }
}

/// Builds and sends `sends` to `server`: its arguments and the reply.
pub(crate) fn call(m: &ElectionModel, server: &mut Server, sends: Sends) -> (Vec<String>, Reply) {
    let r = request(m, sends);
    let reply = send(server, &r);
    (r.args, reply)
}

impl Conforms for ElectionModel {
    /// Candidate 0's first attempt, for each operation the conformance
    /// test names.
    fn declared(&self) -> Vec<Declared<'_>> {
        let t = || token(0, 1);
        let ops = [
            (
                "campaign",
                Sends::Campaign {
                    token: t(),
                    value: "c0".into(),
                },
            ),
            ("renew", Sends::Renew(t())),
            (
                "proclaim",
                Sends::Proclaim {
                    token: t(),
                    value: "c0'".into(),
                },
            ),
            ("resign", Sends::Resign(t())),
            ("leader", Sends::Leader),
        ];
        let roles = Roles::election(b"", crate::model::elect_step::NAME, self.config.ttl);
        ops.into_iter()
            .map(|(op, sends)| Declared {
                op,
                request: request(self, sends),
                roles: roles.clone(),
            })
            .collect()
    }
}
