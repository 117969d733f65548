//! Fencing tokens: strictly increasing across tasks, processes and Redis
//! restarts, and a paused holder's write rejected by the fenced resource.

use crate::common;

use std::io::{BufRead, Write};
use std::time::Duration;

use common::*;
use latchkey::{FencedWrite, Ownership};
use redis::AsyncCommands;

const TASKS: usize = 8;
const PER_TASK: usize = 625; // 2 processes × 8 tasks × 625 = 10,000 acquisitions

/// Each task acquires PER_TASK times and, while holding the lock, appends its
/// fencing token to a list: the list is then in acquisition order. `eager`:
/// the token comes with the acquisition (`with_fencing`); otherwise it is
/// issued on request during the hold. The two processes use one kind each,
/// so the tokens of both kinds interleave in one order.
async fn append_tokens(url: &str, eager: bool) {
    let c = client(url).await;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let mut lock = c.lock("fenced", Duration::from_secs(5)).unwrap();
        if eager {
            lock = lock.with_fencing();
        }
        let url = url.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut conn = raw(&url).await;
            for _ in 0..PER_TASK {
                let g = lock.acquire_until(Duration::from_secs(60)).await.unwrap();
                let _: () = conn
                    .rpush("tokens", g.fencing_token().await.unwrap())
                    .await
                    .unwrap();
                assert_eq!(g.release().await.unwrap(), Ownership::Owned);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process: run by its parent test"]
async fn child_token_appender() {
    append_tokens(&helper_env("LATCHKEY_TEST_URL"), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_across_ten_thousand_acquisitions() {
    let server = RedisServer::start();
    let mut child = spawn_child(
        concat!(module_path!(), "::child_token_appender"),
        &[("LATCHKEY_TEST_URL", server.url())],
    );
    append_tokens(&server.url(), true).await;
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "child failed: {status}");
    let mut conn = raw(&server.url()).await;
    let tokens: Vec<u64> = conn.lrange("tokens", 0, -1).await.unwrap();
    assert_eq!(tokens.len(), 2 * TASKS * PER_TASK);
    for pair in tokens.windows(2) {
        assert!(pair[1] > pair[0], "token {} followed {}", pair[1], pair[0]);
    }
}

async fn one_token(url: &str) -> u64 {
    let c = client(url).await;
    let g = c
        .lock("restarted", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let t = g.fencing_token().await.unwrap();
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
    t
}

#[tokio::test]
async fn tokens_keep_increasing_across_a_restart_without_persistence() {
    let mut server = RedisServer::start();
    let before = one_token(&server.url()).await;
    server.restart(); // the counter is gone
    let mut conn = raw(&server.url()).await;
    let counter: Option<u64> = conn.get("{test:restarted}:fence").await.unwrap();
    assert_eq!(
        counter, None,
        "the restart kept data; this test needs it lost"
    );
    let after = one_token(&server.url()).await;
    assert!(after > before, "token went back from {before} to {after}");
}

#[tokio::test]
async fn tokens_keep_increasing_across_a_restart_with_aof() {
    let mut server = RedisServer::builder().aof(true).start();
    let mut last = 0;
    for _ in 0..3 {
        let t = one_token(&server.url()).await;
        assert!(t > last);
        last = t;
    }
    server.kill(); // a crash, not a clean shutdown: AOF with fsync always keeps the counter
    server.restart();
    let mut conn = raw(&server.url()).await;
    let counter: u64 = conn.get("{test:restarted}:fence").await.unwrap();
    assert_eq!(counter, last, "AOF lost the counter");
    let after = one_token(&server.url()).await;
    assert!(after > last, "token went back from {last} to {after}");
}

#[tokio::test]
async fn fenced_writes_accept_equal_and_newer_and_reject_older_tokens() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let resource = c.fenced("doc").unwrap();
    assert_eq!(resource.read().await.unwrap(), None);
    assert_eq!(
        resource.write(10, "a").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(10, "b").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(9, "stale").await.unwrap(),
        FencedWrite::Rejected { seen: 10 }
    );
    // Beyond 2^53, where Lua numbers would round: still exact.
    let big = (1u64 << 53) + 1;
    assert_eq!(
        resource.write(big, "c").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.write(big - 1, "d").await.unwrap(),
        FencedWrite::Rejected { seen: big }
    );
    assert_eq!(
        resource.write(u64::MAX, "e").await.unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(
        resource.read().await.unwrap(),
        Some((b"e".to_vec(), u64::MAX))
    );
}

/// The stale holder: acquires with a short TTL, checks it holds the lock,
/// says so on stdout and waits for a line on stdin (where the parent pauses
/// it), then writes through the fenced resource and prints the outcome.
#[tokio::test]
#[ignore = "helper process: run by its parent test"]
async fn child_paused_holder() {
    let c = client(&helper_env("LATCHKEY_TEST_URL")).await;
    let guard = c
        .lock("gc", Duration::from_millis(300))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(guard.is_held());
    println!("holding {}", guard.fencing_token().await.unwrap());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let outcome = c
        .fenced("gc-resource")
        .unwrap()
        .write(guard.fencing_token().await.unwrap(), "from A")
        .await
        .unwrap();
    println!("{outcome:?}");
    std::mem::forget(guard);
}

#[tokio::test]
async fn a_paused_holders_write_is_rejected() {
    let server = RedisServer::start();
    let helper = concat!(module_path!(), "::child_paused_holder");
    let (mut a, out, line) = child_talking(helper, &server.url(), "holding ");
    let a_token: u64 = line.trim().trim_start_matches("holding ").parse().unwrap();

    // A pauses (a GC pause, swap, SIGSTOP) while it believes it holds the lock.
    let pid = a.id() as libc::pid_t;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);

    // B waits for A's TTL to run out, takes the lock and writes.
    let c = client(&server.url()).await;
    let b = c
        .lock("gc", Duration::from_secs(5))
        .unwrap()
        .acquire_until(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(b.fencing_token().await.unwrap() > a_token);
    let resource = c.fenced("gc-resource").unwrap();
    assert_eq!(
        resource
            .write(b.fencing_token().await.unwrap(), "from B")
            .await
            .unwrap(),
        FencedWrite::Accepted
    );

    // A wakes up and writes, unaware: the resource refuses it.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    a.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    for l in out.lines() {
        rest.push_str(&l.unwrap());
        rest.push('\n');
    }
    assert!(a.wait().unwrap().success());
    let expected = format!("Rejected {{ seen: {} }}", b.fencing_token().await.unwrap());
    assert!(
        rest.contains(&expected),
        "A's write was not rejected: {rest}"
    );
    assert_eq!(
        resource.read().await.unwrap(),
        Some((b"from B".to_vec(), b.fencing_token().await.unwrap()))
    );
    assert_eq!(b.release().await.unwrap(), Ownership::Owned);
}

/// A token is issued only while the hold lasts: a holder whose lock expired
/// and was taken gets an error (and its guard is marked lost), not a token
/// that would outrank the new holder's.
#[tokio::test]
async fn a_token_asked_after_the_lock_was_lost_is_refused() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let stale = c
        .lock("late", Duration::from_millis(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    assert_eq!(stale.issued_fencing_token(), None, "issued without asking");
    // The new holder waits for the stale one's TTL (the TTL is the point).
    let fresh = c
        .lock("late", Duration::from_secs(5))
        .unwrap()
        .acquire_until(Duration::from_secs(5))
        .await
        .unwrap();
    let fresh_token = fresh.fencing_token().await.unwrap();
    match stale.fencing_token().await {
        Err(latchkey::Error::NotHeld { name }) => assert_eq!(name, "late"),
        other => panic!("expected NotHeld, got {other:?}"),
    }
    // Refusing the token proved the loss: `lost` has fired.
    tokio::time::timeout(Duration::from_millis(1), stale.lost())
        .await
        .expect("lost() did not fire");
    assert_eq!(stale.issued_fencing_token(), None);
    // The counter did not move for the refused request.
    let counter: u64 = server
        .command(&["GET", "{test:late}:fence"])
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(counter, fresh_token);
    assert_eq!(stale.release().await.unwrap(), Ownership::HeldByOther);
    assert_eq!(fresh.release().await.unwrap(), Ownership::Owned);
}

/// `with_fencing` issues the token with the acquisition; without it the
/// token is issued on the first request, and both kinds share one counter.
#[tokio::test]
async fn eager_and_lazy_tokens_share_one_order() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let eager = c
        .lock("kinds", Duration::from_secs(5))
        .unwrap()
        .with_fencing();
    let lazy = c.lock("kinds", Duration::from_secs(5)).unwrap();
    let mut last = 0;
    for round in 0..10 {
        let guard = if round % 2 == 0 { &eager } else { &lazy }
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        assert_eq!(guard.issued_fencing_token().is_some(), round % 2 == 0);
        let token = guard.fencing_token().await.unwrap();
        assert_eq!(guard.issued_fencing_token(), Some(token));
        assert!(token > last, "round {round}: {token} after {last}");
        last = token;
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
}

/// With Redis gone, asking for the token is a typed, transient error that
/// neither issues a token nor declares the lock lost (it may still be ours);
/// once Redis is back with our key, the token is issued.
#[tokio::test]
async fn a_token_asked_while_redis_is_down_is_a_transient_error() {
    let mut server = RedisServer::builder().aof(true).start();
    let c = client(&server.url()).await;
    let guard = c
        .lock("outage", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    server.stop();
    let started = std::time::Instant::now();
    let err = guard.fencing_token().await.expect_err("Redis is down");
    assert!(err.is_transient(), "not transient: {err:?}");
    // Bounded by the test client's 500 ms command timeout (plus margin for a
    // loaded machine): the error must not wait for Redis to return.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(guard.issued_fencing_token(), None);
    assert!(guard.is_held(), "a transient error marked the guard lost");
    server.restart(); // with AOF: our key survived
    let token = eventually("the restarted server gives the token", || async {
        match guard.fencing_token().await {
            Ok(t) => Some(t),
            Err(e) if e.is_transient() => None,
            Err(e) => panic!("after the restart: {e:?}"),
        }
    })
    .await;
    assert!(token > 0);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// `raise_fence.lua` (Redlock's strict fencing) refuses a foreign or corrupt
/// counter as `acquire.lua` and `issue_fence.lua` do, instead of reading it
/// as 0 and overwriting it, and never writes a token at or above 2^53.
#[tokio::test]
async fn raise_fence_refuses_a_foreign_counter_and_keeps_it() {
    let server = RedisServer::start();
    let mut conn = raw(&server.url()).await;
    let raise = redis::Script::new(latchkey::protocol::script_text("raise_fence.lua").unwrap());
    let raise_to = |floor: &'static str| {
        let mut invocation = raise.key("c:fence");
        invocation.arg(floor);
        invocation
    };
    for garbage in ["hello", "-5", "12.5", "9007199254740993"] {
        server.command(&["SET", "c:fence", garbage]).unwrap();
        let err = raise_to("42")
            .invoke_async::<i64>(&mut conn)
            .await
            .expect_err(garbage);
        assert_eq!(err.code(), Some("BADFENCE"), "{garbage}: {err}");
        assert_eq!(server.command(&["GET", "c:fence"]).unwrap(), garbage);
    }
    server.command(&["DEL", "c:fence"]).unwrap();
    server.command(&["RPUSH", "c:fence", "x"]).unwrap();
    let err = raise_to("42")
        .invoke_async::<i64>(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("BADFENCE"), "a list counter: {err}");
    server.command(&["DEL", "c:fence"]).unwrap();
    let err = raise_to("9007199254740992")
        .invoke_async::<i64>(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("BADFENCE"), "a floor of 2^53: {err}");
    assert_eq!(
        raise_to("42").invoke_async::<i64>(&mut conn).await.unwrap(),
        42
    );
    assert_eq!(
        raise_to("7").invoke_async::<i64>(&mut conn).await.unwrap(),
        42
    );
}

/// A fencing counter of the wrong type is a bad counter, named as such, not
/// a WRONGTYPE that blames the lock key.
#[tokio::test]
async fn a_counter_of_the_wrong_type_names_the_counter() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    server
        .command(&["RPUSH", "{test:typed}:fence", "x"])
        .unwrap();
    let fenced = c
        .lock("typed", Duration::from_secs(5))
        .unwrap()
        .with_fencing();
    match fenced.try_acquire().await {
        Err(latchkey::Error::BadFencingCounter { key }) => assert_eq!(key, "{test:typed}:fence"),
        other => panic!("expected BadFencingCounter, got {other:?}"),
    }
    let guard = c
        .lock("typed", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    match guard.fencing_token().await {
        Err(latchkey::Error::BadFencingCounter { key }) => assert_eq!(key, "{test:typed}:fence"),
        other => panic!("expected BadFencingCounter, got {other:?}"),
    }
    let _ = guard.release().await.unwrap();
}

/// A counter that latchkey 0.2 left at `P + name:fence` is no longer read
/// nor written: the lock's counter is `{P + name}:fence` alone.
#[tokio::test]
async fn an_old_counter_is_neither_read_nor_written() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    // Far above any token issued now (server microseconds).
    let old = "5000000000000000";
    server.command(&["SET", "test:mixed:fence", old]).unwrap();
    let guard = c
        .lock("mixed", Duration::from_secs(5))
        .unwrap()
        .with_fencing()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let token = guard
        .issued_fencing_token()
        .expect("issued with the acquisition");
    assert!(
        token < old.parse().unwrap(),
        "{token}: the old counter was read"
    );
    let counter = |key: &str| server.command(&["GET", key]).unwrap().trim().to_owned();
    assert_eq!(counter("{test:mixed}:fence"), token.to_string());
    assert_eq!(
        counter("test:mixed:fence"),
        old,
        "the old counter was written"
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}
