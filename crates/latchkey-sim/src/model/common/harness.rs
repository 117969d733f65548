//! The one harness every model's tests use: build a model from its
//! configuration, search it exhaustively and print what the search covered,
//! and show that a deliberate bug (a mutant) is caught where its control
//! passes.
//!
//! It lives in the library, not in a shared test module, so that the
//! searches stay instantiated here, with this crate's optimisation
//! (`Cargo.toml`), and each model states once ([`explorable!`]) how it is
//! built and mutated.
//!
//! [`explorable!`]: crate::model::common::explorable

use std::fmt::Debug;
use std::ops::RangeInclusive;
use std::time::Instant;

use crate::model::explore::{Model, Stats, Violation};
use crate::model::trace::Record;
use crate::server::Server;

/// The most distinct states a test's search may reach: far above every
/// bounded configuration's space, so reaching it means a bound is wrong.
pub const MAX_STATES: usize = 2_000_000;

/// A model the explorers can search and walk, instantiated in this crate.
pub trait Explorable {
    /// A whole state of the model.
    type State;
    /// [`bfs`](crate::model::explore::bfs) of this model.
    fn explore(&self, max_states: usize) -> Result<Stats, Box<Violation>>;
    /// [`walk`](crate::model::explore::walk) of this model: the steps
    /// taken and the state it ended in.
    fn walk_from(&self, seed: u64, steps: usize) -> Result<(usize, Self::State), Box<Violation>>;
}

/// A model's configuration: what it builds and how it is mutated.
pub trait ModelConfig: Clone {
    /// The model it configures.
    type Model: Explorable;
    /// The model's deliberate bugs.
    type Mutant: Copy + Debug;
    /// The model of this configuration (its scripts loaded and mutated).
    fn build(self) -> Result<Self::Model, String>;
    /// The same configuration with `mutant` in it.
    fn with_mutant(self, mutant: Self::Mutant) -> Self;
}

/// Searches `model` and prints what the search covered (`--nocapture`
/// shows it: the figures in docs/reliability.md); `Err` is the violation,
/// named by `what`.
pub fn search_model<M: Explorable>(what: &str, model: &M) -> Result<Stats, String> {
    let started = Instant::now();
    let stats = model
        .explore(MAX_STATES)
        .map_err(|v| format!("{what}: {v}"))?;
    eprintln!(
        "{what}: {} states, {} transitions, depth {}, {:.2?}",
        stats.states,
        stats.transitions,
        stats.depth,
        started.elapsed()
    );
    Ok(stats)
}

/// [`search_model`] of the model `config` builds.
pub fn search<C: ModelConfig>(what: &str, config: C) -> Result<Stats, String> {
    let model = config.build().map_err(|e| format!("{what}: {e}"))?;
    search_model(what, &model)
}

/// Shows that `mutant` is caught: `config` passes without it (the
/// control) and fails with it. Returns the violation's message, for the
/// test to check that the right invariant caught it; panics otherwise.
pub fn caught<C: ModelConfig>(what: &str, config: C, mutant: C::Mutant) -> String {
    if let Err(e) = search(&format!("{what} (unmutated)"), config.clone()) {
        panic!("the control's configuration fails without the mutant: {e}");
    }
    let model = config
        .with_mutant(mutant)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    match model.explore(MAX_STATES) {
        Ok(stats) => panic!("{what}: the mutant {mutant:?} was not caught ({stats:?})"),
        Err(v) => {
            eprintln!("{what}: caught\n{v}");
            v.message.clone()
        }
    }
}

/// Walks the model of each of `configs` from every seed of `seeds` for
/// `steps` steps, panicking at a violation (its seed replays it); sums
/// `tally` of each walk's last state (what the walks did: holds released,
/// leaderships, …), prints it as `what`, and returns it, for the test to
/// check that the walks did something.
pub fn walk_all<C: ModelConfig>(
    what: &str,
    configs: impl IntoIterator<Item = C>,
    seeds: RangeInclusive<u64>,
    steps: usize,
    mut tally: impl FnMut(&<C::Model as Explorable>::State) -> usize,
) -> usize {
    let started = Instant::now();
    let (mut walks, mut taken, mut total) = (0, 0, 0);
    for config in configs {
        let model = config.build().unwrap_or_else(|e| panic!("{e}"));
        for seed in seeds.clone() {
            let (n, last) = model
                .walk_from(seed, steps)
                .unwrap_or_else(|v| panic!("{v}"));
            walks += 1;
            taken += n;
            total += tally(&last);
        }
    }
    eprintln!(
        "random walks: {walks} walks, {taken} steps, {total} {what}, {:.2?}",
        started.elapsed()
    );
    total
}

/// The violation the first of `seeds`' walks of `steps` steps that breaks
/// an invariant finds (a mutant's, in a model too large to search); panics
/// when none does.
pub fn walk_catches<M: Explorable>(
    model: &M,
    seeds: RangeInclusive<u64>,
    steps: usize,
) -> Violation {
    let started = Instant::now();
    let found = seeds
        .into_iter()
        .find_map(|seed| model.walk_from(seed, steps).err());
    let Some(v) = found else {
        panic!("no walk caught the mutant");
    };
    eprintln!("shrunk in {:.2?}:\n{v}", started.elapsed());
    *v
}

/// Replays `actions` from the initial state: the trace, and the first
/// invariant broken, if any (for a regression test kept as a fixed trace).
pub fn replay<M: Model>(m: &M, actions: &[M::Action]) -> (Vec<Record>, Result<(), String>) {
    let mut server = Server::new(0);
    let mut state = m.initial();
    let mut trace = Vec::new();
    for a in actions {
        let (next, record) = m.step(&mut server, &state, a);
        trace.push(record);
        state = next;
        if let Err(e) = m.check(&state) {
            return (trace, Err(e));
        }
    }
    (trace, Ok(()))
}
