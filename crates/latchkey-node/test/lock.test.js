'use strict';
// The core: connect, a lock's tryAcquire/acquire/release/extend, fencing
// tokens, errors, AbortSignal and timeouts, the loss signal, disposal.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { startRedis, alive } = require('./support/redis');
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

test('tryAcquire gives a guard, then null while it is held; release is idempotent', async () => {
  const lock = client.lock('core-try', { ttl: 10_000 });
  const guard = await lock.tryAcquire();
  assert.ok(guard instanceof lk.Guard);
  assert.equal(guard.isHeld(), true);
  assert.equal(guard.name, 'core-try');
  assert.equal(redis.cli('get', 'latchkey:core-try'), guard.token);
  assert.equal(await lock.tryAcquire(), null);
  assert.ok(guard.deadline > Date.now() && guard.deadline <= Date.now() + 10_000);
  assert.equal(await guard.release(), true);
  assert.equal(await guard.release(), false);
  assert.equal(guard.isHeld(), false);
  assert.equal(redis.cli('exists', 'latchkey:core-try'), '0');
});

test('a waiter is woken by the release, not by polling', async () => {
  const lock = client.lock('core-handoff', { ttl: 10_000 });
  const holder = await lock.acquire();
  let got = false;
  const waiting = lock.acquire({ timeout: 5_000 }).then((g) => {
    got = true;
    return g;
  });
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(got, false);
  const released = Date.now();
  await holder.release();
  const next = await waiting;
  assert.ok(Date.now() - released < 1_000, 'woken at once');
  await next.release();
});

test('{ timeout } rejects with WaitTimedOut, a LatchkeyError with a stable code', async () => {
  const lock = client.lock('core-timeout', { ttl: 10_000 });
  const holder = await lock.acquire();
  const started = Date.now();
  await assert.rejects(lock.acquire({ timeout: 150 }), (e) => {
    assert.ok(e instanceof lk.WaitTimedOut);
    assert.ok(e instanceof lk.LatchkeyError);
    assert.equal(e.code, 'WAIT_TIMED_OUT');
    assert.match(e.message, /core-timeout/);
    return true;
  });
  assert.ok(Date.now() - started >= 140);
  await holder.release();
});

test('an aborted wait rejects with the signal reason and leaves nothing behind', async () => {
  for (const fair of [false, true]) {
    const name = `core-abort-${fair}`;
    const lock = client.lock(name, { ttl: 10_000, fair });
    const holder = await lock.acquire();
    const controller = new AbortController();
    const waiting = lock.acquire({ signal: controller.signal });
    setTimeout(() => controller.abort(new Error('user gave up')), 50);
    await assert.rejects(waiting, /user gave up/);
    await holder.release();
    await client.flush();
    // The aborted waiter took nothing and left no queue entry: free at once.
    const again = await lock.tryAcquire();
    assert.ok(again, `free after an aborted waiter (fair: ${fair})`);
    await again.release();
  }
  const pre = AbortSignal.abort(new Error('already'));
  await assert.rejects(client.lock('core-abort-pre', { ttl: 1_000 }).acquire({ signal: pre }), /already/);
  const t = AbortSignal.timeout(50);
  const holder = await client.lock('core-abort-t', { ttl: 5_000 }).acquire();
  await assert.rejects(client.lock('core-abort-t', { ttl: 5_000 }).acquire({ signal: t }), { name: 'TimeoutError' });
  await holder.release();
});

test('fencing tokens are bigints, increasing hold after hold', async () => {
  const lock = client.lock('core-fence', { ttl: 5_000, fencing: true });
  const a = await lock.acquire();
  const ta = await a.fencingToken();
  assert.equal(typeof ta, 'bigint');
  assert.equal(a.issuedFencingToken, ta);
  await a.release();
  const b = await lock.acquire();
  assert.ok((await b.fencingToken()) > ta);
  await b.release();
  const plain = await client.lock('core-fence-plain', { ttl: 5_000 }).acquire();
  assert.equal(plain.issuedFencingToken, null);
  assert.equal(typeof (await plain.fencingToken()), 'bigint');
  await plain.release();
  await assert.rejects(plain.fencingToken(), lk.NotHeld);
});

test('extend keeps the hold; after a loss it answers false', async () => {
  const guard = await client.lock('core-extend', { ttl: 1_000, watchdog: false }).acquire();
  assert.equal(await guard.extend(20_000), true);
  assert.ok(Number(redis.cli('pttl', 'latchkey:core-extend')) > 15_000);
  redis.cli('del', 'latchkey:core-extend');
  assert.equal(await guard.extend(20_000), false);
  assert.equal(guard.isHeld(), false);
  await guard.release();
});

test('guard.signal aborts with LockLost before the TTL when the hold is found gone', async () => {
  const guard = await client.lock('core-lost', { ttl: 600 }).acquire();
  const signal = guard.signal;
  assert.equal(signal.aborted, false);
  redis.cli('del', 'latchkey:core-lost');
  // The loss notification is weak (it never keeps a process alive by
  // itself): alive() keeps this one up, as the holder's work would.
  await alive(new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true })));
  assert.ok(signal.reason instanceof lk.LockLost);
  assert.equal(signal.reason.code, 'LOCK_LOST');
  assert.equal(signal.reason.reason, 'GONE');
  assert.equal(guard.lostReason, 'GONE');
  await guard.release();
});

test('the watchdog keeps a lock while the JavaScript thread is blocked past its TTL', async () => {
  const guard = await client.lock('core-blocked', { ttl: 600 }).acquire();
  const first = guard.deadline;
  const signal = guard.signal;
  // A synchronous critical section three TTLs long (Atomics.wait blocks the
  // thread as CPU work would): the renewals run on the native layer's own
  // thread, not on this one.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1_800);
  assert.equal(redis.cli('get', 'latchkey:core-blocked'), guard.token);
  assert.ok(Number(redis.cli('pttl', 'latchkey:core-blocked')) > 0);
  assert.equal(guard.isHeld(), true);
  assert.ok(guard.deadline >= first + 1_000, 'renewed while the thread was blocked');
  await new Promise((r) => setImmediate(r));
  assert.equal(signal.aborted, false);
  assert.equal(await guard.release(), true);
});

test('a released guard never aborts its signal', async () => {
  const guard = await client.lock('core-released', { ttl: 200, watchdog: false }).acquire();
  const signal = guard.signal;
  await guard.release();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(signal.aborted, false);
});

test('using() runs the function while holding and releases after, even when it throws', async () => {
  const lock = client.lock('core-using', { ttl: 5_000 });
  const answer = await lock.using(async (signal, guard) => {
    assert.equal(signal.aborted, false);
    assert.equal(await lock.tryAcquire(), null);
    assert.ok(guard.isHeld());
    return 42;
  });
  assert.equal(answer, 42);
  await assert.rejects(lock.using(async () => { throw new Error('boom'); }), /boom/);
  const free = await lock.tryAcquire();
  assert.ok(free);
  await free.release();
});

test('Symbol.asyncDispose releases a guard', async () => {
  const lock = client.lock('core-dispose', { ttl: 5_000 });
  const guard = await lock.acquire();
  await guard[Symbol.asyncDispose]();
  assert.equal(guard.isHeld(), false);
  const free = await lock.tryAcquire();
  assert.ok(free);
  await free.release();
});

test('close() gives back every hold and refuses later calls', async () => {
  const other = await lk.Client.connect(redis.url);
  const a = await other.lock('core-close-a', { ttl: 30_000 }).acquire();
  const told = new Promise((resolve) => a.signal.addEventListener('abort', () => resolve(a.signal.reason)));
  await other.semaphore('core-close-s', 2, { ttl: 30_000 }).acquire();
  assert.equal(await other.close(), true);
  assert.equal(a.isHeld(), false);
  // Each guard is told: lost, CLOSED; its release sends nothing.
  assert.equal(a.lostReason, 'CLOSED');
  assert.equal((await told).reason, 'CLOSED');
  assert.equal(await a.release(), false);
  assert.equal(a.lostReason, null);
  assert.equal(redis.cli('exists', 'latchkey:core-close-a'), '0');
  assert.equal(redis.cli('zcard', '{latchkey:core-close-s}:sem') || '0', '0');
  assert.throws(() => other.lock('x', { ttl: 1_000 }), lk.ClientClosed);
  await assert.rejects(other.signal('x', 'y'), (e) => e.code === 'CLIENT_CLOSED');
});

test('bad input is INVALID_ARGUMENT, thrown (or rejected) before any Redis call', async () => {
  redis.cli('config', 'resetstat');
  const bad = [
    () => client.lock('', { ttl: 1_000 }),
    () => client.lock(42, { ttl: 1_000 }),
    () => client.lock('x', { ttl: -1 }),
    () => client.lock('x', { ttl: '10' }),
    () => client.lock('x', { ttl: NaN }),
    () => client.lock('x', { ttl: 0 }),
    () => client.lock('x', { ttl: 5 }),
    () => client.lock('x', {}),
    () => client.lock('x'),
    () => client.lock('x', { ttl: 1_000, tll: 5 }),
    () => client.lock('x', { ttl: 1_000, fair: 'yes' }),
    () => client.semaphore('x', 0, { ttl: 1_000 }),
    () => client.semaphore('x', 1.5, { ttl: 1_000 }),
    () => client.barrier('x', -2),
    () => client.lockAll([], { ttl: 1_000 }),
  ];
  for (const call of bad) {
    assert.throws(call, (e) => e instanceof lk.InvalidArgument && e.code === 'INVALID_ARGUMENT', String(call));
  }
  // A Promise-returning method rejects instead (test/facade.test.js has more).
  const badWaits = [
    () => client.lock('x', { ttl: 1_000 }).acquire({ timeout: -5 }),
    () => client.lock('x', { ttl: 1_000 }).acquire({ signal: 'no' }),
  ];
  for (const call of badWaits) {
    await assert.rejects(call(), (e) => e instanceof lk.InvalidArgument && e.code === 'INVALID_ARGUMENT', String(call));
  }
  await assert.rejects(lk.Client.connect('http://x'), lk.InvalidArgument);
  const stats = redis.cli('info', 'commandstats');
  assert.doesNotMatch(stats, /cmdstat_(set|evalsha|eval|zadd)/);
});

test('an unreachable server is Unreachable (an Unavailable), naming where', async () => {
  await assert.rejects(lk.Client.connect('redis://127.0.0.1:1/'), (e) => {
    assert.ok(e instanceof lk.Unreachable && e instanceof lk.Unavailable);
    assert.equal(e.code, 'UNREACHABLE');
    assert.equal(e.transient, true);
    assert.match(e.message, /127\.0\.0\.1:1/);
    return true;
  });
});

test('every code the native layer can give has its class', () => {
  const native = require('../lib/native');
  const errors = require('../lib/errors');
  const codes = native.errorCodes();
  assert.ok(codes.includes('WAIT_TIMED_OUT') && codes.includes('UNSUPPORTED_SERVER'), codes.join());
  for (const code of codes) {
    const e = errors.fromNative(new Error(`[${code}] what went wrong`));
    assert.ok(e instanceof lk.LatchkeyError, code);
    assert.notEqual(e.constructor, lk.LatchkeyError, `${code} has a class of its own`);
    assert.equal(e.code, code);
    assert.equal(e.message, 'what went wrong');
    assert.ok(lk.ERROR_CODES.includes(code), code);
  }
});

// The server the library refuses (too old): fetched by ./dev servers, as
// for the Rust suite's test of the same refusal.
const redis62 = path.join(process.env.LATCHKEY_SERVERS_DIR ?? '', 'redis-6.2', 'redis-server');
const have62 = Boolean(process.env.LATCHKEY_SERVERS_DIR) && fs.existsSync(redis62);
test('Redis 6.2 is refused at connect: UnsupportedServer, naming its version', {
  skip: !have62 && process.env.LATCHKEY_REQUIRE_SERVERS !== '1' && 'Redis 6.2 is not fetched (./dev servers)',
}, async () => {
  assert.ok(have62, `${redis62} is missing although LATCHKEY_REQUIRE_SERVERS=1: run ./dev servers`);
  const old = await startRedis([], { program: redis62 });
  try {
    await assert.rejects(lk.Client.connect(old.url), (e) => {
      assert.ok(e instanceof lk.UnsupportedServer, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'UNSUPPORTED_SERVER');
      assert.equal(e.transient, false);
      assert.match(e.message, /^Redis 6\.2\./);
      return true;
    });
  } finally {
    await old.stop();
  }
});
