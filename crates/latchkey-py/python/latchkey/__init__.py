"""latchkey: distributed locks, self-healing leases and fencing tokens on
Redis, for Python. The Rust library itself, through PyO3: a Python process,
a Rust one and ``latchkey run`` exclude each other on the same lock name.

    import latchkey
    client = latchkey.Client("redis://127.0.0.1:6380/0")
    lock = client.lock("nightly-report", ttl=30.0)
    with lock.acquire(timeout=5.0) as guard:
        token = guard.fencing_token()

Every class has a blocking and an asyncio twin (``Lock`` and ``AsyncLock``,
``Permit`` and ``AsyncPermit``, ...): what a ``Client`` makes is blocking,
what an ``AsyncClient`` makes returns coroutines. See docs/python.md in the
repository.
"""

import atexit as _atexit

from latchkey import _errors
from latchkey._errors import *  # noqa: F401,F403  (the exceptions, declared once there)
from latchkey._native import (  # noqa: F401
    MAX_NAME_LEN,
    MAX_TTL,
    MIN_TTL,
    AsyncBarrier,
    AsyncClient,
    AsyncElection,
    AsyncFencedResource,
    AsyncLatch,
    AsyncLeadership,
    AsyncListener,
    AsyncLock,
    AsyncLockGuard,
    AsyncLostEvent,
    AsyncMultiGuard,
    AsyncMultiLock,
    AsyncObserver,
    AsyncPermit,
    AsyncRedlock,
    AsyncRwLock,
    AsyncSemaphore,
    Barrier,
    Client,
    Election,
    FencedResource,
    Latch,
    Leader,
    Leadership,
    Listener,
    Lock,
    LockGuard,
    LostEvent,
    MultiGuard,
    MultiLock,
    Observer,
    Permit,
    PermitHolder,
    Redlock,
    Revocation,
    RwLock,
    Semaphore,
    Signal,
    __version__,
)
from latchkey import _native

# At interpreter exit every hold is given back, whatever owned it: the
# holds alive are released, every client (dropped ones too) is flushed,
# then the runtime stops (crates/latchkey-py/src/exit.rs).
_atexit.register(_native._at_exit)

__all__ = [
    "Client", "AsyncClient", "Redlock", "AsyncRedlock",
    "Lock", "AsyncLock", "MultiLock", "AsyncMultiLock", "Semaphore", "AsyncSemaphore",
    "RwLock", "AsyncRwLock", "Latch", "AsyncLatch", "Barrier", "AsyncBarrier",
    "Election", "AsyncElection", "Observer", "AsyncObserver", "FencedResource", "AsyncFencedResource",
    "Listener", "AsyncListener",
    "LockGuard", "AsyncLockGuard", "Permit", "AsyncPermit", "MultiGuard", "AsyncMultiGuard",
    "Leadership", "AsyncLeadership", "LostEvent", "AsyncLostEvent",
    "Leader", "Signal", "PermitHolder", "Revocation",
    "MIN_TTL", "MAX_TTL", "MAX_NAME_LEN",
] + _errors.__all__
