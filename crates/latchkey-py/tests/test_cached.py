"""lock(cached=idle): a released hold is kept, a re-acquire in the same
process sends nothing to Redis, and another process gets it at once."""

import asyncio
import subprocess
import sys
import time

import latchkey


def commands(r) -> int:
    """Every command the server ran but INFO and PING."""
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items()
               if not k.startswith("cmdstat_info") and k != "cmdstat_ping")


def test_a_kept_hold_is_retaken_with_no_round_trip(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=30.0, cached=60.0)
    r = server.redis()
    with lock.acquire(timeout=5.0) as guard:
        token = guard.token
    assert r.get(f"latchkey:{name}").decode() == token  # kept in Redis
    assert token.endswith(":c")
    before = commands(r)
    for _ in range(100):
        with lock.acquire(timeout=5.0) as guard:
            assert guard.token == token and guard.is_held()
    assert commands(r) - before <= 2
    # flush gives it back.
    assert client.flush(5.0)
    assert r.get(f"latchkey:{name}") is None


CONTENDER = r"""
import sys, time, latchkey
url, name = sys.argv[1], sys.argv[2]
started = time.monotonic()
with latchkey.Client(url).lock(name, ttl=30.0).acquire(timeout=20.0):
    print(f"{time.monotonic() - started:.3f}", flush=True)
"""


def test_another_process_gets_it_long_before_the_idle_time(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=30.0, cached=60.0)
    lock.acquire(timeout=5.0).release()
    assert server.redis().get(f"latchkey:{name}") is not None
    done = subprocess.run([sys.executable, "-c", CONTENDER, server.url, name],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 20.0  # wanted, given back: not the idle time (60 s)
    # And this process takes it from Redis again.
    with lock.acquire(timeout=5.0) as guard:
        assert guard.is_held()


def test_cached_in_asyncio_and_bad_values(server, name):
    async def main():
        lock = latchkey.AsyncClient(server.url).lock(name, ttl=30.0, cached=60.0)
        tokens = set()
        for _ in range(3):
            async with (await lock.acquire(timeout=5.0)) as guard:
                tokens.add(guard.token)
                assert await guard.fencing_token() > 0
        assert len(tokens) == 1

    asyncio.run(main())
    client = latchkey.Client(server.url)
    for bad in (0.0, -1.0):
        try:
            client.lock(name, ttl=30.0, cached=bad)
            raise AssertionError("accepted")
        except latchkey.InvalidInput:
            pass
    try:
        client.lock(name, ttl=30.0, fair=True, cached=5.0)
        raise AssertionError("accepted")
    except latchkey.Unsupported:
        pass


def test_an_inline_cached_lock_is_given_back_when_its_object_goes(server, name):
    """`client.lock(name, cached=…)` made per call, as the docs show: each
    Lock object keeps its idle hold only while it lives; once it is gone,
    the hold goes back, so another process waits little, not the TTL."""
    client = latchkey.Client(server.url)

    def job():
        lock = client.lock(name, ttl=30.0, cached=60.0)
        with lock.acquire(timeout=10.0) as guard:
            assert guard.is_held()
        # The Lock object goes here, after its hold was kept idle.

    for _ in range(3):
        job()
    # No Lock object of this name is left: its hold is released.
    done = subprocess.run([sys.executable, "-c", CONTENDER, server.url, name],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 10.0  # given back at once, not at the TTL (30 s)


def test_a_second_cached_lock_object_of_one_name_breaks_nothing(server, name):
    client, other = latchkey.Client(server.url), latchkey.Client(server.url)
    first = client.lock(name, ttl=30.0, cached=60.0)
    first.acquire(timeout=5.0).release()
    second = client.lock(name, ttl=30.0, cached=60.0)
    with second.acquire(timeout=10.0) as guard:  # asks the first for its idle hold
        assert guard.is_held()
    del second, guard
    # Neither the first object, a plain lock of the client nor another
    # client waits for the idle time or the TTL.
    for lock in (first, client.lock(name, ttl=30.0), other.lock(name, ttl=30.0)):
        with lock.acquire(timeout=10.0) as guard:
            assert guard.is_held()
