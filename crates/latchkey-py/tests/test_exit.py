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
