#!/usr/bin/env bash
# What latchkey-node's former completion queue (one thread-safe function per
# JavaScript thread settling every Promise, src/completions.rs at QUEUE_REV)
# buys over napi-rs's per-call Promise (this tree's src/runtime.rs): the two
# interleaved in one Node process (bench/node_queue.js), REPEAT processes in
# a row. bench/RESULTS.md, "latchkey-node: the completion queue against
# per-call AsyncBlock".
#
#   bench/node_queue.sh [ROUNDS] [CHUNK] [REPEAT] [MANY]   (default 30 1000 5 16)
#   QUEUE_REV=<commit> bench/node_queue.sh ...              (default dfb848b)
#
# Builds the native layer twice in release: the queue from QUEUE_REV (in a
# temporary git worktree, sharing target/), then this tree's. As the bench
# does, redis-server (private, on a free port) is pinned to CPU 0 and Node to
# CPU 1 when there are two CPUs or more.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-30} CHUNK=${2:-1000} REPEAT=${3:-5} MANY=${4:-16}
QUEUE_REV=${QUEUE_REV:-dfb848b}
pkg=crates/latchkey-node
DIR=$(mktemp -d)
port=
cleanup() {
  [ -n "${port:-}" ] && redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
  git worktree remove --force "$DIR/queue-src" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
build() { # side source-root
  mkdir -p "$DIR/$1"
  cp -r "$2/$pkg/lib" "$2/$pkg/package.json" "$DIR/$1/"
  cargo build --quiet --release -p latchkey-node --manifest-path "$2/Cargo.toml" --target-dir "$PWD/target"
  cp target/release/liblatchkey_node.so "$DIR/$1/latchkey-node.linux-x64-gnu.node"
}
git worktree add --quiet --detach "$DIR/queue-src" "$QUEUE_REV"
build queue "$DIR/queue-src"
build per-call "$PWD"

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
