"""The library's events in Python's logging, its metrics in a snapshot
and a prometheus_client collector."""

import logging
import subprocess
import sys

import pytest

import latchkey
from conftest import eventually


def test_the_logger_prints_nothing_unless_configured():
    handlers = logging.getLogger("latchkey").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    assert all(isinstance(h, logging.NullHandler) for h in handlers)


def test_a_lost_lock_is_a_warning_of_the_latchkey_logger(server, name, caplog):
    caplog.set_level(logging.WARNING, logger="latchkey")
    client = latchkey.Client(server.url)
    guard = client.lock(name, ttl=0.6).acquire()
    server.redis().delete(f"latchkey:{name}")
    assert guard.lost.wait(10.0) is True

    def lost_logged():
        return [r for r in caplog.records if "lost" in r.getMessage() and name in r.getMessage()]

    eventually(lambda: lost_logged())
    [record] = lost_logged()[:1]
    assert record.levelno == logging.WARNING
    assert record.name.startswith("latchkey.")  # a child logger: the Rust module that logs
    assert "gone from Redis" in record.getMessage()
    guard.release()


def test_debug_events_come_only_when_debug_is_wanted(server, name, caplog):
    caplog.set_level(logging.WARNING, logger="latchkey")
    client = latchkey.Client(server.url)
    client.lock(name, ttl=5.0).acquire().release()
    client.flush()
    caplog.set_level(logging.DEBUG, logger="latchkey")
    client = latchkey.Client(server.url)  # a client made sees the new level at once
    client.lock(name, ttl=5.0).acquire().release()
    eventually(lambda: any(r.levelno == logging.DEBUG and "acquired" in r.getMessage()
                           and name in r.getMessage() for r in caplog.records))
    acquired = [r for r in caplog.records if r.getMessage().startswith("acquired") and name in r.getMessage()]
    assert len(acquired) == 1  # the acquire at WARNING was not forwarded
    caplog.set_level(logging.WARNING, logger="latchkey")
    latchkey.Client(server.url)


def test_logging_stays_off_the_calling_thread(server, name, caplog):
    # A handler that takes the GIL for long cannot stall a lock's calls: the
    # records reach it from the extension's logging thread.
    import threading
    seen = []

    class Slow(logging.Handler):
        def emit(self, record):
            seen.append(threading.current_thread().name)

    handler = Slow()
    logging.getLogger("latchkey").addHandler(handler)
    try:
        caplog.set_level(logging.DEBUG, logger="latchkey")
        client = latchkey.Client(server.url)
        client.lock(name, ttl=5.0).acquire().release()
        eventually(lambda: seen)
        assert set(seen) == {"latchkey-log"}  # the extension's thread, named for the records
    finally:
        logging.getLogger("latchkey").removeHandler(handler)
        caplog.set_level(logging.WARNING, logger="latchkey")
        latchkey.Client(server.url)


def test_a_snapshot_counts_an_acquisition(server, name):
    client = latchkey.Client(server.url)
    before = latchkey.metrics()
    lock = client.lock(name, ttl=5.0)
    lock.acquire().release()
    assert lock.try_acquire() is not None
    with client.semaphore(name + "-s", 2, ttl=5.0).acquire():
        pass
    after = latchkey.metrics()
    ok = dict(kind="lock", outcome="ok")
    assert after.value("latchkey_acquisitions_total", **ok) - before.value("latchkey_acquisitions_total", **ok) == 2
    grew = after.value("latchkey_acquisitions_total", kind="semaphore", outcome="ok")
    assert grew - before.value("latchkey_acquisitions_total", kind="semaphore", outcome="ok") == 1
    wait = after["latchkey_acquire_wait_seconds"]
    assert wait.type == "histogram" and wait.help
    [lock_waits] = [s for s in wait.samples if s.labels == {"kind": "lock"}]
    assert isinstance(lock_waits, latchkey.HistogramSample)
    assert lock_waits.buckets[-1] == (float("inf"), lock_waits.count) and lock_waits.sum > 0
    assert after.value("latchkey_acquisitions_total", kind="lock", outcome="no-such") == 0


def test_a_loss_is_counted_by_reason(server, name):
    client = latchkey.Client(server.url)
    before = latchkey.metrics().value("latchkey_locks_lost_total", kind="lock", reason="gone")
    guard = client.lock(name, ttl=0.6).acquire()
    server.redis().delete(f"latchkey:{name}")
    assert guard.lost.wait(10.0) is True
    after = latchkey.metrics().value("latchkey_locks_lost_total", kind="lock", reason="gone")
    assert after == before + 1


def test_the_prometheus_collector_exports_the_snapshot(server, name):
    prometheus_client = pytest.importorskip("prometheus_client")
    client = latchkey.Client(server.url)
    client.lock(name, ttl=5.0).acquire().release()
    registry = prometheus_client.CollectorRegistry()
    registry.register(latchkey.PrometheusCollector())
    text = prometheus_client.generate_latest(registry).decode()
    count = latchkey.metrics().value("latchkey_acquisitions_total", kind="lock", outcome="ok")
    assert f'latchkey_acquisitions_total{{kind="lock",outcome="ok"}} {float(count)}' in text
    assert 'latchkey_acquire_wait_seconds_bucket{kind="lock",le="+Inf"}' in text


def test_the_collector_says_when_prometheus_client_is_missing():
    code = "import sys; sys.modules['prometheus_client'] = None\nimport latchkey\n" \
           "try:\n    latchkey.PrometheusCollector()\nexcept ImportError:\n    print('refused')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "refused", done.stderr
