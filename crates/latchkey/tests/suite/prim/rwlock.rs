//! Read-write locks: many readers or one writer; a waiting writer stops new
//! readers and gets in behind a stream of readers; readers get in between a
//! stream of writers; each reader's hold is its own lease; a cancelled wait
//! leaves no intent; writers' fencing tokens increase; bad input is typed.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use latchkey::{Error, Ownership, RwAccess, RwLock};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn many_readers_or_one_writer() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let rw = client.rwlock("doc", TTL).unwrap();
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(rw.try_read().await.unwrap().expect("readers share"));
    }
    assert_eq!(readers[0].access(), RwAccess::Read);
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "no writer beside readers"
    );
    for reader in readers {
        assert_eq!(reader.release().await.unwrap(), Ownership::Owned);
    }
    let writer = rw.try_write().await.unwrap().expect("free");
    assert!(rw.try_write().await.unwrap().is_none(), "one writer");
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "no reader beside the writer"
    );
    assert_eq!(writer.release().await.unwrap(), Ownership::Owned);
    assert!(rw.try_read().await.unwrap().is_some());
}

/// Readers that hold for `hold` and come back at once, `n` of them
/// staggered, so that some reader is always inside, until `stop`.
fn reader_stream(
    rw: &RwLock,
    n: usize,
    hold: Duration,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<usize>> {
    (0..n)
        .map(|i| {
            let (rw, stop) = (rw.clone(), stop.clone());
            tokio::spawn(async move {
                tokio::time::sleep(hold * i as u32 / n as u32).await;
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(guard) = rw.read_until(Duration::from_secs(10)).await {
                        reads += 1;
                        tokio::time::sleep(hold).await;
                        let _ = guard.release().await;
                    }
                }
                reads
            })
        })
        .collect()
}

#[tokio::test]
async fn a_writer_behind_a_stream_of_readers_gets_in_within_one_reader_ttl() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let reader_ttl = Duration::from_secs(1);
    let rw = client.rwlock("stream", reader_ttl).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers = reader_stream(&rw, 3, Duration::from_millis(150), &stop);
    // The stream runs: some reader is inside.
    eventually("readers are inside", || async {
        rw.try_write().await.unwrap().is_none()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let writer = rw
        .write_until(Duration::from_secs(10))
        .await
        .expect("the writer gets in");
    let waited = started.elapsed();
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "no reader while it writes"
    );
    assert_eq!(writer.release().await.unwrap(), Ownership::Owned);
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        reads += r.await.unwrap();
    }
    assert!(reads >= 3, "the readers did read ({reads})");
    assert!(waited < reader_ttl, "the writer waited {waited:?}");
}

#[tokio::test]
async fn a_reader_between_a_stream_of_writers_gets_in() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let rw = client.rwlock("writers", TTL).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Three writers take turns without a gap: one always waits.
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let (rw, stop) = (rw.clone(), stop.clone());
            tokio::spawn(async move {
                let mut writes = 0;
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(guard) = rw.write_until(Duration::from_secs(10)).await {
                        writes += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = guard.release().await;
                    }
                }
                writes
            })
        })
        .collect();
    eventually("a writer is inside", || async {
        rw.try_read().await.unwrap().is_none()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let reader = rw
        .read_until(Duration::from_secs(10))
        .await
        .expect("the reader gets in");
    let waited = started.elapsed();
    assert_eq!(reader.release().await.unwrap(), Ownership::Owned);
    stop.store(true, Ordering::Relaxed);
    let mut writes = 0;
    for w in writers {
        writes += w.await.unwrap();
    }
    assert!(writes >= 4, "the writers did write ({writes})");
    // It gets in after the writer inside now, before the next: about one
    // hold (50 ms) plus round trips.
    assert!(
        waited < Duration::from_secs(1),
        "the reader waited {waited:?}"
    );
}

#[tokio::test]
async fn each_reader_hold_is_its_own_lease() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let ttl = Duration::from_millis(300);
    let rw = client.rwlock("leases", ttl).unwrap().with_watchdog();
    let a = rw.try_read().await.unwrap().unwrap();
    let b = rw.try_read().await.unwrap().unwrap();
    tokio::time::sleep(ttl * 2).await;
    assert!(a.is_held() && b.is_held(), "renewed");
    let mut raw = raw(&redis.url()).await;
    let _: () = raw
        .zrem("{test:leases}:rw:readers", a.token())
        .await
        .unwrap();
    tokio::time::timeout(ttl, a.lost())
        .await
        .expect("a is lost");
    assert!(b.is_held(), "b keeps its hold");
    assert_eq!(b.release().await.unwrap(), Ownership::Owned);
    assert_eq!(a.release().await.unwrap(), Ownership::Expired);
}

#[tokio::test]
async fn a_cancelled_writer_wait_leaves_no_intent() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let rw = client.rwlock("cancel", TTL).unwrap();
    let reader = rw.try_read().await.unwrap().unwrap();
    let waiting = rw.clone();
    let writer = tokio::spawn(async move { waiting.write_until(Duration::from_secs(10)).await });
    let mut raw = raw(&redis.url()).await;
    eventually("the writer's intent is recorded", || {
        let mut raw = raw.clone();
        async move {
            raw.zcard::<_, u64>("{test:cancel}:rw:writers-waiting")
                .await
                .unwrap()
                == 1
        }
    })
    .await;
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "a waiting writer holds readers back"
    );
    writer.abort();
    assert!(writer.await.unwrap_err().is_cancelled());
    assert!(client.flush(Duration::from_secs(5)).await);
    let intents: u64 = raw.zcard("{test:cancel}:rw:writers-waiting").await.unwrap();
    assert_eq!(intents, 0);
    let _ = rw
        .try_read()
        .await
        .unwrap()
        .expect("readers enter again")
        .release()
        .await
        .unwrap();
    assert_eq!(reader.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn writers_fencing_tokens_increase_and_bad_input_is_typed() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let rw = client.rwlock("fenced", TTL).unwrap().with_fencing();
    let mut last = 0;
    for _ in 0..3 {
        let writer = rw.try_write().await.unwrap().unwrap();
        let token = writer.issued_fencing_token().expect("issued");
        assert!(token > last);
        last = token;
        assert_eq!(writer.release().await.unwrap(), Ownership::Owned);
    }
    let reader = rw.try_read().await.unwrap().unwrap();
    assert_eq!(reader.issued_fencing_token(), None);
    assert_eq!(reader.release().await.unwrap(), Ownership::Owned);

    assert!(matches!(
        client.rwlock("", TTL),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.rwlock("x", Duration::ZERO),
        Err(Error::InvalidTtl { .. })
    ));
    let mut raw = raw(&redis.url()).await;
    let _: () = raw.set("{test:junk}:rw:readers", "x").await.unwrap();
    let junk = client.rwlock("junk", TTL).unwrap();
    assert!(matches!(
        junk.try_read().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        junk.try_write().await,
        Err(Error::WrongType { .. })
    ));
}

const PROCESSES: usize = 4;
const ROUNDS: usize = 15;

/// Records who is inside: KEYS = readers inside, writers inside, violations,
/// peak readers; ARGV[1] = 'r' or 'w'. A writer beside anyone, or a reader
/// beside a writer, is a violation.
const ENTER: &str = "
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
local w = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] == 'w' then
  if r > 0 or w > 0 then redis.call('INCR', KEYS[3]) end
  redis.call('INCR', KEYS[2])
else
  if w > 0 then redis.call('INCR', KEYS[3]) end
  r = redis.call('INCR', KEYS[1])
  if r > tonumber(redis.call('GET', KEYS[4]) or '0') then redis.call('SET', KEYS[4], r) end
end
return 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_a_writer_beside_anyone_across_processes() {
    let redis = RedisServer::start();
    let children: Vec<_> = (0..PROCESSES)
        .map(|i| {
            spawn_child(
                concat!(module_path!(), "::rw_worker"),
                &[("RW_URL", redis.url()), ("RW_ID", i.to_string())],
            )
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success());
    }
    let mut raw = raw(&redis.url()).await;
    let done: usize = raw.get("done").await.unwrap();
    let violations: Option<u64> = raw.get("violations").await.unwrap();
    let peak: u64 = raw.get("peak-readers").await.unwrap();
    let writes: u64 = raw.get("writes").await.unwrap();
    assert_eq!(done, PROCESSES * ROUNDS, "every child did its rounds");
    assert_eq!(violations, None, "a writer was never beside anyone");
    assert!(peak >= 2, "readers did share ({peak})");
    assert!(writes >= 3, "writers did write ({writes})");
}

#[tokio::test]
#[ignore = "helper process: run by its parent test"]
async fn rw_worker() {
    let url = helper_env("RW_URL");
    let id: usize = helper_env("RW_ID").parse().unwrap();
    let client = client(&url).await;
    let rw = client.rwlock("procs", TTL).unwrap();
    let mut raw = raw(&url).await;
    let enter = redis::Script::new(ENTER);
    for round in 0..ROUNDS {
        // Every third hold of each process writes, staggered by id.
        let write = (round + id).is_multiple_of(3);
        let (access, mode, inside) = if write {
            (RwAccess::Write, "w", "writers-inside")
        } else {
            (RwAccess::Read, "r", "readers-inside")
        };
        let guard = rw
            .acquire_until(access, Instant::now() + Duration::from_secs(30))
            .await
            .unwrap();
        let _: i64 = enter
            .key("readers-inside")
            .key("writers-inside")
            .key("violations")
            .key("peak-readers")
            .arg(mode)
            .invoke_async(&mut raw)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let _: i64 = raw.decr(inside, 1).await.unwrap();
        if write {
            let _: i64 = raw.incr("writes", 1).await.unwrap();
        }
        let _: i64 = raw.incr("done", 1).await.unwrap();
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
}

/// `read()` and `write()` wait as long as it takes and are woken by the
/// release (the TTL is a minute: only the message can wake them); the
/// bounded waits (`*_timeout`, `*_until`) fail with `Err(WaitTimedOut)`;
/// the accessors name the TTL and the keys.
#[tokio::test]
async fn read_and_write_wait_forever_and_wake_on_release() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let rw = client.rwlock("forever", TTL).unwrap();
    assert_eq!(rw.ttl(), TTL);
    assert_eq!(rw.writer_key(), b"{test:forever}:rw:writer");
    assert_eq!(rw.readers_key(), b"{test:forever}:rw:readers");
    const CHANNEL: &str = "{test:forever}:rw:released";

    let writing = rw.write().await.unwrap();
    let short = Duration::from_millis(50);
    for timed_out in [
        rw.read_until(short).await,
        rw.write_until(short).await,
        rw.read_until(Instant::now() + short).await,
        rw.write_until(Instant::now() + short).await,
        rw.acquire_until(RwAccess::Read, Instant::now() + short)
            .await,
    ] {
        assert!(matches!(timed_out, Err(Error::WaitTimedOut { .. })));
    }
    let reading = rw.clone();
    let reader = tokio::spawn(async move { reading.read().await });
    until_subscribed(&redis, CHANNEL, 1).await;
    assert!(!reader.is_finished());
    assert_eq!(writing.release().await.unwrap(), Ownership::Owned);
    let read = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the release wakes the reader")
        .unwrap()
        .unwrap();
    assert_eq!(read.access(), RwAccess::Read);

    let writing = rw.clone();
    let writer = tokio::spawn(async move { writing.write().await });
    until_subscribed(&redis, CHANNEL, 1).await;
    assert!(!writer.is_finished());
    assert_eq!(read.release().await.unwrap(), Ownership::Owned);
    let written = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the release wakes the writer")
        .unwrap()
        .unwrap();
    assert_eq!(written.access(), RwAccess::Write);
}

/// A read-write lock made `with_renewal_every` keeps a hold past its TTL
/// (the writer key's PTTL is renewed), and a bad interval is typed.
#[tokio::test]
async fn renewal_every_keeps_a_hold_past_its_ttl() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let ttl = Duration::from_millis(300);
    let rw = client
        .rwlock("renewed", ttl)
        .unwrap()
        .with_renewal_every(Duration::from_millis(60))
        .unwrap();
    let writing = rw.write().await.unwrap();
    // Time passing is the point here: three TTLs.
    tokio::time::sleep(ttl * 3).await;
    assert!(writing.is_held(), "renewed every 60 ms");
    let mut raw = raw(&redis.url()).await;
    let pttl: i64 = raw.pttl("{test:renewed}:rw:writer").await.unwrap();
    assert!(pttl > 0, "the writer key is still there: {pttl}");
    assert!(rw.try_read().await.unwrap().is_none());
    assert_eq!(writing.release().await.unwrap(), Ownership::Owned);
    for bad in [Duration::ZERO, ttl] {
        let rw = client.rwlock("renewed", ttl).unwrap();
        assert!(matches!(
            rw.with_renewal_every(bad),
            Err(Error::InvalidInput(_))
        ));
    }
}
