"""At interpreter exit: holds still alive are released (not left until their
TTL), and the process exits promptly."""

import subprocess
import sys

import latchkey

CHILD = r"""
import sys, latchkey
client = latchkey.Client(sys.argv[1])
guard = client.lock(sys.argv[2], ttl=60.0).acquire(timeout=5.0)
permit = client.semaphore(sys.argv[2] + "-sem", 1, ttl=60.0).acquire(timeout=5.0)
print(guard.token, flush=True)
# The script ends with both held.
"""


def test_exit_releases_what_is_still_held(server, name):
    child = subprocess.run([sys.executable, "-c", CHILD, server.url, name],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip().startswith("lk")
    r = server.redis()
    assert r.exists(f"latchkey:{name}") == 0
    client = latchkey.Client(server.url)
    permit = client.semaphore(name + "-sem", 1, ttl=60.0).try_acquire()
    assert permit is not None
    permit.release()


IN_MAIN = r"""
import asyncio, sys, latchkey
url, name, how = sys.argv[1], sys.argv[2], sys.argv[3]

def main():
    client = latchkey.Client(url)
    cached = client.lock(name + "-cached", ttl=60.0, cached=60.0)
    cached.acquire(timeout=5.0).release()  # kept idle
    forgotten = client.lock(name + "-forgotten", ttl=60.0).acquire(timeout=5.0)
    del forgotten  # dropped unreleased: released in the background
    permit = client.semaphore(name + "-sem", 1, ttl=60.0).acquire(timeout=5.0)
    print(permit.token, flush=True)
    # main returns: the client, the lock and the permit go with its frame.

async def amain():
    client = latchkey.AsyncClient(url)
    cached = client.lock(name + "-cached", ttl=60.0, cached=60.0)
    await (await cached.acquire(timeout=5.0)).release()
    forgotten = await client.lock(name + "-forgotten", ttl=60.0).acquire(timeout=5.0)
    del forgotten
    permit = await client.semaphore(name + "-sem", 1, ttl=60.0).acquire(timeout=5.0)
    print(permit.token, flush=True)

if how == "main":
    main()
else:
    asyncio.run(amain())
"""


import pytest


@pytest.mark.parametrize("how", ["main", "asyncio"])
def test_exit_gives_back_what_a_main_function_owned(server, name, how):
    """The client lives in main() (or asyncio.run(main())): its frame is
    gone before the interpreter exits, and with it every object; the holds
    they had, kept idle, dropped unreleased or still held, are all given
    back before the process ends, not left to their TTL."""
    r = server.redis()
    for round in range(3):
        child = subprocess.run([sys.executable, "-c", IN_MAIN, server.url, f"{name}-{round}", how],
                               capture_output=True, text=True, timeout=60)
        assert child.returncode == 0, child.stderr
        assert "Error" not in child.stderr, child.stderr
        left = [k for k in (f"latchkey:{name}-{round}-cached", f"latchkey:{name}-{round}-forgotten")
                if r.exists(k)]
        assert left == [], f"round {round}: still held after exit: {left}"
        permit = latchkey.Client(server.url).semaphore(f"{name}-{round}-sem", 1, ttl=60.0).try_acquire()
        assert permit is not None, f"round {round}: the permit is still taken"
        permit.release()
