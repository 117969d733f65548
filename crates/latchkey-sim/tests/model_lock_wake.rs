//! The plain lock's waiting processes (latchkey 0.4), replayed step by
//! step in the lock model: a waiter's try registers its process; a marked
//! release wakes the first registered process that listens, alone, on its
//! wake channel; the process that takes the lock marks it at once for
//! those still registered, so that its own release wakes the next. (The
//! searches of `model_lock.rs` explore every interleaving of the same
//! steps; these pin the path down.)

use latchkey_sim::model::common::{process_id, Faults, Stored};
use latchkey_sim::model::explore::Model;
use latchkey_sim::model::lock::{Action, Config, LockModel, Op, State};
use latchkey_sim::model::trace::table;
use latchkey_sim::Server;

/// Three clients, one hold each, no fault.
fn model() -> LockModel {
    LockModel::new(Config {
        clients: 3,
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(16),
        max_faults: 0,
        fenced: true,
        watchdog: false,
        faults: Faults::ALL,
        mutant: None,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The registered processes, lowest score first.
fn waiting(s: &State) -> Vec<String> {
    let Some((Stored::ZSet(set), _)) = s.keys.get(&b"{lk:model}:wake"[..]) else {
        return Vec::new();
    };
    let mut members: Vec<(&i64, String)> = set
        .iter()
        .map(|(m, score)| (score, String::from_utf8_lossy(m).into_owned()))
        .collect();
    members.sort();
    members.into_iter().map(|(_, m)| m).collect()
}

/// The lock key's value.
fn holder(s: &State) -> String {
    match s.keys.get(&b"lk:model"[..]) {
        Some((Stored::Str(v), _)) => String::from_utf8_lossy(v).into_owned(),
        _ => String::new(),
    }
}

#[test]
fn a_release_wakes_the_first_waiting_process_alone() {
    let m = model();
    let mut server = Server::new(0);
    let mut s = m.initial();
    let mut trace = Vec::new();
    let mut run = |s: &mut State, action: Action| {
        let (next, record) = m.step(&mut server, s, &action);
        trace.push(record);
        *s = next;
        m.check(s).unwrap_or_else(|e| panic!("{e}"));
    };
    // c0 holds; c1 waits (registered first), then c2, a tick later.
    run(&mut s, Action::Step(0, Op::Try, false));
    run(&mut s, Action::Step(1, Op::Try, false));
    run(&mut s, Action::Step(1, Op::Retry, false));
    run(&mut s, Action::Tick);
    run(&mut s, Action::Step(2, Op::Try, false));
    run(&mut s, Action::Step(2, Op::Retry, false));
    assert_eq!(waiting(&s), [process_id(1), process_id(2)]);
    assert!(holder(&s).ends_with("+w"), "marked: {}", holder(&s));

    // c0's release wakes c1 alone (c2 stays registered, asleep).
    run(&mut s, Action::Step(0, Op::Release, false));
    assert!(s.clients[1].woken && !s.clients[2].woken);
    assert_eq!(waiting(&s), [process_id(2)]);

    // c1 takes the lock, leaves the set and marks its token for c2.
    run(&mut s, Action::Step(1, Op::Retry, false));
    assert_eq!(waiting(&s), [process_id(2)]);
    assert!(holder(&s).ends_with("+w"), "marked: {}", holder(&s));

    // c1's release wakes c2.
    run(&mut s, Action::Step(1, Op::Release, false));
    assert!(s.clients[2].woken, "{}", table(&trace));
    assert!(waiting(&s).is_empty());
    run(&mut s, Action::Step(2, Op::Retry, false));
    assert!(holder(&s).starts_with("lk2:c2"), "{}", table(&trace));
}
