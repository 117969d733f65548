"""os.fork() after a client was made: the child gets a working client of its
own, guards stay the parent's, and nothing hangs."""

import gc
import os
import signal
import subprocess
import sys
import traceback

import latchkey


def in_child(work) -> int:
    """Runs `work` in a forked child; its exit status (a child that hangs is
    killed by its own alarm, and that fails the test)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(30)
            code = work()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"child killed by signal {os.WTERMSIG(status)} (hung?)"
    return os.WEXITSTATUS(status)


def test_child_gets_a_working_client(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    lock.try_acquire().release()  # the parent's connection is in use

    def child():
        guard = lock.try_acquire()
        assert guard is not None and guard.is_held()
        assert guard.fencing_token() > 0
        assert guard.release() is True
        with client.lock(name + "-2", ttl=5.0).acquire(timeout=5.0):
            pass
        return 0

    assert in_child(child) == 0
    # The parent's connection was not disturbed by the child.
    guard = lock.acquire(timeout=5.0)
    assert guard.release() is True


def test_guard_held_across_fork_stays_the_parents(server, name):
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=30.0).acquire()
    r = server.redis()

    def child():
        assert not guard.is_held()
        # The copy of a parent's guard does not hold here: it says it is lost.
        assert guard.lost.is_set() and guard.lost.wait(0) is True and isinstance(guard.deadline, float)
        assert guard.release() is False  # not the child's to release
        try:
            guard.fencing_token()
            return 2
        except latchkey.NotHeld as e:
            assert "parent process" in str(e)
        assert client.lock(name, ttl=30.0).try_acquire() is None
        child_guard = guard
        del child_guard
        gc.collect()
        return 0

    assert in_child(child) == 0
    assert r.get(f"latchkey:{name}").decode().startswith(guard.token)
    assert guard.is_held()
    assert guard.release() is True


def test_multiprocessing_fork_pool_shares_one_lock(server, name):
    import multiprocessing

    client = latchkey.Client(server.url)
    counter = f"{name}:counter"

    def bump(_):
        r = server.redis()
        with client.lock(name, ttl=10.0).acquire(timeout=30.0):
            r.set(counter, int(r.get(counter) or 0) + 1)
        return True

    global _bump
    _bump = bump
    with multiprocessing.get_context("fork").Pool(3) as pool:
        assert all(pool.map(_call_bump, range(30)))
    assert int(server.redis().get(counter)) == 30


_bump = None


def _call_bump(i):
    return _bump(i)


THREADS_AT_FORK = r'''
import os, sys, warnings
import latchkey

def threads():
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])

client = latchkey.Client(sys.argv[1], connect=False)
lock = client.lock(sys.argv[2], ttl=10.0)
assert threads() == 1, threads()          # nothing started: no runtime, no logging thread
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pid = os.fork()
    if pid == 0:
        guard = lock.try_acquire()        # the child's first use starts its own threads
        os._exit(0 if guard is not None and guard.release() else 1)
    _, status = os.waitpid(pid, 0)
assert os.WEXITSTATUS(status) == 0
assert not [w for w in caught if issubclass(w.category, DeprecationWarning)], caught
assert lock.try_acquire().release()       # the parent's first use, after the fork
assert threads() > 1
print("ok")
'''


def test_a_client_made_with_connect_false_starts_no_thread_before_its_first_use(server, name):
    # Python 3.12+ warns (DeprecationWarning) at a fork of a process with
    # threads; a blocking client connects, and starts its runtime, when made.
    done = subprocess.run([sys.executable, "-c", THREADS_AT_FORK, server.url, name],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stdout + done.stderr
