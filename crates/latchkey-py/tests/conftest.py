"""Real redis-server processes on free loopback ports (never 6379), one per
test module by default, a private one for the tests that stop it."""

import os
import shutil
import socket
import subprocess
import time
import uuid

import pytest
import redis

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server, without persistence, on a free loopback port."""

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not installed (./dev test installs it)")
        self.port = free_port()
        assert self.port != 6379
        self.url = f"redis://127.0.0.1:{self.port}/"
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--notify-keyspace-events", "KEA"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server on {self.port} did not start")
                time.sleep(0.01)  # readiness poll of a starting process: no signal to wait on

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def redis(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


@pytest.fixture(scope="module")
def server():
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def private_server():
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


def eventually(check, within: float = 10.0, every: float = 0.01):
    """Waits until `check()` is true (for state with no signal to wait on)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {within}s: {check}")
        time.sleep(every)
