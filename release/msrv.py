#!/usr/bin/env python3
"""The MSRV check: no crate that a published crate builds with asks for a
newer Rust than that crate declares (`rust-version`).

Only one Rust (1.95) can be installed on the build machine, so no build with
the declared version can run here; what can be checked is each dependency's own
declared `rust-version`, as `cargo metadata` resolves them from Cargo.lock.
Normal and build dependencies count, dev-dependencies do not (a user's build
never compiles them). A dependency that declares no `rust-version` cannot be
judged: it is counted and named, not failed. Clippy's `incompatible_msrv`
lint (on by default, denied by `-D warnings`) checks the workspace's own
code against the same number.

Usage: release/msrv.py PACKAGE...   (exit 1 with one line per violation)
"""
import json
import subprocess
import sys


def version_tuple(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main(roots):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", "x86_64-unknown-linux-gnu"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    by_name = {
        p["name"]: p for p in meta["packages"] if p["id"] in meta["workspace_members"]
    }
    failures, undeclared = [], set()
    for root in roots:
        if root not in by_name:
            sys.exit(f"msrv: {root} is not a package of this workspace")
        msrv = by_name[root].get("rust_version")
        if not msrv:
            failures.append(f"{root} declares no rust-version")
            continue
        seen, stack = set(), [by_name[root]["id"]]
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            for dep in nodes[pid]["deps"]:
                kinds = {k["kind"] for k in dep["dep_kinds"]}
                if kinds <= {"dev"}:
                    continue
                stack.append(dep["pkg"])
        for pid in sorted(seen):
            pkg = packages[pid]
            needs = pkg.get("rust_version")
            if needs is None:
                undeclared.add(pkg["name"])
            elif version_tuple(needs) > version_tuple(msrv):
                failures.append(
                    f"{root} (rust-version {msrv}) builds {pkg['name']} {pkg['version']}, "
                    f"which needs Rust {needs}"
                )
        print(f"msrv: {root}: {len(seen) - 1} crates built, rust-version {msrv}")
    if undeclared:
        print(
            f"msrv: {len(undeclared)} dependencies declare no rust-version "
            f"(not judged): {', '.join(sorted(undeclared))}"
        )
    for line in failures:
        print(f"msrv: FAILED: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
