//! Every public path of 0.3 that 0.4 did not retire still compiles: the
//! types at the root and in `inspect` and `limits`, each guard's surface
//! (now the one `Hold<K>`'s), the builders' options and the waits (the
//! `_timeout` twins deprecated, not gone). Retired in 0.4, and so absent
//! here: `DynGuard` (`Box<dyn Guard>`), the root copies of the `inspect`
//! and `limits` names, `Client::list` (`list_all`).
#![allow(deprecated, clippy::let_underscore_future, clippy::type_complexity)]

use latchkey::inspect::{
    BarrierInfo, ElectionInfo, FairLockInfo, Holder, Holding, LatchInfo, LockInfo, PrimitiveInfo,
    RwLockInfo, SemaphoreInfo,
};
use latchkey::limits::{
    DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX, DEFAULT_REPLICA_TIMEOUT, DEFAULT_WAITER_LEASE,
    MAX_COUNT, MAX_INSTANCE_TIMEOUT, MAX_NAME_LEN, MAX_TTL, MIN_INSTANCE_TIMEOUT, MIN_TTL,
    MIN_WAITER_LEASE,
};
#[allow(unused_imports)]
use latchkey::{
    acl, metrics, protocol, redact_url, Barrier, BoxFuture, CachedGuard, CachedLock, Client,
    ClientBuilder, Connection, Election, Error, FencedResource, FencedWrite, Fencing, Guard,
    HoldOptions, Kind, Latch, Leader, Leadership, Listener, Lock, LockGuard, LostReason,
    LostSignal, MetricsLabels, MultiGuard, MultiLock, Observer, Ownership, PermitGuard, Redlock,
    Result, Revocation, RwAccess, RwGuard, RwLock, Semaphore, Signal,
};

/// Each guard's 0.3 surface, by name.
macro_rules! surface {
    ($($guard:ty),*) => {$(
        let _ = <$guard>::name;
        let _ = <$guard>::token;
        let _ = <$guard>::deadline;
        let _ = <$guard>::is_held;
        let _ = <$guard>::lost;
        let _ = <$guard>::lost_signal;
        let _ = <$guard>::release_requested;
        let _ = <$guard>::extend;
        let _ = <$guard>::confirm;
        let _ = <$guard>::release;
        let _ = <$guard>::forget;
        let _ = <$guard>::ttl;
        let _ = <$guard>::lost_reason;
        let _ = <$guard>::fencing_token;
        let _ = <$guard>::issued_fencing_token;
    )*};
}

/// The calls whose arguments are `impl Trait` (no function item to name).
#[allow(dead_code, unused_must_use)]
async fn called(leader: Leadership, election: Election, locks: MultiGuard) {
    let _ = locks.fencing_token_of("a");
    let client = Client::connect("redis://127.0.0.1:1/").await.unwrap();
    let _ = client.describe("a");
    let redlock = Redlock::new(vec![client]).unwrap();
    let _ = redlock.lock("a", std::time::Duration::from_secs(1));
    let _ = leader.proclaim("v");
    let _ = election.campaign_timeout("v", std::time::Duration::from_secs(1));
}

#[test]
fn every_public_path_of_0_3_still_compiles() {
    surface!(
        LockGuard,
        PermitGuard,
        RwGuard,
        MultiGuard,
        Leadership,
        CachedGuard
    );
    let _ = PermitGuard::permits;
    let _ = RwGuard::access;
    let _ = MultiGuard::names;
    let _ = MultiGuard::fencing_tokens;
    let _ = MultiGuard::issued_fencing_tokens;
    let _ = MultiGuard::lost_lock;
    let _ = Leadership::term;
    let _ = Leadership::since;
    let _ = Leadership::value;
    let _ = Leadership::is_leader;
    let _ = Leadership::resign;
    let _ = CachedGuard::took_from_redis;
    // The waits, and their deprecated `_timeout` twins.
    let _ = Lock::acquire;
    let _ = Lock::acquire_timeout;
    let _ = Lock::try_acquire;
    let _ = CachedLock::acquire_timeout;
    let _ = MultiLock::acquire_timeout;
    let _ = Semaphore::acquire_timeout;
    let _ = Semaphore::acquire_many_timeout;
    let _ = RwLock::read_timeout;
    let _ = RwLock::write_timeout;
    let _ = Barrier::arrive_and_wait_timeout;
    let _ = Latch::wait_timeout;
    // The builders' lease options, and the trait over them.
    fn options<P: HoldOptions>(p: P) -> latchkey::Result<P> {
        p.with_watchdog()
            .with_fencing()
            .with_asking()
            .with_max_hold(std::time::Duration::from_secs(60))?
            .with_stop_margin(std::time::Duration::from_millis(100))
    }
    let _ = options::<Lock>;
    let _ = options::<Semaphore>;
    let _ = options::<RwLock>;
    let _ = options::<MultiLock>;
    let _ = (Client::connect, Client::builder, Client::flush);
    let _ = (Redlock::connect, Redlock::new, Redlock::flush);
    let _: Option<Box<dyn Guard>> = None;
    let _: Option<(
        BarrierInfo,
        ElectionInfo,
        FairLockInfo,
        Holder,
        Holding,
        LatchInfo,
        LockInfo,
        PrimitiveInfo,
        RwLockInfo,
        SemaphoreInfo,
    )> = None;
    let _ = (
        DEFAULT_COMMAND_TIMEOUT,
        DEFAULT_PREFIX,
        DEFAULT_REPLICA_TIMEOUT,
        DEFAULT_WAITER_LEASE,
        MAX_COUNT,
        MAX_INSTANCE_TIMEOUT,
        MAX_NAME_LEN,
        MAX_TTL,
        MIN_INSTANCE_TIMEOUT,
        MIN_TTL,
        MIN_WAITER_LEASE,
    );
}
