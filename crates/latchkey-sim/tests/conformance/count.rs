//! A latch's and a barrier's operations, driven through the real library
//! against a real server; every request sent on their keys is recorded,
//! to be compared with the latch and barrier models' (`models::check`).

use std::time::Duration;

use latchkey::Client;
use latchkey_sim::model::conform::{Roles, Scripts};

use crate::lock::TTL;
use crate::monitor::Recorder;
use crate::others::{ms, Log, PREFIX};

/// A latch of 2: created, a waiter of another client reading the count,
/// both counts down (the last opens it).
pub async fn latch<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let name = "conform-latch";
    let latch = a.latch(name, TTL).expect("a latch");
    let roles = Roles::latch(PREFIX, name.as_bytes(), ms(TTL));
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![latch.key().to_vec()],
        roles,
        sent: Vec::new(),
    };
    assert!(latch.create(2).await.expect("create"), "a new latch");
    log.until_any("latch_create.lua", "create").await;
    let waiting = b.latch(name, TTL).expect("a latch");
    let wait = tokio::spawn(async move { waiting.wait_until(Duration::from_secs(20)).await });
    log.until_any("GET", "a waiter reading the count").await;
    latch.count_down().await.expect("count down");
    log.until_any("latch_count_down.lua", "a count-down").await;
    latch.count_down().await.expect("count down");
    log.until_any("latch_count_down.lua", "the last count-down")
        .await;
    wait.await
        .expect("the waiting task")
        .expect("the waiter sees it open");
    log
}

/// A barrier's TTL: below every wait's `keep` (the wait plus 1 s), which
/// the library sends beside it, so that `keep` reads as a number, as the
/// model's (a year: its waits have no deadline) does.
const BARRIER_TTL: Duration = Duration::from_secs(1);

/// A barrier of 2: a party of one client gives up waiting (leaving), then
/// two parties arrive and pass.
pub async fn barrier<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let name = "conform-barrier";
    let barrier = a.barrier(name, 2, BARRIER_TTL).expect("a barrier");
    let roles = Roles::barrier(PREFIX, name.as_bytes(), ms(BARRIER_TTL));
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![barrier.key().to_vec()],
        roles,
        sent: Vec::new(),
    };
    // Long enough to arrive on a loaded machine (its leave takes the
    // arrival back).
    let alone = barrier
        .arrive_and_wait_until(Duration::from_millis(600))
        .await;
    assert!(alone.is_err(), "a party alone gives up");
    log.until_any("barrier_leave.lua", "a party giving up")
        .await;
    let other = b.barrier(name, 2, BARRIER_TTL).expect("a barrier");
    let wait =
        tokio::spawn(async move { other.arrive_and_wait_until(Duration::from_secs(20)).await });
    log.until_any("barrier_arrive.lua", "the first arrival")
        .await;
    barrier
        .arrive_and_wait_until(Duration::from_secs(20))
        .await
        .expect("both pass");
    log.until_any("barrier_arrive.lua", "the last arrival")
        .await;
    wait.await.expect("the waiting task").expect("both pass");
    log
}
