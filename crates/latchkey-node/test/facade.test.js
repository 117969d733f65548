'use strict';
// The facade's manners: Promise-returning methods reject (never throw),
// one AbortSignal serves many waits without a listener warning, using()
// reports a loss, messages print durations as people write them, and the
// .d.ts compiles for an ES2021 target.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { startRedis } = require('./support/redis');
const lk = require('..');

let redis;
let client;
test.before(async () => {
  redis = await startRedis();
  client = await lk.Client.connect(redis.url);
});
test.after(async () => {
  await client.close();
  await redis.stop();
});

/** `call()` must return a Promise that rejects with `Class`, not throw. */
async function rejects(call, Class, what) {
  let made;
  assert.doesNotThrow(() => {
    made = call();
  }, what);
  assert.ok(made instanceof Promise, what);
  await assert.rejects(made, Class, what);
}

test('Promise-returning methods reject on bad input instead of throwing', async () => {
  const lock = client.lock('facade-bad', { ttl: 5_000 });
  const g = await lock.acquire();
  const bad = [
    [() => g.extend(5), 'extend(5)'],
    [() => g.extend('x'), 'extend(x)'],
    [() => g.fencingTokenOf(''), 'fencingTokenOf("")'],
    [() => lock.acquire({ timeout: -5 }), 'acquire timeout -5'],
    [() => lock.acquire({ signal: 'no' }), 'acquire signal'],
    [() => lock.using('no'), 'using(no)'],
    [() => client.signal('', 'x'), 'signal("")'],
    [() => client.revoke(42), 'revoke(42)'],
    [() => client.close({ within: -1 }), 'close within -1'],
    [() => client.flush({ within: 'x' }), 'flush within x'],
    [() => client.semaphore('s', 2, { ttl: 1_000 }).acquire({ permits: 0 }), 'permits 0'],
    [() => client.latch('l').create(0), 'create(0)'],
    [() => client.fenced('f').write(1, 'x'), 'write(1)'],
    [() => client.wait('', { timeout: 10 }), 'wait("")'],
  ];
  for (const [call, what] of bad) await rejects(call, lk.InvalidArgument, what);
  await g.release();
});

test('one AbortSignal given to many waits adds no listener warning, and aborts them all', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    const holder = await client.lock('facade-many', { ttl: 10_000 }).acquire();
    const controller = new AbortController();
    const waits = [];
    for (let i = 0; i < 15; i++) {
      waits.push(client.lock('facade-many', { ttl: 10_000 }).acquire({ signal: controller.signal }));
    }
    // A warning is emitted on the next tick after the 11th listener.
    await new Promise((r) => setImmediate(r));
    controller.abort(new Error('enough'));
    await Promise.all(waits.map((w) => assert.rejects(w, /enough/)));
    await holder.release();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message), []);
  } finally {
    process.off('warning', onWarning);
  }
});

test('using() rejects with LockLost when the lock was lost while the function ran', async () => {
  const lock = client.lock('facade-using', { ttl: 5_000 });
  await assert.rejects(
    lock.using(async () => {
      redis.cli('del', 'latchkey:facade-using');
      return 'done';
    }),
    (e) => e instanceof lk.LockLost && e.code === 'LOCK_LOST',
  );
  // A function that releases the guard itself is not a loss.
  assert.equal(await lock.using(async (_, guard) => (await guard.release()) && 'ok'), 'ok');
});

test('messages: durations in whole ms, a closed client is not "not supported"', async () => {
  const holder = await client.lock('facade-msg', { ttl: 10_000 }).acquire();
  await assert.rejects(client.lock('facade-msg', { ttl: 10_000 }).acquire({ timeout: 101 }), (e) => {
    assert.ok(e instanceof lk.WaitTimedOut);
    assert.match(e.message, /waiting 1\d\dms\b/);
    assert.doesNotMatch(e.message, /\d\.\d{3,}/);
    return true;
  });
  await holder.release();
  const other = await lk.Client.connect(redis.url);
  await other.close();
  assert.throws(() => other.lock('x', { ttl: 1_000 }), (e) => {
    assert.ok(e instanceof lk.ClientClosed);
    assert.doesNotMatch(e.message, /not supported/);
    return true;
  });
});

test('a stalled Redis: the Timeout message says the limit and the time it took', async () => {
  const stalled = await startRedis();
  const slow = await lk.Client.connect(stalled.url, { commandTimeout: 200 });
  try {
    process.kill(stalled.pid, 'SIGSTOP');
    const started = Date.now();
    await assert.rejects(slow.lock('facade-stall', { ttl: 5_000 }).acquire({ timeout: 1_000 }), (e) => {
      assert.ok(e instanceof lk.Timeout, `${e.name}: ${e.message}`);
      assert.match(e.message, /200ms/);
      const took = Date.now() - started;
      assert.ok(took > 400, `${took} ms`);
      assert.match(e.message, /after \d/, e.message);
      assert.doesNotMatch(e.message, /\d\.\d{3,}/);
      return true;
    });
  } finally {
    process.kill(stalled.pid, 'SIGCONT');
    await slow.close();
    await stalled.stop();
  }
});

test('lib/index.d.ts compiles for an ES2021 target with skipLibCheck off', () => {
  const tsc = path.join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'tsconfig.es2021.json')], { stdio: 'inherit' });
});
