"""The host's corners: an outage inside `with`, a capped hold, an event loop
closed under a pending acquire, interpreter exit with a daemon thread
waiting. Whatever the host does, the process does not crash and no hold
outlives what the program can see."""

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

import latchkey
from conftest import RedisServer, eventually


class Boom(Exception):
    pass


@pytest.mark.parametrize("outage", ["killed", "stalled"])
def test_an_outage_inside_with_lets_the_blocks_exception_through_at_once(name, outage):
    """Redis dies (or stalls) inside the block and the block raises: its own
    exception propagates, and leaving the block does not wait out the TTL
    trying to release."""
    server = RedisServer()
    try:
        client = latchkey.Client(server.url, command_timeout=1.0)
        lock = client.lock(name, ttl=20.0)
        started = None
        with pytest.raises(Boom) as raised:
            with lock.acquire(timeout=5.0):
                if outage == "killed":
                    server.stop()
                else:
                    os.kill(server.proc.pid, signal.SIGSTOP)
                started = time.monotonic()
                raise Boom("the block's own")
        left_after = time.monotonic() - started
        assert str(raised.value) == "the block's own"
        assert left_after < 5.0, f"leaving the block took {left_after:.1f}s"
    finally:
        if outage == "stalled" and server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()


def test_an_outage_inside_async_with_lets_the_blocks_exception_through_at_once(name):
    server = RedisServer()

    async def main():
        client = latchkey.AsyncClient(server.url, command_timeout=1.0)
        lock = client.lock(name, ttl=20.0)
        started = None
        with pytest.raises(Boom):
            async with lock.acquire(timeout=5.0):
                server.stop()
                started = time.monotonic()
                raise Boom("the block's own")
        return time.monotonic() - started

    try:
        left_after = asyncio.run(main())
        assert left_after < 5.0, f"leaving the block took {left_after:.1f}s"
    finally:
        server.stop()


def test_a_with_block_whose_hold_reached_its_cap_raises_lock_lost(server, name):
    """`lost` fired (max-hold): the program was told, so leaving the block
    raises, even though the key may not have expired yet."""
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0, max_hold=0.5)
    with pytest.raises(latchkey.LockLost, match="max hold"):
        with lock.acquire(timeout=5.0) as guard:
            assert guard.lost.wait(10.0) is True
            assert guard.lost_reason == "max-hold"
    assert server.redis().exists(f"latchkey:{name}") == 0


def test_an_acquire_orphaned_by_loop_close_stops_waiting(server, name):
    """run_until_complete + asyncio.wait(timeout=) + close(): the pending
    acquire's task is never cancelled; its wait is stopped once the loop is
    found closed (a fair waiter leaves the queue) instead of taking the
    lock when it frees and keeping it (renewed) for ever."""
    r = server.redis()
    queue = f"{{latchkey:{name}}}:queue"
    holder = latchkey.Client(server.url).lock(name, ttl=30.0, fair=True).acquire()
    client = latchkey.AsyncClient(server.url)

    async def orphan():
        return await client.lock(name, ttl=30.0, fair=True).acquire()

    loop = asyncio.new_event_loop()
    task = loop.create_task(orphan())
    loop.run_until_complete(asyncio.wait([task], timeout=0.2))
    eventually(lambda: r.llen(queue) == 1)
    loop.close()
    eventually(lambda: r.llen(queue) == 0)
    assert holder.release() is True
    after = latchkey.Client(server.url).lock(name, ttl=30.0, fair=True).acquire(timeout=10.0)
    assert after.release() is True
    assert r.exists(f"latchkey:{name}") == 0


DAEMON_WAITERS = r"""
import sys, threading, latchkey
url, name = sys.argv[1], sys.argv[2]
client = latchkey.Client(url)
held = client.lock(name, ttl=30.0).acquire()
ready = threading.Barrier(3)
def wait_lock():
    ready.wait()
    client.lock(name, ttl=30.0).acquire()
def wait_signal():
    ready.wait()
    client.wait_any([name + "-never"])
for target in (wait_lock, wait_signal):
    threading.Thread(target=target, daemon=True).start()
ready.wait()
print("waiting", flush=True)
"""


def test_exit_with_daemon_threads_waiting_is_clean(server, name):
    """The interpreter exits while daemon threads wait in acquire() and
    wait_any(): exit code 0, nothing on stderr (no Rust panic), and the
    lock the main thread held is given back."""
    for round in range(3):
        child = subprocess.run([sys.executable, "-c", DAEMON_WAITERS, server.url, f"{name}-{round}"],
                               capture_output=True, text=True, timeout=60)
        assert child.returncode == 0, child.stderr
        assert child.stdout == "waiting\n"
        assert child.stderr == ""
        assert server.redis().exists(f"latchkey:{name}-{round}") == 0


LATE_ATEXIT = r"""
import atexit, sys
def late():  # registered before latchkey's, so it runs after it
    try:
        guard.release()
    except Exception as e:
        print(type(e).__name__, flush=True)
atexit.register(late)
import latchkey
guard = latchkey.Client(sys.argv[1]).lock(sys.argv[2], ttl=30.0).acquire()
"""


def test_a_call_from_an_atexit_handler_after_ours_is_refused_not_hung(server, name):
    child = subprocess.run([sys.executable, "-c", LATE_ATEXIT, server.url, name],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout == "InternalError\n"
    assert server.redis().exists(f"latchkey:{name}") == 0
