//! The models' configurations the conformance check compares with the
//! library: only what decides their requests matters (a client of each
//! kind, unfenced as the library's side is, TTL and lease told apart by
//! value).

use latchkey_sim::model::barrier::BarrierModel;
use latchkey_sim::model::common::Faults;
use latchkey_sim::model::elect::ElectionModel;
use latchkey_sim::model::fair::FairModel;
use latchkey_sim::model::latch::LatchModel;
use latchkey_sim::model::multi::{Kind, MultiModel};
use latchkey_sim::model::signal::SignalModel;

/// A fair lock model, unfenced as the library's side is; its TTL and lease
/// differ, so that the two are told apart by value.
pub fn fair_model() -> FairModel {
    FairModel::new(latchkey_sim::model::fair::Config {
        clients: 2,
        holds: 1,
        ttl: 10,
        lease: 6,
        tick: 2,
        max_time: Some(10),
        max_faults: 0,
        fenced: false,
        watchdog: true,
        leave: true,
        revokes: 1,
        late_messages: false,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the fair lock model")
}

/// A several-names model with a client of each kind: a plain lock of
/// name 0, a keeper of name 0, a `lock_all` of names 0 and 1; unfenced, as
/// the library's side is.
pub fn multi_model() -> MultiModel {
    MultiModel::new(latchkey_sim::model::multi::Config {
        names: 2,
        clients: vec![Kind::Plain(0), Kind::Keeper(0), Kind::Multi(0b11)],
        holds: 1,
        ttl: 10,
        tick: 2,
        idle: 6,
        max_time: Some(10),
        max_faults: 0,
        fenced: false,
        watchdog: true,
        faults: Faults::ALL,
        asks: 1,
        mutant: None,
    })
    .expect("the several-names model")
}

/// An election model of two candidates.
pub fn election_model() -> ElectionModel {
    ElectionModel::new(latchkey_sim::model::elect::Config {
        clients: 2,
        leads: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(10),
        max_faults: 0,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the election model")
}

/// A latch model of 2 counts (a count that reads as a number, not a flag).
pub fn latch_model() -> LatchModel {
    LatchModel::new(latchkey_sim::model::latch::Config {
        count: 2,
        workers: 2,
        waiters: 1,
        ttl: 10,
        tick: 2,
        max_time: 10,
        max_faults: 0,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the latch model")
}

/// A barrier model of 2 parties.
pub fn barrier_model() -> BarrierModel {
    BarrierModel::new(latchkey_sim::model::barrier::Config {
        parties: 2,
        clients: 2,
        rounds: 1,
        ttl: 10,
        tick: 2,
        max_time: 10,
        max_faults: 0,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the barrier model")
}

/// A signals model of two waiters on the first name.
pub fn signal_model() -> SignalModel {
    SignalModel::new(latchkey_sim::model::signal::Config {
        waiters: [2, 0],
        rounds: 1,
        sends: 2,
        max_faults: 0,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the signals model")
}
