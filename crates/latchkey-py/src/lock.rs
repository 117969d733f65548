//! Every call into the Rust API of a lock (`latchkey::Lock`, `LockGuard`),
//! in one file, for the Python classes of lock_py.rs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::{CachedGuard, LockGuard, LostSignal, Ownership};
use tokio::sync::RwLock;

use crate::core::Core;
use crate::runtime::{drop_in_runtime, pid};

/// A lock as Python asked for it: the `latchkey::Lock` is made from the
/// process's client on first use, and again in a forked child (whose
/// client is its own), so that a lock object survives a fork.
pub(crate) struct LockSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
    pub(crate) ttl: Duration,
    pub(crate) watchdog: bool,
    pub(crate) fencing: bool,
    pub(crate) fair: bool,
    /// `Some(idle)`: a released hold is kept while idle (`cached=`).
    pub(crate) cached: Option<Duration>,
    /// The lock made for this process (its pid), kept: making it checks
    /// the name and computes its keys, a measurable share of a cycle; a
    /// cached lock's kept hold lives in it.
    pub(crate) built: std::sync::Mutex<Option<(u32, Built)>>,
}

/// The Rust lock of a spec: plain, or kept while idle.
#[derive(Clone)]
pub(crate) enum Built {
    Plain(latchkey::Lock),
    Cached(latchkey::CachedLock),
}

/// A hold of either kind of lock.
pub(crate) enum Guard {
    Plain(LockGuard),
    Cached(CachedGuard),
}

impl Guard {
    fn token(&self) -> &str {
        match self {
            Guard::Plain(g) => g.token(),
            Guard::Cached(g) => g.token(),
        }
    }
    fn name(&self) -> &[u8] {
        match self {
            Guard::Plain(g) => g.name(),
            Guard::Cached(g) => g.name(),
        }
    }
    fn deadline(&self) -> Instant {
        match self {
            Guard::Plain(g) => g.deadline(),
            Guard::Cached(g) => g.deadline(),
        }
    }
    fn is_held(&self) -> bool {
        match self {
            Guard::Plain(g) => g.is_held(),
            Guard::Cached(g) => g.is_held(),
        }
    }
    fn lost_signal(&self) -> LostSignal {
        match self {
            Guard::Plain(g) => g.lost_signal(),
            Guard::Cached(g) => g.lost_signal(),
        }
    }
    async fn release(self) -> latchkey::Result<Ownership> {
        match self {
            Guard::Plain(g) => g.release().await,
            Guard::Cached(g) => g.release().await,
        }
    }
    async fn extend(&self, ttl: Duration) -> latchkey::Result<Ownership> {
        match self {
            Guard::Plain(g) => g.extend(ttl).await,
            Guard::Cached(g) => g.extend(ttl).await,
        }
    }
    async fn fencing_token(&self) -> latchkey::Result<u64> {
        match self {
            Guard::Plain(g) => g.fencing_token().await,
            Guard::Cached(g) => g.fencing_token().await,
        }
    }
}

impl LockSpec {
    /// The Rust lock on `client`: refuses a bad name or TTL.
    pub(crate) fn build(&self, client: &latchkey::Client) -> latchkey::Result<latchkey::Lock> {
        self.configure(client.lock(&self.name, self.ttl)?)
    }

    /// The Rust lock on `redlock`: the same checks.
    pub(crate) fn build_redlock(
        &self,
        redlock: &latchkey::Redlock,
    ) -> latchkey::Result<latchkey::Lock> {
        self.configure(redlock.lock(&self.name, self.ttl)?)
    }

    /// The lock as asked for: kept while idle with `cached=`.
    pub(crate) fn finish(&self, lock: latchkey::Lock) -> latchkey::Result<Built> {
        match self.cached {
            Some(idle) => lock.with_caching(idle).map(Built::Cached),
            None => Ok(Built::Plain(lock)),
        }
    }

    fn configure(&self, mut lock: latchkey::Lock) -> latchkey::Result<latchkey::Lock> {
        if self.watchdog {
            lock = lock.with_watchdog();
        }
        if self.fencing {
            lock = lock.with_fencing();
        }
        if self.fair {
            lock = lock.fair()?;
        }
        Ok(lock)
    }

    async fn lock(self: &Arc<Self>) -> latchkey::Result<Built> {
        let kept = |built: &Option<(u32, Built)>| {
            built
                .as_ref()
                .filter(|(by, _)| *by == pid())
                .map(|(_, lock)| lock.clone())
        };
        if let Some(lock) = kept(&self.built.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(lock);
        }
        let lock = self.finish(if self.core.is_redlock() {
            self.build_redlock(&self.core.clone().redlock().await?)?
        } else {
            self.build(&self.core.clone().client().await?)?
        })?;
        let inherited = self
            .built
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace((pid(), lock.clone()));
        if let Some((by, lock)) = inherited {
            drop_in_runtime(lock, by); // a parent's, in a forked child: forgotten
        }
        Ok(lock)
    }

    /// One try: a hold, or `None` when someone else holds the lock.
    pub(crate) async fn try_acquire(self: Arc<Self>) -> latchkey::Result<Option<Arc<Held>>> {
        Ok(match self.lock().await? {
            Built::Plain(lock) => lock.try_acquire().await?.map(Guard::Plain),
            Built::Cached(lock) => lock.try_acquire().await?.map(Guard::Cached),
        }
        .map(|guard| Held::new(guard, &self.core)))
    }

    /// Waits at most `wait` (`None`: as long as it takes).
    pub(crate) async fn acquire(
        self: Arc<Self>,
        wait: Option<Duration>,
    ) -> latchkey::Result<Arc<Held>> {
        let deadline = wait.map(|w| Instant::now() + w);
        let guard = match (self.lock().await?, deadline) {
            (Built::Plain(lock), Some(deadline)) => {
                Guard::Plain(lock.acquire_until(deadline).await?)
            }
            (Built::Plain(lock), None) => Guard::Plain(lock.acquire().await?),
            (Built::Cached(lock), Some(deadline)) => {
                Guard::Cached(lock.acquire_until(deadline).await?)
            }
            (Built::Cached(lock), None) => Guard::Cached(lock.acquire().await?),
        };
        Ok(Held::new(guard, &self.core))
    }
}

impl Drop for LockSpec {
    fn drop(&mut self) {
        // Python drops a lock object outside the runtime: a cached lock's
        // idle hold is given back there (or forgotten, in a forked child).
        let built = self
            .built
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((by, lock)) = built {
            drop_in_runtime(lock, by);
        }
    }
}

/// A hold, shared by the Python guard and the calls in flight on it.
pub(crate) struct Held {
    /// `None` once released.
    guard: Arc<RwLock<Option<Guard>>>,
    pub(crate) token: String,
    pub(crate) name: Vec<u8>,
    /// Made on first need (`guard.lost`): without a watchdog, a lost
    /// signal starts a timer task, which most holds never need.
    lost: std::sync::OnceLock<LostSignal>,
    /// The process that holds it: in a forked child the hold is the
    /// parent's, and nothing is done with it.
    pub(crate) owner: u32,
    /// The client it was taken with, kept until the hold is gone: the
    /// client's last flush (when it is dropped, and at exit) then sees the
    /// release this hold's drop may leave in the background.
    _client: Arc<Core>,
}

impl Held {
    /// Made on the runtime (the lost signal may start a task).
    fn new(guard: Guard, client: &Arc<Core>) -> Arc<Held> {
        let held = Arc::new(Held {
            token: guard.token().to_owned(),
            name: guard.name().to_vec(),
            lost: std::sync::OnceLock::new(),
            guard: Arc::new(RwLock::new(Some(guard))),
            owner: pid(),
            _client: client.clone(),
        });
        crate::exit::register(&held);
        held
    }

    /// The hold's lost signal (one that never fires once released).
    pub(crate) fn lost_signal(&self) -> LostSignal {
        if self.owner != pid() {
            return LostSignal::default(); // the parent's: see `LostEvent`
        }
        self.lost
            .get_or_init(|| {
                let Ok(held) = self.guard.try_read() else {
                    return LostSignal::default(); // being released
                };
                let Some(guard) = &*held else {
                    return LostSignal::default();
                };
                // Its timer task (no watchdog) needs the runtime.
                match crate::runtime::handle() {
                    Ok(handle) => {
                        let _entered = handle.enter();
                        guard.lost_signal()
                    }
                    Err(_) => LostSignal::default(),
                }
            })
            .clone()
    }

    fn check_owner(&self) -> latchkey::Result<()> {
        if self.owner == pid() {
            return Ok(());
        }
        Err(latchkey::Error::NotHeld {
            name: format!(
                "{} (held by the parent process {}: a guard does not cross os.fork())",
                String::from_utf8_lossy(&self.name),
                self.owner
            ),
        })
    }

    /// Releases if still held here: `true` when the lock was ours to the
    /// end; `false` when it was not, or was released already (idempotent).
    pub(crate) fn release(
        self: &Arc<Self>,
    ) -> impl std::future::Future<Output = latchkey::Result<bool>> + Send + 'static {
        let me = self.clone();
        async move {
            if me.owner != pid() {
                return Ok(false);
            }
            let taken = me.guard.write().await.take();
            match taken {
                Some(guard) => Ok(guard.release().await? == Ownership::Owned),
                None => Ok(false),
            }
        }
    }

    /// Resets the TTL to `ttl` from now: `true` if we still held the lock.
    pub(crate) fn extend(
        self: &Arc<Self>,
        ttl: Duration,
    ) -> impl std::future::Future<Output = latchkey::Result<bool>> + Send + 'static {
        let me = self.clone();
        async move {
            me.check_owner()?;
            let held = me.guard.read().await;
            match &*held {
                Some(guard) => Ok(guard.extend(ttl).await? == Ownership::Owned),
                None => Ok(false),
            }
        }
    }

    /// The hold's fencing token (one round trip the first time).
    pub(crate) fn fencing_token(
        self: &Arc<Self>,
    ) -> impl std::future::Future<Output = latchkey::Result<u64>> + Send + 'static {
        let me = self.clone();
        async move {
            me.check_owner()?;
            let held = me.guard.read().await;
            match &*held {
                Some(guard) => guard.fencing_token().await,
                None => Err(latchkey::Error::NotHeld {
                    name: String::from_utf8_lossy(&me.name).into_owned(),
                }),
            }
        }
    }

    /// Until when the hold may be assumed (None once released, or while a
    /// release is under way).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        if self.owner != pid() {
            return None;
        }
        let held = self.guard.try_read().ok()?;
        held.as_ref().map(Guard::deadline)
    }

    /// Held and not known lost, before the deadline. Asks nobody.
    pub(crate) fn is_held(&self) -> bool {
        if self.owner != pid() {
            return false;
        }
        match self.guard.try_read() {
            Ok(held) => held.as_ref().is_some_and(Guard::is_held),
            Err(_) => false,
        }
    }
}

impl crate::exit::Releasable for Held {
    fn release_at_exit(
        self: Arc<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let releasing = self.release();
        Box::pin(async move {
            let _ = releasing.await;
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A guard Python let go of without release(): released in the
        // background (or forgotten, in a forked child).
        if let Some(guard) = self.guard.try_write().ok().and_then(|mut g| g.take()) {
            drop_in_runtime(guard, self.owner);
        }
    }
}
