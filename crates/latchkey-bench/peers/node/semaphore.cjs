// Benchmark driver for npm `redis-semaphore` (its `Semaphore`, over one
// ioredis client, every option at its default: lockTimeout 10 s,
// acquireTimeout 10 s, retryInterval 10 ms, refreshInterval 8 s), for the
// `primitives` scenario of latchkey-bench.
//
//     NODE_PATH=bench/peers/node/node_modules node semaphore.cjs PORT uncontended CYCLES PERMITS
//     -> {"version": V, "cycles": N, "seconds": S}
//     NODE_PATH=… node semaphore.cjs PORT handoff TASKS SECONDS HOLD_US
//     -> {"version": V, "gaps_us": [...], "acquisitions": N}
//
// `handoff`: TASKS loops in this process on one semaphore of 1 permit, each
// with a Semaphore of its own: acquire, hold HOLD_US, release. A gap is the
// time from a release's start to the next acquisition by another task.
'use strict';

const Redis = require('ioredis');
const { Semaphore } = require('redis-semaphore');
const version = require('redis-semaphore/package.json').version;

const now = () => Number(process.hrtime.bigint());
const sleeper = new Int32Array(new SharedArrayBuffer(4));
function hold(us) {
  if (us >= 1000) return new Promise((r) => setTimeout(r, us / 1000));
  Atomics.wait(sleeper, 0, 0, us / 1000);
  return Promise.resolve();
}

async function main() {
  const [port, mode, a, b, c] = process.argv.slice(2);
  const client = new Redis({ port: Number(port), host: '127.0.0.1', lazyConnect: false });
  if (mode === 'uncontended') {
    const cycles = Number(a);
    const permits = Number(b);
    const key = 'bench-sem-uncontended';
    // Warm up: the scripts' SHA cache, the connection.
    for (let i = 0; i < 20; i++) {
      const s = new Semaphore(client, key, permits);
      await s.acquire();
      await s.release();
    }
    const started = now();
    for (let i = 0; i < cycles; i++) {
      const s = new Semaphore(client, key, permits);
      await s.acquire();
      await s.release();
    }
    const seconds = (now() - started) / 1e9;
    process.stdout.write(JSON.stringify({ version, cycles, seconds }) + '\n');
  } else if (mode === 'handoff') {
    const tasks = Number(a);
    const until = now() + Number(b) * 1e9;
    const holdUs = Number(c);
    const key = 'bench-sem-handoff';
    let lastRelease = null;
    let lastHolder = -1;
    const gaps = [];
    let acquisitions = 0;
    const loop = async (id) => {
      while (now() < until) {
        const s = new Semaphore(client, key, 1);
        try {
          await s.acquire();
        } catch (e) {
          continue; // acquireTimeout: try again, as users do
        }
        const at = now();
        acquisitions++;
        if (lastRelease !== null && lastHolder !== id) gaps.push((at - lastRelease) / 1000);
        await hold(holdUs);
        lastRelease = now();
        lastHolder = id;
        await s.release();
      }
    };
    await Promise.all([...Array(tasks).keys()].map(loop));
    process.stdout.write(JSON.stringify({ version, gaps_us: gaps, acquisitions }) + '\n');
  }
  client.disconnect();
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e) }) + '\n');
  process.exit(1);
});
