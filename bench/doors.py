#!/usr/bin/env python3
"""The doors' cost (docs/agents.md and docs/http.md, "Cost"): an acquire +
release through `latchkey mcp` (one session), `latchkey serve` (HTTP/1.1
keep-alive) and the CLI (two processes), with the Redis round trips each
costs (INFO commandstats; a script's inner commands apart); then the
resident memory per long-polling waiter of one `serve` process.

Usage: bench/doors.py [LATCHKEY_BINARY] [WAITERS]
  (default target/release/latchkey, 1000). Starts its own redis-server on a
  free loopback port (never 6379) and stops it.
"""
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/latchkey"
WAITERS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
PAIRS = 1000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def round_trips():
    """Commands sent by clients so far (EVALSHA counts one; not its inner calls)."""
    out = subprocess.run(["redis-cli", "-u", URL, "INFO", "commandstats"],
                         capture_output=True, text=True, check=True).stdout
    total = 0
    for line in out.splitlines():
        name = line.split(":")[0][len("cmdstat_"):]
        if line.startswith("cmdstat_") and name not in ("time", "get", "set", "del", "pexpire", "publish", "incr"):
            total += int(line.split("calls=")[1].split(",")[0])
    return total


def timed(label, once, n):
    for _ in range(50):
        once()
    before = round_trips()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    trips = (round_trips() - before - 1) / n  # the INFO of `round_trips` itself
    times.sort()
    print(f"| {label} | {n} | {statistics.median(times) * 1e3:.3f} ms | "
          f"{times[int(n * 0.99) - 1] * 1e3:.2f} ms | {trips:.1f} |")


def mcp():
    door = subprocess.Popen([BIN, "--redis", URL, "--prefix", "b:", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    ids = iter(range(1, 1 << 30))

    def rpc(method, params):
        door.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}) + "\n")
        door.stdin.flush()
        return json.loads(door.stdout.readline())

    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    door.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def once():
        got = rpc("tools/call", {"name": "acquire", "arguments": {"name": "mcp", "ttl": "10s"}})
        token = got["result"]["structuredContent"]["token"]
        rpc("tools/call", {"name": "release", "arguments": {"name": "mcp", "token": token}})

    timed("`latchkey mcp`, one session", once, PAIRS)
    door.stdin.close()
    door.wait()


def serve():
    door = subprocess.Popen([BIN, "--redis", URL, "--prefix", "b:", "serve", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, text=True)
    host, port = door.stdout.readline().strip().split("http://")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port))

    def post(path, body):
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read())

    def once():
        token = post("/v1/locks/http/acquire", {"ttl": "10s"})["token"]
        post("/v1/locks/http/release", {"token": token})

    timed("`latchkey serve`, keep-alive", once, PAIRS)
    waiters(door, host, int(port))
    door.terminate()
    door.wait()


def waiters(door, host, port):
    def rss():
        with open(f"/proc/{door.pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))

    def post(body):
        s = socket.create_connection((host, port))
        text = json.dumps(body)
        s.sendall(f"POST /v1/locks/busy/acquire HTTP/1.1\r\nHost: b\r\nConnection: close\r\n"
                  f"Content-Length: {len(text)}\r\n\r\n{text}".encode())
        return s

    post({"ttl": "5m"}).recv(4096)
    base = rss()
    held = [post({"ttl": "5m", "wait": "120s"}) for _ in range(WAITERS)]
    last = 0
    for _ in range(100):  # until the resident size stops growing
        time.sleep(0.2)
        now = rss()
        if now == last:
            break
        last = now
    print(f"\n`latchkey serve`, {WAITERS} waiters on one busy lock: RSS {base} KiB -> {last} KiB, "
          f"{(last - base) / WAITERS:.1f} KiB per waiter")
    for s in held:
        s.close()


def cli():
    def once():
        out = subprocess.run([BIN, "--redis", URL, "--prefix", "b:", "acquire", "cli", "--ttl", "10s", "--no-wait"],
                             capture_output=True, text=True, check=True).stdout
        subprocess.run([BIN, "--redis", URL, "--prefix", "b:", "release", "cli", out.splitlines()[0]], check=True)

    timed("the CLI, two processes", once, PAIRS // 5)


if __name__ == "__main__":
    port = free_port()
    URL = f"redis://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as scratch:
        server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                   "--dir", scratch], stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
                    break
                time.sleep(0.05)
            print("| door | pairs | median | p99 | round trips per pair |\n|---|---|---|---|---|")
            mcp()
            cli()
            serve()
        finally:
            server.terminate()
            server.wait()
