//! Several locks at once (`Client::lock_all`) and a lock kept while idle
//! (`Lock::with_caching`), driven through the real library against a real
//! server; every request sent on their keys is recorded, to be compared
//! with the several-names model's (`models::check`), and a request to
//! release.

use std::time::Duration;

use latchkey::protocol::release_channel;
use latchkey::{Client, Ownership};
use latchkey_sim::model::conform::{Roles, Scripts, Sent, Shape};

use crate::lock::{Recorded, TTL, WATCHED_TTL};
use crate::monitor::Recorder;
use crate::others::{ms, Log};

/// Whether a `multi_acquire.lua` call waits (its fourth argument, `1`):
/// a waiter's try, which marks the busy holders.
fn waiting(sent: &Sent) -> bool {
    sent.argv.get(3) == Some(&Shape::Literal("1".into()))
}

/// Whether an `acquire.lua` call waits (its fourth argument, `1`).
fn plain_waiting(sent: &Sent) -> bool {
    sent.argv.get(3) == Some(&Shape::Literal("1".into()))
}

/// `lock_all` of two names: a first try, a waiter of another client
/// marking the holder and woken by the release, the releases, a watched
/// hold's renewal.
pub async fn record_all<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let names = ["conform-all-a", "conform-all-b"];
    let all = a.lock_all(&names, TTL).expect("a multi lock");
    assert!(all.one_round_trip(), "one script per operation");
    let keys: Vec<Vec<u8>> = names
        .iter()
        .map(|n| a.lock(n, TTL).expect("a lock").key().to_vec())
        .collect();
    let mut log = Log {
        scripts,
        recorder,
        keys: keys.clone(),
        roles: Roles::locks(&keys, ms(TTL)),
        sent: Vec::new(),
    };
    let guard = all.try_acquire().await.expect("try").expect("free");
    log.until_any("multi_acquire.lua", "lock_all's first try")
        .await;
    let waiting_all = b.lock_all(&names, TTL).expect("a multi lock");
    let wait =
        tokio::spawn(async move { waiting_all.acquire_until(Duration::from_secs(20)).await });
    log.until("multi_acquire.lua", waiting, "lock_all's waiter's try")
        .await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("multi_release.lua", "lock_all's release")
        .await;
    let taken = wait
        .await
        .expect("the waiting task")
        .expect("woken, it takes both");
    assert_eq!(taken.release().await.expect("release"), Ownership::Owned);
    log.until_any("multi_release.lua", "the waiter's release")
        .await;

    let watched = a
        .lock_all(&names, WATCHED_TTL)
        .expect("a multi lock")
        .with_watchdog();
    log.roles = Roles::locks(&keys, ms(WATCHED_TTL));
    let guard = watched.try_acquire().await.expect("try").expect("free");
    log.until_any("multi_extend.lua", "the watchdog's renewal")
        .await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("multi_release.lua", "the watched hold's release")
        .await;
    log
}

/// A lock kept while idle (`with_caching`): taken (and renewed by its
/// watchdog), a token issued, released locally (kept); a plain waiter of
/// another client marks it wanted, the keeper gives it back, the waiter
/// takes it and releases it. Then a request to release the waiter's next
/// hold (recorded apart: the library looks at the name's keys first).
pub async fn record_kept<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> (Log<'a>, Recorded) {
    let name = "conform-kept";
    // One TTL for both sides, short, so that the keeper's watchdog renews
    // soon; the waiter's holds are short-lived anyway.
    let kept = a
        .lock(name, WATCHED_TTL)
        .expect("a lock")
        .with_caching(Duration::from_secs(20))
        .expect("a cached lock");
    let plain = b.lock(name, WATCHED_TTL).expect("a lock");
    let key = plain.key().to_vec();
    let roles = Roles::locks(std::slice::from_ref(&key), ms(WATCHED_TTL));
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![key.clone()],
        roles: roles.clone(),
        sent: Vec::new(),
    };
    let guard = kept.acquire().await.expect("a free lock");
    log.until_any("SET", "the keeper's first try").await;
    log.until_any("extend.lua", "the keeper's renewal").await;
    guard.fencing_token().await.expect("a token");
    log.until_any("issue_fence.lua", "the keeper's token").await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    let waiter = tokio::spawn(async move {
        let guard = plain.acquire_until(Duration::from_secs(20)).await?;
        guard.release().await
    });
    // The waiter's try marks the keeper's token; the keeper hears it is
    // wanted and gives the kept hold back.
    log.until("acquire.lua", plain_waiting, "the waiter's try")
        .await;
    log.until_any("release.lua", "the keeper's give-back").await;
    let released = waiter.await.expect("the waiting task");
    assert_eq!(released.expect("taken and released"), Ownership::Owned);
    // The waiter's own release, its token no keeper's.
    log.until("release.lua", |_| true, "the waiter's release")
        .await;

    let holder = b.lock(name, TTL).expect("a lock");
    let guard = holder.try_acquire().await.expect("try").expect("free");
    // How many heard it does not matter here (a plain holder does not
    // listen); what was sent does.
    a.request_release(name).await.expect("a request to release");
    let channel = release_channel(&key);
    let words = log
        .recorder
        .next_on(&channel, "the request to release")
        .await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    let ask = Recorded {
        words,
        roles: Roles::locks(std::slice::from_ref(&key), ms(TTL)),
    };
    (log, ask)
}
