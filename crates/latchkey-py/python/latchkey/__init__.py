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
import atexit as _atexit
import weakref as _weakref

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

# The clients alive, flushed at interpreter exit (a guard dropped unreleased
# is released in the background; the exit waits for that, briefly).
_clients: "_weakref.WeakSet" = _weakref.WeakSet()


class Client(_Client):
    __doc__ = _Client.__doc__

    def __init__(self, *args, **kwargs):
        _clients.add(self)


class AsyncClient(_AsyncClient):
    __doc__ = _AsyncClient.__doc__

    def __init__(self, *args, **kwargs):
        _clients.add(self)

    async def flush(self, timeout: float = 5.0) -> bool:
        """Waits, at most `timeout` seconds, for the background releases of
        guards dropped unreleased and of calls cancelled; True when all
        finished."""
        # One turn of the loop first: the done-callbacks of a future
        # cancelled just now (which start its Rust side's cleanup) run then.
        await _asyncio.sleep(0)
        return await super().flush(timeout)


class Redlock(_Redlock):
    __doc__ = _Redlock.__doc__

    def __init__(self, *args, **kwargs):
        _clients.add(self)


class AsyncRedlock(_AsyncRedlock):
    __doc__ = _AsyncRedlock.__doc__

    def __init__(self, *args, **kwargs):
        _clients.add(self)

    async def flush(self, timeout: float = 5.0) -> bool:
        """As AsyncClient.flush."""
        await _asyncio.sleep(0)
        return await super().flush(timeout)


@_atexit.register
def _at_exit() -> None:
    # The holds still alive are released (as at the end of a Rust main),
    # then the background work is waited for, then the runtime stops.
    try:
        _native._release_held()
    except Exception:
        pass
    for client in list(_clients):
        try:
            if isinstance(client, (AsyncClient, AsyncRedlock)):
                client.flush_blocking(1.0)
            else:
                client.flush(1.0)
        except Exception:
            pass
    _native._shutdown()


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
