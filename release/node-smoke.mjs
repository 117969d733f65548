// The smoke test release/node.sh runs in a scratch project where only the
// two npm tarballs are installed: the package as a user gets it, not the
// checkout. It must exit by itself: a handle the package leaves open keeps
// the process alive, and the caller's timeout then fails the check.
//
//   node node-smoke.mjs REDIS_URL LATCHKEY_BIN
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { Client, version } from 'latchkey-redis';

const [url, cli] = process.argv.slice(2);
const require = createRequire(import.meta.url);

// The native layer came from the platform package, not from a file a
// build left next to the main package.
const platformPackage = require.resolve('latchkey-redis-linux-x64-gnu');
assert.match(platformPackage, /node_modules\/latchkey-redis-linux-x64-gnu\/latchkey-node\.linux-x64-gnu\.node$/);

// `latchkey run` on the same lock: -E 3 is its exit status when the lock is taken.
function cliRun() {
  const r = spawnSync(cli, ['run', '--redis', url, '--no-wait', '-E', '3', 'release-smoke', '--', 'true']);
  if (r.error) throw r.error;
  return r.status;
}

const client = await Client.connect(url);
const lock = client.lock('release-smoke', { ttl: 10_000, fencing: true });
const first = await lock.acquire({ timeout: 1_000 });
const token = await first.fencingToken();
assert.equal(typeof token, 'bigint');
assert.ok(token > 0n);
assert.equal(await lock.tryAcquire(), null, 'held: a second acquire fails');
assert.equal(cliRun(), 3, 'the CLI cannot take the lock this process holds');
assert.equal(await first.release(), true);
assert.equal(cliRun(), 0, 'once released, the CLI takes it');
const second = await lock.acquire({ timeout: 1_000 });
assert.ok((await second.fencingToken()) > token, 'a later hold has a greater token');
await second.release();
await client.close();
console.log(`latchkey-redis ${version}: acquire, fencing token ${token}, exclusion with ${cli} ok`);
