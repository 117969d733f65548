"""What a wrong URL, a wait and the TRACE level say: one line each, typed."""

import http.server
import logging
import threading

import pytest

import latchkey
from conftest import eventually


def test_a_url_at_a_port_that_is_no_redis_says_so_in_one_line():
    web = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        with pytest.raises(latchkey.Unreachable) as raised:
            latchkey.Client(f"redis://127.0.0.1:{web.server_address[1]}/", command_timeout=5.0)
    finally:
        web.shutdown()
    assert "\n" not in str(raised.value)
    assert "does not speak Redis's protocol" in str(raised.value)


def test_a_database_the_server_lacks_is_invalid_input(server):
    with pytest.raises(latchkey.InvalidInput, match="database the URL names does not exist"):
        latchkey.Client(server.url + "99")


def test_rediss_to_a_plain_server_hints_at_tls(server):
    with pytest.raises(latchkey.Tls, match="does the server serve TLS"):
        latchkey.Client(server.url.replace("redis://", "rediss://"), command_timeout=1.0)


def test_an_async_client_refuses_a_bad_url_when_made():
    with pytest.raises(latchkey.InvalidInput, match="bad Redis URL"):
        latchkey.AsyncClient("garbage")
    with pytest.raises(latchkey.InvalidInput, match="bad Redis URL"):
        latchkey.Client("garbage", connect=False)


def test_trace_is_named_trace():
    assert logging.getLevelName(latchkey.TRACE) == "TRACE"


def test_a_wait_and_its_timeout_are_logged(server, name, caplog):
    holder = latchkey.Client(server.url).lock(name, ttl=10.0).acquire()
    caplog.set_level(logging.DEBUG, logger="latchkey")
    client = latchkey.Client(server.url)  # a client made sees the new level at once
    with pytest.raises(latchkey.WaitTimedOut):
        client.lock(name, ttl=10.0).acquire(timeout=0.1)

    def said():
        return [r.getMessage() for r in caplog.records if r.name == "latchkey.python" and name in r.getMessage()]

    eventually(lambda: any(m.startswith("wait timed out") for m in said()))
    assert any(m.startswith("waiting") for m in said()), said()
    holder.release()
