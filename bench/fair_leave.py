#!/usr/bin/env python3
"""A herd of fair waiters leaving the queue (docs/scale.md, "Leaving the
queue"): `fair_leave.lua` of a revision before (whose removal was ZREM +
LREM, a scan of the queue) and of the working tree (no scan), the same run,
interleaved A B A B: Redis's time in the scripts (`INFO commandstats`,
evalsha usec) for N waiters all leaving a queue of N, in random order and in
arrival order. Each script is assembled as the library does (the preludes
shared/lib.lua, fence.lua, hand_on.lua, then the script), sent with redis-py.

Usage: bench/fair_leave.py [BEFORE_REV] [ROUNDS]
  (default 1f95f10, the last revision with the scanning leave; 3 rounds).
  Starts its own redis-server on a free loopback port (never 6379).
"""
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

BEFORE = sys.argv[1] if len(sys.argv) > 1 else "1f95f10"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
PARTS = ["shared/lib.lua", "shared/fence.lua", "shared/hand_on.lua", "fair_leave.lua"]
DIR = "crates/latchkey/src/scripts/"
KEYS = ["{b}", "{b}:queue", "{b}:leases", "{b}:fence", "{b}:acquired"]


def script(rev):
    if rev is None:
        return "".join(open(DIR + part).read() for part in PARTS)
    show = lambda part: subprocess.check_output(["git", "show", f"{rev}:{DIR}{part}"], text=True)
    return "".join(show(part) for part in PARTS)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def evalsha_ms(r):
    return r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0) / 1000.0


def herd(r, sha, n, order):
    """Queues n entries behind another holder, then all n leave: ms of Redis."""
    r.flushall()
    r.set(KEYS[0], "lk2:someone-else", px=600_000)
    entries = [
        "%032x:2000:0:lk2:%032x:1796594976493:27918:vm"
        % (random.getrandbits(128), random.getrandbits(128))
        for _ in range(n)
    ]
    p = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        p.rpush(KEYS[1], *entries[i : i + 1000])
        p.zadd(KEYS[2], {e: 10**13 for e in entries[i : i + 1000]})
    p.execute()
    if order == "random":
        random.shuffle(entries)
    before = evalsha_ms(r)
    p = r.pipeline(transaction=False)
    for e in entries:
        p.evalsha(sha, 5, *KEYS, "lk2:leaver", "PUBLISH", "{b}:handoff:", "{b}:released", e)
    assert all(reply == -1 for reply in p.execute())
    # Every entry is gone: the last live one was at the tail and took the
    # dead ones before it.
    assert r.llen(KEYS[1]) == 0 and r.zcard(KEYS[2]) == 0
    return evalsha_ms(r) - before


def main():
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", d],
            stdout=subprocess.DEVNULL,
        )
        try:
            r = redis.Redis(port=port)
            for _ in range(200):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            shas = {"before": r.script_load(script(BEFORE)), "after": r.script_load(script(None))}
            print(f"before: {BEFORE}; after: the working tree; medians of {ROUNDS} interleaved rounds")
            print("| queue N (all leave) | order | before, ms of Redis | after, ms | after/before |")
            print("|---|---|---|---|---|")
            for n in (1000, 4096, 16384):
                for order in ("random", "arrival"):
                    ms = {"before": [], "after": []}
                    for _ in range(ROUNDS):
                        for name in ("before", "after"):
                            ms[name].append(herd(r, shas[name], n, order))
                    b, a = statistics.median(ms["before"]), statistics.median(ms["after"])
                    print(f"| {n} | {order} | {b:.1f} | {a:.1f} | {a / b:.2f} |")
        finally:
            server.terminate()
            server.wait()


main()
