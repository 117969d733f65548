"""The package against the other deployments: a real 3-primary Redis
Cluster (names in different slots), a Sentinel-watched primary, and TLS
with certificates made here (the server-name override included)."""

import asyncio
import os
import shutil
import subprocess
import threading

import pytest
import redis

import latchkey
from conftest import eventually, free_port, wait_ready


def slot_owner_ports(cluster, keys):
    rc = cluster.cluster()
    return {rc.get_node_from_key(k).port for k in keys}


def test_cluster_locks_in_different_slots(cluster, name):
    client = latchkey.Client(cluster.urls)
    names = [f"{name}-{i}" for i in range(6)]
    # The names really land on more than one primary.
    assert len(slot_owner_ports(cluster, [f"latchkey:{n}" for n in names])) > 1
    guards = [client.lock(n, ttl=10.0, fencing=True).acquire(timeout=5.0) for n in names]
    other = latchkey.Client(cluster.urls[1:])
    for n in names:
        assert other.lock(n, ttl=10.0).try_acquire() is None
    tokens = [g.fencing_token() for g in guards]
    assert all(t >= 1 for t in tokens)
    for g in guards:
        assert g.release() is True
    for n in names:
        with other.lock(n, ttl=10.0).acquire(timeout=5.0) as g:
            assert g.is_held()


def test_cluster_waiter_is_woken_by_sharded_pubsub(cluster, name):
    a, b = latchkey.Client(cluster.urls), latchkey.Client(cluster.urls)
    held = a.lock(name, ttl=30.0).acquire()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("g", b.lock(name, ttl=30.0).acquire(timeout=20.0)))
    t.start()
    channel = f"{{latchkey:{name}}}:released"
    rc = cluster.cluster()
    node = redis.Redis(port=rc.get_node_from_key(channel).port)
    eventually(lambda: node.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] >= 1)
    held.release()
    t.join(20)
    assert got["g"].is_held()
    got["g"].release()


def test_cluster_primitives_and_signals(cluster, name):
    client = latchkey.Client(cluster.urls)
    semaphore = client.semaphore(name + "-sem", 2, ttl=10.0)
    p1, p2 = semaphore.acquire(timeout=5.0), semaphore.acquire(timeout=5.0)
    assert semaphore.try_acquire() is None
    assert len(semaphore.holders()) == 2
    p1.release(), p2.release()
    with client.rwlock(name + "-rw", ttl=10.0).write(timeout=5.0) as w:
        assert w.is_held()
    with client.listen(name + "-sig") as listener:
        assert client.signal(name + "-sig", b"hi") == 1
        assert listener.recv(timeout=10.0).payload == b"hi"

    async def main():
        aclient = latchkey.AsyncClient(cluster.urls)
        async with (await aclient.lock(name + "-async", ttl=10.0).acquire(timeout=5.0)) as g:
            assert g.is_held()

    asyncio.run(main())


def test_sentinel_finds_the_primary(sentinel, name):
    client = latchkey.Client("redis://ignored/", sentinels=sentinel.sentinels, master="m")
    with client.lock(name, ttl=10.0).acquire(timeout=5.0) as guard:
        value = sentinel.primary.redis().get(f"latchkey:{name}")
        assert value is not None and value.decode().startswith(guard.token)
    with pytest.raises(latchkey.LatchkeyError):
        latchkey.Client("redis://ignored/", sentinels=sentinel.sentinels, master="no-such-master",
                        command_timeout=1.0)


def make_certs(tmp):
    """A CA, and a server certificate for the name redis.test only."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")

    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=redis.test",
        "-keyout", "server.key", "-out", "server.csr")
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:redis.test\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")
    return {n: os.path.join(tmp, n) for n in ("ca.pem", "server.pem", "server.key")}


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("tls"))
    certs = make_certs(tmp)
    port, plain = free_port(), free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(plain), "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", certs["server.pem"], "--tls-key-file", certs["server.key"],
         "--tls-ca-cert-file", certs["ca.pem"], "--tls-auth-clients", "no",
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(plain, proc, "TLS redis-server")
    yield port, certs
    proc.kill()
    proc.wait()


def test_tls_with_a_server_name_override(tls_server, name):
    port, certs = tls_server
    url = f"rediss://127.0.0.1:{port}/"
    # The certificate names redis.test, not 127.0.0.1: refused, as a Tls error...
    with pytest.raises(latchkey.Tls):
        latchkey.Client(url, tls_ca=certs["ca.pem"], command_timeout=2.0)
    # ...and accepted when told which name to check.
    client = latchkey.Client(url, tls_ca=certs["ca.pem"], tls_server_name="redis.test")
    with client.lock(name, ttl=10.0).acquire(timeout=5.0) as guard:
        assert guard.is_held()

    async def main():
        aclient = latchkey.AsyncClient(url, tls_ca=certs["ca.pem"], tls_server_name="redis.test")
        async with (await aclient.lock(name, ttl=10.0).acquire(timeout=5.0)) as g:
            assert g.is_held()

    asyncio.run(main())
