//! The explorers: an exhaustive breadth-first search of a bounded model with
//! visited-state deduplication, and seeded random walks of larger ones.
//!
//! Why a plain BFS with hashing and not the `stateright` crate: a step
//! runs a real script on the one simulated [`Server`] a search owns (its
//! Lua state is costly to make, so states keep the keyspace as data and
//! the server is set to it before each step), which fits a loop of a few
//! dozen lines better than a framework whose `Model::next_state` takes
//! `&self` and no mutable context; and the search needs only what BFS gives
//! (a shortest trace to a violation, the count of distinct states, the
//! depth). A state's 64-bit hash stands for it in the visited set: a
//! collision would skip a state, at odds of about n²/2⁶⁵ (under 10⁻⁹ for
//! the million states searched here).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use crate::model::trace::{table, Record};
use crate::server::Server;

/// A protocol model the explorers can run.
pub trait Model {
    /// A whole state: the keyspace, the clocks, every client's beliefs.
    type State: Clone + Hash;
    /// One transition.
    type Action: Clone + PartialEq;

    /// The state the model starts in.
    fn initial(&self) -> Self::State;
    /// The transitions enabled in `state`.
    fn actions(&self, state: &Self::State) -> Vec<Self::Action>;
    /// Takes `action` from `state` on `server` (set to the state's keyspace
    /// and clock first): the next state and what happened.
    fn step(
        &self,
        server: &mut Server,
        state: &Self::State,
        action: &Self::Action,
    ) -> (Self::State, Record);
    /// `Err(why)` when `state` breaks an invariant.
    fn check(&self, state: &Self::State) -> Result<(), String>;
}

/// An invariant broken, with the steps from the start that broke it.
#[derive(Debug)]
pub struct Violation {
    /// The invariant and how it broke.
    pub message: String,
    /// Every step from the initial state.
    pub trace: Vec<Record>,
    /// The seed of the random walk that found it (`None`: the search).
    pub seed: Option<u64>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "invariant broken: {}", self.message)?;
        if let Some(seed) = self.seed {
            writeln!(
                f,
                "random walk seed {seed} (replay: walk(model, {seed}, steps))"
            )?;
        }
        write!(f, "{}", table(&self.trace))
    }
}

/// What a search covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Distinct states reached (and checked).
    pub states: usize,
    /// Transitions taken, including those to states already seen.
    pub transitions: usize,
    /// The longest shortest path from the initial state.
    pub depth: usize,
}

fn fingerprint<T: Hash>(value: &T) -> u64 {
    // SipHash with fixed keys: the same state hashes the same in every run.
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Searches every state reachable from the initial one, breadth first,
/// checking each; stops at the first violation (with a shortest trace to
/// it) or after `max_states` distinct states (an error: the bound was
/// meant to hold the whole space).
pub fn bfs<M: Model>(model: &M, max_states: usize) -> Result<Stats, Box<Violation>> {
    let mut server = Server::new(0);
    let start = model.initial();
    let mut seen = HashSet::new();
    seen.insert(fingerprint(&start));
    // Every state kept with its parent and the step into it, for traces.
    let mut nodes: Vec<(M::State, usize, Option<Record>, usize)> = vec![(start, 0, None, 0)];
    let mut queue = VecDeque::from([0usize]);
    let mut stats = Stats::default();
    let trace_to = |nodes: &Vec<(M::State, usize, Option<Record>, usize)>, mut at: usize| {
        let mut steps = Vec::new();
        while let Some(r) = &nodes[at].2 {
            steps.push(r.clone());
            at = nodes[at].1;
        }
        steps.reverse();
        steps
    };
    if let Err(message) = model.check(&nodes[0].0) {
        return Err(Box::new(Violation {
            message,
            trace: Vec::new(),
            seed: None,
        }));
    }
    while let Some(at) = queue.pop_front() {
        let (state, depth) = (nodes[at].0.clone(), nodes[at].3);
        stats.depth = stats.depth.max(depth);
        for action in model.actions(&state) {
            let (next, record) = model.step(&mut server, &state, &action);
            stats.transitions += 1;
            if !seen.insert(fingerprint(&next)) {
                continue;
            }
            let verdict = model.check(&next);
            nodes.push((next, at, Some(record), depth + 1));
            let id = nodes.len() - 1;
            if let Err(message) = verdict {
                return Err(Box::new(Violation {
                    message,
                    trace: trace_to(&nodes, id),
                    seed: None,
                }));
            }
            if nodes.len() > max_states {
                return Err(Box::new(Violation {
                    message: format!("more than {max_states} states: the bound is too loose"),
                    trace: Vec::new(),
                    seed: None,
                }));
            }
            queue.push_back(id);
        }
    }
    stats.states = nodes.len();
    Ok(stats)
}

/// A small deterministic generator (xorshift64*): a walk is its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x % n as u64) as usize
    }
}

/// A random walk of at most `steps` steps from the initial state, each
/// action drawn uniformly from those enabled, every state checked. The same
/// seed gives the same walk. Returns the steps taken and the last state; a
/// violation comes shrunk ([`shrink`]) to a short trace, with its seed.
pub fn walk<M: Model>(
    model: &M,
    seed: u64,
    steps: usize,
) -> Result<(usize, M::State), Box<Violation>> {
    let mut server = Server::new(0);
    let mut rng = Rng::new(seed);
    let mut state = model.initial();
    let mut taken = Vec::new();
    for n in 0..steps {
        let actions = model.actions(&state);
        if actions.is_empty() {
            return Ok((n, state));
        }
        let action = actions[rng.below(actions.len())].clone();
        state = model.step(&mut server, &state, &action).0;
        taken.push(action);
        if model.check(&state).is_err() {
            let shortest = shrink(model, &mut server, taken);
            let (trace, verdict) = run(model, &mut server, &shortest);
            return Err(Box::new(Violation {
                message: verdict.err().unwrap_or_default(),
                trace,
                seed: Some(seed),
            }));
        }
    }
    Ok((steps, state))
}

/// Runs `actions` from the initial state while each is enabled: the trace
/// and the first invariant broken (`Ok` if none was, or an action was not
/// enabled where it came).
fn run<M: Model>(
    model: &M,
    server: &mut Server,
    actions: &[M::Action],
) -> (Vec<Record>, Result<(), String>) {
    let mut state = model.initial();
    let mut trace = Vec::new();
    for action in actions {
        if !model.actions(&state).contains(action) {
            return (trace, Ok(()));
        }
        let (next, record) = model.step(server, &state, action);
        trace.push(record);
        state = next;
        if let Err(e) = model.check(&state) {
            return (trace, Err(e));
        }
    }
    (trace, Ok(()))
}

/// Shrinks a failing list of actions: drops runs of actions, halving the
/// run's length down to one, keeping each drop after which the rest still
/// breaks an invariant (cut at the step that breaks it), then every run
/// of up to 8 at every place; again until nothing can go. Short, not
/// always shortest.
pub fn shrink<M: Model>(
    model: &M,
    server: &mut Server,
    mut actions: Vec<M::Action>,
) -> Vec<M::Action> {
    loop {
        let before = actions.len();
        let mut chunk = (actions.len() / 2).max(1);
        loop {
            let mut end = actions.len();
            while end > 0 {
                let start = end.saturating_sub(chunk);
                let mut fewer = actions.clone();
                fewer.drain(start..end);
                let (trace, verdict) = run(model, server, &fewer);
                if verdict.is_err() {
                    fewer.truncate(trace.len());
                    actions = fewer;
                }
                end = start.min(actions.len());
            }
            if chunk == 1 {
                break;
            }
            chunk /= 2;
        }
        // Then every short run at every place: dropping one action may
        // disable a later one (a retry needs the busy try before it), so
        // runs the halving's alignment missed are tried too.
        for width in 1..=8 {
            let mut start = actions.len().saturating_sub(width);
            loop {
                if start + width <= actions.len() {
                    let mut fewer = actions.clone();
                    fewer.drain(start..start + width);
                    let (trace, verdict) = run(model, server, &fewer);
                    if verdict.is_err() {
                        fewer.truncate(trace.len());
                        actions = fewer;
                    }
                }
                if start == 0 {
                    break;
                }
                start -= 1;
            }
        }
        if actions.len() == before {
            return actions;
        }
    }
}
