// Benchmark driver for latchkey's own Node package (crates/latchkey-node,
// installed by bench/peers/install.sh as latchkey-redis) on the `primitives`
// scenario's semaphore, with the interface of semaphore.cjs (redis-semaphore):
//
//     NODE_PATH=bench/peers/node/node_modules node latchkey_semaphore.cjs PORT uncontended CYCLES PERMITS
//     -> {"version": V, "cycles": N, "seconds": S}
//     NODE_PATH=… node latchkey_semaphore.cjs PORT handoff TASKS SECONDS HOLD_US
//     -> {"version": V, "gaps_us": [...], "acquisitions": N}
//
// Uncontended: `tryAcquire()` + `release()` on one semaphore, as the Rust
// rows do. Hand-off: TASKS loops in this process, a client each (as the
// Rust contenders have), on a semaphore of 1 permit, woken by the release's
// message: acquire, hold HOLD_US, release. A gap is the time from a
// release's start to the next acquisition by another task.
'use strict';

const { Client } = require('latchkey-redis');
const version = require('latchkey-redis/package.json').version;

const TTL_MS = 10000;
const now = () => Number(process.hrtime.bigint());
const sleeper = new Int32Array(new SharedArrayBuffer(4));
function hold(us) {
  if (us >= 1000) return new Promise((r) => setTimeout(r, us / 1000));
  Atomics.wait(sleeper, 0, 0, us / 1000);
  return Promise.resolve();
}

async function main() {
  const [port, mode, a, b, c] = process.argv.slice(2);
  const url = `redis://127.0.0.1:${port}/`;
  if (mode === 'uncontended') {
    const cycles = Number(a);
    const client = await Client.connect(url);
    const sem = client.semaphore('bench-sem-uncontended-node', Number(b), { ttl: TTL_MS, watchdog: false });
    for (let i = 0; i < 20; i++) await (await sem.tryAcquire()).release();
    const started = now();
    for (let i = 0; i < cycles; i++) await (await sem.tryAcquire()).release();
    const seconds = (now() - started) / 1e9;
    process.stdout.write(JSON.stringify({ version, cycles, seconds }) + '\n');
    await client.close();
  } else if (mode === 'handoff') {
    const tasks = Number(a);
    const until = now() + Number(b) * 1e9;
    const holdUs = Number(c);
    let lastRelease = null;
    let lastHolder = -1;
    const gaps = [];
    let acquisitions = 0;
    const clients = await Promise.all([...Array(tasks).keys()].map(() => Client.connect(url)));
    const loop = async (id) => {
      const sem = clients[id].semaphore('bench-sem-handoff-node', 1, { ttl: TTL_MS, watchdog: false });
      while (now() < until) {
        let permit;
        try {
          permit = await sem.acquire({ timeout: 5_000 });
        } catch (e) {
          continue;
        }
        const at = now();
        acquisitions++;
        if (lastRelease !== null && lastHolder !== id) gaps.push((at - lastRelease) / 1000);
        await hold(holdUs);
        lastRelease = now();
        lastHolder = id;
        await permit.release();
      }
    };
    await Promise.all([...Array(tasks).keys()].map(loop));
    process.stdout.write(JSON.stringify({ version, gaps_us: gaps, acquisitions }) + '\n');
    await Promise.all(clients.map((cl) => cl.close()));
  }
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e) }) + '\n');
  process.exit(1);
});
