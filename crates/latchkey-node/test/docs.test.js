'use strict';
// Every `ts` block of docs/node.md and of the README's Node section runs:
// transpiled by TypeScript (which lowers `await using` for Node 20), the
// package name pointed at this checkout, the URLs at private servers.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const ts = require('typescript');
const { startRedis } = require('./support/redis');

const REPO = path.join(__dirname, '..', '..', '..');
const LIB = path.join(__dirname, '..', 'lib', 'index.js');

function blocks(file) {
  const text = fs.readFileSync(path.join(REPO, file), 'utf8');
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
}

let servers;
let dir;
test.before(async () => {
  servers = [await startRedis(), await startRedis(), await startRedis()];
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'latchkey-node-docs-'));
});
test.after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  fs.rmSync(dir, { recursive: true, force: true });
});

function runBlock(source, i) {
  let code = source.replaceAll("'latchkey-redis'", JSON.stringify(LIB)).replaceAll('"latchkey-redis"', JSON.stringify(LIB));
  [6380, 6381, 6382].forEach((port, k) => {
    code = code.replaceAll(`redis://127.0.0.1:${port}/`, servers[k].url);
  });
  const js = ts.transpileModule(code, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022 },
  }).outputText;
  const file = path.join(dir, `block-${i}.mjs`);
  fs.writeFileSync(file, js);
  return execFileSync(process.execPath, [file], { timeout: 30_000 }).toString();
}

for (const file of ['docs/node.md', 'README.md']) {
  test(`every ts block of ${file} runs`, (t) => {
    const found = blocks(file);
    assert.ok(found.length > 0, `${file} has ts blocks`);
    found.forEach((block, i) => {
      try {
        const out = runBlock(block, `${path.basename(file)}-${i}`);
        t.diagnostic(`${file} block ${i}: ${out.trim().split("\n").join(" | ")}`);
      } catch (e) {
        assert.fail(`${file} block ${i} failed:\n${block}\n${e.stderr ?? e.message}`);
      }
    });
  });
}
