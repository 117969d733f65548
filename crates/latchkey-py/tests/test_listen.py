"""client.listen(): subscriptions kept between receives (no gap), in both
APIs; close() ends an iteration from another thread; patterns; holders."""

import asyncio

import pytest
import os
import threading

import latchkey
from conftest import eventually


def test_a_listener_keeps_signals_sent_between_receives(server, name):
    sender, receiver = latchkey.Client(server.url), latchkey.Client(server.url)
    with receiver.listen([name, name + "-b"]) as listener:
        assert listener.subscribed
        # Subscribed when listen() returned: both are heard, none lost.
        assert sender.signal(name, b"one") == 1
        assert sender.signal(name + "-b", b"two") == 1
        first = listener.recv(timeout=10.0)
        second = listener.recv(timeout=10.0)
        assert (first.name, first.payload) == (name.encode(), b"one")
        assert (second.name, second.payload) == ((name + "-b").encode(), b"two")
        with pytest.raises(latchkey.WaitTimedOut):
            listener.recv(timeout=0.05)
        assert listener.try_recv() is None
        sender.signal(name, b"three")
        eventually(lambda: (s := listener.try_recv()) is not None and s.payload == b"three")
    # Closed: nothing listens any more (the unsubscribe is sent in the background).
    eventually(lambda: sender.signal(name, b"late") == 0)
    assert listener.recv(timeout=1.0) is None


def test_iteration_ends_when_closed_from_another_thread(server, name):
    sender, receiver = latchkey.Client(server.url), latchkey.Client(server.url)
    listener = receiver.listen(name)
    seen = []
    done = threading.Event()

    def consume():
        for signal in listener:
            seen.append(signal.payload)
            if len(seen) == 3:
                listener.close()
        done.set()

    t = threading.Thread(target=consume)
    t.start()
    for i in range(3):
        assert sender.signal(name, f"{i}".encode()) == 1
    assert done.wait(20)
    t.join(5)
    assert seen == [b"0", b"1", b"2"]
    # A blocked iteration is ended by close() too.
    blocked = receiver.listen(name)
    ended = threading.Event()
    threading.Thread(target=lambda: (list(blocked), ended.set())).start()
    blocked.close()
    assert ended.wait(10)


def test_patterns_hear_every_matching_name(server, name):
    sender, receiver = latchkey.Client(server.url), latchkey.Client(server.url)
    with receiver.listen(name + ":*", patterns=True) as listener:
        assert sender.signal(name + ":a", b"x") == 1
        got = listener.recv(timeout=10.0)
        assert got.name == (name + ":a").encode() and got.payload == b"x"


def test_async_listener_iterates_and_survives_a_cancelled_receive(server, name):
    async def main():
        receiver = latchkey.AsyncClient(server.url)
        sender = latchkey.AsyncClient(server.url)
        listener = await receiver.listen(name)
        # A receive cancelled by a timeout loses nothing and leaves it usable.
        try:
            await asyncio.wait_for(listener.recv(), 0.05)
            raise AssertionError("nothing was sent")
        except asyncio.TimeoutError:
            pass
        assert await sender.signal(name, b"a") == 1
        assert await sender.signal(name, b"b") == 1
        got = []
        async for signal in listener:
            got.append(signal.payload)
            if len(got) == 2:
                break
        assert got == [b"a", b"b"]
        async with listener:
            pass
        for _ in range(500):  # the unsubscribe is sent in the background
            if await sender.signal(name, b"c") == 0:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("still subscribed after close")
        assert await listener.recv(timeout=0.5) is None

    asyncio.run(main())


def test_semaphore_holders_lists_each_permit(server, name):
    client = latchkey.Client(server.url)
    semaphore = client.semaphore(name, 3, ttl=10.0)
    assert semaphore.holders() == []
    a, b = semaphore.acquire(timeout=5.0), semaphore.acquire(timeout=5.0)
    holders = semaphore.holders()
    assert sorted(h.token for h in holders) == sorted([a.token, b.token])
    for h in holders:
        assert h.pid == os.getpid() and h.host
        assert 0 < h.ttl_left <= 10.0 and h.acquired_at > 0
    a.release()
    assert [h.token for h in semaphore.holders()] == [b.token]
    b.release()

    async def main():
        s = latchkey.AsyncClient(server.url).semaphore(name, 3, ttl=10.0)
        p = await s.acquire(timeout=5.0)
        assert [h.token for h in await s.holders()] == [p.token]
        await p.release()

    asyncio.run(main())
