#!/usr/bin/env node
'use strict';
// Builds the native layer with cargo in a checkout and puts it where
// lib/native.js looks first (latchkey-node.linux-x64-gnu.node, next to
// package.json). ./dev test and `npm run build:debug` run it with --debug:
// the workspace's debug build, shared with the Rust tests, so the copy
// takes a second. Without --debug, the dist profile's build through cargo
// (linux-x64-gnu only; `npm run build` makes it on any platform, through
// napi). Never run at install: the published package has no install
// script, its native layer comes prebuilt in a platform package.
//
//   node scripts/build.js [--debug]
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const debug = process.argv.includes('--debug');
const root = path.join(__dirname, '..');
const out = path.join(root, 'latchkey-node.linux-x64-gnu.node');

if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error(`latchkey-redis: built here for linux-x64-gnu only; on ${process.platform}-${process.arch} run \`npm run build\` in crates/latchkey-node (docs/node.md, "Building from source")`);
  process.exit(1);
}
const manifest = path.join(root, 'Cargo.toml');
const args = ['build', '--manifest-path', manifest, '-p', 'latchkey-node', '--message-format=json-render-diagnostics'];
// What is shipped is built so too: optimised, no debug info, stripped.
if (!debug) args.push('--profile', 'dist');
let made;
try {
  const log = execFileSync('cargo', args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28 }).toString();
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    const m = JSON.parse(line);
    if (m.reason === 'compiler-artifact' && m.target?.name === 'latchkey_node') {
      made = m.filenames.find((f) => f.endsWith('.so'));
    }
  }
} catch (e) {
  console.error(`latchkey-redis: the native build failed (cargo: ${e.message}); Rust (https://rustup.rs) is needed to build from source`);
  process.exit(1);
}
if (!made) {
  console.error('latchkey-redis: cargo built no liblatchkey_node.so');
  process.exit(1);
}
fs.copyFileSync(made, out);
