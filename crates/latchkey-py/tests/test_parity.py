"""Python is the same library: every public method of a Rust recipe or
guard has a Python counterpart, or a reviewed reason below. A method added
in Rust fails this test until it is bound or listed."""

import os
import re

import latchkey

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "latchkey", "src")

# Rust files (or folders) of each type, and the Python classes that bind it.
BOUND = {
    "primitives/lock": [latchkey.Lock, latchkey.LockGuard],
    "primitives/multi": [latchkey.MultiLock, latchkey.MultiGuard],
    "primitives/semaphore": [latchkey.Semaphore, latchkey.Permit],
    "primitives/rwlock": [latchkey.RwLock, latchkey.Permit],
    "primitives/election": [latchkey.Election, latchkey.Leadership, latchkey.Observer],
    "primitives/latch.rs": [latchkey.Latch],
    "primitives/barrier.rs": [latchkey.Barrier],
    "primitives/fence.rs": [latchkey.FencedResource],
    "primitives/signal": [latchkey.Listener],
    "primitives/guard.rs": [latchkey.LockGuard, latchkey.Lock],
    "client/mod.rs": [latchkey.Client],
    "client/signals.rs": [latchkey.Client],
    "client/control.rs": [latchkey.Client],
}

# One Python call for a Rust family: `acquire(timeout=)` is `acquire`,
# `acquire_timeout` and `acquire_until`; keywords of the factory are the
# builder's `with_*`.
SAME_AS = {
    "raise": "raise_to",  # `raise` is a Python keyword
    "with_watchdog": "watchdog=", "with_fencing": "fencing=", "with_asking": "ask=",
    "with_max_hold": "max_hold=", "with_stop_margin": "stop_margin=", "with_caching": "cached=",
    "with_hold_at_least": "hold_at_least=",
    "fair": "fair=", "listen_patterns": "listen(patterns=True)", "wait_any": "wait_any",
}

# Deliberately not in Python, and why (reviewed).
EXCEPTIONS = {
    "key": "the Redis key: the protocol's business (docs/protocol.md), not a user's",
    "as_any": "how a binding reaches one kind's calls; Python has a class per kind",
    "confirm": "a supervisor's proof before it starts work (the CLI's); extend() proves and renews in one call",
    "readers_key": "as key", "writer_key": "as key",
    "lost_signal": "the `lost` event is Python's handle on it",
    "issued_fencing_tokens": "fencing_tokens() answers without a round trip once issued",
    "extend_token": "by-token calls are the CLI's and the doors' (`latchkey extend`, `mcp`, `serve`), for a process that holds no guard",
    "release_token": "as extend_token", "resign_token": "as extend_token",
    "fair_with_lease": "a fair waiter's lease is the library's default here",
    "is_fair": "a lock is made fair by its caller, who knows",
    "idle": "the `cached=` it was made with", "is_kept": "a cached lock's internals; give_back() acts on it",
    "took_from_redis": "a cached guard's bookkeeping, for the bench",
    "with_replicas": "replica confirmation: not yet bound (Sentinel users: the CLI's --replicas)",
    "with_replicas_within": "as with_replicas", "with_renewal_every": "the watchdog's default cadence",
    "one_round_trip": "how the library takes several locks: not a caller's decision",
    "into_stream": "`Observer.next` in a loop; Rust streams have no Python form",
    "value_lossy": "Python decodes bytes itself",
    "recv_all": "iterate the listener", "recv_timeout": "recv(timeout=)", "is_subscribed": "the `subscribed` property",
    "builder": "the constructor's keywords", "builder_sentinel": "sentinels=, master=",
    "connection": "a raw Redis connection: use redis-py", "command_timeout": "the constructor's keyword",
    "server": "the URL is in repr()",
    "inspect": "inspection is the CLI's (`latchkey status`, `list`, `top`)",
    "list_all": "as inspect", "describe": "as inspect", "lock_waiters": "as inspect",
    "wait_all": "wait_any in a loop", "wait_pattern": "listen(patterns=True)", "waiters": "as inspect",
    "acquire_many_timeout": "acquire_many(timeout=)", "acquire_many_until": "acquire_many(timeout=)",
    "acquire_until": "a read-write lock's is read(timeout=) and write(timeout=)",
}

def rust_methods(path):
    full = os.path.join(SRC, path)
    files = [full] if full.endswith(".rs") else [
        os.path.join(d, f) for d, _, fs in os.walk(full) for f in fs if f.endswith(".rs")]
    names = set()
    for f in files:
        text = open(f).read()
        names |= set(re.findall(r"^\s*pub (?:async )?fn (\w+)", text, re.M))
        if path.endswith("guard.rs"):
            names |= set(re.findall(r"^    fn (\w+)", text, re.M))
    return names


STUBS = os.path.join(os.path.dirname(__file__), "..", "python", "latchkey", "_native.pyi")


def recipe_keywords():
    """The keywords of the lease recipes (`**options`), as the stubs'
    `_LeaseOptions` and `_LockOptions` spell them."""
    text = open(STUBS).read()
    keys = set()
    for body in re.findall(r"^class _(?:Lease|Lock)Options\(.*?\):\n((?:    .*\n)+)", text, re.M):
        keys |= set(re.findall(r"^    (\w+): ", body, re.M))
    return keys


def python_has(name, classes):
    base = re.sub(r"_(timeout|until)$", "", name)
    if any(hasattr(c, n) for c in classes for n in (name, base)):
        return True
    if name in SAME_AS:
        alias = SAME_AS[name].split("(")[0].rstrip("=")
        return any(hasattr(c, alias) for c in classes + [latchkey.Client, latchkey.Lock]) or \
            alias in recipe_keywords()
    return False


def test_every_rust_method_has_a_python_counterpart():
    missing = []
    for path, classes in BOUND.items():
        for name in sorted(rust_methods(path)):
            if name in EXCEPTIONS or name in ("new", "connect", "release", "name", "ttl"):
                continue
            if not python_has(name, classes + [latchkey.LockGuard]):
                missing.append(f"{path}: {name}")
    assert not missing, "Rust methods with no Python counterpart (bind them or list why):\n" + "\n".join(missing)


def test_every_exception_is_still_a_rust_method():
    every = set().union(*(rust_methods(p) for p in BOUND))
    stale = sorted(n for n in EXCEPTIONS if n not in every)
    assert not stale, f"listed but gone from Rust: {stale}"


def test_every_recipe_keyword_of_the_stubs_is_taken(server):
    """The stubs' keywords are what the recipes take: each is accepted
    (and an unknown one refused, as Python refuses one)."""
    import pytest
    client = latchkey.Client(server.url)
    values = {"watchdog": True, "fencing": False, "ask": False, "fair": False}
    keys = recipe_keywords()
    assert {"watchdog", "fencing", "max_hold", "ask", "stop_margin", "hold_at_least", "fair", "cached"} <= keys
    for key in sorted(keys):
        client.lock("parity", 10.0, **{key: values.get(key, 1.0)})
        if key not in ("fair", "cached"):
            client.semaphore("parity", 2, 10.0, **{key: values.get(key, 1.0)})
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        client.rwlock("parity", 10.0, bogus=True)
    with pytest.raises(TypeError, match="argument 'fair'"):
        client.lock("parity", 10.0, fair="yes")
