"""One design for every primitive: blocking and asyncio twins that are real
classes, one hold surface (the library's `Guard`), what Rust can do and
Python could not before, and leaving a `with` block whose hold was lost."""

import asyncio
import inspect
import threading

import pytest

import latchkey


def test_every_async_class_exists_and_isinstance_holds(server, name):
    async def main():
        client = await latchkey.AsyncClient(server.url).connect()
        assert isinstance(client, latchkey.AsyncClient)
        semaphore = client.semaphore(name, 2, ttl=10.0)
        assert isinstance(semaphore, latchkey.AsyncSemaphore) and not isinstance(semaphore, latchkey.Semaphore)
        permit = await semaphore.acquire()
        assert isinstance(permit, latchkey.AsyncPermit)
        assert isinstance(permit.lost, latchkey.AsyncLostEvent)
        await permit.release()
        rw = client.rwlock(name + "-rw", ttl=10.0)
        assert isinstance(rw, latchkey.AsyncRwLock)
        assert isinstance(client.latch(name + "-l"), latchkey.AsyncLatch)
        assert isinstance(client.barrier(name + "-b", 2), latchkey.AsyncBarrier)
        election = client.election(name + "-e", ttl=10.0)
        assert isinstance(election, latchkey.AsyncElection)
        async with election.campaign("me") as leadership:
            assert isinstance(leadership, latchkey.AsyncLeadership)
            assert leadership.term == await leadership.fencing_token()
        assert isinstance(await election.observe(), latchkey.AsyncObserver)
        assert isinstance(client.fenced(name + "-f"), latchkey.AsyncFencedResource)
        listener = await client.listen(name + "-s")
        assert isinstance(listener, latchkey.AsyncListener)
        listener.close()
        assert isinstance(client.lock_all([name + "-a", name + "-b"], ttl=5.0), latchkey.AsyncMultiLock)

    asyncio.run(main())


def test_a_hold_of_the_wrong_api_is_refused_in_the_wrong_with(server, name):
    async def main():
        client = latchkey.AsyncClient(server.url)
        guard = await client.lock(name, ttl=10.0).acquire()
        with pytest.raises(TypeError, match="async with"):
            with guard:
                pass
        await guard.release()

    asyncio.run(main())


def test_leaving_a_with_block_whose_hold_was_lost_raises_lock_lost(server, name):
    client = latchkey.Client(server.url)
    with pytest.raises(latchkey.LockLost, match="lost before its with block ended") as raised:
        with client.lock(name, ttl=30.0).acquire() as guard:
            assert [r.kind for r in client.revoke(name)] == ["lock"]
            assert guard.lost.wait(10.0) is True
    assert isinstance(raised.value, latchkey.NotHeld)
    assert guard.lost_reason in ("revoked", "gone")  # gone: found so at a renewal before the message


def test_a_block_that_raised_keeps_its_own_exception(server, name):
    client = latchkey.Client(server.url)
    with pytest.raises(KeyError):
        with client.lock(name, ttl=30.0).acquire() as guard:
            client.revoke(name)
            guard.lost.wait(10.0)
            raise KeyError("the block's own")


def test_a_hold_released_in_its_block_leaves_quietly(server, name):
    client = latchkey.Client(server.url)
    with client.lock(name, ttl=30.0).acquire() as guard:
        assert guard.release() is True


def test_release_requested_hears_request_release_and_a_waiter_that_asks(server, name):
    holder, other = latchkey.Client(server.url), latchkey.Client(server.url)
    guard = holder.lock(name, ttl=30.0).acquire()
    with pytest.raises(latchkey.WaitTimedOut):
        guard.release_requested(timeout=0.05)
    heard = threading.Event()
    t = threading.Thread(target=lambda: (guard.release_requested(timeout=20.0), heard.set()))
    t.start()
    # The holder subscribes in its thread: ask until a connection heard it.
    while other.request_release(name) == 0 and t.is_alive():
        heard.wait(0.02)
    assert heard.wait(20.0)
    t.join()
    # A waiter made with ask=True asks by itself; the holder lets go.
    def let_go():
        guard.release_requested(timeout=20.0)
        guard.release()
    t = threading.Thread(target=let_go)
    t.start()
    with other.lock(name, ttl=30.0, ask=True).acquire(timeout=20.0) as taken:
        assert taken.is_held()
    t.join()


def test_lock_all_takes_every_lock_or_none(server, name):
    client, other = latchkey.Client(server.url), latchkey.Client(server.url)
    a, b = name + "-a", name + "-b"
    with client.lock_all([a, b], ttl=10.0, fencing=True).acquire(timeout=5.0) as both:
        assert isinstance(both, latchkey.MultiGuard) and both.names == [a, b]
        assert other.lock(b, ttl=10.0).try_acquire() is None
        tokens = both.fencing_tokens()
        assert len(tokens) == 2 and both.fencing_token_of(b) == tokens[1]
        assert both.lost_lock() is None
    assert other.lock_all([b, a], ttl=10.0).try_acquire().release() is True


def test_acquire_many_takes_k_permits_at_once(server, name):
    client = latchkey.Client(server.url)
    semaphore = client.semaphore(name, 3, ttl=10.0)
    with semaphore.acquire_many(2, timeout=5.0) as permits:
        assert permits.permits == 2 and permits.access is None
        assert semaphore.try_acquire_many(2) is None
        with semaphore.acquire(timeout=5.0) as one:
            assert one.permits == 1
    with pytest.raises(latchkey.InvalidCount):
        semaphore.acquire_many(0)


def test_max_hold_caps_a_hold(server, name):
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=10.0, max_hold=0.3).acquire()
    assert guard.lost.wait(10.0) is True
    assert guard.lost_reason == "max-hold" and not guard.is_held()
    guard.release()


def test_hold_at_least_keeps_an_early_release_held_until_then(server, name):
    client, other = latchkey.Client(server.url), latchkey.Client(server.url)
    guard = client.lock(name, ttl=20.0, hold_at_least=30.0).acquire()
    assert guard.release() is True
    pttl = server.redis().pttl(f"latchkey:{name}")
    assert 20_000 < pttl <= 30_000, pttl
    assert other.lock(name, ttl=5.0).try_acquire() is None
    with pytest.raises(latchkey.InvalidTtl):
        client.lock(name, ttl=5.0, hold_at_least=0.0)


def test_a_kept_hold_is_given_back_on_request(server, name):
    client, other = latchkey.Client(server.url), latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0, cached=30.0)
    lock.acquire().release()
    assert other.lock(name, ttl=10.0).try_acquire() is None  # kept while idle
    assert lock.give_back() is True
    assert other.lock(name, ttl=10.0).try_acquire() is not None


def test_a_leadership_is_a_hold_like_every_other(server, name):
    client = latchkey.Client(server.url)
    with client.election(name, ttl=10.0).campaign(b"node-a", timeout=5.0) as leadership:
        assert leadership.name == name and leadership.fencing_token() == leadership.term
        assert leadership.issued_fencing_token() == leadership.term
        assert leadership.extend(10.0) is True and leadership.value == b"node-a"


def test_names_come_back_as_given_and_reprs_say_what_they_are(server, name):
    client = latchkey.Client(server.url)
    assert client.lock(name.encode(), ttl=5.0).name == name.encode()
    with client.lock(name, ttl=5.0).acquire() as guard:
        assert guard.name == name
        objects = [client, client.lock(name, ttl=5.0), guard, guard.lost, client.semaphore(name + "-s", 2, ttl=5.0),
                   client.rwlock(name + "-r", ttl=5.0), client.latch(name + "-l"), client.barrier(name + "-b", 2),
                   client.election(name + "-e", ttl=5.0), client.fenced(name + "-f")]
        for o in objects:
            assert " object at 0x" not in repr(o) and type(o).__name__ in repr(o), repr(o)


def test_public_classes_have_real_signatures():
    params = inspect.signature(latchkey.Client).parameters
    assert list(params)[:4] == ["url", "connect", "prefix", "command_timeout"]
    assert "connect" not in inspect.signature(latchkey.AsyncClient).parameters
    assert "instance_timeout" in inspect.signature(latchkey.Redlock).parameters
    with pytest.raises(TypeError, match="bogus"):
        latchkey.AsyncClient("redis://127.0.0.1:1/", bogus=True)
