"""The blocking lock: acquire, try, release, extend, fencing, lost, GC."""

import gc
import threading
import time

import pytest

import latchkey
from conftest import eventually


def test_acquire_holds_the_key_and_release_frees_it(server, name):
    client = latchkey.Client(server.url)
    r = server.redis()
    guard = client.lock(name, ttl=10.0).acquire(timeout=5.0)
    assert r.get(f"latchkey:{name}").decode() == guard.token
    assert guard.is_held()
    assert guard.release() is True
    assert r.get(f"latchkey:{name}") is None
    assert not guard.is_held()
    assert isinstance(guard.deadline, float)  # the last deadline, once released
    # Idempotent: a second release finds nothing to do.
    assert guard.release() is False


def test_try_acquire_gives_none_while_busy(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    guard = lock.try_acquire()
    assert isinstance(guard, latchkey.LockGuard)
    assert lock.try_acquire() is None
    guard.release()
    again = lock.try_acquire()
    assert again is not None
    again.release()


def test_context_manager_releases_on_exit_even_on_error(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    with pytest.raises(ZeroDivisionError):
        with lock.acquire(timeout=5.0) as guard:
            assert guard.is_held()
            1 / 0
    assert server.redis().get(f"latchkey:{name}") is None


def test_str_and_bytes_name_the_same_lock(server, name):
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=10.0).acquire()
    assert client.lock(name.encode(), ttl=10.0).try_acquire() is None
    assert guard.name == name  # a str, as given
    guard.release()


def test_timeout_raises_wait_timed_out(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    holder = lock.acquire()
    with pytest.raises(latchkey.WaitTimedOut) as caught:
        lock.acquire(timeout=0.2)
    # Where redis-py code caught LockError, and a plain TimeoutError.
    assert isinstance(caught.value, latchkey.Busy)
    assert isinstance(caught.value, TimeoutError)
    assert "still busy after waiting" in str(caught.value)
    holder.release()


def test_waiter_gets_the_lock_when_the_holder_releases(server, name):
    holder_client, waiter_client = latchkey.Client(server.url), latchkey.Client(server.url)
    holder = holder_client.lock(name, ttl=30.0).acquire()
    got = {}

    def wait():
        got["guard"] = waiter_client.lock(name, ttl=30.0).acquire(timeout=20.0)

    t = threading.Thread(target=wait)
    t.start()
    # The waiter marked the holder's token (it waits for the release message).
    eventually(lambda: server.redis().get(f"latchkey:{name}").endswith(b"+w"))
    holder.release()
    t.join(20)
    assert got["guard"].is_held()
    got["guard"].release()


def test_fencing_tokens_strictly_increase(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    tokens = []
    for _ in range(3):
        with lock.acquire() as guard:
            tokens.append(guard.fencing_token())
            assert guard.fencing_token() == tokens[-1]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    with client.lock(name, ttl=10.0, fencing=True).acquire() as guard:
        assert guard.fencing_token() > tokens[-1]


def test_extend_moves_the_deadline_and_the_ttl(server, name):
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=2.0, watchdog=False).acquire()
    before = guard.deadline
    assert before - time.monotonic() <= 2.0
    assert guard.extend(60.0) is True
    assert guard.deadline - time.monotonic() > 30.0
    assert server.redis().pttl(f"latchkey:{name}") > 30_000
    guard.release()
    assert guard.is_held() is False


def test_lost_fires_when_the_key_is_taken_away(server, name):
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=0.6, watchdog=True).acquire()
    assert not guard.lost.is_set()
    assert guard.lost.wait(0) is False
    server.redis().delete(f"latchkey:{name}")
    # The watchdog's next renewal finds the key gone.
    assert guard.lost.wait(10.0) is True
    assert guard.lost.is_set() and not guard.is_held()
    assert guard.extend(1.0) is False
    with pytest.raises(latchkey.NotHeld):
        guard.fencing_token()


def test_lost_fires_at_the_deadline_without_watchdog(server, name):
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=0.3, watchdog=False).acquire()
    assert guard.lost.wait(10.0) is True
    assert not guard.is_held()


def test_a_guard_nothing_references_stays_held_until_the_client_closes(server, name):
    """A hold ends when the program releases it, loses it, closes the
    client or exits, never because Python collected its object: redis-py's
    `lock.acquire(); work(); lock.release()` keeps the lock through work()."""
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=30.0)
    lock.acquire()  # the guard is dropped at once
    gc.collect()
    assert client.flush(10.0) is True
    assert server.redis().exists(f"latchkey:{name}") == 1
    assert lock.locked() is True
    assert latchkey.Client(server.url).lock(name, ttl=30.0).try_acquire() is None
    assert client.close() is True
    assert server.redis().exists(f"latchkey:{name}") == 0
    assert client.close() is True  # idempotent
    with pytest.raises(latchkey.ClientClosed, match="the client is closed"):
        lock.acquire(timeout=1.0)
    with pytest.raises(latchkey.ClientClosed):
        client.lock(name, ttl=30.0)
    assert latchkey.Client(server.url).lock(name, ttl=30.0).locked() is False


def test_close_ends_a_wait_in_flight_and_takes_nothing(server, name):
    holder = latchkey.Client(server.url).lock(name, ttl=30.0).acquire()
    client = latchkey.Client(server.url)
    failed = []

    def wait():
        try:
            client.lock(name, ttl=30.0).acquire(timeout=60.0)
        except latchkey.ClientClosed as e:
            failed.append(e)

    t = threading.Thread(target=wait)
    t.start()
    # The waiter marks the key when it asks to be woken at the release.
    eventually(lambda: server.redis().get(f"latchkey:{name}").endswith(b"+w"))
    client.close()
    t.join(20)
    assert not t.is_alive() and len(failed) == 1
    assert holder.release() is True
    assert server.redis().exists(f"latchkey:{name}") == 0


def test_prefix_changes_the_key(server, name):
    client = latchkey.Client(server.url, prefix="app:")
    assert client.prefix == b"app:"
    with client.lock(name, ttl=10.0).acquire():
        assert server.redis().exists(f"app:{name}")
    # Another prefix is another lock.
    other = latchkey.Client(server.url).lock(name, ttl=10.0).try_acquire()
    assert other is not None
    other.release()


def test_gil_is_released_while_blocked(server, name):
    """While one thread waits in acquire, another runs Python code: if the
    wait held the GIL, no iteration of the loop below could fall inside it."""
    client = latchkey.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()
    span = {}

    def wait():
        span["start"] = time.monotonic()
        with pytest.raises(latchkey.WaitTimedOut):
            client.lock(name, ttl=30.0).acquire(timeout=1.0)
        span["end"] = time.monotonic()

    t = threading.Thread(target=wait)
    t.start()
    ticks = []
    while t.is_alive():
        ticks.append(time.monotonic())
    t.join()
    inside = [x for x in ticks if span["start"] + 0.2 < x < span["end"] - 0.2]
    assert inside, "no Python code ran while the other thread waited"
    holder.release()


def test_fair_lock_queues_and_hands_over(server, name):
    client_a, client_b = latchkey.Client(server.url), latchkey.Client(server.url)
    holder = client_a.lock(name, ttl=30.0, fair=True).acquire()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault(
        "g", client_b.lock(name, ttl=30.0, fair=True).acquire(timeout=20.0)))
    t.start()
    eventually(lambda: server.redis().llen(f"{{latchkey:{name}}}:queue") == 1)
    holder.release()
    t.join(20)
    assert got["g"].is_held()
    got["g"].release()
