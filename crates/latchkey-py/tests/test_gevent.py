"""Under gevent's monkey-patching a waiting acquire lets the hub run: the
holder greenlet gets to release, other greenlets keep running. Each case
runs in a process of its own (monkey-patching is process-wide)."""

import subprocess
import sys

import pytest

pytest.importorskip("gevent")

PRELUDE = r"""
from gevent import monkey; monkey.patch_all()
import sys, time, gevent, latchkey
url, name = sys.argv[1], sys.argv[2]
"""

CONTENDING = PRELUDE + r"""
client = latchkey.Client(url)
done = []
def work(i):
    with client.lock(name, ttl=10.0).acquire():   # no timeout: a frozen hub would wait for ever
        gevent.sleep(0.05)                          # the holder yields while it holds
    done.append(i)
gevent.joinall([gevent.spawn(work, i) for i in range(2)], timeout=60)
print(sorted(done))
"""

TICKING = PRELUDE + r"""
client = latchkey.Client(url)
holder = client.lock(name, ttl=10.0).acquire()
ticks = []
def ticker():
    while True:
        ticks.append(time.monotonic())
        gevent.sleep(0.01)
def wait():
    start = time.monotonic()
    try:
        client.lock(name, ttl=10.0).acquire(timeout=0.5)
    except latchkey.WaitTimedOut:
        pass
    return start, time.monotonic()
t = gevent.spawn(ticker)
start, end = gevent.spawn(wait).get(timeout=30)
t.kill()
holder.release()
print(sum(1 for x in ticks if start < x < end))
"""

# The pattern of a gevent worker (gunicorn -k gevent, celery -P gevent):
# many greenlets, one lock per task, a pool that must drain.
POOL = PRELUDE + r"""
from gevent.pool import Pool
client = latchkey.Client(url)
counter = {"n": 0}
def task(i):
    with client.lock(name, ttl=10.0).acquire(timeout=30.0):
        n = counter["n"]
        gevent.sleep(0)
        counter["n"] = n + 1
pool = Pool(20)
started = time.monotonic()
for i in range(100):
    pool.spawn(task, i)
pool.join(timeout=60)
print(counter["n"], round(time.monotonic() - started, 2), file=sys.stderr)
print(counter["n"])
"""


def run(script, server, name):
    return subprocess.run([sys.executable, "-c", script, server.url, name],
                          capture_output=True, text=True, timeout=90)


def test_two_greenlets_contending_without_a_timeout_both_finish(server, name):
    child = run(CONTENDING, server, name)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[0, 1]"


def test_a_ticker_greenlet_keeps_ticking_while_another_waits(server, name):
    child = run(TICKING, server, name)
    assert child.returncode == 0, child.stderr
    # 10 ms ticks through a 0.5 s wait: a frozen hub gives none.
    assert int(child.stdout) >= 10, child.stdout


def test_a_pool_of_greenlets_like_a_gevent_worker_drains(server, name):
    child = run(POOL, server, name)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "100", child.stderr
