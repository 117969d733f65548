"""latchkey's exceptions: one class per kind of the Rust ``latchkey::Error``,
with the same one-line messages. The extension raises them by name
(crates/latchkey-py/src/errors.rs)."""


class LatchkeyError(Exception):
    """Everything latchkey raises."""


# The state says no ----------------------------------------------------------


class Busy(LatchkeyError):
    """The lock is someone else's: catch this where redis-py code caught
    ``redis.exceptions.LockError``."""


class WaitTimedOut(Busy, TimeoutError):
    """A bounded wait ran out while the lock (or primitive) stayed busy."""


class NotHeld(Busy):
    """The hold is no longer ours (it expired, someone else holds the lock,
    or it was made by the parent of a forked process): no fencing token is
    issued."""


class LockLost(NotHeld):
    """A ``with`` block ended and its hold had been lost in it (it expired,
    was revoked or taken over): the block ran, at least in part, without
    the lock. Raised only when the block itself raised nothing. Where
    redis-py raises ``LockNotOwnedError`` and python-redis-lock
    ``NotAcquired``."""


class ClientClosed(LatchkeyError):
    """A call on a client after its ``close()`` (or on what it made): the
    client gave its holds back and takes nothing more."""


class MaxHoldReached(Busy):
    """A hold reached its cap (``max_hold=``): it is not renewed past it."""


class ForeignValue(LatchkeyError):
    """A key where latchkey keeps a hold holds a value no latchkey client
    wrote (another program's data under the prefix): left alone."""


class LatchOpen(LatchkeyError):
    """A latch is open already: it opens once."""


class CountedBelowZero(LatchkeyError):
    """A latch counted down past zero."""


class NotFound(LatchkeyError):
    """The latch or barrier does not exist in Redis."""


class PartiesMismatch(LatchkeyError):
    """A barrier joined with another number of parties than its own."""


# Redis unavailable for now (transient: worth retrying later) ---------------


class Unavailable(LatchkeyError):
    """Redis cannot serve now: down, unreachable, failing over, out of memory.
    Transient. The base of every kind of unavailability."""


class Unreachable(Unavailable, ConnectionError):
    """Redis could not be reached: refused, reset, or gone."""


class Timeout(Unavailable, TimeoutError):
    """Redis did not answer within the command timeout."""


class NoQuorum(Unavailable):
    """A Redlock could not reach a majority of its instances."""


class OutOfMemory(Unavailable):
    """Redis is out of memory and refuses writes."""


class ReadOnlyReplica(Unavailable):
    """The server is a read-only replica: connect to the primary."""


class TooFewReplicas(Unavailable):
    """Too few replicas acknowledged the lock; it was released again."""


# Bad input: fix the call ---------------------------------------------------


class InvalidInput(LatchkeyError, ValueError):
    """An argument was refused (a bad URL, timeout, option)."""


class InvalidName(InvalidInput):
    """A name is empty, too long, or of a reserved form."""


class InvalidTtl(InvalidInput):
    """A TTL is outside latchkey.MIN_TTL .. latchkey.MAX_TTL."""


class InvalidCount(InvalidInput):
    """A count (latch, barrier parties, permits) of 0 or too large."""


class Unsupported(InvalidInput):
    """What was asked is not offered for this kind of lock."""


# Deployment: fix the server, user or key -----------------------------------


class Tls(LatchkeyError):
    """A TLS connection could not be set up."""


class Auth(LatchkeyError):
    """The server refused our credentials."""


class NoPermission(LatchkeyError, PermissionError):
    """The server refused a command for lack of permission (ACL NOPERM)."""


class WrongType(LatchkeyError):
    """A key latchkey uses holds a value of another type."""


class BadFencingCounter(LatchkeyError):
    """A fencing counter holds something other than a token."""


class NotACluster(LatchkeyError):
    """Seeds were given, and the server is not a Redis Cluster node."""


class UnsupportedServer(LatchkeyError):
    """The server is too old for latchkey (Redis before 7.0, Valkey before
    7.2): refused at connect, before anything is written."""


# Anything else: report it --------------------------------------------------


class RedisError(LatchkeyError):
    """Any other error reported by Redis."""


class ProtocolError(LatchkeyError):
    """Redis answered with something latchkey does not understand."""


class RandomError(LatchkeyError):
    """The operating system gave no random bytes for an owner token."""


class InternalError(LatchkeyError):
    """A background task of latchkey's ended without an answer."""
