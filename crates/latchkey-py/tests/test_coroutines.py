"""The asyncio methods are coroutines: nothing runs until awaited, tasks
take them, and a task cancelled (by hand or by the event loop's shutdown)
gives back whatever its call took."""

import asyncio
import gc
import warnings

import pytest

import latchkey
from conftest import eventually


def test_create_task_takes_an_acquire(server, name):
    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        lock = client.lock(name, ttl=10.0)
        assert asyncio.iscoroutine(lock.acquire())  # (closed unawaited below)
        task = asyncio.create_task(lock.acquire(timeout=5.0))
        guard = await task
        assert isinstance(guard, latchkey.AsyncLockGuard) and guard.is_held()
        assert await asyncio.create_task(guard.release()) is True

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        asyncio.run(main())


def test_an_acquire_never_awaited_takes_nothing_and_says_so(server, name):
    r = server.redis()

    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        pending = client.lock(name, ttl=10.0).acquire(timeout=5.0)
        await asyncio.sleep(0.2)  # time it would have had to take the lock
        assert r.exists(f"latchkey:{name}") == 0
        with pytest.warns(RuntimeWarning, match="AsyncLock.acquire' was never awaited"):
            del pending
            gc.collect()
        assert r.exists(f"latchkey:{name}") == 0

    asyncio.run(main())


def test_async_with_an_acquire(server, name):
    r = server.redis()

    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        async with client.lock(name, ttl=10.0).acquire(timeout=1.0) as guard:
            assert guard.is_held() and r.exists(f"latchkey:{name}") == 1
        assert r.exists(f"latchkey:{name}") == 0
        async with client.semaphore(name + "-s", 1, ttl=10.0).acquire(timeout=1.0) as permit:
            assert permit.is_held()
        assert await client.semaphore(name + "-s", 1, ttl=10.0).try_acquire() is not None

    asyncio.run(main())


@pytest.mark.parametrize("fair", [False, True], ids=["barging", "fair"])
def test_an_acquire_pending_when_its_loop_closes_takes_nothing_later(server, name, fair):
    """`asyncio.gather(lock.acquire(), job())` where job() fails: the loop's
    shutdown cancels the acquire still waiting; it must not take the lock
    when the holder lets go (and keep it, renewed, for the process's life)."""
    r = server.redis()
    holder = latchkey.Client(server.url).lock(name, ttl=30.0, fair=fair).acquire()
    waiter = latchkey.AsyncClient(server.url)

    async def job():
        if fair:
            await asyncio.to_thread(eventually, lambda: r.llen(f"{{latchkey:{name}}}:queue") == 1)
        else:
            await asyncio.to_thread(eventually, lambda: r.get(f"latchkey:{name}").endswith(b"+w"))
        raise ZeroDivisionError

    async def main():
        await asyncio.gather(waiter.lock(name, ttl=30.0, fair=fair).acquire(), job())

    with pytest.raises(ZeroDivisionError):
        asyncio.run(main())
    assert waiter.flush_blocking(10.0) is True
    if fair:
        assert r.llen(f"{{latchkey:{name}}}:queue") == 0
    assert holder.release() is True
    # Nobody is waiting any more: the lock stays free, and anyone gets it.
    other = latchkey.Client(server.url).lock(name, ttl=30.0, fair=fair).acquire(timeout=5.0)
    assert r.get(f"latchkey:{name}").decode().startswith(other.token)
    other.release()
    assert r.exists(f"latchkey:{name}") == 0


def test_a_cancelled_task_gives_back_what_it_took(server, name):
    r = server.redis()

    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        lock = client.lock(name, ttl=30.0)
        for i in range(30):
            task = asyncio.create_task(lock.acquire())
            for _ in range(i % 4):
                await asyncio.sleep(0)
            task.cancel()
            try:
                guard = await task
                await guard.release()
            except asyncio.CancelledError:
                pass
        assert await client.flush(10.0) is True

    asyncio.run(main())
    gc.collect()
    assert r.exists(f"latchkey:{name}") == 0
