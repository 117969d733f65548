'use strict';
// The event loop and processes: a hold's watchdog and loss listener never
// keep a finished process alive, and its exit gives the holds back; a
// pending wait does keep it alive; Ctrl-C during a wait; a client per worker
// thread and per forked process; a terminated worker's waits end with it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, fork } = require('node:child_process');
const { Worker } = require('node:worker_threads');
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

function run(args, onLine) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
    onLine?.(out, child);
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out })));
}

test('a process that ends without close() exits by itself and gives its holds back', async () => {
  const started = Date.now();
  const { code, out } = await run([fixture('hold-and-exit.js'), redis.url]);
  assert.equal(code, 0);
  assert.match(out, /held/);
  assert.ok(Date.now() - started < 10_000, 'not kept alive by the 30 s watchdog');
  assert.equal(redis.cli('exists', 'latchkey:exit-held'), '0', 'released at exit, not left to its TTL');
  const free = await client.semaphore('exit-sem', 2, { ttl: 1_000 }).tryAcquire({ permits: 2 });
  assert.ok(free, 'the permit was given back at exit');
  await free.release();
});

test('a pending wait keeps the process alive until it is answered; then it exits by itself', async () => {
  const holder = await client.lock('alone', { ttl: 30_000 }).acquire();
  let released;
  const { code, out } = await run([fixture('wait-alone.js'), redis.url], (text) => {
    // The holder keeps it a while after the child waits: the child has
    // nothing but its wait to stay up for meanwhile.
    if (text.includes('waiting') && released === undefined) {
      released = new Promise((r) => setTimeout(r, 300)).then(() => holder.release());
    }
  });
  await released;
  assert.equal(code, 0);
  assert.match(out, /got\nreleased/);
  assert.equal(redis.cli('exists', 'latchkey:alone'), '0');
});

test('Ctrl-C during a wait aborts it and leaves no queue entry', async () => {
  const holder = await client.lock('sigint', { ttl: 30_000, fair: true }).acquire();
  const { code, out } = await run([fixture('wait-sigint.js'), redis.url], (text, child) => {
    if (text.includes('waiting') && !child.signalled) {
      child.signalled = true;
      setTimeout(() => child.kill('SIGINT'), 100);
    }
  });
  assert.equal(code, 130);
  assert.match(out, /aborted: interrupted/);
  await holder.release();
  const next = await client.lock('sigint', { ttl: 5_000, fair: true }).tryAcquire();
  assert.ok(next, 'the interrupted waiter left the queue');
  await next.release();
});

test('worker threads and forked processes, a client each, exclude each other', async () => {
  const job = { url: redis.url, rounds: 15 };
  const workers = [0, 1].map(
    (id) =>
      new Promise((resolve, reject) => {
        const w = new Worker(fixture('contend.js'), { workerData: { ...job, id: `worker-${id}` } });
        w.on('message', resolve);
        w.on('error', reject);
      }),
  );
  const forks = [0, 1].map(
    (id) =>
      new Promise((resolve, reject) => {
        const c = fork(fixture('contend.js'), [JSON.stringify({ ...job, id: `fork-${id}` })]);
        c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`fork ${id} exited ${code}`))));
      }),
  );
  await Promise.all([...workers, ...forks]);
});

test('a terminated worker thread\'s waits end with it: its fair waiter leaves the queue', async () => {
  const name = 'worker-fair';
  const holder = await client.lock(name, { ttl: 30_000, fair: true }).acquire();
  const worker = new Worker(fixture('wait-in-worker.js'), { workerData: { url: redis.url, name } });
  await new Promise((resolve) => worker.once('message', resolve));
  const queued = () => redis.cli('exists', `{latchkey:${name}}:queue`) === '1';
  await until('the worker queued', queued);
  await worker.terminate();
  // Still held: only the end of the worker's wait can empty the queue (a
  // wait left running would stay queued, renewing its place).
  await until('the terminated waiter left the queue', () => !queued());
  assert.ok(holder.isHeld());
  await holder.release();
  const next = await client.lock(name, { ttl: 5_000, fair: true }).tryAcquire();
  assert.ok(next, 'nobody else took it');
  await next.release();
});
