#!/usr/bin/env bash
# Installs the peer libraries the benchmark compares latchkey with, into this
# throwaway folder (git-ignored), with their own package managers:
#
#   venv/          python3 -m venv, then pip: redis (its Lock), python-redis-lock,
#                  pottery (its Redlock), and latchkey's own Python package
#                  (crates/latchkey-py, built by maturin: a few minutes the
#                  first time; rebuilt when its sources change)
#   node/          npm: @sesamecare-oss/redlock, redlock 5.0.0-beta.2 (the `redlock`
#                  package most users install, under the alias `redlock5`), ioredis,
#                  redis-semaphore, redis-leader (election),
#                  and latchkey's own Node package (crates/latchkey-node, its native
#                  layer built in release by cargo, installed as node_modules/latchkey-redis;
#                  rebuilt when its sources change)
#
# Usage: bench/peers/install.sh        (idempotent; re-running is cheap)
#
# Each half is optional: when Python or Node (or the network) is missing, that
# half is skipped with a message and the benchmark marks those peers as not
# installed. Exit status: 0 when at least one half is usable.
set -uo pipefail
cd "$(dirname "$0")"

ok=0

if command -v python3 >/dev/null 2>&1; then
  if [ ! -x venv/bin/python ]; then
    python3 -m venv venv || rm -rf venv
  fi
  if [ -x venv/bin/python ] &&
    venv/bin/python -m pip install --quiet --disable-pip-version-check \
      'redis>=5' 'python-redis-lock>=4'; then
    venv/bin/python -c 'import redis, redis_lock' && touch venv/.installed && ok=1
  else
    echo "install.sh: pip could not install redis / python-redis-lock; Python peers skipped" >&2
  fi
  if [ -x venv/bin/python ]; then
    venv/bin/python -m pip install --quiet --disable-pip-version-check 'pottery>=3' ||
      echo "install.sh: pip could not install pottery; that peer is skipped" >&2
    # latchkey-py from this checkout, rebuilt when any Rust or Python source
    # of the package or the library changed since the last install.
    stamp=venv/.latchkey-py
    if [ ! -f "$stamp" ] || [ -n "$(find ../../crates/latchkey/src ../../crates/latchkey-py -newer "$stamp" -type f -print -quit 2>/dev/null)" ]; then
      if venv/bin/python -m pip install --quiet --disable-pip-version-check ../../crates/latchkey-py; then
        touch "$stamp"
      else
        echo "install.sh: could not build crates/latchkey-py; that peer is skipped" >&2
      fi
    fi
  fi
else
  echo "install.sh: python3 not found; Python peers skipped" >&2
fi

if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  mkdir -p node
  if [ ! -f node/package.json ]; then
    echo '{"name":"latchkey-bench-peers","private":true}' >node/package.json
  fi
  # latchkey-node from this checkout: the package's files and a release
  # build of its native layer (the tests' debug build stays where it is),
  # in node/latchkey-redis, installed by npm below as a folder dependency
  # (npm would prune a copy put straight into node_modules).
  stamp=node/.latchkey-node
  pkg=../../crates/latchkey-node
  if [ ! -f "$stamp" ] || [ -n "$(find ../../crates/latchkey/src $pkg/src $pkg/lib -newer "$stamp" -type f -print -quit 2>/dev/null)" ]; then
    dest=node/latchkey-redis
    # cargo puts the library under CARGO_TARGET_DIR when that is set.
    target="${CARGO_TARGET_DIR:-../../target}"
    if cargo build --quiet --release --manifest-path ../../Cargo.toml -p latchkey-node; then
      rm -rf "$dest" && mkdir -p "$dest" &&
        cp -r "$pkg/lib" "$pkg/scripts" "$pkg/package.json" "$dest/" &&
        cp "$target/release/liblatchkey_node.so" "$dest/latchkey-node.linux-x64-gnu.node" &&
        touch "$stamp"
    else
      echo "install.sh: could not build crates/latchkey-node; that peer is skipped" >&2
    fi
  fi
  own=()
  if [ -f node/latchkey-redis/package.json ]; then own=("$PWD/node/latchkey-redis"); fi
  if npm install --prefix node --no-audit --no-fund --silent "${own[@]}" \
    '@sesamecare-oss/redlock@^1' 'redlock5@npm:redlock@5.0.0-beta.2' 'ioredis@>=5' 'redis-semaphore@^5' 'redis-leader@0.1.0'; then
    touch node/.installed && ok=1
  else
    echo "install.sh: npm could not install @sesamecare-oss/redlock / ioredis; Node peers skipped" >&2
  fi
else
  echo "install.sh: node/npm not found; Node peers skipped" >&2
fi

[ "$ok" = 1 ]
