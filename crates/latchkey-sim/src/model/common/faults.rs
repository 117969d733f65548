//! The faults every model shares, as one set of transitions: which are
//! enabled in a state ([`FaultWindow`]) and what each does ([`take_fault`]).
//! A model's `Action` carries them as `Action::Fault(_)` and its state says
//! what a fault touches ([`FaultTarget`]), so that a new fault added here
//! comes to every model at once.

use crate::model::trace::Record;

/// The faults a configuration allows.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// A client pauses (and later resumes).
    pub pause: bool,
    /// A script's reply is lost.
    pub lost_reply: bool,
    /// A published message (a wake-up, a hand-off, a signal) is lost.
    pub lost_message: bool,
    /// Redis restarts without persistence.
    pub restart: bool,
}

impl Faults {
    /// Every fault.
    pub const ALL: Faults = Faults {
        pause: true,
        lost_reply: true,
        lost_message: true,
        restart: true,
    };
}

/// A fault transition. (A lost reply is not one: it is a client's step
/// whose reply does not arrive, `Action::Step(_, _, true)`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A client pauses.
    Pause(usize),
    /// A paused client resumes (not a fault: the end of one).
    Resume(usize),
    /// A client's pending message is lost.
    LoseMessage(usize),
    /// Redis restarts without persistence.
    Restart,
}

/// Which faults can strike in one state: those the configuration allows,
/// while the run's budget of faults lasts.
pub(crate) struct FaultWindow {
    allowed: Faults,
    /// The budget is not spent.
    open: bool,
    /// Time can still run (a pause or restart matters only then).
    time_left: bool,
}

impl FaultWindow {
    /// The window of a state with `so_far` of `max` faults taken.
    pub(crate) fn new(allowed: Faults, so_far: u8, max: u8, time_left: bool) -> FaultWindow {
        FaultWindow {
            allowed,
            open: so_far < max,
            time_left,
        }
    }

    /// Whether a reply may be lost.
    pub(crate) fn lost_reply(&self) -> bool {
        self.open && self.allowed.lost_reply
    }

    /// A client's step, `step(false)`, and after it the same step with its
    /// reply lost, `step(true)`, where one may be and the step is `remote`
    /// (a reply to lose: not a client's local step).
    pub(crate) fn step<A>(&self, out: &mut Vec<A>, remote: bool, step: impl Fn(bool) -> A) {
        out.push(step(false));
        if self.lost_reply() && remote {
            out.push(step(true));
        }
    }

    /// Client `i`'s fault transitions, in the order every model lists
    /// them: a resume (whatever the budget) or a pause if `pausable`, then
    /// the loss of its pending message if it has `message`.
    pub(crate) fn client<A: From<Fault>>(
        &self,
        out: &mut Vec<A>,
        i: usize,
        paused: bool,
        pausable: bool,
        message: bool,
    ) {
        if paused {
            out.push(Fault::Resume(i).into());
        } else if self.open && self.allowed.pause && self.time_left && pausable {
            out.push(Fault::Pause(i).into());
        }
        if self.open && self.allowed.lost_message && message {
            out.push(Fault::LoseMessage(i).into());
        }
    }

    /// A restart, where the keyspace holds something to lose.
    pub(crate) fn restart<A: From<Fault>>(&self, out: &mut Vec<A>, keyspace_empty: bool) {
        if self.open && self.allowed.restart && self.time_left && !keyspace_empty {
            out.push(Fault::Restart.into());
        }
    }
}

/// What the fault transitions touch in a model's state.
pub(crate) trait FaultTarget {
    /// What a lost message is called in the trace (`c0's {MESSAGE} lost`).
    const MESSAGE: &'static str;
    /// Counts one fault against the run's budget.
    fn count_fault(&mut self);
    /// Pauses or resumes client `c`; a model whose clients never pause
    /// (never `pausable` in [`FaultWindow::client`]) keeps the default.
    fn set_paused(&mut self, _c: usize, _paused: bool) {
        unreachable!("this model's clients never pause");
    }
    /// Drops client `c`'s pending message.
    fn lose_message(&mut self, c: usize);
    /// Wipes the keyspace, with what the model resets or moves on with it
    /// (its clock by `tick` where a restart takes time).
    fn restart(&mut self, tick: i64);
}

/// Takes `fault` in `n` (a state at `at` ms): what it changes, and its
/// line in a trace.
pub(crate) fn take_fault<S: FaultTarget>(n: &mut S, at: i64, tick: i64, fault: Fault) -> Record {
    match fault {
        Fault::Pause(c) => {
            n.set_paused(c, true);
            n.count_fault();
            Record::world(at, "pause", format!("c{c} paused"))
        }
        Fault::Resume(c) => {
            n.set_paused(c, false);
            Record::world(at, "resume", format!("c{c} resumed"))
        }
        Fault::LoseMessage(c) => {
            n.lose_message(c);
            n.count_fault();
            let what = format!("c{c}'s {} lost", S::MESSAGE);
            Record::world(at, "lose-message", what)
        }
        Fault::Restart => {
            n.restart(tick);
            n.count_fault();
            Record::world(at, "restart", "keyspace wiped".into())
        }
    }
}
