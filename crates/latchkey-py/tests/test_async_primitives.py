"""The other primitives from an AsyncClient: the same calls, awaited."""

import asyncio

import pytest

import latchkey


def test_async_semaphore_rwlock_latch(server, name):
    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        sem = client.semaphore(name + "-s", 1, ttl=10.0)
        async with (await sem.acquire(timeout=5.0)) as permit:
            assert permit.is_held()
            assert await sem.try_acquire() is None
        kept = await sem.try_acquire()
        assert kept is not None
        rw = client.rwlock(name + "-rw", ttl=10.0)
        reader = await rw.read(timeout=5.0)
        assert await rw.try_write() is None
        assert await reader.release() is True
        latch = client.latch(name + "-l")
        assert await latch.create(1) is True
        waiting = asyncio.ensure_future(latch.wait(timeout=20.0))
        assert await latch.count_down() == 0
        assert await waiting is True
        with pytest.raises(latchkey.WaitTimedOut):
            await sem.acquire(timeout=0.1)
        assert await kept.release() is True

    asyncio.run(main())


def test_async_election_and_signals(server, name):
    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        election = client.election(name, ttl=10.0)
        leader = await election.campaign(b"me", timeout=5.0)
        assert leader.is_leader() and (await election.leader()).term == leader.term
        assert await leader.resign() is True
        waiting = asyncio.ensure_future(client.wait_any(name + "-sig", timeout=20.0))
        while await client.signal(name + "-sig", b"go") == 0:
            await asyncio.sleep(0.01)
        signal = await waiting
        assert signal.payload == b"go"
        resource = client.fenced(name + "-res")
        assert await resource.write(5, b"v") is True
        assert await resource.read() == (b"v", 5)

    asyncio.run(main())
