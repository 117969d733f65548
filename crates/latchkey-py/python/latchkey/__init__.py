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

from latchkey._errors import *  # noqa: F401,F403  (the exceptions, declared once there)
# `X as X`: re-exported, for type checkers too.
from latchkey._native import (  # noqa: F401
    MAX_NAME_LEN as MAX_NAME_LEN,
    MAX_TTL as MAX_TTL,
    MIN_TTL as MIN_TTL,
    AsyncBarrier as AsyncBarrier,
    AsyncClient as AsyncClient,
    AsyncElection as AsyncElection,
    AsyncFencedResource as AsyncFencedResource,
    AsyncLatch as AsyncLatch,
    AsyncLeadership as AsyncLeadership,
    AsyncListener as AsyncListener,
    AsyncLock as AsyncLock,
    AsyncLockGuard as AsyncLockGuard,
    AsyncLostEvent as AsyncLostEvent,
    AsyncMultiGuard as AsyncMultiGuard,
    AsyncMultiLock as AsyncMultiLock,
    AsyncObserver as AsyncObserver,
    AsyncPermit as AsyncPermit,
    AsyncRedlock as AsyncRedlock,
    AsyncRwLock as AsyncRwLock,
    AsyncSemaphore as AsyncSemaphore,
    Barrier as Barrier,
    Client as Client,
    Election as Election,
    FencedResource as FencedResource,
    Latch as Latch,
    Leader as Leader,
    Leadership as Leadership,
    Listener as Listener,
    Lock as Lock,
    LockGuard as LockGuard,
    LostEvent as LostEvent,
    MultiGuard as MultiGuard,
    MultiLock as MultiLock,
    Observer as Observer,
    Permit as Permit,
    PermitHolder as PermitHolder,
    Redlock as Redlock,
    Revocation as Revocation,
    RwLock as RwLock,
    Semaphore as Semaphore,
    Signal as Signal,
    __version__ as __version__,
)
from latchkey import _native
from latchkey._metrics import (  # noqa: F401
    CounterSample as CounterSample,
    HistogramSample as HistogramSample,
    Metric as Metric,
    MetricsSnapshot as MetricsSnapshot,
    PrometheusCollector as PrometheusCollector,
    metrics as metrics,
)
from latchkey._logging import TRACE as TRACE

# Which levels the `latchkey` loggers want, before the first event.
_native._refresh_logging()

# At interpreter exit every hold is given back, whatever owned it: the
# holds alive are released, every client (dropped ones too) is flushed,
# then the runtime stops (crates/latchkey-py/src/exit.rs).
_atexit.register(_native._at_exit)

# No __all__: every public name here is the API (the exceptions are
# declared once, in _errors.py; the private names start with "_").
