#!/usr/bin/env bash
# The crates' part of `./dev release-check`: what crates.io and docs.rs
# would refuse or warn about, checked before anything is published.
#
#   release/crates.sh
#
# Each step prints its time; the first that fails stops the check with one
# line naming it. Needs cargo-deny and cargo-semver-checks (installed by
# `./dev release-check` into target/release-tools when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# Published to crates.io, in dependency order (the CLI needs the other three).
PUBLISHED=(latchkey-redis latchkey-testkit latchkey-torture latchkey-cli)
pkgs=()
for p in "${PUBLISHED[@]}"; do pkgs+=(-p "$p"); done

step() {
  local what="$1" started=$SECONDS
  shift
  echo "release: ---- $what" >&2
  "$@" || { echo "release: FAILED: $what" >&2; exit 1; }
  echo "release: $what: ok in $((SECONDS - started)) s" >&2
}

# No dependency asks for a newer Rust than the crates declare.
step "MSRV (every dependency's rust-version)" python3 release/msrv.py "${PUBLISHED[@]}"

# Licenses, bans, sources (deny.toml); advisories need a database this
# machine cannot fetch.
step "cargo deny (licenses, bans, sources)" cargo deny --locked check --hide-inclusion-graph licenses bans sources

# The documentation as docs.rs builds it: `--cfg docsrs`, every feature;
# a broken intra-doc link or a bad code block fails. docs.rs documents
# libraries only: the CLI's doc comments are its --help text.
step "docs (--cfg docsrs, -D warnings)" env RUSTDOCFLAGS="--cfg docsrs -D warnings" \
  cargo doc --quiet --locked --no-deps --all-features -p latchkey-redis -p latchkey-testkit -p latchkey-torture

# cargo extracts each packaged crate into the cargo home, under
# registry/src/-<hash of the overlay registry's path>/<name>-<version>, and
# builds from an extraction already there: a checkout at a path packaged
# before (CI clones to the same path each time) would verify the CLI against
# an earlier commit's library of the same version. Those go first.
forget_extracted() {
  local home="${CARGO_HOME:-$HOME/.cargo}" p v
  while read -r p v; do
    rm -rf "$home"/registry/src/-*/"$p-$v"
  done < <(cargo metadata --locked --no-deps --format-version 1 |
    python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] in sys.argv[1:]:
        print(p["name"], p["version"])' "${PUBLISHED[@]}")
}
step "forget earlier extractions of these crates" forget_extracted

# Each .crate made and built on its own, as crates.io will have it: the
# workspace's unpublished crates replaced by the packaged ones (cargo
# packages several crates in dependency order for this). The dev profile
# of the workspace, so the dependencies' builds of the tests are reused.
step "cargo package (verified)" cargo package --quiet --locked "${pkgs[@]}" \
  --config 'profile.dev.debug="line-tables-only"' --config 'profile.dev.package."*".debug=false'

# What `cargo publish` checks before uploading (metadata, dependencies on
# the registry, the overlay of the crates published together); the build
# was verified above.
step "cargo publish --dry-run" cargo publish --quiet --locked --dry-run --no-verify "${pkgs[@]}"

# Breaking changes of the library's API since the last release, and a
# version that says so.
step "semver (the library against the last release)" release/semver.sh

for p in "${PUBLISHED[@]}"; do
  f="$(ls target/package/"$p"-*.crate 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$f" ] && echo "release: $(basename "$f"): $(du -k "$f" | cut -f1) KiB" >&2
done
