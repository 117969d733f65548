'use strict';
// Loads the native layer for this platform. Two places, in this order:
// 1. latchkey-node.<platform>.node next to package.json: what a checkout
//    builds (`npm run build`, `npm run build:debug`, `napi build --platform`);
//    the published package carries none, so an install never finds one here.
// 2. the platform package latchkey-redis-<platform> (an optional dependency
//    of the published package, holding only the prebuilt .node): npm
//    installs the one whose os, cpu and libc match, and no other.
// When neither loads, the error says which platform this is, which
// platform packages exist and how to build from source, since npm itself
// says nothing when it skips an optional dependency.
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const PACKAGE = 'latchkey-redis';
const BUILD_FROM_SOURCE =
  'build from source on this machine with Rust (https://rustup.rs): in a checkout of latchkey, ' +
  '`cd crates/latchkey-node && npm ci && npm run build`, then ' +
  '`npm install <checkout>/crates/latchkey-node` in your project (docs/node.md, "Building from source")';

// napi-rs's names: linux-x64-gnu, linux-x64-musl, darwin-arm64, win32-x64-msvc, …
function platform() {
  const { platform: os, arch } = process;
  if (os === 'linux') {
    // A glibc Node reports its glibc version; a musl one reports none.
    const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  if (os === 'win32') return `win32-${arch}-msvc`;
  return `${os}-${arch}`;
}

// The platform packages the published package.json names (none in a checkout).
function prebuilt() {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  return Object.keys(manifest.optionalDependencies ?? {}).filter((name) => name.startsWith(`${PACKAGE}-`));
}

function explain(here, pkg, failure) {
  const known = prebuilt();
  const lines = [`${PACKAGE}: no native layer for this platform (${here}; Node ${process.version}).`];
  if (failure) {
    lines.push(`${failure.name} failed to load: ${failure.error.message}`);
  } else if (known.includes(pkg)) {
    lines.push(
      `Its platform package ${pkg} is not installed: npm skips optional dependencies under ` +
        '--omit=optional (or --no-optional), or when the lock file was made on another platform; ' +
        `install it: \`npm install ${pkg}\`.`,
    );
  } else if (known.length) {
    lines.push(`Prebuilt platform packages: ${known.join(', ')}; none is for ${here}.`);
  } else {
    lines.push('Prebuilt platform packages: none named in this package.json (a checkout of the repository).');
  }
  lines.push(`Or ${BUILD_FROM_SOURCE}.`);
  return lines.join('\n');
}

function load() {
  const here = platform();
  const local = path.join(ROOT, `latchkey-node.${here}.node`);
  const pkg = `${PACKAGE}-${here}`;
  const name = fs.existsSync(local) ? local : pkg;
  try {
    return require(name);
  } catch (e) {
    const absent = name === pkg && e.code === 'MODULE_NOT_FOUND' && e.message.startsWith(`Cannot find module '${pkg}'`);
    throw new Error(explain(here, pkg, absent ? undefined : { name, error: e }), { cause: e });
  }
}

module.exports = load();
