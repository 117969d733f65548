"""Threads sharing one client: mutual exclusion holds, nothing deadlocks."""

import threading

import latchkey


def test_threads_sharing_a_client_exclude_each_other(server, name):
    client = latchkey.Client(server.url)
    lock = client.lock(name, ttl=10.0)
    r = server.redis()
    counter = f"{name}:counter"
    inside = []
    overlaps = []
    errors = []

    def work():
        try:
            for _ in range(20):
                with lock.acquire(timeout=30.0):
                    inside.append(1)
                    if len(inside) > 1:
                        overlaps.append(len(inside))
                    # A read-modify-write that a second holder would break.
                    value = int(r.get(counter) or 0)
                    r.set(counter, value + 1)
                    inside.pop()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert not overlaps
    assert int(r.get(counter)) == 6 * 20
