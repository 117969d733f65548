"""latchkey: distributed locks, self-healing leases and fencing tokens on
Redis, for Python. The Rust library itself, through PyO3: a Python process,
a Rust one and ``latchkey run`` exclude each other on the same lock name.

    import latchkey
    client = latchkey.Client("redis://127.0.0.1:6380/0")
    lock = client.lock("nightly-report", ttl=30.0)
    with lock.acquire(timeout=5.0) as guard:
        token = guard.fencing_token()

See docs/python.md in the repository.
"""

import asyncio as _asyncio
from typing import Awaitable as _Awaitable, Callable as _Callable
import atexit as _atexit

from latchkey._errors import (  # noqa: F401
    Auth,
    BadFencingCounter,
    Busy,
    CountedBelowZero,
    InternalError,
    InvalidCount,
    InvalidInput,
    InvalidName,
    InvalidTtl,
    LatchOpen,
    LatchkeyError,
    NoPermission,
    NoQuorum,
    NotACluster,
    NotFound,
    NotHeld,
    OutOfMemory,
    PartiesMismatch,
    ProtocolError,
    RandomError,
    ReadOnlyReplica,
    RedisError,
    Timeout,
    Tls,
    TooFewReplicas,
    Unavailable,
    Unreachable,
    Unsupported,
    WaitTimedOut,
    WrongType,
)
from latchkey._native import (  # noqa: F401
    MAX_NAME_LEN,
    MAX_TTL,
    MIN_TTL,
    AsyncClient as _AsyncClient,
    AsyncLock,
    AsyncLockGuard,
    AsyncLostEvent,
    AsyncRedlock as _AsyncRedlock,
    Barrier,
    Client as _Client,
    Election,
    FencedResource,
    Latch,
    Leader,
    Leadership,
    Listener,
    Lock,
    LockGuard,
    LostEvent,
    Observer,
    Permit,
    PermitHolder,
    Redlock as _Redlock,
    RwLock,
    Semaphore,
    Signal,
    __version__,
)
from latchkey import _native
from latchkey._aio import Call as _Call



Client = _Client


async def _flush_after_a_turn(flush: "_Callable[[], _Awaitable[bool]]") -> bool:
    # One turn of the loop first: the done-callbacks of a future cancelled
    # just now (which start its Rust side's cleanup) run then.
    await _asyncio.sleep(0)
    return await flush()


class AsyncClient(_AsyncClient):
    __doc__ = _AsyncClient.__doc__

    def flush(self, timeout: float = 5.0) -> "_Call[bool]":
        """Waits, at most `timeout` seconds, for the background releases of
        guards dropped unreleased and of calls cancelled; True when all
        finished."""
        native = _AsyncClient.flush
        return _Call(lambda: _flush_after_a_turn(lambda: native(self, timeout)), "AsyncClient.flush")


Redlock = _Redlock


class AsyncRedlock(_AsyncRedlock):
    __doc__ = _AsyncRedlock.__doc__

    def flush(self, timeout: float = 5.0) -> "_Call[bool]":
        """As AsyncClient.flush."""
        native = _AsyncRedlock.flush
        return _Call(lambda: _flush_after_a_turn(lambda: native(self, timeout)), "AsyncRedlock.flush")


# At interpreter exit every hold is given back, whatever owned it: the
# holds alive are released, every client (dropped ones too) is flushed,
# then the runtime stops (crates/latchkey-py/src/exit.rs).
_atexit.register(_native._at_exit)


__all__ = [
    "Client", "AsyncClient", "Redlock", "AsyncRedlock", "Lock", "AsyncLock", "LockGuard", "AsyncLockGuard",
    "LostEvent", "AsyncLostEvent", "Semaphore", "RwLock", "Permit", "Latch", "Barrier",
    "Election", "Leadership", "Leader", "Observer", "Signal", "Listener", "PermitHolder",
    "FencedResource",
    "MIN_TTL", "MAX_TTL", "MAX_NAME_LEN",
    "LatchkeyError",
    "Busy",
    "WaitTimedOut",
    "NotHeld",
    "LatchOpen",
    "CountedBelowZero",
    "NotFound",
    "PartiesMismatch",
    "Unavailable",
    "Unreachable",
    "Timeout",
    "NoQuorum",
    "OutOfMemory",
    "ReadOnlyReplica",
    "TooFewReplicas",
    "InvalidInput",
    "InvalidName",
    "InvalidTtl",
    "InvalidCount",
    "Unsupported",
    "Tls",
    "Auth",
    "NoPermission",
    "WrongType",
    "BadFencingCounter",
    "NotACluster",
    "RedisError",
    "ProtocolError",
    "RandomError",
    "InternalError",
]
