#!/usr/bin/env bash
# What latchkey-node's completion queue (crates/latchkey-node/src/completions.rs)
# buys over napi-rs's per-call Promise: the package as shipped (A) against
# the same tree built with the feature `per-call-promises` (B), interleaved
# in one Node process (bench/node_queue.js), REPEAT processes in a row.
#
#   bench/node_queue.sh [ROUNDS] [CHUNK] [REPEAT] [MANY]   (default 20 400 3 16)
#
# Builds the native layer twice in release (B, then A, so target/ is left
# with the shipped build). As the bench does, redis-server (private, on a
# free port) is pinned to CPU 0 and Node to CPU 1 when there are two CPUs
# or more.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-20} CHUNK=${2:-400} REPEAT=${3:-3} MANY=${4:-16}
pkg=crates/latchkey-node
DIR=$(mktemp -d)
port=
cleanup() {
  [ -n "${port:-}" ] && redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
  rm -rf "$DIR"
}
trap cleanup EXIT
build() { # side [cargo args...]
  local side=$1
  shift
  mkdir -p "$DIR/$side"
  cp -r "$pkg/lib" "$pkg/package.json" "$DIR/$side/"
  cargo build --quiet --release -p latchkey-node "$@"
  cp target/release/liblatchkey_node.so "$DIR/$side/latchkey-node.linux-x64-gnu.node"
}
build per-call --features per-call-promises
build queue

server=() client=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  server=(taskset -c 0) client=(taskset -c 1)
fi
port=$((20000 + RANDOM % 20000))
"${server[@]}" redis-server --port "$port" --save '' --appendonly no --daemonize yes \
  --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" --dir "$DIR" >/dev/null
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
for _ in $(seq "$REPEAT"); do
  "${client[@]}" node bench/node_queue.js "$port" "$DIR/queue" "$DIR/per-call" \
    "$ROUNDS" "$CHUNK" "$MANY"
done
