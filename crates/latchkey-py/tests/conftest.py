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

    def __init__(self, program: str = "redis-server") -> None:
        if shutil.which(program) is None:
            pytest.fail(f"{program} is not installed (./dev test installs it)")
        self.program = program
        self.port = free_port()
        assert self.port != 6379
        self.url = f"redis://127.0.0.1:{self.port}/"
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.program, "--port", str(self.port), "--bind", "127.0.0.1",
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


def free_cluster_port() -> int:
    """A free port ≤ 55535 whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        port = free_port()
        if port > 55535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port with a free bus port")


def wait_ready(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis(port=port, socket_timeout=1).ping()
            return
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} on {port} did not start")
            time.sleep(0.01)  # readiness poll of a starting process: no signal to wait on


def cluster_ok(port: int) -> bool:
    info = redis.Redis(port=port, socket_timeout=2, decode_responses=True).execute_command("CLUSTER INFO")
    if isinstance(info, dict):
        return info.get("cluster_state") == "ok"
    return "cluster_state:ok" in info


class RedisCluster:
    """A real Redis Cluster of three primaries (no replicas) on free ports."""

    def __init__(self, tmp: str) -> None:
        if shutil.which("redis-cli") is None:
            pytest.fail("redis-cli is not installed (./dev test installs it)")
        self.ports = []
        self.procs = []
        for _ in range(3):
            port = free_cluster_port()
            node_dir = os.path.join(tmp, f"node-{port}")
            os.makedirs(node_dir)
            proc = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--dir", node_dir, "--save", "", "--appendonly", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.ports.append(port)
            self.procs.append(proc)
            wait_ready(port, proc, "cluster node")
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout}{created.stderr}")
        # Every node must know every slot before a client's first MOVED.
        deadline = time.monotonic() + 30
        for port in self.ports:
            while not cluster_ok(port):
                if time.monotonic() > deadline:
                    raise RuntimeError("the cluster did not become ok")
                time.sleep(0.05)  # gossip settling: no event to wait on
        self.urls = [f"redis://127.0.0.1:{p}/" for p in self.ports]

    def cluster(self) -> "redis.cluster.RedisCluster":
        return redis.cluster.RedisCluster(host="127.0.0.1", port=self.ports[0])

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = RedisCluster(str(tmp_path_factory.mktemp("cluster")))
    yield c
    c.stop()


class Sentinel:
    """A primary, a replica of it and one Sentinel watching them (master `m`)."""

    def __init__(self, tmp: str) -> None:
        self.primary = RedisServer()
        self.replica_port = free_port()
        self.replica = subprocess.Popen(
            ["redis-server", "--port", str(self.replica_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no",
             "--replicaof", "127.0.0.1", str(self.primary.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.replica_port, self.replica, "replica")
        self.port = free_port()
        conf = os.path.join(tmp, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\n"
                    f"sentinel monitor m 127.0.0.1 {self.primary.port} 1\n"
                    "sentinel down-after-milliseconds m 1000\n")
        self.proc = subprocess.Popen(["redis-server", conf, "--sentinel"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, self.proc, "sentinel")
        self.sentinels = [f"127.0.0.1:{self.port}"]

    def stop(self) -> None:
        for proc in (self.proc, self.replica):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.primary.stop()


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory):
    s = Sentinel(str(tmp_path_factory.mktemp("sentinel")))
    yield s
    s.stop()
