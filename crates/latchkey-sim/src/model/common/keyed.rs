//! The shape the semaphore and the read-write lock share: a state of
//! clients over the keyspace snapshot, a client's step or a tick or a
//! fault as the transitions, and how a step folds the server back into
//! the state (its keys, and a release's message waking every waiter: both
//! subscribe to one channel per primitive).

use crate::model::common::{load, store, take_fault, Client, Fault, FaultTarget, Keys};
use crate::model::trace::{show_reply, Record};
use crate::reply::Reply;
use crate::server::Server;

/// A whole state of a model over the keyspace snapshot, its clients in
/// phases `P`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyedState<P> {
    /// The server's clock, ms since the model's start.
    pub now: i64,
    /// The live keys.
    pub keys: Keys,
    /// The clients.
    pub clients: Vec<Client<P>>,
    /// The highest fencing token issued (0: none).
    pub last_token: u64,
    /// Something a step saw that breaks an invariant by itself (a token
    /// not above the last, an acquire's verdict against the documented
    /// rule, an error reply): kept to report.
    pub broken: Option<String>,
    /// Restarts so far.
    pub restarts: u8,
    /// Faults so far.
    pub faults: u8,
}

impl<P> KeyedState<P> {
    /// The state at time 0: no keys, `clients` about to start.
    pub fn initial(clients: Vec<Client<P>>) -> KeyedState<P> {
        KeyedState {
            now: 0,
            keys: Keys::new(),
            clients,
            last_token: 0,
            broken: None,
            restarts: 0,
            faults: 0,
        }
    }

    /// Notes a fencing token issued: it must be above every one before it.
    pub(crate) fn issued(&mut self, fence: u64) {
        if fence <= self.last_token && self.broken.is_none() {
            self.broken = Some(format!(
                "fencing tokens must strictly increase: {fence} issued after {}",
                self.last_token
            ));
        }
        self.last_token = self.last_token.max(fence);
    }
}

/// A transition of such a model, its clients' operations `Op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyedAction<Op> {
    /// The clock moves one tick.
    Tick,
    /// A fault, or a paused client's resume.
    Fault(Fault),
    /// A client steps; `true`: the reply is lost.
    Step(usize, Op, bool),
}

impl<Op> From<Fault> for KeyedAction<Op> {
    fn from(fault: Fault) -> KeyedAction<Op> {
        KeyedAction::Fault(fault)
    }
}

/// A phase in which a client waits for a release's message.
pub trait Waits {
    /// Whether the client waits (a message wakes it).
    fn waits(&self) -> bool;
}

/// What a model over the keyspace snapshot does in a client's step.
pub(crate) trait KeyedModel {
    /// Its clients' phases.
    type Phase: Clone + Waits;
    /// Its clients' operations.
    type Op: Copy;
    /// One tick of its clock, in ms.
    fn tick(&self) -> i64;
    /// Client `c`'s operation `op` from `s`, on `server` set to it, into
    /// `n`: the script's name, the arguments and the reply.
    fn client_step(
        &self,
        server: &mut Server,
        s: &KeyedState<Self::Phase>,
        n: &mut KeyedState<Self::Phase>,
        c: usize,
        op: Self::Op,
        lost: bool,
    ) -> (&'static str, Vec<String>, Reply);
}

/// Takes `action` from `s` on `server`: the next state and what happened.
pub(crate) fn keyed_step<M: KeyedModel>(
    m: &M,
    server: &mut Server,
    s: &KeyedState<M::Phase>,
    action: &KeyedAction<M::Op>,
) -> (KeyedState<M::Phase>, Record)
where
    // Each model says what a fault touches (`fault_target!`).
    KeyedState<M::Phase>: FaultTarget,
{
    let mut n = s.clone();
    let tick = m.tick();
    let record = match *action {
        KeyedAction::Tick => {
            n.now += tick;
            // Drop what expired, so that equal states hash equal.
            load(server, n.now, &n.keys);
            settle(server, &mut n);
            Record::world(s.now, "tick", format!("+{tick} ms"))
        }
        KeyedAction::Fault(fault) => take_fault(&mut n, s.now, tick, fault),
        KeyedAction::Step(c, op, lost) => {
            if lost {
                n.faults += 1;
            }
            load(server, s.now, &s.keys);
            let (script, args, reply) = m.client_step(server, s, &mut n, c, op, lost);
            let shown = show_reply(&reply);
            if matches!(reply, Reply::Error(_)) && n.broken.is_none() {
                n.broken = Some(format!(
                    "the model's step went wrong: c{c}'s {script} answered {shown}"
                ));
            }
            settle(server, &mut n);
            Record::client(s.now, c, script.into(), args, shown, lost)
        }
    };
    (n, record)
}

/// Reads the server's keys back into `n`, and wakes every waiter if a
/// release published (they subscribed to the primitive's one channel).
fn settle<P: Waits>(server: &mut Server, n: &mut KeyedState<P>) {
    match store(server) {
        Ok(keys) => n.keys = keys,
        Err(why) => {
            n.broken
                .get_or_insert(format!("the model's step went wrong: {why}"));
        }
    }
    if !server.take_published().is_empty() {
        for c in &mut n.clients {
            if c.phase.waits() {
                c.woken = true;
            }
        }
    }
}
