#!/usr/bin/env bash
# Client instructions per cycle, counted by callgrind (deterministic, unlike
# times on a shared machine): each workload is run for N and 3N cycles and
# the difference is divided by 2N, so start-up and warm-up cancel out.
#
#   cargo build --release -p latchkey-bench
#   bench/profile.sh [N] [WORKLOAD...]     (default N=300; all workloads)
#
# Counts still move by a few per cent from run to run (which worker thread
# a task lands on decides how often threads park and wake): each workload
# is counted REPEAT times (default 3); printed: the median, then every count.
#
# Workloads: latchkey raw-same rslock (the `uncontended` scenario's
# `--instructions` probes), redlock5 rslock5 mk-try mk-acquire mk-named mk-raw
# mk-raw-managed (see
# crates/latchkey-bench/src/profile.rs). With KEEP=DIR, both runs' callgrind
# output is kept as DIR/callgrind.WORKLOAD.{1,3}.out; bench/cgdiff.py turns
# them into per-cycle costs by function.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300}
shift || true
WORKLOADS=${*:-latchkey raw-same rslock redlock5 rslock5 mk-try mk-acquire mk-named mk-raw mk-raw-managed}
BIN=${BIN:-target/release/latchkey-bench}
DIR=$(mktemp -d)
trap 'for p in "$DIR"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done; sleep 0.2; rm -rf "$DIR"' EXIT
BASE=$((20000 + RANDOM % 20000))
PORTS=""
for i in 0 1 2 3 4; do
  port=$((BASE + i))
  redis-server --port "$port" --save '' --appendonly no --daemonize yes \
    --pidfile "$DIR/$i.pid" --logfile "$DIR/$i.log" --dir "$DIR" >/dev/null
  PORTS="${PORTS:+$PORTS,}$port"
done
sleep 0.3
count() { # workload cycles outfile
  local args
  case $1 in
    latchkey|raw-same|raw-setnx|rslock) args=(--instructions "$1" "$BASE" "$2") ;;
    *) args=(--profile "$1" "$PORTS" "$2") ;;
  esac
  valgrind --tool=callgrind --callgrind-out-file="$3" "$BIN" "${args[@]}" 2>&1 |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
for w in $WORKLOADS; do
  out1=/dev/null out3=/dev/null
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"; out1="$KEEP/callgrind.$w.1.out"; out3="$KEEP/callgrind.$w.3.out"
  fi
  counts=()
  for _ in $(seq "${REPEAT:-3}"); do
    a=$(count "$w" "$N" "$out1")
    b=$(count "$w" $((3 * N)) "$out3")
    counts+=($(( (b - a) / (2 * N) )))
  done
  sorted=($(printf '%s\n' "${counts[@]}" | sort -n))
  echo "$w ${sorted[$(( ${#sorted[@]} / 2 ))]} (${counts[*]})"
done
