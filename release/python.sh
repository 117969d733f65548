#!/usr/bin/env bash
# The Python package's release: the sdist and the wheel to upload to PyPI, and
# the checks that PyPI and a user's pip would otherwise make after the upload.
#
#   release/python.sh wheel   build the sdist, then the wheel from that sdist,
#                             into target/wheels
#   release/python.sh check   the same, then twine, check-wheel-contents,
#                             auditwheel, abi3audit, the license files and the
#                             smoke test of the wheel installed without Rust
#   release/python.sh verify  those checks alone, on what target/wheels holds
#                             (no build: a second look, or a changed check)
#
# Needs cargo (the build), python3 with venv, redis-server (the smoke test)
# and PyPI, or a pip cache that has the pinned tools (release/python-tools.txt).
# Each step prints one line with its time; a step that fails prints its log's
# tail and, last, one line naming it. Works in target/release-py/: the tools'
# venv, the build's cargo target (kept, so that a second run reuses the
# compiled dependencies), the clean venvs, the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist=$root/target/wheels
work=$root/target/release-py
tools=$work/tools-venv
manifest=crates/latchkey-py/Cargo.toml

say() { echo "release/python.sh: $*" >&2; }

# Runs one named step with its output in a log: a run reads as one line a
# step, and a failure as the log's end and the step's name, last.
step() {
  local name=$1 started=$SECONDS
  shift
  mkdir -p "$work/logs"
  local log="$work/logs/$name.log"
  # A subshell with errexit of its own: a function called as an `if`
  # condition would run with errexit off, and a failure inside it would pass.
  local rc=0
  set +e
  (set -e; "$@") >"$log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then
    say "$name: ok ($((SECONDS - started)) s)"
  else
    tail -n 30 "$log" >&2
    say "FAILED: $name (after $((SECONDS - started)) s; the whole log: $log)"
    exit 1
  fi
}

install_tools() {
  if [ ! -x "$tools/bin/python" ]; then python3 -m venv "$tools"; fi
  "$tools/bin/python" -m pip install -q --disable-pip-version-check -r release/python-tools.txt
}

build_sdist() {
  # Only our files in target/wheels are replaced: the globs below then match one each.
  mkdir -p "$dist"
  rm -f "$dist"/latchkey_redis-*
  "$tools/bin/maturin" sdist -m "$manifest" -o "$dist"
}

# The wheel is built from the sdist, as pip would build it for a user without
# a matching wheel: a file missing from the sdist fails here, and the release
# build (the longest step) runs once, not once for the checkout and once for
# the sdist. The venv holds nothing but the build backend and zig, and pip is
# told to check that they satisfy the sdist's own build requirements.
# maturin finds zig as `python3 -m ziglang`, so that venv comes first on PATH.
# The dist profile: release without the debug info release keeps for the
# CLI's backtraces (maturin strips the extension anyway; this skips making it).
#
# The cargo target dir outlives a run, to keep the dependencies compiled; our
# own crates are cleaned first, as pip unpacks the sdist with the fixed mtimes
# maturin writes (2006): cargo, which judges path crates by mtime, would
# otherwise take last run's build for fresh and ship a stale extension.
build_wheel() {
  local venv=$work/build-venv log=$work/logs/wheel.log
  cargo clean -q --target-dir "$work/cargo" --profile dist \
    --target "$(rustc -vV | sed -n 's/^host: //p')" -p latchkey-redis -p latchkey-py
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    $(grep -E '^(maturin|ziglang)==' release/python-tools.txt)
  PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$work/cargo" \
    MATURIN_PEP517_ARGS="--profile dist --zig --compatibility manylinux2014" \
    "$venv/bin/python" -m pip wheel -v --disable-pip-version-check --no-cache-dir --no-index \
    --no-deps --no-build-isolation --check-build-dependencies -w "$dist" "$(sdist)"
  grep -q 'Compiling latchkey-py ' "$log" ||
    { echo "latchkey-py was not compiled in this build: the wheel's extension may be stale"; return 1; }
}

sdist() { echo "$dist"/latchkey_redis-*.tar.gz; }
wheel_file() { echo "$dist"/latchkey_redis-*.whl; }

# PyPI's platform tag: the wheel's name says manylinux2014 (glibc 2.17), and
# auditwheel finds nothing in the extension that needs a newer glibc or a
# library outside the manylinux set.
audit_platform() {
  local wheel name platforms tag
  wheel=$(wheel_file)
  # NAME-VERSION-PYTHON-ABI-PLATFORM.whl; PLATFORM lists its aliases, dot-separated.
  name=$(basename "$wheel" .whl)
  platforms=".${name##*-}."
  if [[ "$name" != *-cp39-abi3-* || "$platforms" != *.manylinux_2_17_x86_64.* || "$platforms" != *.manylinux2014_x86_64.* ]]; then
    echo "the wheel's tags are not cp39-abi3 manylinux_2_17 (manylinux2014) x86_64: $name.whl"
    return 1
  fi
  "$tools/bin/auditwheel" show "$wheel" >"$work/auditwheel.txt"
  cat "$work/auditwheel.txt"
  tag=$(tr -s '\n ' ' ' <"$work/auditwheel.txt" | grep -oE 'consistent with the following platform tag: "manylinux_2_[0-9]+_x86_64"' | grep -oE '2_[0-9]+' || true)
  if [ -z "$tag" ] || [ "${tag#2_}" -gt 17 ]; then
    echo "auditwheel does not find the wheel manylinux_2_17 x86_64 compatible (found: ${tag:-none})"
    return 1
  fi
}

# The installed wheel, as a user gets it: a clean venv, only its bin and
# redis-server on PATH (no cargo, no rustc), nothing from an index.
smoke() {
  local out=$work/smoke
  rm -rf "$out"
  mkdir -p "$out/bin"
  ln -s "$(command -v redis-server)" "$out/bin/redis-server"
  python3 -m venv "$out/venv"
  env -i HOME="$HOME" PATH="$out/venv/bin:$out/bin" \
    "$out/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index "$(wheel_file)"
  env -i HOME="$HOME" PATH="$out/venv/bin:$out/bin" \
    "$out/venv/bin/python" crates/latchkey-py/tests/smoke/wheel_smoke.py
}

sizes() {
  local f
  for f in "$(sdist)" "$(wheel_file)"; do
    say "$(basename "$f"): $(numfmt --to=iec --suffix=B "$(stat -c %s "$f")")"
  done
}

build() {
  step tools install_tools
  step sdist build_sdist
  say "building the wheel from the sdist (a release build: minutes; log: $work/logs/wheel.log)"
  step wheel build_wheel
}

verify() {
  local f
  for f in "$(sdist)" "$(wheel_file)"; do
    [ -f "$f" ] || { say "FAILED: no single $(basename "$f") in target/wheels (release/python.sh wheel makes them)"; exit 1; }
  done
  step twine "$tools/bin/twine" check --strict "$(sdist)" "$(wheel_file)"
  # --package: every file of the Python half (stubs, py.typed) is in the
  # wheel (W101). W102 (a file not in that tree) is off: the extension is
  # built, never in the tree; the default checks still catch stray files.
  step check-wheel-contents "$tools/bin/check-wheel-contents" \
    --package crates/latchkey-py/python/latchkey --ignore W102 "$(wheel_file)"
  step auditwheel audit_platform
  step abi3audit "$tools/bin/abi3audit" --strict --summary "$(wheel_file)"
  step licenses "$tools/bin/python" release/python_dist_licenses.py "$(sdist)" "$(wheel_file)" "$root"
  command -v redis-server >/dev/null || { say "FAILED: smoke (no redis-server on PATH)"; exit 1; }
  step smoke smoke
}

started=$SECONDS
case "${1:-}" in
  wheel) build ;;
  check) build; verify ;;
  verify) step tools install_tools; verify ;;
  *) echo "usage: release/python.sh wheel | check | verify" >&2; exit 2 ;;
esac
sizes
say "done in $((SECONDS - started)) s"
