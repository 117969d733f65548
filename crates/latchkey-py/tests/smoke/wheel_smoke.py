"""The installed wheel works where no Rust is (./dev test runs this in a
clean virtualenv, with a PATH without cargo): it connects to a private
redis-server, locks with a fencing token, releases, and tells its
metadata. Run as `python wheel_smoke.py`; exits non-zero on any failure."""

import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    assert shutil.which("cargo") is None, "cargo is on the PATH: not a Rust-free install"
    import latchkey

    here = os.path.dirname(os.path.abspath(latchkey.__file__))
    assert "site-packages" in here, f"latchkey imported from {here}, not the installed wheel"
    meta = importlib.metadata.metadata("latchkey-redis")
    assert meta["Name"] == "latchkey-redis" and meta["Version"] == latchkey.__version__
    assert meta.get_all("Classifier") and meta["Description"]
    assert (meta["License-Expression"] or meta["License"]) == "MIT OR Apache-2.0"
    # No URL until the project has a true one (a placeholder is worse than none).
    assert not any("example.invalid" in url for url in meta.get_all("Project-URL") or [])

    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client = latchkey.Client(f"redis://127.0.0.1:{port}/")
                break
            except latchkey.Unreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)  # readiness poll of a starting server: no signal to wait on
        lock = client.lock("smoke", ttl=5.0, fencing=True)
        with lock.acquire(timeout=5.0) as guard:
            first = guard.fencing_token()
            assert lock.try_acquire() is None
        with lock.acquire(timeout=5.0) as guard:
            assert guard.fencing_token() > first
        assert lock.try_acquire().release() is True
        assert latchkey.metrics().value("latchkey_acquisitions_total", kind="lock", outcome="ok") == 3
    finally:
        server.kill()
        server.wait()
    print(f"wheel smoke: latchkey-redis {latchkey.__version__} from {here}: ok")


if __name__ == "__main__":
    main()
    sys.exit(0)
