'use strict';
// `npm pack` makes a tarball with the native layer inside; it installs in
// a scratch project with no Rust on the PATH (and no registry: --offline),
// and works there.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis } = require('./support/redis');

const PKG = path.join(__dirname, '..');

test('the npm pack tarball installs without Rust and runs', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'latchkey-node-pack-'));
  const redis = await startRedis();
  try {
    const npm = (args, cwd, env) => execFileSync('npm', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
    const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], PKG, process.env));
    const tarball = path.join(dir, packed[0].filename);
    const files = packed[0].files.map((f) => f.path);
    assert.ok(files.includes('latchkey-node.linux-x64-gnu.node'), 'the native layer is inside');
    assert.ok(files.includes('lib/index.d.ts'));
    assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('src/')));
    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{"name":"scratch","version":"1.0.0","private":true}');
    // Only node's own folder on the PATH: no cargo, no rustc.
    const bare = { ...process.env, PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` };
    delete bare.CARGO_HOME;
    assert.throws(() => execFileSync('cargo', ['--version'], { env: bare, stdio: 'ignore' }));
    npm(['install', '--offline', '--no-audit', '--no-fund', tarball], app, bare);
    fs.writeFileSync(
      path.join(app, 'smoke.mjs'),
      `import { Client } from 'latchkey-redis';
const client = await Client.connect(${JSON.stringify(redis.url)});
const guard = await client.lock('smoke', { ttl: 5_000, fencing: true }).acquire({ timeout: 1_000 });
console.log(typeof (await guard.fencingToken()), await guard.release());
await client.close();
`,
    );
    assert.equal(execFileSync(process.execPath, ['smoke.mjs'], { cwd: app, env: bare }).toString().trim(), 'bigint true');
  } finally {
    await redis.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
