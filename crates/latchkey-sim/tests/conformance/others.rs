//! The semaphore's and the read-write lock's operations (and a fresh
//! client's plain lock), driven through the real library against a real
//! server; every request sent on their keys is recorded, for `tables.rs`
//! (and their models' requests, `within`). How many times a waiter tries or renews
//! depends on timing, so these are not paired with operations by order:
//! each must match an entry of the primitive's table.

use std::time::Duration;

use latchkey::protocol::{primitive_key, RWLOCK_SUFFIXES};
use latchkey::{Client, Ownership};
use latchkey_sim::model::conform::{Roles, Scripts, Sent};

use crate::lock::{Recorded, TTL, WATCHED_TTL};
use crate::monitor::Recorder;

/// The library's default key prefix, which the clients here use.
pub const PREFIX: &[u8] = b"latchkey:";
/// How long a waiter that must give up waits.
pub const GIVE_UP: Duration = Duration::from_millis(400);

pub fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).expect("a duration in i64 ms")
}

/// Every request sent on one primitive's keys, in order.
pub struct Log<'a> {
    pub scripts: &'a Scripts,
    pub recorder: &'a mut Recorder,
    pub keys: Vec<Vec<u8>>,
    pub roles: Roles,
    /// The requests, shaped.
    pub sent: Vec<(Sent, Recorded)>,
}

impl Log<'_> {
    /// Records every request on `keys` (read with `roles`) until one of
    /// `script` whose shape `also` accepts; panics, naming `what`, if none
    /// comes within the recorder's time.
    pub async fn until(&mut self, script: &str, also: impl Fn(&Sent) -> bool, what: &str) {
        loop {
            let keys: Vec<&[u8]> = self.keys.iter().map(Vec::as_slice).collect();
            let words = self.recorder.next_among(&keys, what).await;
            let sent = self.scripts.shape_words(&words, &self.roles);
            let Some(sent) = sent else {
                panic!("{what}: a malformed call {words:?}");
            };
            let done = sent.script == script && also(&sent);
            let roles = self.roles.clone();
            self.sent.push((sent, Recorded { words, roles }));
            if done {
                return;
            }
        }
    }

    /// [`Log::until`] any request of `script`.
    pub async fn until_any(&mut self, script: &str, what: &str) {
        self.until(script, |_| true, what).await;
    }

    /// Goes on with another primitive's keys and roles.
    pub fn switch(&mut self, keys: Vec<Vec<u8>>, roles: Roles) {
        self.keys = keys;
        self.roles = roles;
    }
}

/// A semaphore of 3 permits: one taken, issued a token, two at once, a
/// waiter of another client woken by a release, the releases, a fenced
/// acquire, the watchdog's renewal.
pub async fn semaphore<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let name = "conform-sem";
    let sem = a.semaphore(name, 3, TTL).expect("a semaphore");
    let roles = Roles::semaphore(PREFIX, name.as_bytes(), ms(TTL));
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![sem.key().to_vec()],
        roles,
        sent: Vec::new(),
    };

    let one = sem
        .try_acquire()
        .await
        .expect("try")
        .expect("a free permit");
    log.until_any("sem_acquire.lua", "acquire").await;
    one.fencing_token().await.expect("a token");
    log.until_any("sem_fence.lua", "issue").await;
    let two = sem.acquire_many(2).await.expect("two free permits");
    log.until_any("sem_acquire.lua", "acquire many").await;
    let waiting = b.semaphore(name, 3, TTL).expect("a semaphore");
    let wait = tokio::spawn(async move { waiting.acquire_until(Duration::from_secs(20)).await });
    log.until_any("sem_acquire.lua", "a waiter's try").await;
    assert_eq!(one.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "release").await;
    let woken = wait
        .await
        .expect("the waiting task")
        .expect("woken, it takes the permit");
    assert_eq!(two.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "release many").await;
    assert_eq!(woken.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "the waiter's release")
        .await;
    let fenced = sem
        .with_fencing()
        .try_acquire()
        .await
        .expect("try")
        .expect("free");
    log.until_any("sem_acquire.lua", "a fenced acquire").await;
    assert_eq!(fenced.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "release").await;

    let name = "conform-sem-watched";
    let watched = a
        .semaphore(name, 3, WATCHED_TTL)
        .expect("a semaphore")
        .with_watchdog();
    let roles = Roles::semaphore(PREFIX, name.as_bytes(), ms(WATCHED_TTL));
    log.switch(vec![watched.key().to_vec()], roles);
    let guard = watched.try_acquire().await.expect("try").expect("free");
    log.until_any("sem_extend.lua", "the watchdog's renewal")
        .await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "release").await;
    log
}

/// A read-write lock's keys that scripts name first.
fn rw_keys(name: &str) -> Vec<Vec<u8>> {
    [0, 1, 2]
        .map(|i| primitive_key(PREFIX, name.as_bytes(), RWLOCK_SUFFIXES[i]))
        .into()
}

/// A read-write lock: a reader, a writer of another client that waits for
/// it and gives up, the reader's release, a writer issued a token on
/// demand, waits for a read and (fenced) a read and a write, a fenced
/// writer, the releases, a reader's and a writer's renewals.
pub async fn rwlock<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let name = "conform-rw";
    let rw = a.rwlock(name, TTL).expect("a read-write lock");
    let roles = Roles::rwlock(PREFIX, name.as_bytes(), ms(TTL));
    let mut log = Log {
        scripts,
        recorder,
        keys: rw_keys(name),
        roles,
        sent: Vec::new(),
    };

    let reader = rw.try_read().await.expect("try").expect("free");
    log.until_any("rw_acquire.lua", "read").await;
    let writer = b.rwlock(name, TTL).expect("a read-write lock");
    // Long enough for its first try (which records its intent, withdrawn
    // when it gives up) on a loaded machine.
    let gave_up = writer.write_until(GIVE_UP).await;
    assert!(gave_up.is_err(), "a writer waits for the reader");
    log.until_any("rw_forget.lua", "a writer giving up").await;
    assert_eq!(reader.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "the reader's release")
        .await;
    let w = rw.try_write().await.expect("try").expect("free");
    log.until_any("rw_acquire.lua", "write").await;
    w.fencing_token().await.expect("a token");
    log.until_any("issue_fence.lua", "issue").await;
    assert_eq!(w.release().await.expect("release"), Ownership::Owned);
    log.until_any("rw_release_write.lua", "the writer's release")
        .await;
    // A wait's attempts (waiting '1'), plain and fenced: what the
    // read-write lock model sends for each of its attempts.
    let r = rw.read().await.expect("a free read");
    log.until_any("rw_acquire.lua", "read waiting").await;
    assert_eq!(r.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "the reader's release")
        .await;
    let r = rw.clone().with_fencing().read().await.expect("a free read");
    log.until_any("rw_acquire.lua", "read waiting fenced").await;
    assert_eq!(r.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "the reader's release")
        .await;
    let w = rw
        .clone()
        .with_fencing()
        .write()
        .await
        .expect("a free write");
    log.until_any("rw_acquire.lua", "write waiting fenced")
        .await;
    assert_eq!(w.release().await.expect("release"), Ownership::Owned);
    log.until_any("rw_release_write.lua", "the writer's release")
        .await;
    let fenced = rw
        .with_fencing()
        .try_write()
        .await
        .expect("try")
        .expect("free");
    log.until_any("rw_acquire.lua", "a fenced writer").await;
    assert_eq!(fenced.release().await.expect("release"), Ownership::Owned);
    log.until_any("rw_release_write.lua", "the writer's release")
        .await;

    let name = "conform-rw-watched";
    let watched = a
        .rwlock(name, WATCHED_TTL)
        .expect("a read-write lock")
        .with_watchdog();
    log.switch(
        rw_keys(name),
        Roles::rwlock(PREFIX, name.as_bytes(), ms(WATCHED_TTL)),
    );
    let guard = watched.try_read().await.expect("try").expect("free");
    log.until_any("sem_extend.lua", "a reader's renewal").await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("sem_release.lua", "the reader's release")
        .await;
    let guard = watched.try_write().await.expect("try").expect("free");
    log.until_any("extend.lua", "a writer's renewal").await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("rw_release_write.lua", "the writer's release")
        .await;
    log
}

/// A plain lock's first try on a client that has run no script yet: the
/// acquire script without a token (so that a user not allowed scripts is
/// refused before it takes a key), which the lock model leaves out (its
/// clients are used ones).
pub async fn fresh_lock<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    server_url: &str,
) -> Log<'a> {
    let client = Client::connect(server_url).await.expect("connect");
    let lock = client.lock("conform-fresh", TTL).expect("a lock");
    let roles = Roles::lock(lock.key(), ms(TTL));
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![lock.key().to_vec()],
        roles,
        sent: Vec::new(),
    };
    let guard = lock.try_acquire().await.expect("try").expect("free");
    log.until_any("acquire.lua", "a fresh client's first try")
        .await;
    assert_eq!(guard.release().await.expect("release"), Ownership::Owned);
    log.until_any("release.lua", "the release").await;
    log
}
