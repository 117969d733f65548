"""The other primitives, blocking API: semaphore, rwlock, latch, barrier,
election, signals, fenced resource."""

import threading

import pytest

import latchkey
from conftest import eventually


def test_semaphore_gives_at_most_its_permits(server, name):
    client = latchkey.Client(server.url)
    sem = client.semaphore(name, 2, ttl=10.0, fencing=True)
    a, b = sem.acquire(timeout=5.0), sem.try_acquire()
    assert isinstance(a, latchkey.Permit) and b is not None
    assert sem.try_acquire() is None
    with pytest.raises(latchkey.WaitTimedOut):
        sem.acquire(timeout=0.2)
    assert a.fencing_token() is not None and b.fencing_token() > a.fencing_token()
    assert a.extend(20.0) is True
    assert a.release() is True and a.release() is False
    with sem.acquire(timeout=5.0) as c:
        assert c.is_held() and c.deadline is not None
    b.release()
    with pytest.raises(latchkey.InvalidCount):
        client.semaphore(name, 0, ttl=10.0)


def test_rwlock_readers_share_and_writer_excludes(server, name):
    client = latchkey.Client(server.url)
    rw = client.rwlock(name, ttl=10.0)
    r1, r2 = rw.read(timeout=5.0), rw.try_read()
    assert r1.is_held() and r2 is not None
    assert rw.try_write() is None
    with pytest.raises(latchkey.WaitTimedOut):
        rw.write(timeout=0.2)
    r1.release(), r2.release()
    with rw.write(timeout=5.0) as w:
        assert w.is_held()
        assert rw.try_read() is None
    # Every hold has one surface: a read hold extends as a lock does.
    reader = rw.read()
    assert reader.extend(20.0) is True
    reader.release()


def test_latch_opens_at_zero_and_late_waiters_return(server, name):
    client = latchkey.Client(server.url)
    latch = client.latch(name, ttl=60.0)
    assert latch.count() is None
    assert latch.create(2) is True
    with pytest.raises(latchkey.WaitTimedOut):
        latch.wait(timeout=0.1)
    opened = {}
    t = threading.Thread(target=lambda: opened.setdefault("v", latch.wait(timeout=20.0)))
    t.start()
    assert latch.count_down() == 1
    assert latch.count_down() == 0
    t.join(20)
    assert opened["v"] is True
    assert latch.wait(timeout=0) is True
    with pytest.raises(latchkey.CountedBelowZero):
        latch.count_down()


def test_barrier_releases_its_parties_together(server, name):
    clients = [latchkey.Client(server.url) for _ in range(3)]
    generations = []
    threads = [threading.Thread(target=lambda c=c: generations.append(c.barrier(name, 3).arrive_and_wait(timeout=20.0)))
               for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(generations) == 3 and len(set(generations)) == 1 and generations[0] is not None
    barrier = clients[0].barrier(name, 3)
    with pytest.raises(latchkey.WaitTimedOut):
        barrier.arrive_and_wait(timeout=0.2)
    # The arrival that timed out was taken back.
    generation, arrived = barrier.state()
    assert generation > generations[0] and arrived == 0


def test_election_one_leader_terms_increase(server, name):
    a, b = latchkey.Client(server.url), latchkey.Client(server.url)
    ea, eb = a.election(name, ttl=10.0), b.election(name, ttl=10.0)
    observer = eb.observe()
    leader = ea.campaign("node-a", timeout=5.0)
    assert isinstance(leader, latchkey.Leadership)
    assert leader.is_leader() and leader.value == b"node-a"
    assert eb.try_campaign("node-b") is None
    seen = eb.leader()
    assert seen.term == leader.term and seen.value == b"node-a"
    first = observer.next(timeout=10.0)
    while first is None or first.term != leader.term:
        first = observer.next(timeout=10.0)
    assert leader.proclaim("node-a2") is True
    assert leader.value == b"node-a2"
    with pytest.raises(latchkey.WaitTimedOut):
        eb.campaign("node-b", timeout=0.2)
    assert leader.resign() is True and leader.resign() is False
    with eb.campaign("node-b", timeout=5.0) as second:
        assert second.term > leader.term


def test_signal_reaches_a_waiter(server, name):
    sender, receiver = latchkey.Client(server.url), latchkey.Client(server.url)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("s", receiver.wait_any([name, name + "-other"], timeout=20.0)))
    t.start()
    # The waiter is subscribed once a signal is heard by someone.
    eventually(lambda: sender.signal(name, b"hello") >= 1 or False)
    t.join(20)
    signal = got["s"]
    assert isinstance(signal, latchkey.Signal)
    assert signal.name == name.encode() and signal.payload == b"hello" and not signal.unicast
    with pytest.raises(latchkey.WaitTimedOut):
        receiver.wait_any(name, timeout=0.1)


def test_fenced_resource_refuses_a_stale_token(server, name):
    client = latchkey.Client(server.url)
    resource = client.fenced(name + "-output")
    assert resource.read() is None
    assert resource.write(10, b"new") is True
    assert resource.write(9, b"stale") is False
    assert resource.read() == (b"new", 10)
