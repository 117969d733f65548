"""The type stubs match the module (mypy's stubtest), and type-check an
example of both APIs under --strict."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)

EXAMPLE = '''
import asyncio
from typing import List, Optional, Tuple, Type

import latchkey


def blocking(client: latchkey.Client) -> int:
    lock: latchkey.Lock = client.lock("x", ttl=30.0, fencing=True, max_hold=60.0, ask=True)
    with lock.acquire(timeout=5.0) as guard:
        held: latchkey.LockGuard = guard
        token: int = guard.fencing_token()
        deadline: float = guard.deadline
        lost: bool = guard.lost.wait(0)
        event: latchkey.LostEvent = guard.lost
        reason: Optional[str] = guard.lost_reason
        issued: Optional[int] = guard.issued_fencing_token()
        return token  # returning inside `with`: __exit__ is typed None
    raise AssertionError("unreachable")


def every_recipe(client: latchkey.Client) -> None:
    assert lock_kept(client) >= 0
    both: latchkey.MultiLock = client.lock_all(["a", "b"], ttl=10.0)
    with both.acquire() as multi:
        m: latchkey.MultiGuard = multi
        tokens: List[int] = multi.fencing_tokens()
        first: int = multi.fencing_token_of("a")
    pool: latchkey.Semaphore = client.semaphore("s", 3, ttl=10.0)
    with pool.acquire_many(2, timeout=1.0) as permit:
        p: latchkey.Permit = permit
        k: int = permit.permits
    holders: List[latchkey.PermitHolder] = pool.holders()
    rw: latchkey.RwLock = client.rwlock("rw", ttl=10.0)
    with rw.write(timeout=1.0) as w:
        access: Optional[str] = w.access
    latch: latchkey.Latch = client.latch("l")
    latch.create(1)
    latch.count_down()
    opened: bool = latch.wait(timeout=1.0)
    barrier: latchkey.Barrier = client.barrier("b", 1)
    generation: int = barrier.arrive_and_wait(timeout=1.0)
    election: latchkey.Election = client.election("e", ttl=10.0)
    with election.campaign("me", timeout=1.0) as leadership:
        lead: latchkey.Leadership = leadership
        term: int = leadership.term
        leadership.extend(10.0)
    leader: Optional[latchkey.Leader] = election.leader()
    observer: latchkey.Observer = election.observe()
    fenced: latchkey.FencedResource = client.fenced("f")
    stored: bool = fenced.write(term, b"v")
    read: Optional[Tuple[bytes, int]] = fenced.read()
    revoked: List[latchkey.Revocation] = client.revoke("x")
    asked: int = client.request_release("x")
    with client.listen("sig") as listener:
        lst: latchkey.Listener = listener
        client.signal("sig", b"p")
        signal: Optional[latchkey.Signal] = listener.recv(timeout=1.0)
    heard: latchkey.Signal = client.wait_any(["sig"], timeout=0.1)
    redlock = latchkey.Redlock(["redis://a/", "redis://b/", "redis://c/"], instance_timeout=0.5)
    r: latchkey.Lock = redlock.lock("r", ttl=10.0)
    quorum: int = redlock.quorum
    limits: Tuple[float, float, int] = (latchkey.MIN_TTL, latchkey.MAX_TTL, latchkey.MAX_NAME_LEN)
    errors: List[Type[latchkey.LatchkeyError]] = [
        latchkey.Busy, latchkey.WaitTimedOut, latchkey.NotHeld, latchkey.LockLost, latchkey.MaxHoldReached,
        latchkey.ForeignValue, latchkey.LatchOpen, latchkey.CountedBelowZero, latchkey.NotFound,
        latchkey.PartiesMismatch, latchkey.Unavailable, latchkey.Unreachable, latchkey.Timeout,
        latchkey.NoQuorum, latchkey.OutOfMemory, latchkey.ReadOnlyReplica, latchkey.TooFewReplicas,
        latchkey.InvalidInput, latchkey.InvalidName, latchkey.InvalidTtl, latchkey.InvalidCount,
        latchkey.Unsupported, latchkey.Tls, latchkey.Auth, latchkey.NoPermission, latchkey.WrongType,
        latchkey.BadFencingCounter, latchkey.NotACluster, latchkey.UnsupportedServer,
        latchkey.RedisError, latchkey.ProtocolError, latchkey.RandomError, latchkey.InternalError,
    ]


def observed() -> float:
    snapshot: latchkey.MetricsSnapshot = latchkey.metrics()
    metric: latchkey.Metric = snapshot["latchkey_acquisitions_total"]
    for sample in metric.samples:
        if isinstance(sample, latchkey.HistogramSample):
            buckets: List[Tuple[float, int]] = sample.buckets
        else:
            counted: latchkey.CounterSample = sample
    collector: latchkey.PrometheusCollector = latchkey.PrometheusCollector()
    level: int = latchkey.TRACE
    return snapshot.value("latchkey_acquisitions_total", kind="lock", outcome="ok")


def lock_kept(client: latchkey.Client) -> int:
    kept = client.lock("k", ttl=5.0, cached=5.0)
    with kept.acquire():
        pass
    return int(kept.give_back())


async def asyncio_api(url: str) -> bool:
    client: latchkey.AsyncClient = await latchkey.AsyncClient(url).connect()
    alock: latchkey.AsyncLock = client.lock("x", ttl=30.0)
    async with alock.acquire(timeout=5.0) as guard:
        g: latchkey.AsyncLockGuard = guard
        token: int = await guard.fencing_token()
        event: latchkey.AsyncLostEvent = guard.lost
        lost: bool = await guard.lost.wait(0)
    both: latchkey.AsyncMultiLock = client.lock_all(["a", "b"], ttl=10.0)
    multi: latchkey.AsyncMultiGuard = await both.acquire()
    await multi.release()
    sem: latchkey.AsyncSemaphore = client.semaphore("s", 2, ttl=10.0)
    permit: latchkey.AsyncPermit = await sem.acquire()
    rw: latchkey.AsyncRwLock = client.rwlock("rw", ttl=10.0)
    latch: latchkey.AsyncLatch = client.latch("l")
    barrier: latchkey.AsyncBarrier = client.barrier("b", 1)
    election: latchkey.AsyncElection = client.election("e", ttl=10.0)
    leadership: latchkey.AsyncLeadership = await election.campaign("me")
    observer: latchkey.AsyncObserver = await election.observe()
    fenced: latchkey.AsyncFencedResource = client.fenced("f")
    listener: latchkey.AsyncListener = await client.listen("sig")
    redlock: latchkey.AsyncRedlock = await latchkey.AsyncRedlock(["redis://a/", "redis://b/"]).connect()
    task = asyncio.create_task(alock.acquire())
    held: latchkey.AsyncLockGuard = await task
    await held.release()
    return await permit.release()
'''


def mypy(*args, cwd=CRATE):
    pytest.importorskip("mypy", reason="mypy is not installed (./dev test installs it)")
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)


def test_stubs_match_the_module():
    done = mypy("mypy.stubtest", "latchkey", "--allowlist", "stubtest-allowlist.txt")
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_example_type_checks_strictly(tmp_path):
    (tmp_path / "example.py").write_text(EXAMPLE)
    done = mypy("mypy", "--strict", "example.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
