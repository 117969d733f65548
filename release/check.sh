#!/usr/bin/env bash
# `./dev release-check`: everything a registry would refuse or warn about,
# checked here before anything is published, and what is shipped built and
# tried as a user gets it:
#
#   1. the manifests: one version everywhere, no placeholder;
#   2. the native build (release/native.sh): the CLI and the Node addon,
#      optimised, stripped, for glibc 2.17;
#   3. the crates (release/crates.sh): MSRV, cargo-deny, docs as docs.rs
#      builds them, cargo package (verified) and publish --dry-run, semver;
#   4. the CLI tarball (release/dist.sh): made, verified, extracted and run;
#   5. the Python sdist and wheel (release/python.sh): twine,
#      check-wheel-contents, auditwheel, abi3audit, installed without Rust;
#   6. the Node packages (release/node.sh): publint, attw, installed
#      without Rust or install scripts.
#
# Tools come from the registries, pinned: cargo-deny and cargo-semver-checks
# built once into target/release-tools; cargo-zigbuild and zig, twine and
# the wheel checkers from PyPI into target/ venvs; publint and attw from
# npm. Each step prints its time, and the whole its total.
set -euo pipefail
cd "$(dirname "$0")/.."
source release/native.sh

DENY_VERSION="0.20.2"
SEMVER_CHECKS_VERSION="0.51.0"
TOOLS="$PWD/target/release-tools"

# cargo install builds them from source (crates.io has no binaries): a few
# minutes each, once per target/ folder.
release_tools() {
  if [ ! -x "$TOOLS/bin/cargo-deny" ] || [ "$("$TOOLS/bin/cargo-deny" --version)" != "cargo-deny $DENY_VERSION" ]; then
    cargo install --quiet --locked --root "$TOOLS" "cargo-deny@$DENY_VERSION"
  fi
  if [ ! -x "$TOOLS/bin/cargo-semver-checks" ] ||
    ! "$TOOLS/bin/cargo-semver-checks" --version | grep -qx "cargo-semver-checks $SEMVER_CHECKS_VERSION"; then
    cargo install --quiet --locked --root "$TOOLS" "cargo-semver-checks@$SEMVER_CHECKS_VERSION"
  fi
}

started=$SECONDS
times=()
timed() {
  local what="$1" t=$SECONDS
  shift
  echo "release: ==== $what" >&2
  "$@" || { echo "release: FAILED in $what" >&2; exit 1; }
  times+=("$what: $((SECONDS - t)) s")
}

timed "the tools" release_tools
export PATH="$TOOLS/bin:$PATH"
timed "the manifests" python3 release/manifests.py
bin_dir=""
native() { bin_dir="$(build_native)"; }
timed "the native build" native
timed "the crates" release/crates.sh
timed "the CLI tarball" release/dist.sh "$bin_dir"
timed "the Python packages" release/python.sh check
# The smoke test's exclusion with the CLI uses the CLI that is shipped.
timed "the Node packages" env LATCHKEY_BIN="$bin_dir/latchkey" release/node.sh check "$bin_dir/liblatchkey_node.so"
echo "release: ==== passed in $((SECONDS - started)) s" >&2
for line in "${times[@]}"; do echo "release:   $line" >&2; done
