"""Under gevent's monkey-patching a waiting acquire lets the hub run: the
holder greenlet gets to release, other greenlets keep running. Each case
runs in a process of its own (monkey-patching is process-wide)."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("gevent")

from conftest import REPO  # noqa: E402

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


def docs_example():
    """docs/python.md's gevent example (a `py` block: test_docs.py runs the
    `python` ones in its own process, which must not be patched)."""
    with open(os.path.join(REPO, "docs", "python.md")) as f:
        [example] = [b for b in re.findall(r"```py\n(.*?)```", f.read(), re.S) if "patch_all" in b]
    return example


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


def test_the_docs_gevent_worker_example_drains_its_pool(server):
    script = docs_example().replace("redis://127.0.0.1:6380/0", server.url)
    assert server.url in script
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90)
    assert child.returncode == 0, child.stderr
