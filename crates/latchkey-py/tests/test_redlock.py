"""latchkey.Redlock / AsyncRedlock: one lock over three independent
redis-server processes, held while a majority agree."""

import asyncio
import threading

import pytest

import latchkey
from conftest import RedisServer


@pytest.fixture(scope="module")
def instances():
    servers = [RedisServer() for _ in range(3)]
    yield servers
    for s in servers:
        s.stop()


def urls(servers):
    return [s.url for s in servers]


def test_a_redlock_holds_the_key_on_every_instance(instances, name):
    redlock = latchkey.Redlock(urls(instances))
    assert (redlock.instances, redlock.quorum) == (3, 2)
    guard = redlock.lock(name, ttl=10.0).acquire(timeout=5.0)
    for s in instances:
        assert s.redis().get(f"latchkey:{name}").decode().startswith(guard.token)
    # The same layout as a Client's lock: a client of one instance is excluded.
    assert latchkey.Client(instances[0].url).lock(name, ttl=10.0).try_acquire() is None
    assert guard.release() is True
    for s in instances:
        assert s.redis().get(f"latchkey:{name}") is None


def test_two_redlocks_exclude_each_other_and_hand_over(instances, name):
    a = latchkey.Redlock(urls(instances)).lock(name, ttl=10.0, fencing=True)
    b = latchkey.Redlock(urls(instances)).lock(name, ttl=10.0, fencing=True)
    first = a.acquire(timeout=5.0)
    assert b.try_acquire() is None
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("g", b.acquire(timeout=20.0)))
    t.start()
    token = first.fencing_token()
    first.release()
    t.join(20)
    second = got["g"]
    assert second.is_held()
    assert second.fencing_token() > token
    second.release()


def test_a_minority_down_still_locks_and_a_majority_down_is_no_quorum(name):
    servers = [RedisServer() for _ in range(3)]
    try:
        redlock = latchkey.Redlock(urls(servers), instance_timeout=0.2)
        lock = redlock.lock(name, ttl=5.0)
        servers[2].stop()
        with lock.acquire(timeout=5.0) as guard:
            assert guard.is_held()
        servers[1].stop()
        # Retried as transient until the deadline, then the quorum failure itself.
        with pytest.raises(latchkey.NoQuorum, match="only 1 of 3"):
            lock.acquire(timeout=1.0)
        with pytest.raises(latchkey.NoQuorum):
            lock.try_acquire()
        assert servers[0].redis().get(f"latchkey:{name}") is None
    finally:
        for s in servers:
            s.stop()


def test_bad_redlock_arguments_are_invalid_input(instances, name):
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Redlock(instances[0].url)
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Redlock([])
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Redlock([instances[0].url, instances[0].url])
    redlock = latchkey.Redlock(urls(instances))
    with pytest.raises(latchkey.InvalidInput):
        redlock.lock(name, ttl=0.0)
    with pytest.raises(latchkey.Unsupported, match="fair lock on a Redlock"):
        redlock.lock(name, ttl=5.0, fair=True)


def test_async_redlock_acquires_and_cancels_cleanly(instances, name):
    async def main():
        redlock = latchkey.AsyncRedlock(urls(instances))
        assert (redlock.instances, redlock.quorum) == (3, 2)
        holder = await (await redlock.connect()).lock(name, ttl=10.0).acquire(timeout=5.0)
        waiter = latchkey.AsyncRedlock(urls(instances)).lock(name, ttl=10.0)
        # A cancelled acquire leaves no hold behind.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(waiter.acquire(), 0.3)
        assert await holder.release() is True
        async with (await waiter.acquire(timeout=5.0)) as guard:
            assert guard.is_held()
        for s in instances:
            assert s.redis().get(f"latchkey:{name}") is None

    asyncio.run(main())
