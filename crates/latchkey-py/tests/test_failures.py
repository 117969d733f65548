"""The failure paths: Redis down, ACL refusal, bad input; the exception
hierarchy."""

import os

import pytest

import latchkey
from latchkey import _native


def test_every_error_kind_has_a_class():
    for class_name in _native.ERROR_CLASSES:
        cls = getattr(latchkey, class_name)
        assert issubclass(cls, latchkey.LatchkeyError), class_name


def test_redis_6_2_is_refused_at_connect_as_unsupported_server():
    """The server the library refuses (too old), fetched by ./dev servers as
    for the Rust suite's test of the same refusal."""
    from conftest import RedisServer
    program = os.path.join(os.environ.get("LATCHKEY_SERVERS_DIR", ""), "redis-6.2", "redis-server")
    if not (os.environ.get("LATCHKEY_SERVERS_DIR") and os.path.exists(program)):
        if os.environ.get("LATCHKEY_REQUIRE_SERVERS") == "1":
            pytest.fail(f"{program} is missing although LATCHKEY_REQUIRE_SERVERS=1: run ./dev servers")
        pytest.skip("Redis 6.2 is not fetched (./dev servers)")
    old = RedisServer(program)
    try:
        with pytest.raises(latchkey.UnsupportedServer) as caught:
            latchkey.Client(old.url)
        assert str(caught.value).startswith("Redis 6.2.")
        assert not isinstance(caught.value, latchkey.Unavailable)
    finally:
        old.stop()


def test_redis_down_at_connect_is_unavailable():
    from conftest import free_port
    with pytest.raises(latchkey.Unavailable) as caught:
        latchkey.Client(f"redis://127.0.0.1:{free_port()}/")
    assert isinstance(caught.value, latchkey.Unreachable)
    assert isinstance(caught.value, ConnectionError)
    assert str(caught.value).startswith("Redis unreachable")


def test_redis_stopped_under_a_client_is_unavailable(private_server, name):
    client = latchkey.Client(private_server.url, command_timeout=0.5)
    lock = client.lock(name, ttl=10.0)
    private_server.stop()
    with pytest.raises(latchkey.Unavailable):
        lock.try_acquire()
    # A bounded wait through an outage reports the outage, not a conflict.
    with pytest.raises(latchkey.Unavailable):
        lock.acquire(timeout=1.0)


def test_bad_ttl_is_invalid_input(server, name):
    client = latchkey.Client(server.url)
    for ttl in (0.0, 0.001, -1.0, float("nan"), float("inf"), 10 ** 9):
        with pytest.raises(latchkey.InvalidInput):
            client.lock(name, ttl=ttl)
    with pytest.raises(latchkey.InvalidTtl):
        client.lock(name, ttl=0.0)
    guard = client.lock(name, ttl=1.0).acquire()
    with pytest.raises(latchkey.InvalidInput):
        guard.extend(-5.0)
    guard.release()


def test_bad_name_is_invalid_input(server):
    client = latchkey.Client(server.url)
    for bad in ("", "x" * (latchkey.MAX_NAME_LEN + 1), "job:fence"):
        with pytest.raises(latchkey.InvalidName):
            client.lock(bad, ttl=1.0)
    with pytest.raises(latchkey.InvalidInput):
        client.lock(42, ttl=1.0)
    assert issubclass(latchkey.InvalidInput, ValueError)


def test_bad_timeout_and_url_are_invalid_input(server, name):
    client = latchkey.Client(server.url)
    with pytest.raises(latchkey.InvalidInput):
        client.lock(name, ttl=1.0).acquire(timeout=-1.0)
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Client("not a url")


def test_acl_refusal_is_no_permission(server, name):
    r = server.redis()
    # A user that may connect but not touch latchkey's keys.
    r.execute_command("ACL", "SETUSER", "locked-out", "on", ">pw", "~other:*", "&*", "+@all")
    client = latchkey.Client(f"redis://locked-out:pw@127.0.0.1:{server.port}/")
    with pytest.raises(latchkey.NoPermission) as caught:
        client.lock(name, ttl=5.0).try_acquire()
    assert "docs/security.md" in str(caught.value)
    assert isinstance(caught.value, PermissionError)


def test_connection_options_are_checked(server, tmp_path):
    # Several URLs are the nodes of one Redis Cluster: a standalone server is not one.
    with pytest.raises(latchkey.NotACluster):
        latchkey.Client([server.url, server.url])
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Client(server.url, sentinels=["127.0.0.1:1"])
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Client(server.url, tls_cert=str(tmp_path / "cert.pem"))
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Client(server.url.replace("redis://", "rediss://"), tls_ca=tmp_path / "missing.pem")
    with pytest.raises(latchkey.InvalidInput):
        latchkey.Client([])


def test_huge_numbers_are_refused_or_bounded_never_a_panic(server, name):
    # 1e19 s fits a Duration (u64 seconds) but not a deadline on the clock.
    client = latchkey.Client(server.url, command_timeout=1e19)
    huge = 1e15
    makers = [
        lambda: client.lock(name, ttl=huge),
        lambda: client.semaphore(name, 2, ttl=huge),
        lambda: client.rwlock(name, ttl=huge),
        lambda: client.latch(name, ttl=huge),
        lambda: client.barrier(name, 2, ttl=huge),
        lambda: client.election(name, ttl=huge),
        lambda: client.semaphore(name, 2 ** 63, ttl=1.0),
    ]
    for make in makers:
        with pytest.raises(latchkey.InvalidInput):
            make()
    # A huge wait is a long one, not an overflow.
    with client.lock(name, ttl=5.0).acquire(timeout=1e19) as guard:
        assert guard.lost.wait(1e-3) is False
        with pytest.raises(latchkey.WaitTimedOut):
            client.wait_any(name + "-nobody", timeout=0.01)
    assert client.flush(1e19) is True


def test_no_password_reaches_a_repr_or_an_error(server):
    client = latchkey.Client(server.url.replace("redis://", "redis://default:s3cret@"))
    assert "s3cret" not in repr(client)
    try:
        latchkey.Client("redis://user:s3cret@127.0.0.1:notaport/")
        raise AssertionError("accepted")
    except latchkey.LatchkeyError as e:
        assert "s3cret" not in str(e)


def test_a_ttl_that_is_no_duration_is_invalid_ttl_as_zero_is(server, name):
    client = latchkey.Client(server.url)
    for ttl in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(latchkey.InvalidTtl, match="invalid ttl"):
            client.lock(name, ttl=ttl)
        with pytest.raises(latchkey.InvalidTtl):
            client.semaphore(name, 2, ttl=ttl)
    with client.lock(name, ttl=5.0).acquire() as guard:
        with pytest.raises(latchkey.InvalidTtl):
            guard.extend(-1.0)


def test_counts_out_of_any_range_are_invalid_count_never_overflow(server, name):
    client = latchkey.Client(server.url)
    for bad in (-1, 0, 2 ** 63, 2 ** 70, -(2 ** 70)):
        with pytest.raises(latchkey.InvalidCount, match="invalid semaphore permits"):
            client.semaphore(name, bad, ttl=5.0)
        with pytest.raises(latchkey.InvalidCount, match="invalid barrier parties"):
            client.barrier(name, bad)
        with pytest.raises(latchkey.InvalidCount, match="invalid latch count"):
            client.latch(name).create(bad)
    with pytest.raises(latchkey.InvalidInput):
        client.semaphore(name, 2.5, ttl=5.0)
    with pytest.raises(latchkey.InvalidInput, match="fencing token -1"):
        client.fenced(name + "-res").write(-1, b"v")


def test_a_refused_connection_names_where_and_no_redis_client_internals():
    from conftest import free_port
    port = free_port()
    with pytest.raises(latchkey.Unreachable, match=f"127.0.0.1:{port}: Connection refused"):
        latchkey.Client(f"redis://user:s3cret@127.0.0.1:{port}/")
    for url in ("not a url", "http://127.0.0.1:1/", "redis://127.0.0.1:notaport/"):
        with pytest.raises(latchkey.InvalidInput) as caught:
            latchkey.Client(url)
        message = str(caught.value)
        assert "InvalidClientConfig" not in message and "expected redis://" in message, message
