//! What every model shares, so that a new fault, configuration piece or
//! check comes to all of them at once: the fault transitions ([`faults`]),
//! the keyspace snapshot ([`snapshot`]), the scripts' texts and replies
//! ([`script`]), the library's timing rules ([`timing`]), a client's
//! phases ([`client`]), the state and steps of the models over the
//! snapshot ([`keyed`]), and the test harness ([`harness`]).

pub mod client;
pub mod faults;
pub mod harness;
pub mod keyed;
pub mod script;
pub mod snapshot;
pub mod timing;

pub use client::{Client, Phase};
pub(crate) use faults::{take_fault, FaultTarget, FaultWindow};
pub use faults::{Fault, Faults};
pub use harness::{
    caught, search, search_model, walk_all, walk_catches, Explorable, ModelConfig, MAX_STATES,
};
pub(crate) use keyed::{keyed_step, KeyedModel};
pub use keyed::{KeyedAction, KeyedState, Waits};
pub use script::{ints, mutate, process_id, script, token};
pub use snapshot::{
    field, get, live_members, live_scores, load, server_ms, set_members, store, Keys, Stored,
};
pub use timing::{drift, margin, time_left};

/// Makes `$model` explorable: its `search` and `walk` (instantiated here,
/// so that they are built with this crate's optimisation, `Cargo.toml`),
/// and `$config` a [`ModelConfig`] building it with `$model::new` and
/// mutating it through its `mutant` field.
macro_rules! explorable {
    ($model:ty, $config:ty, $mutant:ty, $state:ty) => {
        impl $model {
            /// [`bfs`](crate::model::explore::bfs) of this model.
            pub fn search(
                &self,
                max_states: usize,
            ) -> Result<crate::model::explore::Stats, Box<crate::model::explore::Violation>> {
                crate::model::explore::bfs(self, max_states)
            }

            /// [`walk`](crate::model::explore::walk) of this model.
            pub fn walk(
                &self,
                seed: u64,
                steps: usize,
            ) -> Result<(usize, $state), Box<crate::model::explore::Violation>> {
                crate::model::explore::walk(self, seed, steps)
            }
        }

        impl crate::model::common::Explorable for $model {
            type State = $state;

            fn walk_from(
                &self,
                seed: u64,
                steps: usize,
            ) -> Result<(usize, $state), Box<crate::model::explore::Violation>> {
                self.walk(seed, steps)
            }

            fn explore(
                &self,
                max_states: usize,
            ) -> Result<crate::model::explore::Stats, Box<crate::model::explore::Violation>> {
                self.search(max_states)
            }
        }

        impl crate::model::common::ModelConfig for $config {
            type Model = $model;
            type Mutant = $mutant;

            fn build(self) -> Result<$model, String> {
                <$model>::new(self)
            }

            fn with_mutant(self, mutant: $mutant) -> Self {
                Self {
                    mutant: Some(mutant),
                    ..self
                }
            }
        }
    };
}

pub(crate) use explorable;

/// `Action::Fault` for a model's `Action`: the shared fault transitions
/// ([`FaultWindow`]) list themselves as its actions.
macro_rules! fault_action {
    ($action:ty) => {
        impl From<crate::model::common::Fault> for $action {
            fn from(fault: crate::model::common::Fault) -> $action {
                <$action>::Fault(fault)
            }
        }
    };
}

pub(crate) use fault_action;

/// [`FaultTarget`] for a state of the common shape: `clients[c].paused`,
/// `faults`, and a restart that wipes `keys`, counts in `restarts` and
/// moves `now` on by a tick. `|client| …` drops a client's pending
/// message; `|state| …`, if given, is what else a restart resets.
macro_rules! fault_target {
    ($state:ty, $message:literal, |$client:ident| $lose:expr $(, |$s:ident| $also:expr)?) => {
        impl crate::model::common::FaultTarget for $state {
            const MESSAGE: &'static str = $message;

            fn count_fault(&mut self) {
                self.faults += 1;
            }

            fn set_paused(&mut self, c: usize, paused: bool) {
                self.clients[c].paused = paused;
            }

            fn lose_message(&mut self, c: usize) {
                let $client = &mut self.clients[c];
                $lose;
            }

            fn restart(&mut self, tick: i64) {
                self.keys.clear();
                $(
                    let $s = &mut *self;
                    $also;
                )?
                self.restarts += 1;
                // A restart takes time: the server's clock moves on meanwhile.
                self.now += tick;
            }
        }
    };
}

pub(crate) use fault_target;
