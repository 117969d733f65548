'use strict';
// One lock, several doors: a Node holder excludes `latchkey run`, the
// Python package and (with prefix "") node-redlock's bare keys, and each of
// them excludes a Node waiter, both ways.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { startRedis } = require('./support/redis');
const lk = require('..');

const REPO = path.join(__dirname, '..', '..', '..');
const CLI = process.env.LATCHKEY_BIN || path.join(REPO, 'target', 'debug', 'latchkey');
const PYTHON = process.env.LATCHKEY_PYTHON || path.join(REPO, 'target', 'py-venv', 'bin', 'python');
const havePython = fs.existsSync(PYTHON) && spawnSync(PYTHON, ['-c', 'import latchkey']).status === 0;

let redis;
let client;
let bare;
test.before(async () => {
  redis = await startRedis();
  client = await lk.Client.connect(redis.url);
  bare = await lk.Client.connect(redis.url, { prefix: '' });
});
test.after(async () => {
  await client.close();
  await bare.close();
  await redis.stop();
});

function peers() {
  const Redis = require('ioredis');
  const Redlock = require('redlock').default;
  const io = new Redis(redis.port, '127.0.0.1');
  const redlock = new Redlock([io], { retryCount: 0 });
  return { io, redlock };
}

test('prefix "": a latchkey holder excludes node-redlock, then lets it in', async () => {
  const { io, redlock } = peers();
  const guard = await bare.lock('shared-a', { ttl: 10_000 }).acquire();
  await assert.rejects(redlock.acquire(['shared-a'], 5_000));
  await guard.release();
  const theirs = await redlock.acquire(['shared-a'], 5_000);
  await theirs.release();
  io.disconnect();
});

test('prefix "": a node-redlock holder excludes latchkey; a waiter gets it after its release', async () => {
  const { io, redlock } = peers();
  const theirs = await redlock.acquire(['shared-b'], 10_000);
  const lock = bare.lock('shared-b', { ttl: 10_000 });
  assert.equal(await lock.tryAcquire(), null);
  const waiting = lock.acquire({ timeout: 10_000 });
  await new Promise((r) => setTimeout(r, 100));
  await theirs.release(); // publishes nothing: the waiter finds it free by looking again
  const ours = await waiting;
  assert.ok(ours.isHeld());
  assert.ok((await io.get('shared-b')).startsWith(ours.token));
  await ours.release();
  io.disconnect();
});

test('`latchkey run` and a Node holder exclude each other', { skip: !fs.existsSync(CLI) && `no CLI at ${CLI} (cargo build -p latchkey-cli)` }, async () => {
  const guard = await client.lock('shared-cli', { ttl: 10_000 }).acquire();
  const refused = spawnSync(CLI, ['run', '--redis', redis.url, '--no-wait', '-E', '3', 'shared-cli', '--', 'true']);
  assert.equal(refused.status, 3, refused.stderr.toString());
  await guard.release();
  const cli = spawn(CLI, ['run', '--redis', redis.url, 'shared-cli', '--', 'sh', '-c', 'echo in; sleep 1']);
  const cliExited = new Promise((resolve) => cli.once('exit', resolve)); // listened to from the start
  await new Promise((resolve) => cli.stdout.once('data', resolve));
  assert.equal(await client.lock('shared-cli', { ttl: 10_000 }).tryAcquire(), null);
  const started = Date.now();
  const next = await client.lock('shared-cli', { ttl: 10_000 }).acquire({ timeout: 10_000 });
  assert.ok(Date.now() - started > 300, 'got it only once the command ended');
  await next.release();
  assert.equal(await cliExited, 0);
});

test('the Python package and a Node holder exclude each other', { skip: !havePython && `no Python package at ${PYTHON} (./dev test builds it)` }, async () => {
  const py = (code) => spawnSync(PYTHON, ['-c', `import latchkey\nc = latchkey.Client(${JSON.stringify(redis.url)})\n${code}`]).stdout.toString().trim();
  const guard = await client.lock('shared-py', { ttl: 10_000 }).acquire();
  assert.equal(py('print(c.lock("shared-py", ttl=5.0).try_acquire())'), 'None');
  await guard.release();
  const holder = spawn(PYTHON, ['-c', `import latchkey, sys, time
c = latchkey.Client(${JSON.stringify(redis.url)})
g = c.lock("shared-py", ttl=10.0).acquire()
print("in", flush=True)
time.sleep(1)
g.release()`]);
  const holderExited = new Promise((resolve) => holder.once('exit', resolve));
  await new Promise((resolve) => holder.stdout.once('data', resolve));
  assert.equal(await client.lock('shared-py', { ttl: 10_000 }).tryAcquire(), null);
  const next = await client.lock('shared-py', { ttl: 10_000 }).acquire({ timeout: 10_000 });
  await next.release();
  assert.equal(await holderExited, 0);
});

// `latchkey serve` on a free loopback port (port 0: it picks one and prints
// it) against this file's redis-server, with no tokens (loopback only).
async function startServe() {
  const env = { ...process.env };
  delete env.LATCHKEY_SERVE_TOKENS;
  const proc = spawn(CLI, ['serve', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  // Its one line on stdout says where it listens: it listens then.
  const line = await new Promise((resolve, reject) => {
    let text = '';
    proc.stdout.on('data', (chunk) => {
      text += chunk;
      if (text.includes('\n')) resolve(text.split('\n')[0]);
    });
    proc.once('exit', (code) => reject(new Error(`latchkey serve exited (${code}) before listening`)));
  });
  assert.match(line, /^listening on http:\/\//);
  const base = line.replace('listening on ', '');
  const post = async (route, body) => {
    const reply = await fetch(base + route, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    return [reply.status, await reply.json()];
  };
  const stop = async () => {
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  };
  return { post, stop, pid: proc.pid };
}

test('a lock taken over HTTP (`latchkey serve`) excludes Node until released over HTTP, both ways', { skip: !fs.existsSync(CLI) && `no CLI at ${CLI} (cargo build -p latchkey-cli)` }, async () => {
  const served = await startServe();
  try {
    const [status, held] = await served.post('/v1/locks/shared-http/acquire', { ttl: '1m' });
    assert.equal(status, 200, JSON.stringify(held));
    assert.equal(held.acquired, true);
    const lock = client.lock('shared-http', { ttl: 10_000 });
    assert.equal(await lock.tryAcquire(), null, 'busy for Node while held over HTTP');

    const [released, reply] = await served.post('/v1/locks/shared-http/release', { token: held.token });
    assert.equal(released, 200, JSON.stringify(reply));
    const ours = await lock.tryAcquire();
    assert.ok(ours !== null && ours.isHeld());
    assert.ok((await ours.fencingToken()) > BigInt(held.fencing_token), 'one fencing counter for both doors');

    const [busyStatus, busy] = await served.post('/v1/locks/shared-http/acquire', { ttl: '1m' });
    assert.equal(busyStatus, 200);
    assert.equal(busy.acquired, false, 'busy over HTTP while Node holds it');
    assert.equal(busy.holder.pid, process.pid, 'the holder it names is this process');
    await ours.release();
    const [, again] = await served.post('/v1/locks/shared-http/acquire', { ttl: '1m' });
    assert.equal(again.acquired, true);
    await served.post('/v1/locks/shared-http/release', { token: again.token });
  } finally {
    await served.stop();
  }
});
