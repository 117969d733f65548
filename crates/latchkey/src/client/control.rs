//! [`Client`]'s inspection and an operator's control (layer 5, a facade):
//! reading what is held, revoking holds and asking holders to let go, over
//! `primitives/inspect` and `primitives/control`. A client made from a
//! Redlock refuses all of it (no one instance's keys say what a majority
//! holds).

use crate::client::Client;
use crate::primitives::inspect::{Inspector, LockInfo, PrimitiveInfo};
use crate::vocab::error::Result;

impl Client {
    /// Reads the state of the lock `name` in one atomic round trip: the
    /// lock's view of [`Client::describe`], the lock of a fair lock
    /// included (its queue is [`FairLockInfo`](crate::inspect::FairLockInfo)'s).
    ///
    /// Fails with [`Error::InvalidName`](crate::Error::InvalidName) for a
    /// name no lock can have (empty, longer than
    /// [`MAX_NAME_LEN`](crate::limits::MAX_NAME_LEN), ending in `:fence`), as
    /// [`Client::lock`] does, and with [`Error::WrongType`](crate::Error::WrongType)
    /// when the key holds something other than a string. A free lock is not
    /// an error: `held` is false. Neither is a fencing counter that holds
    /// garbage: see [`LockInfo::bad_fencing_counter`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, name: impl AsRef<[u8]>) -> Result<LockInfo> {
        Inspector(self.one_server(locks_only!("inspection"))?)
            .inspect(name.as_ref())
            .await
    }

    /// Every primitive under `name` (lock, fair lock, semaphore, rwlock,
    /// latch, barrier, election), read by one script in one round trip: a
    /// snapshot, never a basis for decisions. One entry per kind found, in
    /// [`Kind`](crate::Kind) order (a name can be several); empty when
    /// nothing is there. What counts as found: `docs/protocol.md`,
    /// "Inspection of every kind". Holders are named by host and pid, never
    /// by token. Errors as [`Client::inspect`]'s (`InvalidName`, and
    /// `WrongType` for a lock key `P + name` that is not a string).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn describe(&self, name: impl AsRef<[u8]>) -> Result<Vec<PrimitiveInfo>> {
        Inspector(self.one_server(locks_only!("inspection"))?)
            .describe(name.as_ref())
            .await
    }

    /// Every primitive whose name matches the glob `pattern` (Redis `MATCH`
    /// syntax: `*`, `?`, `[abc]`, `\` escapes; `*` for all), every kind,
    /// sorted by name, then kind. A lock is listed when it is held with a
    /// latchkey owner token, or when its fencing counter exists; another
    /// program's key under the prefix is skipped.
    ///
    /// Uses `SCAN` (never `KEYS`, which blocks the server) on every primary,
    /// `COUNT 1000`, then describes each name found, pipelined
    /// (`docs/protocol.md`). Keys created or deleted meanwhile may or may
    /// not be seen.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn list_all(&self, pattern: impl AsRef<[u8]>) -> Result<Vec<PrimitiveInfo>> {
        Inspector(self.one_server(locks_only!("inspection"))?)
            .list_all(pattern.as_ref())
            .await
    }

    /// Revokes every hold of `name`, whoever holds it: an operator's way out
    /// of a holder that is alive but stuck (its watchdog would renew its lock
    /// forever). A lock, a fair lock (handed to the head of its queue), every
    /// permit of a semaphore, a read-write lock's writer and readers, an
    /// election's leader (resigned: candidates take over at once). The
    /// fencing counter is raised past every token the revoked holders could
    /// have, in the same script and before a fair lock is handed on, and
    /// returned: [`FencedResource::raise`](crate::FencedResource::raise) a
    /// resource to it and the revoked holders' next writes there are
    /// refused at once, while the next holder's token is above it. The
    /// holders learn it at their next renewal (their `lost()` fires), at
    /// the latest at their deadline. Empty when nothing held `name`
    /// (latches and barriers are never held). A key no latchkey client
    /// wrote where a hold would be (another program's data under the
    /// prefix) is never deleted: [`Error::ForeignValue`](crate::Error::ForeignValue),
    /// and nothing is revoked. Counted in
    /// `latchkey_revocations_total` and logged (warn), for the audit; the
    /// ACL user needs [`acl::Use::Revoke`](crate::acl::Use::Revoke).
    ///
    /// # Cancel safety
    /// Dropped after a request was sent, a hold may or may not have been
    /// revoked (each kind's revocation is one script, but a name holding
    /// several kinds is revoked kind by kind); calling it again is harmless.
    pub async fn revoke(&self, name: impl AsRef<[u8]>) -> Result<Vec<crate::Revocation>> {
        crate::primitives::control::revoke::revoke(
            self.one_server(locks_only!("revoking holds"))?,
            name.as_ref(),
        )
        .await
    }

    /// Asks the holders of `name` to let go (cooperative revocation): the
    /// `release_requested()` of each guard that awaits it completes (a
    /// `latchkey run` or `elect` holder stops CMD with SIGTERM, then its
    /// grace). Nothing is taken away: a holder that does not listen keeps
    /// its hold ([`Client::revoke`] takes it). A message on the primitive's
    /// own channel, one per kind held under `name`; returns the connections
    /// that received it (listening holders, and waiters, which take it as
    /// any wake-up), 0 when nothing holds `name`.
    ///
    /// # Cancel safety
    /// Dropped after a request was sent, some holders may have been asked;
    /// asking again is harmless.
    pub async fn request_release(&self, name: impl AsRef<[u8]>) -> Result<u64> {
        crate::primitives::control::request::request_release(
            self.one_server(locks_only!("release requests"))?,
            name.as_ref(),
        )
        .await
    }

    /// How many clients wait for each of the locks `names` (in that
    /// order): the connections subscribed to each lock's release channel.
    /// A holder that listens for revocations and release requests (every
    /// `latchkey run`) is subscribed there too, and counted: `latchkey top`
    /// leaves a latchkey holder's connection out of its WAIT column.
    /// A process's waiting tasks share its client's one connection, so this
    /// counts waiting clients (processes, usually), not tasks; clients that
    /// wait by polling (a foreign holder, no pub/sub) are not seen. One
    /// `PUBSUB NUMSUB` (on a Redis Cluster, `PUBSUB SHARDNUMSUB` on every
    /// primary).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn lock_waiters(&self, names: &[&[u8]]) -> Result<Vec<u64>> {
        Inspector(self.one_server(locks_only!("inspection"))?)
            .lock_waiters(names)
            .await
    }
}
