#!/usr/bin/env bash
# The Node package's release check: makes the two npm tarballs that would be
# published (latchkey-redis, pure JavaScript, and latchkey-redis-linux-x64-gnu,
# the stripped native layer only), lints them as the registry's users'
# tools would, and installs them where a user would: a scratch project with
# no Rust on the PATH and no install script to run.
#
#   release/node.sh check [ADDON]
#   release/node.sh pack ARTIFACTS
#
# check: this machine's platform, linux-x64-gnu, packed and checked.
#   ADDON (or $LATCHKEY_NODE_ADDON): liblatchkey_node.so built with the dist
#   profile (stripped); when neither is given, this builds it:
#   cargo build --profile dist -p latchkey-node.
#   $LATCHKEY_BIN: the CLI the exclusion check runs (default target/debug/latchkey).
# pack: the release of every platform in package.json's napi.targets, from
#   ARTIFACTS, a folder holding latchkey-node.<platform>.node for each (what
#   `napi build --platform --profile dist` makes on each platform's machine):
#   the tarballs only; publish the platform packages before the main one.
# Writes into ${CARGO_TARGET_DIR:-target}/node-release: the .tgz files
# (what `npm publish` would upload) and the scratch projects.
# Nothing is published: the registry is only read for the dev dependencies
# (npm ci), the installs run --offline from the tarballs.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG=$ROOT/crates/latchkey-node
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$TARGET/node-release
PLATFORM=linux-x64-gnu # the only platform this machine builds and checks
NODE_FILE=latchkey-node.$PLATFORM.node
NAPI=$PKG/node_modules/.bin/napi

die() { echo "release/node.sh: $*" >&2; exit 1; }

# Runs one step and prints its time, so the check's cost is visible in CI logs.
step() {
  local name=$1 start end
  shift
  echo "== $name"
  start=$(date +%s%N)
  "$@"
  end=$(date +%s%N)
  printf '== %s: %d.%02d s\n' "$name" $(((end - start) / 1000000000)) $(((end - start) / 10000000 % 100))
}

# `node -p` over a JSON file: the checks read package.json and npm's output.
json() { node -p "const j = require('$1'); $2"; }

dev_dependencies() {
  # napi, publint and attw at the versions the lock file pins. npm ci
  # reinstalls everything (20 s); node_modules' own record, newer than both
  # manifests, means an install from this lock file is there already.
  local record=$PKG/node_modules/.package-lock.json
  if [ "$record" -nt "$PKG/package-lock.json" ] && [ "$record" -nt "$PKG/package.json" ]; then
    echo "node_modules is up to date with package-lock.json"
    return
  fi
  (cd "$PKG" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
}

# The addon given, or the dist build made here. The dist profile strips it;
# an addon built otherwise (release keeps 80 MB of debug info) is refused
# rather than stripped here, so what is checked is what the build made.
find_addon() {
  ADDON=${1:-${LATCHKEY_NODE_ADDON:-}}
  if [ -z "$ADDON" ]; then
    cargo build --profile dist -p latchkey-node --manifest-path "$ROOT/Cargo.toml"
    ADDON=$TARGET/dist/liblatchkey_node.so
  fi
  [ -f "$ADDON" ] || die "no addon at $ADDON"
  if readelf -S --wide "$ADDON" | grep -qE ' \.(symtab|debug_[a-z]+) '; then
    die "$ADDON is not stripped (symbols or debug info): build it with --profile dist"
  fi
}

# The packages as napi-rs lays them out, in a copy of the package: the
# checkout stays as it is, and the files the tarballs need from elsewhere in
# the repository (the licenses, docs/node.md as the README) are copied, not
# linked, since npm pack does not reliably follow symbolic links.
# $1: the folder of latchkey-node.<platform>.node files, one per target.
stage() {
  local artifacts=$1 dir platform
  rm -rf "$OUT/main"
  mkdir -p "$OUT/main"
  cp -r "$PKG/package.json" "$PKG/lib" "$ROOT/LICENSE-MIT" "$ROOT/LICENSE-APACHE" "$OUT/main/"
  cp "$ROOT/docs/node.md" "$OUT/main/README.md"
  # One folder per target of package.json's napi.targets.
  "$NAPI" create-npm-dirs --cwd "$OUT/main" --npm-dir npm
  for dir in "$OUT/main/npm"/*/; do
    platform=$(basename "$dir")
    cp "$ROOT/LICENSE-MIT" "$ROOT/LICENSE-APACHE" "$dir"
    # type: publint asks every package to say it (there is no .js inside).
    (cd "$dir" && npm pkg set 'files[]=LICENSE-MIT' 'files[]=LICENSE-APACHE' type=commonjs \
      "description=The native layer of latchkey-redis for $platform: installed by latchkey-redis, not used directly")
  done
  # napi artifacts moves each <binaryName>.<platform>.node into its package.
  "$NAPI" artifacts --cwd "$OUT/main" --output-dir "$artifacts" --npm-dir npm
  # It also copies the host's file beside the main package.json; the main
  # package must not carry one (its files list leaves it out in any case).
  rm -f "$OUT/main"/*.node
  # pre-publish writes optionalDependencies (every platform package, at the
  # main package's version) and validates the platform packages; with
  # --skip-optional-publish and no --gh-release it publishes nothing. It
  # reads the last commit's message even so, hence GIT_DIR.
  GIT_DIR=$(git -C "$ROOT" rev-parse --absolute-git-dir) \
    "$NAPI" pre-publish --cwd "$OUT/main" --npm-dir npm --skip-optional-publish
}

# Every package into $OUT: the main one and each platform's.
pack() {
  local dir
  rm -f "$OUT"/*.tgz
  for dir in "$OUT/main" "$OUT/main/npm"/*/; do
    (cd "$dir" && npm pack --silent --pack-destination "$OUT" >/dev/null)
  done
  VERSION=$(json "$PKG/package.json" 'j.version')
  MAIN_TGZ=$OUT/latchkey-redis-$VERSION.tgz
  PLATFORM_TGZ=$OUT/latchkey-redis-$PLATFORM-$VERSION.tgz
  [ -f "$MAIN_TGZ" ] && [ -f "$PLATFORM_TGZ" ] || die "npm pack made no $MAIN_TGZ or $PLATFORM_TGZ"
}

# Fails unless the tarball holds exactly these files (package/ stripped).
has_files() {
  local tgz=$1 got want
  shift
  got=$(tar -tzf "$tgz" | sed 's#^package/##' | sort)
  want=$(printf '%s\n' "$@" | sort)
  [ "$got" = "$want" ] || die "$(basename "$tgz") holds:
$got
expected:
$want"
}

# What is inside the tarballs themselves, not in the staging folder.
inspect() {
  local lib
  lib=$(cd "$PKG" && find lib -type f | sort)
  # shellcheck disable=SC2086 # one word per file
  has_files "$MAIN_TGZ" package.json README.md LICENSE-MIT LICENSE-APACHE $lib
  has_files "$PLATFORM_TGZ" package.json README.md LICENSE-MIT LICENSE-APACHE "$NODE_FILE"
  cmp -s "$ADDON" <(tar -xzOf "$PLATFORM_TGZ" "package/$NODE_FILE") || die "the platform tarball's $NODE_FILE is not $ADDON"
  # napi artifacts rewrites the main package's entry point in place: the
  # JavaScript packed must still be the checkout's.
  rm -rf "$OUT/unpacked" && mkdir "$OUT/unpacked"
  tar -xzf "$MAIN_TGZ" -C "$OUT/unpacked"
  diff -r "$PKG/lib" "$OUT/unpacked/package/lib" || die "the main tarball's lib/ differs from crates/latchkey-node/lib"
  tar -xzOf "$MAIN_TGZ" package/package.json >"$OUT/main.json"
  tar -xzOf "$PLATFORM_TGZ" package/package.json >"$OUT/platform.json"
  # npm runs these at install (and node-gyp for a binding.gyp, which the
  # file lists above rule out); the published package must run nothing.
  local scripts
  for json_file in "$OUT/main.json" "$OUT/platform.json"; do
    scripts=$(json "$json_file" "['preinstall', 'install', 'postinstall'].filter((s) => j.scripts?.[s]).join(' ')")
    [ -z "$scripts" ] || die "$(json "$json_file" j.name) has install scripts: $scripts"
  done
  # One version everywhere: the main package, the platform package, the
  # dependency between them and the Cargo workspace's.
  local cargo
  cargo=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml")
  [ "$(json "$OUT/main.json" j.version)" = "$cargo" ] || die "latchkey-redis is not at the workspace's version $cargo"
  [ "$(json "$OUT/platform.json" j.version)" = "$cargo" ] || die "the platform package is not at $cargo"
  [ "$(json "$OUT/main.json" "j.optionalDependencies?.['latchkey-redis-$PLATFORM']")" = "$cargo" ] ||
    die "latchkey-redis does not depend on latchkey-redis-$PLATFORM $cargo"
  [ "$(json "$OUT/platform.json" "[j.os, j.cpu, j.libc].join(' ')")" = "linux x64 glibc" ] ||
    die "the platform package's os, cpu or libc is not linux, x64, glibc"
}

# publint on every tarball made, attw on the main one (the only one with types).
lint() {
  local out tgz
  for tgz in "$OUT"/*.tgz; do
    # --strict makes warnings fail; a suggestion only prints, so any
    # message at all fails here too.
    out=$("$PKG/node_modules/.bin/publint" run --strict "$tgz" 2>&1) || die "publint $(basename "$tgz"):
$out"
    echo "$out"
    echo "$out" | grep -qE '^(Suggestions|Warnings|Errors):' && die "publint has messages for $(basename "$tgz")"
  done
  # The types as TypeScript resolves them under node10, node16 (CJS and
  # ESM) and bundlers; --no-definitely-typed keeps the registry out of it.
  "$PKG/node_modules/.bin/attw" --no-definitely-typed --no-emoji --no-color --format table-flipped "$MAIN_TGZ" ||
    die "attw found problems in the main package's types (above)"
}

# A project with no dependencies of its own, PATH without cargo or rustc.
scratch() {
  local dir=$1
  mkdir -p "$dir"
  echo '{"name":"scratch","version":"1.0.0","private":true}' >"$dir/package.json"
}
bare_env() {
  env -u CARGO_HOME -u RUSTUP_HOME -u CARGO_TARGET_DIR PATH="$(dirname "$(command -v node)"):/usr/bin:/bin" "$@"
}

# Both tarballs, as npm would install them from the registry (--offline:
# the platform package can only come from its tarball), install scripts
# allowed to run: there must be none, and without Rust one would fail.
install_both() {
  local app=$OUT/app
  scratch "$app"
  if bare_env sh -c 'command -v cargo || command -v rustc' >/dev/null; then
    die "cargo or rustc is still on the scratch PATH"
  fi
  (cd "$app" && bare_env npm install --offline --no-audit --no-fund --loglevel=error "$MAIN_TGZ" "$PLATFORM_TGZ")
  [ -f "$app/node_modules/latchkey-redis-$PLATFORM/$NODE_FILE" ] || die "the platform package was not installed"
}

# A private redis-server on a free loopback port (never 6379), stopped on exit.
start_redis() {
  local port
  port=$(node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })")
  [ "$port" != 6379 ] || port=$((port + 1))
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$OUT/redis.log" 2>&1 &
  REDIS_PID=$!
  # Waited for too: a server left unreaped lingers as a zombie.
  trap 'kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null || true' EXIT
  REDIS_URL=redis://127.0.0.1:$port/
  for _ in $(seq 100); do
    redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return
    sleep 0.05
  done
  die "redis-server did not start on $port: $(cat "$OUT/redis.log")"
}

smoke() {
  local cli=${LATCHKEY_BIN:-$ROOT/target/debug/latchkey}
  [ -x "$cli" ] || die "no CLI at $cli (cargo build -p latchkey-cli, or set LATCHKEY_BIN)"
  start_redis
  cp "$ROOT/release/node-smoke.mjs" "$OUT/app/"
  # A dangling handle keeps the process alive: the timeout turns that into a failure.
  (cd "$OUT/app" && bare_env timeout 60 node node-smoke.mjs "$REDIS_URL" "$cli") ||
    die "the smoke test failed, or did not exit by itself within 60 s"
}

# Where no platform package matches, the main package alone says which
# platform it is on, which packages exist and how to build from source.
# Two cases: the platform package left out (--omit=optional, here), and
# another libc (a musl Node, simulated: it reports no glibc version).
missing_platform() {
  local app=$OUT/app-alone err
  scratch "$app"
  (cd "$app" && bare_env npm install --offline --omit=optional --no-audit --no-fund --loglevel=error "$MAIN_TGZ")
  [ ! -e "$app/node_modules/latchkey-redis-$PLATFORM" ] || die "--omit=optional installed the platform package"
  err=$(cd "$app" && bare_env node -e "require('latchkey-redis')" 2>&1) && die "latchkey-redis loaded without its platform package"
  expect "$err" "no native layer for this platform ($PLATFORM;" \
    "platform package latchkey-redis-$PLATFORM is not installed" "npm install latchkey-redis-$PLATFORM" "build from source"
  err=$(cd "$OUT/app" && bare_env node -e "
    const report = process.report.getReport.bind(process.report);
    process.report.getReport = () => { const r = report(); delete r.header.glibcVersionRuntime; return r; };
    require('latchkey-redis')" 2>&1) && die "latchkey-redis loaded as a musl process"
  expect "$err" "no native layer for this platform (linux-x64-musl;" \
    "Prebuilt platform packages: latchkey-redis-$PLATFORM; none is for linux-x64-musl" "build from source"
}
expect() {
  local text=$1 want
  shift
  for want in "$@"; do
    [[ $text == *"$want"* ]] || die "the loader's error lacks \"$want\":
$text"
  done
  echo "$text" | grep -v '^    at ' | sed -n '/^Error: /,/^Or /p'
}

sizes() {
  local tgz
  for tgz in "$MAIN_TGZ" "$PLATFORM_TGZ"; do
    printf '%s: %s bytes (%s)\n' "$(basename "$tgz")" "$(stat -c %s "$tgz")" "$(du -h "$tgz" | cut -f1)"
  done
  printf '%s unpacked: %s bytes, needs glibc %s or later\n' "$NODE_FILE" "$(stat -c %s "$ADDON")" \
    "$(objdump -T "$ADDON" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
}

# This machine's addon alone, as napi artifacts wants it: named for its platform.
one_artifact() {
  rm -rf "$OUT"
  mkdir -p "$OUT/artifacts"
  cp "$ADDON" "$OUT/artifacts/$NODE_FILE"
}

main() {
  local start=$SECONDS
  case "${1:-}" in
    check) ;;
    pack)
      [ -d "${2:-}" ] || die "usage: release/node.sh pack ARTIFACTS (a folder of latchkey-node.<platform>.node files)"
      step "npm ci (napi, publint, attw)" dev_dependencies
      step "stage every package (napi create-npm-dirs, artifacts, pre-publish)" stage "$(cd "$2" && pwd)"
      step "npm pack" pack
      step "publint and attw" lint
      ls -l "$OUT"/*.tgz
      return
      ;;
    *) die "usage: release/node.sh check [ADDON] | release/node.sh pack ARTIFACTS" ;;
  esac
  step "npm ci (napi, publint, attw)" dev_dependencies
  step "the addon" find_addon "${2:-}"
  one_artifact
  step "stage both packages (napi create-npm-dirs, artifacts, pre-publish)" stage "$OUT/artifacts"
  step "npm pack" pack
  step "inspect the tarballs" inspect
  step "publint and attw" lint
  step "install both tarballs without Rust" install_both
  step "smoke test" smoke
  step "the error without a platform package" missing_platform
  sizes
  echo "release/node.sh: ok in $((SECONDS - start)) s ($OUT)"
}

main "$@"
