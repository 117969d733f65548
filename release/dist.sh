#!/usr/bin/env bash
# `./dev dist`: the CLI as an operator downloads it.
#
#   release/dist.sh [BIN_DIR]
#
# Makes target/dist/latchkey-VERSION-x86_64-unknown-linux-gnu.tar.gz (the
# stripped `latchkey`, LICENSE-MIT, LICENSE-APACHE, README.md, docs/cli.md
# under one folder of the same name) and its .sha256 (sha256sum's format:
# `sha256sum -c` verifies it), then checks what it made: the checksum, and
# that the extracted binary runs `latchkey --version` and `latchkey demo`
# with nothing on the PATH but redis-server. BIN_DIR is a folder holding a
# `latchkey` that release/native.sh built; without it, it builds one.
#
# The archive is reproducible: entries sorted, owned by 0:0, dated at the
# last commit, gzip without a timestamp.
set -euo pipefail
cd "$(dirname "$0")/.."
source release/native.sh

bin_dir="${1:-}"
if [ -z "$bin_dir" ]; then bin_dir="$(build_native)"; fi
version="$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "latchkey-cli"))')"
name="latchkey-$version-$NATIVE_TRIPLE"
out="$PWD/target/dist"
stage="$out/stage"
rm -rf "$stage" "$out/$name.tar.gz" "$out/$name.tar.gz.sha256"
mkdir -p "$stage/$name"
install -m 755 "$bin_dir/latchkey" "$stage/$name/latchkey"
install -m 644 LICENSE-MIT LICENSE-APACHE "$stage/$name/"
install -m 644 crates/latchkey-cli/README.md "$stage/$name/README.md"
install -m 644 docs/cli.md "$stage/$name/cli.md"
epoch="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
tar -C "$stage" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -cf - "$name" |
  gzip -9n >"$out/$name.tar.gz"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
rm -rf "$stage"

# What an operator does with it: verify, extract, run.
check="$out/check"
rm -rf "$check"
mkdir -p "$check/path"
(cd "$out" && sha256sum --quiet -c "$name.tar.gz.sha256") ||
  { echo "dist: FAILED: the checksum does not match the archive" >&2; exit 1; }
tar -C "$check" -xzf "$out/$name.tar.gz"
exe="$check/$name/latchkey"
ln -s "$(command -v redis-server)" "$check/path/redis-server"
if file "$exe" | grep -q 'not stripped'; then
  echo "dist: FAILED: $exe is not stripped" >&2; exit 1
fi
glibc="$(glibc_needed "$exe")"
if [ "$(printf '%s\n%s\n' "$glibc" "$NATIVE_GLIBC" | sort -V | tail -n 1)" != "$NATIVE_GLIBC" ]; then
  echo "dist: FAILED: the binary needs glibc $glibc, above $NATIVE_GLIBC" >&2; exit 1
fi
said="$(env -i HOME="$HOME" PATH="$check/path" "$exe" --version)"
[ "$said" = "latchkey $version" ] ||
  { echo "dist: FAILED: --version said '$said', not 'latchkey $version'" >&2; exit 1; }
env -i HOME="$HOME" PATH="$check/path" "$exe" demo --workers 3 --increments 20 >"$check/demo.log" 2>&1 ||
  { echo "dist: FAILED: latchkey demo (its output: $check/demo.log)" >&2; tail -n 5 "$check/demo.log" >&2; exit 1; }
rm -rf "$check"
echo "dist: $out/$name.tar.gz ($(du -k "$out/$name.tar.gz" | cut -f1) KiB; binary $(du -k "$bin_dir/latchkey" | cut -f1) KiB, needs glibc $glibc or later)"
echo "dist: $out/$name.tar.gz.sha256: $(cut -d' ' -f1 "$out/$name.tar.gz.sha256")"
