'use strict';
// A hold's life against its host's corners: it ends only when the program
// releases it, it is lost (and the program is told), the client is closed,
// or the process exits; never because V8 collected an object, and no
// corner (worker teardown, close, a stopped process) crashes the process.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { startRedis, until } = require('./support/redis');
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

const fixture = (name) => path.join(__dirname, 'fixtures', name);

/** A child node process: its output so far, lines awaited, its exit. */
function child(args) {
  const proc = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiters = [];
  const look = () => {
    for (const w of [...waiters]) {
      const m = w.re.exec(out);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  proc.stdout.on('data', (d) => {
    out += d;
    look();
  });
  proc.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    proc,
    exited,
    get out() {
      return out;
    },
    get err() {
      return err;
    },
    line(re) {
      return new Promise((resolve, reject) => {
        waiters.push({ re, resolve });
        look();
        exited.then(({ code, signal }) => reject(new Error(`exited (${code ?? signal}) before ${re}: ${out}${err}`)));
      });
    },
  };
}

test('a guard V8 collects unreleased is kept, and its signal still reports a loss', async () => {
  const c = child(['--expose-gc', fixture('gc-unreferenced.js'), redis.url]);
  const [, token] = await c.line(/token (\S+)/);
  await c.line(/plain collected/);
  // Collected several TTLs ago: still ours in Redis, renewed, and refused to others.
  assert.equal(redis.cli('get', 'latchkey:gc-plain'), token);
  assert.ok(Number(redis.cli('pttl', 'latchkey:gc-plain')) > 0);
  assert.equal(await client.lock('gc-plain', { ttl: 1_000 }).tryAcquire(), null);
  const [, aborted] = await c.line(/signal collected (\w+)/);
  assert.equal(aborted, 'false');
  // The guard is gone, its signal is not: a loss still reaches it.
  redis.cli('del', 'latchkey:gc-signal');
  const [, reason] = await c.line(/signal aborted (\w+)/);
  assert.equal(reason, 'GONE');
  c.proc.stdin.end();
  const { code } = await c.exited;
  assert.equal(code, 0, c.err);
  assert.equal(redis.cli('exists', 'latchkey:gc-plain'), '0', 'given back at close');
  // Told once that a guard was collected while held (usually a leak).
  assert.equal(c.err.match(/LATCHKEY_UNRELEASED_GUARD/g)?.length, 1, c.err);
});

test('a client V8 collects with its guard keeps the hold, and the exit gives it back', async () => {
  const c = child(['--expose-gc', fixture('gc-client-exit.js'), redis.url]);
  const [, token] = await c.line(/token (\S+)/);
  await c.line(/collected/);
  // Client and guard collected a TTL ago: still ours in Redis, renewed.
  assert.equal(redis.cli('get', 'latchkey:gc-client'), token);
  assert.ok(Number(redis.cli('pttl', 'latchkey:gc-client')) > 0);
  c.proc.stdin.end();
  const { code } = await c.exited;
  assert.equal(code, 0, c.err);
  assert.equal(redis.cli('exists', 'latchkey:gc-client'), '0', 'given back at exit, not left to its TTL');
});

test('terminating worker threads that hold locks never crashes the process and gives their holds back', async () => {
  const c = child([fixture('workers-terminated.js'), redis.url, String(redis.port), '20']);
  const { code, signal } = await c.exited;
  assert.equal(signal, null, c.err);
  assert.equal(code, 0, `${c.out}${c.err}`);
  assert.match(c.out, /done/);
  assert.doesNotMatch(c.err, /panic/);
});

test('close() ends a pending wait with ClientClosed; it never takes the lock later', async () => {
  const holder = await client.lock('close-pending', { ttl: 30_000 }).acquire();
  const other = await lk.Client.connect(redis.url);
  const waiting = other.lock('close-pending', { ttl: 30_000 }).acquire();
  const settled = waiting.then(() => 'took it', (e) => e);
  await other.close();
  const ended = await Promise.race([settled, new Promise((r) => setTimeout(() => r('still pending'), 5_000))]);
  assert.ok(ended instanceof lk.ClientClosed, String(ended));
  assert.doesNotMatch(ended.message, /not supported/);
  await holder.release();
  const next = await client.lock('close-pending', { ttl: 5_000 }).tryAcquire();
  assert.ok(next, 'the closed client\'s wait took nothing');
  await next.release();
  // And in a process of its own: the wait ends at close, and the exit is clean.
  const held = await client.lock('close-pending', { ttl: 30_000 }).acquire();
  const c = child([fixture('close-waiting.js'), redis.url]);
  const { code, signal } = await c.exited;
  await held.release();
  assert.equal(signal, null, c.err);
  assert.equal(code, 0, c.err);
  assert.match(c.out, /rejected CLIENT_CLOSED/);
  assert.doesNotMatch(c.err, /panic/);
});

test('a holder stopped past its TTL finds its signal aborted (EXPIRED) on its first read', { skip: process.platform === 'win32' }, async () => {
  const c = child([fixture('stopped-holder.js'), redis.url]);
  await c.line(/held/);
  c.proc.kill('SIGSTOP');
  try {
    // Someone else gets the lock: the stopped holder's TTL ran out.
    const taker = await client.lock('stopped', { ttl: 30_000 }).acquire({ timeout: 10_000 });
    await taker.release();
  } finally {
    c.proc.kill('SIGCONT');
  }
  c.proc.stdin.write('check\n');
  const [json] = await c.line(/\{.*\}/);
  const seen = JSON.parse(json);
  assert.deepEqual(seen, { aborted: true, reason: 'EXPIRED', threw: 'LOCK_LOST', fresh: true, held: false });
  c.proc.stdin.write('exit\n');
  assert.equal((await c.exited).code, 0, c.err);
});

test('fencing: true on a cached lock issues a token with every acquisition', async () => {
  const lock = client.lock('cached-fenced', { ttl: 5_000, cached: 10_000, fencing: true });
  const first = await lock.acquire();
  assert.equal(typeof first.issuedFencingToken, 'bigint');
  assert.equal(await first.fencingToken(), first.issuedFencingToken);
  await first.release();
  const kept = await lock.acquire(); // the kept hold: no round trip to take it
  assert.equal(typeof kept.issuedFencingToken, 'bigint');
  assert.ok(kept.issuedFencingToken > first.issuedFencingToken);
  await kept.release();
  assert.equal(await lock.giveBack(), true);
});
