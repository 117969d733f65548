'use strict';
// The .d.ts: tsc --noEmit --strict on a program that uses every export,
// and every runtime export declared.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

test('tsc --strict accepts a program using every export', () => {
  const tsc = path.join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'tsconfig.json')], { stdio: 'inherit' });
});

test('every runtime export is declared in lib/index.d.ts and used by the sample', () => {
  const dts = fs.readFileSync(path.join(__dirname, '..', 'lib', 'index.d.ts'), 'utf8');
  const sample = fs.readFileSync(path.join(__dirname, 'types', 'every-export.ts'), 'utf8');
  for (const name of Object.keys(require('..'))) {
    assert.match(dts, new RegExp(`export (declare )?(class|const|function) ${name}\\b`), `${name} declared`);
    assert.match(sample, new RegExp(`\\b${name}\\b`), `${name} used by the sample`);
  }
});
