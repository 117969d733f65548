#!/usr/bin/env bash
# What latchkey-node's thread hop costs: the package as shipped against a
# variant whose calls run on the JavaScript thread (bench/node_thread.patch:
# no hop, but then the watchdog renews only while a call runs; the reason
# the package does not ship it, docs/node.md "The event loop"), and
# node-redlock, interleaved in one Node process (bench/node_thread.js).
#
#   bench/peers/install.sh           (node-redlock and ioredis)
#   bench/node_thread.sh [ROUNDS] [CHUNK] [REPEAT]   (default 30 400 3)
#
# Builds the native layer twice in release (the variant, then the shipped
# one again, so target/ is left as it was), with the patch applied to the
# working tree only while the variant builds. As the bench does, redis-server
# is pinned to CPU 0 and Node to CPU 1 when there are two CPUs or more.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-30} CHUNK=${2:-400} REPEAT=${3:-3}
pkg=crates/latchkey-node
mods=bench/peers/node/node_modules
if [ ! -d "$mods/@sesamecare-oss/redlock" ] || [ ! -d "$mods/ioredis" ]; then
  echo "node_thread.sh: node-redlock is not installed; run bench/peers/install.sh first" >&2
  exit 2
fi
git diff --quiet -- "$pkg/src/runtime.rs" ||
  { echo "node_thread.sh: $pkg/src/runtime.rs has local changes; commit or stash them" >&2; exit 2; }
DIR=$(mktemp -d)
patched=0 port=
cleanup() {
  [ "$patched" = 1 ] && git checkout --quiet -- "$pkg/src/runtime.rs"
  [ -n "${port:-}" ] && redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
  rm -rf "$DIR"
}
trap cleanup EXIT
build() { # side
  mkdir -p "$DIR/$1"
  cp -r "$pkg/lib" "$pkg/package.json" "$DIR/$1/"
  # The variant leaves the per-call Promise unused: its warnings go to a log.
  cargo build --quiet --release -p latchkey-node 2>"$DIR/build-$1.log" ||
    { cat "$DIR/build-$1.log" >&2; exit 1; }
  cp target/release/liblatchkey_node.so "$DIR/$1/latchkey-node.linux-x64-gnu.node"
}
git apply bench/node_thread.patch && patched=1
build on-js-thread
git checkout --quiet -- "$pkg/src/runtime.rs" && patched=0
build shipped

server=() client=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  server=(taskset -c 0) client=(taskset -c 1)
fi
port=$((20000 + RANDOM % 20000))
"${server[@]}" redis-server --port "$port" --save '' --appendonly no --daemonize yes \
  --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" --dir "$DIR" >/dev/null
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
for _ in $(seq "$REPEAT"); do
  "${client[@]}" node bench/node_thread.js "$port" "$DIR/shipped" "$DIR/on-js-thread" \
    "$PWD/$mods" "$ROUNDS" "$CHUNK"
done
