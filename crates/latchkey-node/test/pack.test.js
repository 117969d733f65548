'use strict';
// The main package as npm packs it: JavaScript and types only (the native
// layer ships in a platform package, release/node.sh), nothing run at
// install, installable everywhere so that its loader can say what is
// missing. release/node.sh packs both packages and installs them.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('node:child_process');
const path = require('node:path');

const PKG = path.join(__dirname, '..');

test('the packed main package holds lib/ only and runs nothing at install', () => {
  const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: PKG, stdio: ['ignore', 'pipe', 'pipe'] }).toString());
  const files = packed[0].files.map((f) => f.path);
  for (const f of ['package.json', 'lib/index.js', 'lib/index.d.ts', 'lib/native.js']) assert.ok(files.includes(f), f);
  // The checkout's debug build sits next to package.json; it is not packed.
  assert.deepEqual(files.filter((f) => !f.startsWith('lib/') && f !== 'package.json'), []);
  const manifest = require('../package.json');
  for (const s of ['preinstall', 'install', 'postinstall']) assert.equal(manifest.scripts[s], undefined, s);
  assert.equal(manifest.os, undefined, 'installs on every OS, to say what is missing there');
  assert.equal(manifest.cpu, undefined);
});

test('with no native layer for the platform, the error names it and how to build one', () => {
  // A musl Node reports no glibc version: the loader then looks for
  // linux-x64-musl, which nothing here provides.
  const musl = `const report = process.report.getReport.bind(process.report);
process.report.getReport = () => { const r = report(); delete r.header.glibcVersionRuntime; return r; };
require(${JSON.stringify(PKG)});`;
  const r = spawnSync(process.execPath, ['-e', musl], { encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /latchkey-redis: no native layer for this platform \(linux-x64-musl; Node v/);
  assert.match(r.stderr, /Prebuilt platform packages: none named in this package\.json/);
  assert.match(r.stderr, /build from source .* npm ci && npm run build/);
});
