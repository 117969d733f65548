"""The asyncio API: the same lock as coroutines; cancellation leaves no lock."""

import asyncio
import gc

import pytest

import latchkey
from conftest import eventually


def run(coro):
    return asyncio.run(coro)


def test_async_acquire_release_and_context_manager(server, name):
    async def main():
        client = latchkey.AsyncClient(server.url)
        await client.connect()
        lock = client.lock(name, ttl=10.0)
        guard = await lock.acquire(timeout=5.0)
        assert isinstance(guard, latchkey.AsyncLockGuard)
        assert guard.is_held()
        assert await lock.try_acquire() is None
        token = await guard.fencing_token()
        assert await guard.extend(20.0) is True
        assert await guard.release() is True
        assert await guard.release() is False
        async with (await lock.acquire(timeout=5.0)) as again:
            assert await again.fencing_token() > token
            assert server.redis().exists(f"latchkey:{name}")
        assert server.redis().exists(f"latchkey:{name}") == 0

    run(main())


def test_async_timeout_raises_wait_timed_out(server, name):
    async def main():
        client = latchkey.AsyncClient(server.url)
        lock = client.lock(name, ttl=10.0)
        holder = await lock.acquire()
        with pytest.raises(latchkey.WaitTimedOut):
            await lock.acquire(timeout=0.2)
        await holder.release()

    run(main())


def test_async_errors_are_typed(server, name):
    from conftest import free_port

    async def main():
        down = latchkey.AsyncClient(f"redis://127.0.0.1:{free_port()}/")
        with pytest.raises(latchkey.Unavailable):
            await down.lock(name, ttl=1.0).try_acquire()
        client = await latchkey.AsyncClient(server.url).connect()
        with pytest.raises(latchkey.InvalidTtl):
            client.lock(name, ttl=0.0)

    run(main())


def test_async_lost_is_awaitable(server, name):
    async def main():
        client = latchkey.AsyncClient(server.url)
        guard = await client.lock(name, ttl=0.6).acquire()
        assert await guard.lost.wait(0.05) is False
        server.redis().delete(f"latchkey:{name}")
        await asyncio.wait_for(guard.lost, 10.0)
        assert guard.lost.is_set()

    run(main())


@pytest.mark.parametrize("fair", [False, True], ids=["barging", "fair"])
def test_cancelled_wait_leaves_no_lock_and_no_queue_entry(server, name, fair):
    r = server.redis()

    async def main():
        holder_client = latchkey.AsyncClient(server.url)
        waiter_client = latchkey.AsyncClient(server.url)
        holder = await holder_client.lock(name, ttl=30.0, fair=fair).acquire()
        waiting = asyncio.ensure_future(waiter_client.lock(name, ttl=30.0, fair=fair).acquire())
        if fair:
            await asyncio.to_thread(eventually, lambda: r.llen(f"{{latchkey:{name}}}:queue") == 1)
        else:
            await asyncio.to_thread(eventually, lambda: r.get(f"latchkey:{name}").endswith(b"+w"))
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await waiter_client.flush(10.0) is True
        if fair:
            assert r.llen(f"{{latchkey:{name}}}:queue") == 0
        assert await holder.release() is True
        assert r.exists(f"latchkey:{name}") == 0

    run(main())


def test_timeouts_racing_acquisitions_leave_no_lock(server, name):
    """asyncio.wait_for around acquire, cancelling at every stage of the
    round trip: whatever a cancelled acquisition took is given back."""
    r = server.redis()

    async def main():
        client = latchkey.AsyncClient(server.url)
        await client.connect()
        lock = client.lock(name, ttl=30.0)
        kept = []
        for i in range(60):
            try:
                kept.append(await asyncio.wait_for(lock.acquire(), timeout=0.0005 * (i % 6)))
            except asyncio.TimeoutError:
                pass
            for guard in kept:
                await guard.release()
            kept.clear()
        assert await client.flush(10.0) is True

    run(main())
    gc.collect()
    assert r.exists(f"latchkey:{name}") == 0


@pytest.mark.skipif(not hasattr(asyncio, "timeout"), reason="asyncio.timeout is Python 3.11+")
def test_asyncio_timeout_around_a_fair_acquire_leaves_no_queue_entry(server, name):
    r = server.redis()

    async def main():
        holder_client, waiter_client = latchkey.AsyncClient(server.url), latchkey.AsyncClient(server.url)
        holder = await holder_client.lock(name, ttl=30.0, fair=True).acquire()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await waiter_client.lock(name, ttl=30.0, fair=True).acquire()
        assert await waiter_client.flush(10.0) is True
        assert r.llen(f"{{latchkey:{name}}}:queue") == 0
        assert await holder.release() is True
        assert r.exists(f"latchkey:{name}") == 0

    run(main())


def test_an_async_clients_close_gives_back_a_hold_nothing_references(server, name):
    r = server.redis()

    async def main():
        client = latchkey.AsyncClient(server.url)
        lock = client.lock(name, ttl=30.0)
        await lock.acquire()  # the guard is dropped at once
        gc.collect()
        assert r.exists(f"latchkey:{name}") == 1
        assert await lock.locked() is True
        assert await client.close() is True
        assert r.exists(f"latchkey:{name}") == 0
        with pytest.raises(latchkey.ClientClosed):
            await lock.acquire(timeout=1.0)

    run(main())
