//! The plain lock with fencing, model-checked: a bounded exhaustive search,
//! seeded random walks of larger configurations, and the mutants each of
//! them must catch.

use std::time::Instant;

use latchkey_sim::model::explore::Stats;
use latchkey_sim::model::lock::{Config, Faults, LockModel, Mutant};

/// Two clients, one name, a TTL of 10 ms in ticks of 2 ms, 40 ms of time.
fn small(fenced: bool, max_faults: u8, mutant: Option<Mutant>) -> Config {
    Config {
        clients: 2,
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(24),
        max_faults,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        mutant,
    }
}

fn search(config: Config) -> Stats {
    let model = LockModel::new(config.clone()).expect("the scripts load");
    let started = Instant::now();
    match model.search(300_000) {
        Ok(stats) => {
            eprintln!(
                "fenced={} faults={}: {} states, {} transitions, depth {} in {:?}",
                config.fenced,
                config.max_faults,
                stats.states,
                stats.transitions,
                stats.depth,
                started.elapsed()
            );
            stats
        }
        Err(v) => panic!("{v}"),
    }
}

#[test]
fn probe() {
    for t in [12, 16, 20] {
        let mut c = small(true, 0, None);
        c.max_time = Some(t);
        search(c);
    }
    for t in [12, 16] {
        let mut c = small(true, 1, None);
        c.max_time = Some(t);
        search(c);
    }
}
