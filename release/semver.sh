#!/usr/bin/env bash
# The library's API against the last release (release/baseline), with
# cargo-semver-checks over rustdoc's JSON of both.
#
#   release/semver.sh
#
# The report lists every change a semver-compatible release could not make
# (it is run as if the next release were a patch release, the strictest
# reading) into target/semver/report.txt; the CHANGELOG must name each.
# The check fails when the API broke and the workspace's version does not
# say so (below 1.0 a breaking release raises the minor version, from 1.0
# the major). The rustdoc JSON is made here rather than from
# `--baseline-rev`, because the baseline published the crate under another
# package name (`latchkey`); the baseline's is kept, keyed by its commit.
set -euo pipefail
cd "$(dirname "$0")/.."

read -r base_version base_commit < <(grep -v '^#' release/baseline | grep .)
out="$PWD/target/semver"
mkdir -p "$out"

# rustdoc's JSON output is unstable: RUSTC_BOOTSTRAP lets the stable
# toolchain make it, as cargo-semver-checks itself does. Its own target
# folder, so the flag does not rebuild the workspace's.
rustdoc_json() { # MANIFEST PACKAGE TARGET_DIR
  RUSTC_BOOTSTRAP=1 cargo rustdoc --quiet --locked --lib --manifest-path "$1" -p "$2" --target-dir "$3" \
    -- -Z unstable-options --output-format json
}

baseline="$out/baseline-$base_commit.json"
if [ ! -s "$baseline" ]; then
  # A shallow clone (as some CI systems make) lacks the baseline: deepen it.
  if ! git cat-file -e "$base_commit^{commit}" 2>/dev/null &&
    [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    git fetch -q --unshallow || true
  fi
  if ! git cat-file -e "$base_commit^{commit}" 2>/dev/null; then
    echo "semver: the baseline commit $base_commit ($base_version) is not in this clone" >&2
    exit 1
  fi
  src="$out/baseline-src"
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$base_commit" | tar -x -C "$src"
  rustdoc_json "$src/crates/latchkey/Cargo.toml" latchkey "$out/target"
  mv "$out/target/doc/latchkey.json" "$baseline"
  rm -rf "$src"
fi
rustdoc_json crates/latchkey/Cargo.toml latchkey-redis "$out/target"
current="$out/current.json"
mv "$out/target/doc/latchkey.json" "$current"

version="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["crate_version"])' "$current")"
set +e
cargo semver-checks --baseline-rustdoc "$baseline" --current-rustdoc "$current" \
  --release-type patch --color never >"$out/report.txt" 2>&1
broke=$?
set -e
# Exit 1 with a list: breaking changes; anything else is the tool failing.
if [ "$broke" -ne 0 ] && ! grep -q "^--- failure" "$out/report.txt"; then
  cat "$out/report.txt" >&2
  echo "semver: cargo-semver-checks failed (above)" >&2
  exit 1
fi
if [ "$broke" -eq 0 ]; then
  echo "semver: no breaking change since $base_version ($version now)"
  exit 0
fi
lints="$(grep -c '^--- failure' "$out/report.txt" || true)"
echo "semver: $lints kinds of breaking change since $base_version: target/semver/report.txt"
python3 - "$base_version" "$version" <<'PY'
import sys
base, now = (tuple(int(p) for p in v.split(".")) for v in sys.argv[1:])
breaking = now[0] > base[0] if base[0] >= 1 else (now[0] > 0 or now[1] > base[1])
if not breaking:
    sys.exit(f"semver: FAILED: the API broke but {sys.argv[2]} is not a breaking release after {sys.argv[1]}")
print(f"semver: {sys.argv[2]} is a breaking release after {sys.argv[1]}: allowed")
PY
