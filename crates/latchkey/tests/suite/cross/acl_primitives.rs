//! The primitives as a least-privilege user: a user granted exactly
//! `rule(&[Use::Locks, Use::Primitives], …)` (`docs/security.md`, rules (a)
//! and (c)) runs each of fair locks, semaphores, read-write locks, latches,
//! barriers and elections end to end, waiting and waking included, on two
//! clients (two connections, as two processes have). The scripts run with
//! the user's permissions, so each command they call is judged here. What
//! a user with the locks' rule only gets: `tests/suite/cross/acl.rs`.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::acl::{rule, Use};
use latchkey::{Client, Ownership};

const TTL: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(10);
/// A wake-up by message comes well within this; every TTL is far longer,
/// so a waiter that gets in sooner was woken, not freed by an expiry.
const PROMPT: Duration = Duration::from_secs(5);

/// A server with the user `prim`, granted nothing but the locks' and the
/// primitives' rules, and two clients logged in as it.
async fn as_primitives_user() -> (RedisServer, Client, Client) {
    let server = RedisServer::start();
    let granted = rule(&[Use::Locks, Use::Primitives], "test:");
    create_user(&server, "prim", &granted);
    let url = user_url(&server, "prim");
    let (a, b) = (client(&url).await, client(&url).await);
    (server, a, b)
}

/// A count Redis answered (`LLEN`, `ZCARD`), as the default user.
fn count(server: &RedisServer, args: &[&str]) -> u64 {
    let reply = server.command(args).expect("a count");
    reply.trim().parse().expect("an integer reply")
}

#[tokio::test]
async fn a_fair_lock_is_handed_to_the_waiter_of_another_client() {
    let (server, a, b) = as_primitives_user().await;
    let fair = |c: &Client| c.lock("acl-fair", TTL).unwrap().fair().unwrap();
    let first = fair(&a).try_acquire().await.unwrap().expect("a free lock");
    let waiting = fair(&b);
    let waiter = tokio::spawn(async move {
        let guard = waiting.acquire_until(WAIT).await;
        (Instant::now(), guard)
    });
    eventually("the waiter is queued", || async {
        count(&server, &["LLEN", "{test:acl-fair}:queue"]) == 1
    })
    .await;
    // Inspecting it reads its queue too (LRANGE, in the primitives' rule).
    let info = b.inspect("acl-fair").await.unwrap();
    let value = info.value.as_deref().expect("held");
    assert!(value.starts_with(first.token().as_bytes()), "{info:?}");
    let released = Instant::now();
    assert_eq!(first.release().await.unwrap(), Ownership::Owned);
    let (acquired, guard) = waiter.await.unwrap();
    let guard = guard.expect("the release hands the lock to the waiter");
    assert!(acquired - released < PROMPT, "{:?}", acquired - released);
    assert_eq!(count(&server, &["LLEN", "{test:acl-fair}:queue"]), 0);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_semaphore_permit_is_taken_renewed_listed_and_passed_on() {
    let (server, a, b) = as_primitives_user().await;
    let pool = a.semaphore("acl-pool", 1, TTL).unwrap().with_fencing();
    let permit = pool.try_acquire().await.unwrap().expect("a free permit");
    assert!(permit.issued_fencing_token().is_some_and(|t| t > 0));
    assert!(pool.try_acquire().await.unwrap().is_none(), "one permit");
    assert_eq!(permit.extend(TTL).await.unwrap(), Ownership::Owned);
    let holders = pool.holders().await.unwrap();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0].token, permit.token());

    let other = b.semaphore("acl-pool", 1, TTL).unwrap().with_fencing();
    let waiter = tokio::spawn(async move {
        let permit = other.acquire_until(WAIT).await;
        (Instant::now(), permit)
    });
    until_subscribed(&server, "{test:acl-pool}:permits:released", 1).await;
    let released = Instant::now();
    assert_eq!(permit.release().await.unwrap(), Ownership::Owned);
    let (acquired, next) = waiter.await.unwrap();
    let next = next.expect("the waiter gets the released permit");
    assert!(acquired - released < PROMPT, "{:?}", acquired - released);
    assert_eq!(next.release().await.unwrap(), Ownership::Owned);
    assert!(pool.holders().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_read_write_lock_lets_readers_share_and_a_writer_in_alone() {
    let (server, a, b) = as_primitives_user().await;
    let rw = a.rwlock("acl-doc", TTL).unwrap().with_fencing();
    let r1 = rw.try_read().await.unwrap().expect("a free lock");
    let r2 = rw.try_read().await.unwrap().expect("readers share");
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "no writer beside readers"
    );

    // A writer of the other client waits for both readers.
    let writing = b.rwlock("acl-doc", TTL).unwrap().with_fencing();
    let writer = tokio::spawn(async move { writing.write_until(WAIT).await });
    eventually("the writer waits", || async {
        count(&server, &["ZCARD", "{test:acl-doc}:rw:writers-waiting"]) == 1
    })
    .await;
    assert_eq!(r1.release().await.unwrap(), Ownership::Owned);
    assert_eq!(r2.release().await.unwrap(), Ownership::Owned);
    let w = writer.await.unwrap().expect("the writer gets in");
    assert!(w.issued_fencing_token().is_some_and(|t| t > 0));
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "no reader beside the writer"
    );

    // A reader waits for the writer, whose release lets it in.
    let reading = rw.clone();
    let reader = tokio::spawn(async move { reading.read_until(WAIT).await });
    eventually("the reader waits", || async {
        count(&server, &["ZCARD", "{test:acl-doc}:rw:readers-waiting"]) == 1
    })
    .await;
    let released = Instant::now();
    assert_eq!(w.release().await.unwrap(), Ownership::Owned);
    let r = reader.await.unwrap().expect("the reader gets in");
    assert!(released.elapsed() < PROMPT);
    assert_eq!(r.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_latch_counted_down_to_zero_wakes_its_waiter() {
    let (server, a, b) = as_primitives_user().await;
    let latch = a.latch("acl-gate", TTL).unwrap();
    assert!(latch.create(2).await.unwrap(), "created");
    let waiting = b.latch("acl-gate", TTL).unwrap();
    let waiter = tokio::spawn(async move {
        let open = waiting.wait_until(WAIT).await;
        (Instant::now(), open)
    });
    until_subscribed(&server, "{test:acl-gate}:latch:opened", 1).await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count().await.unwrap(), Some(1));
    let opened = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let (woken, open) = waiter.await.unwrap();
    open.expect("the waiter sees the latch open");
    assert!(woken - opened < PROMPT, "{:?}", woken - opened);
}

#[tokio::test]
async fn a_barrier_of_two_releases_both_and_a_lone_party_takes_its_arrival_back() {
    let (_server, a, b) = as_primitives_user().await;
    let barrier = a.barrier("acl-step", 2, TTL).unwrap();
    // Alone, a party times out and takes its arrival back.
    let alone = barrier
        .arrive_and_wait_until(Duration::from_millis(200))
        .await;
    assert!(matches!(alone, Err(latchkey::Error::WaitTimedOut { .. })));
    assert_eq!(barrier.state().await.unwrap(), Some((0, 0)));

    let early = barrier.clone();
    let first = tokio::spawn(async move { early.arrive_and_wait_until(WAIT).await });
    eventually("one party arrived", || async {
        barrier.state().await.unwrap() == Some((0, 1))
    })
    .await;
    let second = b.barrier("acl-step", 2, TTL).unwrap();
    assert_eq!(second.arrive_and_wait_until(WAIT).await.unwrap(), 0);
    assert_eq!(first.await.unwrap().unwrap(), 0);
    assert_eq!(barrier.state().await.unwrap(), Some((1, 0)));
}

#[tokio::test]
async fn an_election_elects_proclaims_and_hands_over_on_resign() {
    let (server, a, b) = as_primitives_user().await;
    let ea = a.election("acl-e", TTL).unwrap();
    let eb = b.election("acl-e", TTL).unwrap();
    let leader = ea.campaign("a").await.unwrap();
    assert!(eb.try_campaign("b").await.unwrap().is_none(), "one leader");
    assert_eq!(leader.proclaim("a2").await.unwrap(), Ownership::Owned);
    assert_eq!(eb.leader().await.unwrap().expect("a leader").value, b"a2");

    let waiting = tokio::spawn(async move {
        let successor = eb.campaign("b").await;
        (Instant::now(), successor)
    });
    until_subscribed(&server, "{test:acl-e}:election:changes", 1).await;
    let (first_term, resigned) = (leader.term(), Instant::now());
    assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
    let (elected, successor) = waiting.await.unwrap();
    let successor = successor.expect("the candidate is elected");
    assert!(elected - resigned < PROMPT, "{:?}", elected - resigned);
    assert!(successor.term() > first_term);
    assert_eq!(ea.leader().await.unwrap().expect("a leader").value, b"b");
    assert_eq!(successor.resign().await.unwrap(), Ownership::Owned);
    assert_eq!(ea.leader().await.unwrap(), None);
}
