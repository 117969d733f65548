"""Benchmark driver for the Python peers of latchkey (scenarios 1 and 2).

    venv/bin/python driver.py LIB PORT

LIB is `redis-py` (redis-py's own `Lock`), `python-redis-lock`,
`pottery` (pottery's `Redlock` on one master) or `latchkey-py` (latchkey's
own Python package, crates/latchkey-py). Each is used with its default
settings; only the lock's TTL (10 s, as for every library in the benchmark)
is given, since a lock without one never frees itself after a crash, and
latchkey-py's watchdog is off, as the other libraries have none.

The driver speaks the benchmark's line protocol (see
crates/latchkey-bench/src/driver.rs): one JSON object per line on stdout,
one command per line on stdin.

    -> {"ready": true, "lib": ..., "version": ...}     (or {"error": ...}, exit 1)
    <- uncontended KEY CYCLES
    -> {"cycles": N, "seconds": S}
    <- handoff KEY TASKS HOLD_US SECONDS MAX_HANDOFFS
    -> {"armed": true}
    <- go
    -> {"acquisitions": N, "acquired": [ns...], "released": [ns...]}

Timestamps are CLOCK_MONOTONIC nanoseconds (time.monotonic_ns), the clock the
Rust and Node drivers use too, so events from several processes can be merged.
"""

import json
import sys
import threading
import time

TTL_S = 10


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class RedisPyLock:
    """redis-py's Lock: SET NX PX, polling every 0.1 s while busy (its default)."""

    def __init__(self, client):
        self.client = client

    def acquire(self, key, wait_s=None):
        lock = self.client.lock(key, timeout=TTL_S)
        if wait_s is None:
            ok = lock.acquire()
        else:
            ok = lock.acquire(blocking_timeout=max(wait_s, 0.001))
        return lock if ok else None

    def release(self, lock):
        lock.release()


class PythonRedisLock:
    """python-redis-lock: SET NX EX, waiters block in BLPOP on a signal list."""

    def __init__(self, client):
        import redis_lock

        self.client = client
        self.module = redis_lock

    def acquire(self, key, wait_s=None):
        lock = self.module.Lock(self.client, key, expire=TTL_S)
        if wait_s is None:
            ok = lock.acquire()
        else:
            # Its timeout is whole seconds, at least 1.
            ok = lock.acquire(timeout=max(1, int(wait_s + 0.999)))
        return lock if ok else None

    def release(self, lock):
        lock.release()


class PotteryRedlock:
    """pottery's Redlock on one master: SET NX PX, retrying after a short
    random sleep while busy (its default)."""

    def __init__(self, client):
        from pottery import Redlock

        self.client = client
        self.redlock = Redlock

    def acquire(self, key, wait_s=None):
        lock = self.redlock(key=key, masters={self.client}, auto_release_time=TTL_S)
        ok = lock.acquire(timeout=-1 if wait_s is None else max(wait_s, 0.001))
        return lock if ok else None

    def release(self, lock):
        lock.release()


class LatchkeyPy:
    """latchkey's Python package: the Rust library underneath (one script
    call or bare SET per acquisition, waiters woken by a message, the GIL
    released while waiting)."""

    def __init__(self, port):
        import latchkey

        self.module = latchkey
        self.client = latchkey.Client(f"redis://127.0.0.1:{port}/")
        self.locks = {}

    def acquire(self, key, wait_s=None):
        lock = self.locks.get(key)
        if lock is None:
            lock = self.locks[key] = self.client.lock(key, ttl=float(TTL_S), watchdog=False)
        try:
            return lock.acquire(timeout=None if wait_s is None else max(wait_s, 0.001))
        except self.module.WaitTimedOut:
            return None

    def release(self, guard):
        guard.release()


def uncontended(lib, key, cycles):
    started = time.perf_counter()
    for _ in range(cycles):
        lib.release(lib.acquire(key))
    emit({"cycles": cycles, "seconds": time.perf_counter() - started})


def handoff(lib, key, tasks, hold_us, seconds, max_handoffs):
    # Open one pooled connection per thread now, so connecting is not timed
    # (latchkey-py multiplexes one connection: nothing to open).
    pool = getattr(lib.client, "connection_pool", None)
    if pool is not None:
        conns = [pool.get_connection() for _ in range(tasks)]
        for c in conns:
            pool.release(c)
    state = {"count": 0, "acquisitions": 0, "stop": False}
    acquired, released = [], []
    guard = threading.Lock()
    # A thread that released stands aside until another thread has acquired
    # (see crates/latchkey-bench/src/handoff.rs): every handoff goes to a waiter.
    acquired_since = threading.Condition(guard)
    go = threading.Event()
    box = {}

    def worker():
        go.wait()
        deadline = box["deadline"]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or state["stop"]:
                return
            lock = lib.acquire(key, remaining)
            if lock is None:
                return
            now = time.monotonic_ns()
            with guard:
                state["acquisitions"] += 1
                mine = state["acquisitions"]
                acquired_since.notify_all()
                more = (
                    not state["stop"]
                    and now < box["deadline_ns"]
                    and state["count"] < max_handoffs
                )
                if more:
                    acquired.append(now)
                    state["count"] += 1
                else:
                    state["stop"] = True
                    acquired_since.notify_all()
            if more:
                time.sleep(hold_us / 1e6)
                released.append(time.monotonic_ns())
            lib.release(lock)
            if not more:
                return
            with guard:
                acquired_since.wait_for(
                    lambda: state["acquisitions"] > mine or state["stop"],
                    timeout=max(0.0, deadline - time.monotonic()),
                )

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(tasks)]
    for t in threads:
        t.start()
    emit({"armed": True})
    if sys.stdin.readline().strip() != "go":
        return
    box["deadline"] = time.monotonic() + seconds
    box["deadline_ns"] = time.monotonic_ns() + int(seconds * 1e9)
    go.set()
    for t in threads:
        t.join()
    emit({"acquisitions": state["acquisitions"], "acquired": acquired, "released": released})


def main():
    name, port = sys.argv[1], int(sys.argv[2])
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        client.ping()
        if name == "redis-py":
            lib, version = RedisPyLock(client), redis.__version__
        elif name == "python-redis-lock":
            import importlib.metadata

            lib = PythonRedisLock(client)
            version = importlib.metadata.version("python-redis-lock")
        elif name == "pottery":
            import importlib.metadata

            lib = PotteryRedlock(client)
            version = importlib.metadata.version("pottery")
        elif name == "latchkey-py":
            lib = LatchkeyPy(port)
            version = lib.module.__version__
        else:
            raise ValueError(f"unknown library {name!r}")
        # Warm up: script registration and the first connection.
        lib.release(lib.acquire("warm-up"))
    except Exception as e:  # reported to the bench, which skips this peer
        emit({"error": f"{type(e).__name__}: {e}"})
        sys.exit(1)
    emit({"ready": True, "lib": name, "version": version})
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "uncontended":
            uncontended(lib, words[1], int(words[2]))
        elif words[0] == "handoff":
            handoff(lib, words[1], int(words[2]), int(words[3]), float(words[4]), int(words[5]))
        elif words[0] == "quit":
            return
        else:
            emit({"error": f"unknown command {words[0]!r}"})


if __name__ == "__main__":
    main()
