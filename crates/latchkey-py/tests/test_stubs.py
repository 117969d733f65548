"""The type stubs match the module (mypy's stubtest), and type-check an
example of both APIs under --strict."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)

EXAMPLE = '''
import latchkey

def blocking(client: latchkey.Client) -> int:
    with client.lock("x", ttl=30.0).acquire(timeout=5.0) as guard:
        token: int = guard.fencing_token()
        lost: bool = guard.lost.wait(0)
    return token

async def asyncio_api(client: latchkey.AsyncClient) -> bool:
    alock = client.lock("x", ttl=30.0)
    async with (await alock.acquire(timeout=5.0)) as guard:
        token: int = await guard.fencing_token()
    async with alock.acquire(timeout=5.0) as entered:
        held: bool = entered.is_held()
    permit = await client.semaphore("s", 2, ttl=10.0).acquire()
    return await permit.release()
'''


def mypy(*args, cwd=CRATE):
    pytest.importorskip("mypy", reason="mypy is not installed (./dev test installs it)")
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)


def test_stubs_match_the_module():
    done = mypy("mypy.stubtest", "latchkey", "--allowlist", "stubtest-allowlist.txt")
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_example_type_checks_strictly(tmp_path):
    (tmp_path / "example.py").write_text(EXAMPLE)
    done = mypy("mypy", "--strict", "example.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
