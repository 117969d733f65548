//! Fair hand-offs at their edges: a waiter held up while the
//! lock is handed to it must not come back holding a lock that is someone
//! else's by then, and fair and plain callers of one name stay live:
//! a plain waiter is woken when a fair queue frees the lock, not at
//! the TTL it read. Against real redis-servers, no sleeps as synchronisation.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::{Client, Lock, Ownership};

const LEASE: Duration = Duration::from_millis(300);
const QUEUE: &str = "{test:fair}:queue";
const RELEASED: &str = "{test:fair}:released";

fn fair(c: &Client, ttl: Duration) -> Lock {
    c.lock("fair", ttl).unwrap().fair_with_lease(LEASE).unwrap()
}

fn queue_len(server: &RedisServer) -> usize {
    let len = server.command(&["LLEN", QUEUE]).unwrap();
    len.trim().parse().unwrap()
}

/// The holder's token, without a waiter's '+w' mark.
fn holder(server: &RedisServer) -> String {
    let value = server.command(&["GET", "test:fair"]).unwrap();
    let value = value.trim();
    value.strip_suffix("+w").unwrap_or(value).to_owned()
}

async fn until_queued(server: &RedisServer, n: usize) {
    eventually(&format!("{n} waiter(s) queued"), || async {
        queue_len(server) == n
    })
    .await
}

/// What a stoppable waiter saw when its `acquire` returned.
#[derive(Debug)]
struct Returned {
    token: String,
    /// The lock key's holder (read right after the return).
    holder: String,
    /// Whether the guard's deadline was still ahead at the return.
    deadline_ahead: bool,
}

/// A fair waiter on a runtime of its own, whose only thread can be stopped
/// (blocked) and resumed from outside, as SIGSTOP/SIGCONT stop a process:
/// nothing of its client runs meanwhile, its subscriber included.
struct Stoppable {
    stop: tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>,
    resume: std::sync::mpsc::Sender<()>,
    returned: tokio::sync::oneshot::Receiver<Returned>,
}

impl Stoppable {
    fn start(url: String) -> Stoppable {
        let (stop, mut stop_rx) =
            tokio::sync::mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<()>>();
        let (resume, resume_rx) = std::sync::mpsc::channel::<()>();
        let (returned_tx, returned) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                tokio::spawn(async move {
                    while let Some(stopped) = stop_rx.recv().await {
                        let _ = stopped.send(());
                        // Blocks the runtime's only thread until resumed.
                        let _ = resume_rx.recv();
                    }
                });
                let c = client(&url).await;
                let mut check = raw(&url).await;
                let guard = fair(&c, Duration::from_secs(10)).acquire().await.unwrap();
                let deadline_ahead = guard.deadline() > Instant::now();
                let value: String = redis::cmd("GET")
                    .arg("test:fair")
                    .query_async(&mut check)
                    .await
                    .unwrap_or_default();
                let holder = value.strip_suffix("+w").unwrap_or(&value).to_owned();
                let token = guard.token().to_owned();
                let _ = returned_tx.send(Returned {
                    token,
                    holder,
                    deadline_ahead,
                });
                let _ = guard.release().await;
            });
        });
        Stoppable {
            stop,
            resume,
            returned,
        }
    }

    /// Returns once the waiter's thread is blocked.
    async fn stop(&self) {
        let (stopped, is_stopped) = tokio::sync::oneshot::channel();
        self.stop.send(stopped).unwrap();
        is_stopped.await.unwrap();
    }
}

#[tokio::test]
async fn a_waiter_stopped_through_its_hand_off_queues_again() {
    // The lock is handed to a waiter that is stopped; its
    // hand-off TTL runs out, the next waiter takes the lock, and the stopped
    // one, resumed, must not return a guard for a lock that is not its own.
    // Several rounds: on resumption the hand-off message and the renewal
    // timer are both ready, and which one the wait sees first is chance.
    let server = RedisServer::start();
    let (a, c) = (client(&server.url()).await, client(&server.url()).await);
    // Rounds in which the release handed the lock to the stopped waiter
    // (its lease may also have run out first: then it was skipped).
    let mut handed_to_stopped = 0;
    for round in 0..4 {
        let held = fair(&a, Duration::from_secs(10))
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let mut waiter = Stoppable::start(server.url());
        until_queued(&server, 1).await;
        let next = fair(&c, Duration::from_secs(10));
        let next = tokio::spawn(async move { next.acquire().await.unwrap() });
        until_queued(&server, 2).await;
        waiter.stop().await;
        assert_eq!(held.release().await.unwrap(), Ownership::Owned);
        let handed_to = holder(&server);
        // Handed to the stopped waiter; its hand-off TTL (the lease) runs
        // out and the next waiter takes the lock.
        let next = next.await.unwrap();
        assert_eq!(holder(&server), next.token(), "round {round}");
        if handed_to != next.token() {
            handed_to_stopped += 1;
        }
        waiter.resume.send(()).unwrap();
        tokio::select! {
            returned = &mut waiter.returned => panic!(
                "round {round}: the stopped waiter returned while another holds the lock: {returned:?}"
            ),
            _ = until_queued(&server, 1) => {}
        }
        // It queued again, behind the holder: served when that one releases.
        assert_eq!(next.release().await.unwrap(), Ownership::Owned);
        let returned = (&mut waiter.returned).await.unwrap();
        assert_eq!(returned.holder, returned.token, "round {round}");
        assert!(returned.deadline_ahead, "round {round}");
        eventually("released", || async { holder(&server).is_empty() }).await;
    }
    eprintln!("handed to the stopped waiter in {handed_to_stopped} of 4 rounds");
    assert!(handed_to_stopped > 0, "the path under test was never taken");
}

#[tokio::test]
async fn a_plain_waiter_is_woken_when_a_fair_queue_frees_the_lock() {
    // A plain waiter marks a fair holder and sleeps until
    // its TTL or a release message; the fair release hands the lock to the
    // queue's head instead of freeing it. The mark must go with the lock,
    // so that the release that finally frees it wakes the plain waiter.
    let ttl = Duration::from_secs(30);
    let server = RedisServer::start();
    let (a, b, p) = (
        client(&server.url()).await,
        client(&server.url()).await,
        client(&server.url()).await,
    );
    let held = fair(&a, ttl).try_acquire().await.unwrap().expect("free");
    let plain = p.lock("fair", ttl).unwrap();
    let plain = tokio::spawn(async move {
        let guard = plain.acquire_until(Duration::from_secs(60)).await;
        (Instant::now(), guard)
    });
    eventually("the plain waiter marked the holder", || async {
        server
            .command(&["GET", "test:fair"])
            .unwrap()
            .trim()
            .ends_with("+w")
    })
    .await;
    let queued = fair(&b, ttl);
    let queued = tokio::spawn(async move { queued.acquire().await.unwrap() });
    until_queued(&server, 1).await;
    let released = Instant::now();
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let queued = queued.await.unwrap();
    assert_eq!(queued.release().await.unwrap(), Ownership::Owned);
    let (at, guard) = plain.await.unwrap();
    let guard = guard.unwrap();
    assert!(
        at - released < ttl / 6,
        "the plain waiter took {:?} after the fair queue's first release (TTL {ttl:?})",
        at - released
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn fair_and_plain_waiters_of_one_name_finish_in_about_their_holds() {
    // 4 fair and 4 plain waiters (each its own client, as
    // separate processes), holds of 100 ms, TTL 30 s: done in about the sum
    // of the holds, not a TTL.
    let ttl = Duration::from_secs(30);
    let hold = Duration::from_millis(100);
    let server = RedisServer::start();
    let first = client(&server.url()).await;
    let held = fair(&first, ttl)
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let mut tasks = Vec::new();
    for i in 0..8 {
        let c = client(&server.url()).await;
        let lock = match i % 2 {
            0 => fair(&c, ttl),
            _ => c.lock("fair", ttl).unwrap(),
        };
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire_until(Duration::from_secs(60)).await.unwrap();
            tokio::time::sleep(hold).await;
            let outcome = guard.release().await.unwrap();
            drop(c);
            outcome
        }));
    }
    // All waiting: the fair ones queued, every one listening for releases.
    until_queued(&server, 4).await;
    until_subscribed(&server, RELEASED, 8).await;
    let started = Instant::now();
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    for task in tasks {
        assert_eq!(task.await.unwrap(), Ownership::Owned);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "8 holds of {hold:?} took {took:?} (TTL {ttl:?})"
    );
}
