// Benchmark driver for the Node peer of latchkey (scenarios 1 and 2).
//
//     NODE_PATH=bench/peers/node/node_modules node driver.cjs LIB PORT
//
// LIB is `node-redlock`: @sesamecare-oss/redlock over one ioredis client, with
// the library's default settings (retryCount 10, retryDelay 200 ms,
// retryJitter 100 ms, driftFactor 0.01); only the lock's TTL (10 s, as for
// every library in the benchmark) is given. An acquire that runs out of
// retries throws; a waiter then simply calls acquire again, as users do.
// `node-redlock5` is `redlock` 5.0.0-beta.2, the package most users install
// (`npm install redlock`), under the npm alias `redlock5` (see
// bench/peers/install.sh): the API the fork kept, set up the same way.
// Or `latchkey-node`: latchkey's own Node package (crates/latchkey-node,
// the Rust library under napi-rs, built in release by bench/peers/install.sh),
// one client, one Lock object per key, the watchdog off as the other
// libraries have none; waiters sleep until the release's message.
//
// The driver speaks the benchmark's line protocol (see
// crates/latchkey-bench/src/driver.rs): one JSON object per line on stdout,
// one command per line on stdin.
//
//     -> {"ready": true, "lib": ..., "version": ...}     (or {"error": ...}, exit 1)
//     <- uncontended KEY CYCLES
//     -> {"cycles": N, "seconds": S}
//     <- handoff KEY TASKS HOLD_US SECONDS MAX_HANDOFFS
//     -> {"armed": true}
//     <- go
//     -> {"acquisitions": N, "acquired": [ns...], "released": [ns...]}
//
// Timestamps are CLOCK_MONOTONIC nanoseconds (process.hrtime), the clock the
// Rust and Python drivers use too.
'use strict';

const readline = require('readline');

const TTL_MS = 10000;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const now = () => Number(process.hrtime.bigint());

// Sub-millisecond holds: setTimeout cannot wait less than 1 ms, so the
// thread sleeps in Atomics.wait (blocking the event loop, as CPU work in the
// critical section would, but without burning a core the way a spin would).
const sleeper = new Int32Array(new SharedArrayBuffer(4));
function hold(us) {
  if (us >= 1000) return new Promise((r) => setTimeout(r, us / 1000));
  Atomics.wait(sleeper, 0, 0, us / 1000);
  return Promise.resolve();
}

// The two libraries behind one shape: acquire(key) → a lock, release(lock).
function nodeRedlock(redlock) {
  return {
    acquire: (key) => redlock.acquire([key], TTL_MS),
    release: (lock) => lock.release(),
  };
}

function latchkeyNode(client) {
  const locks = new Map();
  const lockOf = (key) => {
    let lock = locks.get(key);
    if (lock === undefined) {
      lock = client.lock(key, { ttl: TTL_MS, watchdog: false });
      locks.set(key, lock);
    }
    return lock;
  };
  return {
    acquire: (key) => lockOf(key).acquire(),
    release: (guard) => guard.release(),
  };
}

async function uncontended(redlock, key, cycles) {
  const started = now();
  for (let i = 0; i < cycles; i++) {
    const lock = await redlock.acquire(key);
    await redlock.release(lock);
  }
  emit({ cycles, seconds: (now() - started) / 1e9 });
}

async function handoff(redlock, key, tasks, holdUs, seconds, maxHandoffs, nextLine) {
  const acquired = [];
  const released = [];
  let acquisitions = 0;
  let stop = false;
  // A task that released stands aside until another task has acquired (see
  // crates/latchkey-bench/src/handoff.rs): every handoff goes to a waiter.
  let asides = [];
  const wakeAsides = () => {
    const still = [];
    for (const a of asides) {
      if (stop || acquisitions > a.mine) a.resolve();
      else still.push(a);
    }
    asides = still;
  };
  emit({ armed: true });
  if ((await nextLine()).trim() !== 'go') return;
  const deadline = now() + seconds * 1e9;
  const timer = setTimeout(() => {
    stop = true;
    wakeAsides();
  }, seconds * 1000);
  async function worker() {
    while (!stop && now() < deadline) {
      let lock;
      try {
        lock = await redlock.acquire(key);
      } catch (e) {
        continue; // out of retries: try again until the window closes
      }
      const t = now();
      acquisitions++;
      const mine = acquisitions;
      wakeAsides();
      const more = !stop && t < deadline && acquired.length < maxHandoffs;
      if (more) {
        acquired.push(t);
        await hold(holdUs);
        released.push(now());
      } else {
        stop = true;
      }
      await redlock.release(lock).catch(() => {});
      if (stop) wakeAsides();
      else if (acquisitions === mine) await new Promise((resolve) => asides.push({ mine, resolve }));
    }
  }
  await Promise.all(Array.from({ length: tasks }, worker));
  clearTimeout(timer);
  emit({ acquisitions, acquired, released });
}

async function main() {
  const [lib, portArg] = process.argv.slice(2);
  let redlock;
  let version;
  try {
    if (lib === 'node-redlock') {
      const Redis = require('ioredis');
      const { Redlock } = require('@sesamecare-oss/redlock');
      const client = new Redis({ host: '127.0.0.1', port: Number(portArg), lazyConnect: true });
      await client.connect();
      const r = new Redlock([client]);
      // As the library's README advises: a busy lock is reported as an 'error'
      // event, which would otherwise crash the process.
      r.on('error', () => {});
      redlock = nodeRedlock(r);
      version = require('@sesamecare-oss/redlock/package.json').version;
    } else if (lib === 'node-redlock5') {
      const Redis = require('ioredis');
      const mod = require('redlock5');
      const Redlock = mod.default || mod.Redlock || mod;
      const client = new Redis({ host: '127.0.0.1', port: Number(portArg), lazyConnect: true });
      await client.connect();
      const r = new Redlock([client]);
      r.on('error', () => {});
      redlock = nodeRedlock(r);
      // Its "exports" leave package.json out: read it beside the entry point.
      const entry = require.resolve('redlock5');
      const root = entry.slice(0, entry.lastIndexOf('/node_modules/redlock5/') + '/node_modules/redlock5/'.length);
      version = JSON.parse(require('fs').readFileSync(root + 'package.json', 'utf8')).version;
    } else if (lib === 'latchkey-node') {
      const { Client } = require('latchkey-redis');
      redlock = latchkeyNode(await Client.connect(`redis://127.0.0.1:${portArg}/`));
      version = require('latchkey-redis/package.json').version;
    } else {
      throw new Error(`unknown library ${lib}`);
    }
    const warm = await redlock.acquire('warm-up');
    await redlock.release(warm);
  } catch (e) {
    emit({ error: String(e && e.message ? e.message : e) });
    process.exit(1);
  }
  emit({ ready: true, lib, version });

  const rl = readline.createInterface({ input: process.stdin });
  const lines = rl[Symbol.asyncIterator]();
  const nextLine = async () => {
    const { value, done } = await lines.next();
    return done ? '' : value;
  };
  for (;;) {
    const line = await nextLine();
    const words = line.trim().split(/\s+/);
    if (!line || words[0] === 'quit') break;
    if (words[0] === 'uncontended') {
      await uncontended(redlock, words[1], Number(words[2]));
    } else if (words[0] === 'handoff') {
      await handoff(redlock, words[1], Number(words[2]), Number(words[3]), Number(words[4]), Number(words[5]), nextLine);
    } else if (words[0] !== '') {
      emit({ error: `unknown command ${words[0]}` });
    }
  }
  process.exit(0);
}

main();
