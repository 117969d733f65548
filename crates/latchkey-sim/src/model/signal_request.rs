//! What the signals model sends: built in one place ([`request`]), which
//! its steps send (`signal.rs`) and the conformance check compares with
//! what the library sends (`model::conform`, [`Conforms`]).

use crate::model::conform::{Conforms, Declared, Roles};
use crate::model::lock_request::Request;
use crate::model::signal::{broadcast_channel, SignalModel};

/// A send on name `name` (an index of `signal::NAMES`) of `message`.
pub(crate) enum Sends {
    /// `Client::signal_one`: `signal_one.lua` (no key: the waiters'
    /// channels are found by pattern) with the pick among them.
    One {
        name: usize,
        pick: u8,
        message: String,
    },
    /// `Client::signal`: a broadcast on the name's channel.
    Broadcast { name: usize, message: String },
}

/// What `sends` sends: the one place the model builds its requests.
pub(crate) fn request(m: &SignalModel, sends: Sends) -> Request<'_> {
    match sends {
        Sends::One {
            name,
            pick,
            message,
        } => Request {
            name: "signal_one.lua",
            text: Some(&m.signal_one),
            keys: Vec::new(),
            args: vec![
                String::from_utf8_lossy(&m.pattern(name)).into_owned(),
                pick.to_string(),
                message,
            ],
        },
        Sends::Broadcast { name, message } => Request {
            name: "PUBLISH",
            text: None,
            keys: Vec::new(),
            args: vec![
                String::from_utf8_lossy(&broadcast_channel(name)).into_owned(),
                message,
            ],
        },
    }
}

impl Conforms for SignalModel {
    /// A `signal_one` and a broadcast on the first name. The pick is 2:
    /// the library's is a random 48-bit number, which reads as an integer,
    /// as the model's picks do but for 0 and 1, which read as flags.
    fn declared(&self) -> Vec<Declared<'_>> {
        let message = || "lksig1:0000000000000001:go".to_string();
        [
            (
                "signal one",
                Sends::One {
                    name: 0,
                    pick: 2,
                    message: message(),
                },
            ),
            (
                "broadcast",
                Sends::Broadcast {
                    name: 0,
                    message: message(),
                },
            ),
        ]
        .into_iter()
        .map(|(op, sends)| Declared {
            op,
            request: request(self, sends),
            // No key; the library's channel and pattern names are its own
            // (`signal/wire.rs`): every word reads as a value.
            roles: Roles::default(),
        })
        .collect()
    }
}
