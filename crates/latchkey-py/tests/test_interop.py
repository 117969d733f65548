"""The same lock from redis-py's Lock (prefix=""), from `latchkey run` and
from `latchkey serve` (HTTP)."""

import json
import os
import subprocess
import threading
import urllib.error
import urllib.request

import pytest

import latchkey
from conftest import REPO, eventually


def test_latchkey_holder_excludes_redis_py(server, name):
    client = latchkey.Client(server.url, prefix="")
    guard = client.lock(name, ttl=10.0).acquire()
    peer = server.redis().lock(name, timeout=10)
    assert peer.acquire(blocking=False) is False
    assert guard.release() is True
    assert peer.acquire(blocking=False) is True
    peer.release()


def test_redis_py_holder_excludes_latchkey(server, name):
    client = latchkey.Client(server.url, prefix="")
    lock = client.lock(name, ttl=10.0)
    peer = server.redis().lock(name, timeout=30)
    assert peer.acquire(blocking=False)
    assert lock.try_acquire() is None
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("g", lock.acquire(timeout=30.0)))
    t.start()
    # redis-py's release publishes nothing: the waiter finds it by polling.
    peer.release()
    t.join(30)
    assert got["g"].is_held()
    assert server.redis().get(name).decode().startswith(got["g"].token)
    got["g"].release()


def latchkey_bin():
    path = os.environ.get("LATCHKEY_BIN") or os.path.join(REPO, "target", "debug", "latchkey")
    if not os.path.exists(path):
        pytest.skip(f"no latchkey CLI at {path} (cargo build -p latchkey-cli; ./dev test builds it)")
    return path


def test_latchkey_run_and_python_exclude_each_other(server, name):
    """A shell script under `latchkey run` and a Python holder, one lock,
    fenced writes: no lost update, tokens increase across both."""
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    r = server.redis()
    guard = lock.acquire()
    cli = subprocess.Popen(
        [latchkey_bin(), "run", "--redis", server.url, "--wait", "30s", "--ttl", "10s", name,
         "--", "sh", "-c", "echo ran"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The CLI waits: it marked our token.
    eventually(lambda: r.get(f"latchkey:{name}").endswith(b"+w"))
    assert cli.poll() is None
    assert guard.release() is True
    out, err = cli.communicate(timeout=30)
    assert cli.returncode == 0, err
    assert out.strip() == "ran"
    with lock.acquire(timeout=5.0) as after:
        assert after.is_held()


def test_cli_and_python_holders_lose_no_update_and_fence_in_order(server, name):
    """Three `latchkey run` processes and two Python threads, one lock: each
    hold does a read-modify-write of a counter (a second holder would lose
    an update) and records its fencing token; tokens come in hold order."""
    binary = latchkey_bin()
    r = server.redis()
    counter, tokens = f"{name}:counter", f"{name}:tokens"
    step = (f"v=$(redis-cli -p {server.port} get {counter}); "
            f"redis-cli -p {server.port} set {counter} $(( ${{v:-0}} + 1 )) >/dev/null; "
            f"redis-cli -p {server.port} rpush {tokens} $LATCHKEY_FENCING_TOKEN >/dev/null")
    rounds = 5
    script = " ".join(
        [f"for i in $(seq {rounds}); do {binary} run --redis {server.url} --wait 60s --ttl 10s {name} -- sh -c '{step}' || exit 1; done"])
    clis = [subprocess.Popen(["sh", "-c", script], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    client = latchkey.Client(server.url)
    errors = []

    def python_holder():
        try:
            for _ in range(rounds):
                with client.lock(name, ttl=10.0).acquire(timeout=60.0) as guard:
                    token = guard.fencing_token()
                    v = int(r.get(counter) or 0)
                    r.set(counter, v + 1)
                    r.rpush(tokens, token)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=python_holder) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for cli in clis:
        _, err = cli.communicate(timeout=120)
        assert cli.returncode == 0, err
    assert not errors
    assert int(r.get(counter)) == 5 * rounds
    seen = [int(t) for t in r.lrange(tokens, 0, -1)]
    assert len(seen) == 5 * rounds
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


def test_python_redis_lock_and_latchkey_exclude_each_other(server, name):
    """python-redis-lock keeps `lock:` + name: with prefix="lock:" the two
    share the key, both ways."""
    redis_lock = pytest.importorskip("redis_lock", reason="./dev test installs python-redis-lock")
    client = latchkey.Client(server.url, prefix="lock:")
    conn = server.redis()
    theirs = redis_lock.Lock(conn, name, expire=30)
    assert theirs.acquire(blocking=False)
    assert client.lock(name, ttl=10.0).try_acquire() is None
    theirs.release()
    guard = client.lock(name, ttl=10.0).acquire(timeout=5.0)
    assert conn.get(f"lock:{name}").decode().startswith(guard.token)
    assert redis_lock.Lock(conn, name, expire=30).acquire(blocking=False) is False
    assert guard.release() is True
    again = redis_lock.Lock(conn, name, expire=30)
    assert again.acquire(blocking=False) is True
    again.release()


class Served:
    """`latchkey serve` on a free loopback port (port 0: it picks one and
    prints it) against `server`, with no tokens (loopback callers only)."""

    def __init__(self, server):
        env = {k: v for k, v in os.environ.items() if k != "LATCHKEY_SERVE_TOKENS"}
        self.proc = subprocess.Popen(
            [latchkey_bin(), "serve", "--redis", server.url, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, text=True, env=env)  # stderr: pytest's capture
        # Its one line on stdout says where it listens: it listens then. A
        # server that never says so is killed, so the read cannot hang.
        guard = threading.Timer(30, self.proc.kill)
        guard.start()
        line = self.proc.stdout.readline()
        guard.cancel()
        assert line.startswith("listening on http://"), f"latchkey serve said {line!r}"
        self.base = line.strip().removeprefix("listening on ")

    def post(self, path, body):
        """POST a JSON body: (HTTP status, JSON reply)."""
        request = urllib.request.Request(
            self.base + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, json.load(reply)
        except urllib.error.HTTPError as refused:
            return refused.code, json.load(refused)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def test_a_lock_taken_over_http_excludes_python_until_released_over_http(server, name):
    """`latchkey serve` and the Python package on one name, both ways."""
    served = Served(server)
    try:
        status, held = served.post(f"/v1/locks/{name}/acquire", {"ttl": "1m"})
        assert (status, held["acquired"]) == (200, True), held
        assert server.redis().get(f"latchkey:{name}").decode() == held["token"]
        lock = latchkey.Client(server.url).lock(name, ttl=10.0)
        assert lock.try_acquire() is None, "busy for Python while held over HTTP"

        status, released = served.post(f"/v1/locks/{name}/release", {"token": held["token"]})
        assert (status, released["released"]) == (200, True), released
        guard = lock.try_acquire()
        assert guard is not None and guard.is_held()
        assert guard.fencing_token() > held["fencing_token"], "one fencing counter for both doors"

        status, busy = served.post(f"/v1/locks/{name}/acquire", {"ttl": "1m"})
        assert (status, busy["acquired"]) == (200, False), busy
        assert busy["holder"]["pid"] == os.getpid(), "the holder it names is this process"
        assert guard.release() is True
        status, again = served.post(f"/v1/locks/{name}/acquire", {"ttl": "1m"})
        assert (status, again["acquired"]) == (200, True), again
        status, _ = served.post(f"/v1/locks/{name}/release", {"token": again["token"]})
        assert status == 200
    finally:
        served.stop()
