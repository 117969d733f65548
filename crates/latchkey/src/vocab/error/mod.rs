//! The one error type of this crate.

pub(crate) mod acl;
mod code;
mod said;

pub(crate) use said::Said;
pub(crate) mod tls;

use std::time::Duration;

/// A specialized `Result` for latchkey operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in latchkey.
///
/// Not getting a lock is *not* an error when you asked only to try
/// ([`Lock::try_acquire`](crate::Lock::try_acquire) returns `Ok(None)`), and
/// losing ownership on release or extend is reported by an outcome
/// ([`Ownership`](crate::Ownership)), not an error.
/// Errors are for bad input and for a Redis that cannot answer properly.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client.lock("nightly-report", Duration::from_secs(30))?;
/// match lock.acquire_until(Duration::from_secs(5)).await {
///     Ok(guard) => guard.release().await.map(drop)?,
///     Err(latchkey::Error::WaitTimedOut { .. }) => println!("busy: try tomorrow"),
///     Err(e) if e.is_transient() => eprintln!("Redis trouble, worth retrying later: {e}"),
///     Err(e) => return Err(e), // a mistake to fix, not to retry
/// }
/// # Ok(()) }
/// ```
///
/// # Which errors are transient
/// [`is_transient`](Error::is_transient) says whether retrying later can
/// help. Roughly, by kind:
///
/// | Kind | Variants | Retry? |
/// |---|---|---|
/// | Redis unavailable for now | `Unreachable`, `Timeout`, `NoQuorum`, `OutOfMemory`, `ReadOnlyReplica`, `TooFewReplicas` | yes (`is_transient`) |
/// | A bounded wait ran out | `WaitTimedOut` | your policy: the primitive is busy, not broken |
/// | The state says no | `LatchOpen`, `CountedBelowZero`, `PartiesMismatch`, `NotFound`, `NotHeld`, `MaxHoldReached`, `ForeignValue` | no: the answer will not change by retrying |
/// | Bad input | `InvalidName`, `InvalidTtl`, `InvalidCount`, `InvalidInput`, `Unsupported` | no: fix the call |
/// | Deployment | `Auth`, `Tls`, `NoPermission`, `UnsupportedServer`, `WrongType`, `BadFencingCounter` | no: fix the server, user or key |
/// | Anything else | `Redis`, `Protocol`, `Random`, `Internal` | no: report it |
///
/// A lock's waiting calls ([`Lock::acquire`](crate::Lock::acquire) and its
/// siblings) already retry transient errors until their deadline (without
/// one, for 30 s), so a transient error that reaches you has outlasted
/// that. The CLI maps these kinds to its exit codes (`docs/cli.md`); each
/// kind also has a stable [`code`](Error::code), which the Python and Node
/// packages name their error classes after.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A lock or signal name is empty, too long, or uses a reserved form.
    #[error("invalid name: {reason}")]
    InvalidName {
        /// Why the name was refused.
        reason: String,
    },

    /// A TTL is below [`MIN_TTL`](crate::limits::MIN_TTL) or above [`MAX_TTL`](crate::limits::MAX_TTL).
    #[error("invalid ttl {ttl:?}: {reason}")]
    InvalidTtl {
        /// The TTL that was refused.
        ttl: Duration,
        /// Why it was refused.
        reason: &'static str,
    },

    /// Some other argument or option was refused (a bad URL, a bad option
    /// value, a renewal interval that does not fit the TTL).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// Redis could not be reached: connection refused, reset, or the server is gone.
    #[error("Redis unreachable: {}", said::Said(.0))]
    Unreachable(#[source] redis::RedisError),

    /// Redis did not answer within the configured command timeout.
    #[error("Redis did not answer `{op}` within {after:?}")]
    Timeout {
        /// The operation that timed out.
        op: &'static str,
        /// The timeout that was exceeded.
        after: Duration,
    },

    /// A TLS connection could not be set up: the server's certificate was
    /// refused (unknown CA, wrong name, expired), the server refused ours
    /// or wanted one, the port does not speak TLS, or a certificate or key
    /// given to [`ClientBuilder`](crate::ClientBuilder) is unusable. Not
    /// transient: the configuration must change (`docs/security.md`).
    #[error("TLS failed: {reason}")]
    Tls {
        /// What went wrong and what to do about it.
        reason: String,
    },

    /// The server refused our credentials (wrong password or user, or NOAUTH).
    #[error("Redis authentication failed: {}", said::Said(.0))]
    Auth(#[source] redis::RedisError),

    /// A key that latchkey uses holds a value of the wrong type (WRONGTYPE):
    /// something else uses the same key name.
    #[error("key {key:?} holds a value of the wrong type; is another program using this name?")]
    WrongType {
        /// The key, lossily decoded as UTF-8.
        key: String,
    },

    /// A lock's fencing counter (`name:fence`) holds something other than a
    /// token: something else wrote it. No token was issued (and, for a lock
    /// made [`with_fencing`](crate::Lock::with_fencing), the lock was not
    /// taken). Deleting the counter resets it (see `docs/fencing.md` for what
    /// that costs).
    #[error("fencing counter {key:?} does not hold a fencing token; delete it to reset the lock")]
    BadFencingCounter {
        /// The counter's key, lossily decoded as UTF-8.
        key: String,
    },

    /// The client was closed ([`Client::close`](crate::Client::close)): it
    /// takes no new hold, and every hold it had was given back.
    #[error("the client is closed (close() was called)")]
    ClientClosed,

    /// A fencing token was asked of a guard whose lock is no longer held
    /// (it expired, or someone else holds it now): a token issued now could
    /// outrank the new holder's, so none is. Stop working on the resource.
    #[error("lock {name:?} is no longer held: no fencing token can be issued")]
    NotHeld {
        /// The lock's name, lossily decoded as UTF-8.
        name: String,
    },

    /// An extension asked of a hold that reached its cap
    /// ([`with_max_hold`](crate::Lock::with_max_hold)): it is not extended
    /// past it, and ends at its deadline. Stop working on the resource.
    #[error("{name:?} reached its max hold of {max_hold:?}: it is not extended past it")]
    MaxHoldReached {
        /// The primitive's name, lossily decoded as UTF-8.
        name: String,
        /// The cap it was made with.
        max_hold: Duration,
    },

    /// A revocation found a key that no latchkey client wrote where a hold
    /// should be (a plain `SET` under the prefix, another program's data):
    /// it is not ours to end, and nothing was revoked.
    #[error("key {key:?} holds a value no latchkey client wrote: it is not revoked (another program's data?)")]
    ForeignValue {
        /// The key, lossily decoded as UTF-8.
        key: String,
    },

    /// The server refused a command for lack of permission (ACL NOPERM).
    /// The message says what was refused: the command, or the keys or
    /// channel it touched. `docs/security.md` has the rule latchkey needs.
    #[error("Redis refused permission (ACL): {}; latchkey's ACL rule is in docs/security.md, and `latchkey doctor` prints the fix", said::Said(.0))]
    NoPermission(#[source] redis::RedisError),

    /// The server is out of memory (`maxmemory` reached under the
    /// `noeviction` policy) and refuses writes (OOM). Transient: it passes
    /// when memory is freed. Fix: free memory or raise `maxmemory`.
    #[error("Redis is out of memory and refuses writes (maxmemory reached): {}", said::Said(.0))]
    OutOfMemory(#[source] redis::RedisError),

    /// The server is a read-only replica (READONLY): connect to the
    /// primary. Transient: a replica being promoted after a failover
    /// starts to accept writes.
    #[error("Redis is a read-only replica; connect to the primary: {}", said::Said(.0))]
    ReadOnlyReplica(#[source] redis::RedisError),

    /// The server or cluster cannot serve the request now: a Redis Cluster
    /// whose slot is moving or has no primary (MOVED or ASK that the cluster
    /// client could not follow, TRYAGAIN, CLUSTERDOWN, MASTERDOWN: a failover
    /// in progress), or a server still loading its data after a restart
    /// (LOADING). Transient: every wait retries it until its deadline.
    #[error("Redis cannot serve now (a failover or restart in progress): {}", said::Said(.0))]
    Unavailable(#[source] redis::RedisError),

    /// The server is one latchkey cannot work on: Redis before 7.0 (a plain
    /// acquisition is `SET … NX … GET`, new in 7.0; KeyDB reports 6.x) or
    /// Valkey before 7.2. Found at connect from `INFO server`
    /// (`redis_version`, and `valkey_version` / `server_name:valkey` for
    /// Valkey, which reports `redis_version:7.2.4` from version 8 on), so
    /// nothing else was sent. Not transient: upgrade the server
    /// (`docs/protocol.md`, "Supported servers").
    #[error("{server} {version} at {address} is not supported: latchkey needs Redis 7.0 or later, or Valkey 7.2 or later")]
    UnsupportedServer {
        /// "Redis" or "Valkey".
        server: &'static str,
        /// The version the server reports (`redis_version`, `valkey_version`).
        version: String,
        /// The host and port that answered.
        address: String,
    },

    /// [Seeds](crate::ClientBuilder::seed) were given, and the server that
    /// answered is not a Redis Cluster node: seeds are nodes of one
    /// cluster (independent servers are [`Redlock`](crate::Redlock)'s).
    #[error("{server} is not a Redis Cluster node: several URLs of one client are seeds of one cluster (for independent servers use Redlock)")]
    NotACluster {
        /// The host and port of the server that answered.
        server: String,
    },

    /// A bounded wait gave up because its deadline passed first: a lock,
    /// permit, read or write hold or leadership still held by someone else,
    /// a latch still closed, a barrier's parties still missing, no signal.
    /// Every primitive's `*_timeout` and `*_until` end so (the one timeout
    /// convention); an outage at the deadline is that outage's error instead.
    #[error("{name:?} still busy after waiting {waited:?}")]
    WaitTimedOut {
        /// The name waited on, lossily decoded as UTF-8 (for a wait on
        /// several signal names or a pattern: them, comma-separated).
        name: String,
        /// How long we waited.
        waited: Duration,
    },

    /// A [`Redlock`](crate::Redlock) operation could not reach enough
    /// instances to decide: fewer than a majority answered (or, for extend
    /// and release, the ones that did not answer could change the outcome).
    /// Transient: the instances may come back.
    #[error("Redlock {op}: only {answered} of {instances} Redis instances answered; a majority needs {needed}")]
    NoQuorum {
        /// The operation: "connect", "acquire", "issue fencing token", "raise fence", "extend", "release", "subscribe".
        op: &'static str,
        /// How many instances answered.
        answered: usize,
        /// How many must agree: N/2 + 1.
        needed: usize,
        /// N, the number of instances.
        instances: usize,
    },

    /// A count was refused: a latch's count, a barrier's parties or a
    /// semaphore's permits of 0, or above [`MAX_COUNT`](crate::limits::MAX_COUNT).
    #[error("invalid {what} {count}: {reason}")]
    InvalidCount {
        /// What was counted: "latch count", "barrier parties", "semaphore permits".
        what: &'static str,
        /// The count that was refused.
        count: u64,
        /// Why it was refused.
        reason: &'static str,
    },

    /// [`Latch::count_down`](crate::Latch::count_down) on a latch that is
    /// open already (its count is 0): it cannot go below zero.
    #[error("latch {name:?} is open already: it cannot be counted below zero")]
    CountedBelowZero {
        /// The latch's name, lossily decoded as UTF-8.
        name: String,
    },

    /// [`Latch::create`](crate::Latch::create) of a latch that exists and
    /// is open already: a latch opens once, and creating it again would
    /// neither re-arm it nor make the next `wait` wait.
    #[error("latch {name:?} is open already{}: a latch opens once; count again under a new name, or after it expires", expires_in.map(|d| format!(" (it expires in {}s)", d.as_secs().max(1))).unwrap_or_default())]
    LatchOpen {
        /// The latch's name, lossily decoded as UTF-8.
        name: String,
        /// When the open latch expires (its creator's TTL), if it has a TTL.
        expires_in: Option<std::time::Duration>,
    },

    /// The latch or barrier does not exist in Redis: never created, or gone
    /// at its TTL.
    #[error("{what} {name:?} does not exist (never created, or gone at its TTL)")]
    NotFound {
        /// "latch" or "barrier".
        what: &'static str,
        /// The name, lossily decoded as UTF-8.
        name: String,
    },

    /// A barrier was joined with a number of parties other than the one its
    /// current generation was started with.
    #[error("barrier {name:?} has {stored} parties, not {given}")]
    PartiesMismatch {
        /// The barrier's name, lossily decoded as UTF-8.
        name: String,
        /// The parties stored in Redis by the first arrival.
        stored: u64,
        /// The parties this caller gave.
        given: u64,
    },

    /// What was asked is not offered for this kind of lock (a
    /// [fair](crate::Lock::fair) lock on a [`Redlock`](crate::Redlock):
    /// see `docs/redlock.md`).
    #[error("not supported: {0}")]
    Unsupported(&'static str),

    /// A lock made [`with_replicas`](crate::Lock::with_replicas) was taken,
    /// but fewer replicas than asked acknowledged it (`WAIT`) within the
    /// replica timeout, so it could be lost in a failover: it was released
    /// again. Transient: the replicas may catch up or come back.
    #[error("lock {name:?}: only {acked} of {wanted} replicas acknowledged it within {waited:?}; it was released")]
    TooFewReplicas {
        /// The lock's name, lossily decoded as UTF-8.
        name: String,
        /// How many replicas were asked for.
        wanted: usize,
        /// How many acknowledged in time.
        acked: usize,
        /// How long `WAIT` waited.
        waited: Duration,
    },

    /// Any other error reported by Redis or the client library.
    #[error("Redis error: {}", said::Said(.0))]
    Redis(#[source] redis::RedisError),

    /// Redis answered with something this version of latchkey does not understand.
    #[error("unexpected reply from Redis: {0}")]
    Protocol(String),

    /// The operating system could not give random bytes for an owner token.
    #[error("no random bytes from the operating system: {0}")]
    Random(#[source] std::io::Error),

    /// A background task of latchkey's ended without an answer (it
    /// panicked or its runtime shut down): a bug or a runtime going away.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A NOPERM refusal of a key or channel (Redis says "one of the keys used
/// as arguments") with the keys or channel named; a refused command is
/// named by Redis already.
fn naming(err: redis::RedisError, keys: &[&[u8]]) -> redis::RedisError {
    use redis::{ErrorKind, ServerErrorKind};
    let detail = err.detail().unwrap_or_default();
    if keys.is_empty() || detail.contains("command") {
        return err;
    }
    let names: Vec<String> = keys
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let detail = format!("{detail} ({})", names.join(", "));
    redis::RedisError::from((ErrorKind::Server(ServerErrorKind::NoPerm), "NOPERM", detail))
}

impl Error {
    /// True for errors that may go away by themselves (unreachable, timeout,
    /// a failover in progress, no quorum): retrying later can help. Bad
    /// input, auth and wrong-type errors are not transient. Every wait of
    /// latchkey retries exactly these (see `vocab/retry.rs`).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Unreachable(_)
                | Error::Timeout { .. }
                | Error::NoQuorum { .. }
                | Error::OutOfMemory(_)
                | Error::ReadOnlyReplica(_)
                | Error::Unavailable(_)
                | Error::TooFewReplicas { .. }
        )
    }

    /// Classifies an error from redis-rs, by its kind and error code (never
    /// by message text, but for an ACL refusal inside a script, which Redis
    /// reports as `ERR`: see `vocab/error/acl.rs`). `keys`: the keys the command
    /// touched, to name the right one (the lock key, or its fencing counter)
    /// in a WRONGTYPE or BADFENCE error; `after`: the timeout in force, for
    /// a timeout.
    pub(crate) fn from_redis(err: redis::RedisError, keys: &[&[u8]], after: Duration) -> Error {
        use redis::{ErrorKind, ServerErrorKind};
        let name = |key: Option<&&[u8]>| {
            String::from_utf8_lossy(key.copied().unwrap_or_default()).into_owned()
        };
        if let Some(reason) = crate::vocab::error::tls::tls_failure(&err) {
            return Error::Tls { reason };
        }
        if let Some(refusal) = crate::vocab::error::acl::script_refusal(&err) {
            return Error::NoPermission(refusal);
        }
        match err.code() {
            Some("WRONGTYPE") => {
                return Error::WrongType {
                    key: name(keys.first()),
                }
            }
            // Raised by our scripts for a fencing counter that holds no token
            // (garbage, a negative or huge number, or not a string at all).
            Some("BADFENCE") => {
                // The message names the bad counter (a multi acquire reads
                // one per lock); else the first counter.
                let detail = err.detail().unwrap_or_default();
                let counters = keys
                    .iter()
                    .filter(|k| k.ends_with(crate::vocab::protocol::FENCE_SUFFIX));
                let named = counters
                    .clone()
                    .find(|k| detail.contains(String::from_utf8_lossy(k).as_ref()));
                // An election's term counter is a field of its state hash,
                // which the message names.
                let counter = named.or_else(|| counters.clone().next()).or_else(|| {
                    keys.iter()
                        .find(|k| detail.contains(String::from_utf8_lossy(k).as_ref()))
                });
                return Error::BadFencingCounter { key: name(counter) };
            }
            // Raised by the revoke scripts for a hold key holding no token.
            Some("FOREIGN") => {
                let detail = err.detail().unwrap_or_default();
                let key = keys
                    .iter()
                    .find(|k| detail.contains(String::from_utf8_lossy(k).as_ref()));
                return Error::ForeignValue {
                    key: name(key.or(keys.first())),
                };
            }
            Some("NOAUTH") | Some("WRONGPASS") => return Error::Auth(err),
            Some("OOM") => return Error::OutOfMemory(err),
            _ => {}
        }
        match err.kind() {
            ErrorKind::AuthenticationFailed => Error::Auth(err),
            ErrorKind::Server(ServerErrorKind::NoPerm) => Error::NoPermission(naming(err, keys)),
            ErrorKind::Server(ServerErrorKind::ReadOnly) => Error::ReadOnlyReplica(err),
            ErrorKind::Server(
                ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::BusyLoading,
            )
            | ErrorKind::ClusterConnectionNotFound => Error::Unavailable(err),
            _ if err.is_timeout() => Error::Timeout {
                op: "command",
                after,
            },
            _ if err.is_io_error()
                || err.is_connection_refusal()
                || err.is_connection_dropped()
                || err.is_unrecoverable_error() =>
            {
                Error::Unreachable(err)
            }
            _ => Error::Redis(err),
        }
    }
}
