//! Which transitions the fair lock model enables in a state, and its
//! [`Model`] implementation: clients act on time (the clock waits while a
//! client that is not paused has a step due), faults within the budget.

use crate::model::common::{time_left, FaultWindow};
use crate::model::explore::Model;
use crate::model::fair::{Action, Client, FairModel, Op, Phase, State, Wake};
use crate::server::Server;

crate::model::common::fault_action!(Action);

crate::model::common::fault_target!(
    State,
    "message",
    |client| client.wake = Wake::None,
    |state| {
        for c in &mut state.clients {
            c.unseen = None;
            // The subscriber reconnects: a waiter looks again.
            if matches!(c.phase, Phase::Waiting(_)) && c.wake == Wake::None {
                c.wake = Wake::Look;
            }
        }
    }
);

impl FairModel {
    /// The client's enabled operations, and whether one of them is due now
    /// (the clock waits for it).
    fn client_ops(&self, c: &Client, now: i64) -> (Vec<Op>, bool) {
        if c.paused {
            return (Vec::new(), false);
        }
        let mut ops = Vec::new();
        let mut due = c.late.is_some();
        if c.cleanup.is_some() {
            ops.push(Op::Cleanup);
            due = true;
        }
        match &c.phase {
            Phase::Idle => ops.push(Op::Try),
            Phase::Waiting(w) => {
                if c.wake != Wake::None || now >= w.recheck_at {
                    ops.push(Op::Attempt);
                    due = true;
                }
                if self.config.leave {
                    ops.push(Op::Leave);
                }
            }
            Phase::Held(h) => {
                ops.push(Op::Release);
                if now >= h.next_renew && self.believes(h, now) {
                    ops.push(Op::Renew);
                    due = true;
                }
            }
            Phase::Done => {}
        }
        (ops, due)
    }

    fn holds_key(&self, s: &State) -> bool {
        s.keys.iter().any(|(k, _, _)| k == self.key())
    }
}

impl Model for FairModel {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let client = Client {
            phase: Phase::Idle,
            paused: false,
            tokens: 0,
            ids: 0,
            holds: 0,
            wake: Wake::None,
            cleanup: None,
            unseen: None,
            late: None,
        };
        State {
            now: 0,
            keys: Vec::new(),
            clients: vec![client; self.config.clients],
            last_token: 0,
            revoke_fence: 0,
            restarts: 0,
            revokes: 0,
            faults: 0,
            broken: None,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.config;
        let mut out = Vec::new();
        let time_left = time_left(cfg.max_time, s.now, cfg.tick);
        let faults = FaultWindow::new(cfg.faults, s.faults, cfg.max_faults, time_left);
        let mut waiting_on_a_client = false;
        for (i, c) in s.clients.iter().enumerate() {
            let (ops, due) = self.client_ops(c, s.now);
            waiting_on_a_client |= due;
            for op in ops {
                faults.step(&mut out, true, |lost| Action::Step(i, op, lost));
            }
            let message = c.wake != Wake::None;
            faults.client(&mut out, i, c.paused, c.phase != Phase::Done, message);
            let handed = matches!(c.wake, Wake::Handed { .. });
            if cfg.late_messages && handed && c.late.is_none() && !c.paused {
                out.push(Action::DelayMessage(i));
            }
            if c.late.is_some() && !c.paused {
                out.push(Action::Deliver(i));
            }
        }
        if time_left && !waiting_on_a_client {
            out.push(Action::Tick);
        }
        faults.restart(&mut out, s.keys.is_empty());
        if s.revokes < cfg.revokes && self.holds_key(s) {
            out.push(Action::Revoke);
        }
        out
    }

    fn step(
        &self,
        server: &mut Server,
        s: &State,
        action: &Action,
    ) -> (State, super::trace::Record) {
        super::fair_step::step(self, server, s, action)
    }

    fn check(&self, s: &State) -> Result<(), String> {
        if let Some(why) = &s.broken {
            return Err(why.clone());
        }
        super::fair_check::check(self, s)
    }
}
