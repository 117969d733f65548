'use strict';
// What latchkey-node's former completion queue buys, run by
// bench/node_queue.sh: two builds of the package in one Node process, chunks
// of uncontended acquire+release cycles alternated A B, B A, A B, ... round
// by round:
//   A = Promises settled through one completion queue per JavaScript thread
//       (src/completions.rs, as it was),
//   B = napi-rs's per-call Promise, a JsDeferred (the mechanism behind its
//       AsyncBlock and Env::spawn_future; src/runtime.rs).
// Two loads:
//   one   = one task, one lock (the bench's "uncontended" scenario),
//   many  = MANY tasks at once on MANY keys of one client (calls in flight
//           together, where the queue settles a batch per wake-up).
// Per side and load: every cycle's latency (p50, p99 over all its chunks),
// cycles/s and client CPU per cycle (process.cpuUsage: every thread of the
// process) per chunk, their medians; B ÷ A per round, then the median and
// middle half of those ratios. Prints one JSON line.
// Usage: node bench/node_queue.js PORT DIR_A DIR_B [ROUNDS] [CHUNK] [MANY]
const [port, dirA, dirB, roundsArg, chunkArg, manyArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 20);
const chunk = Number(chunkArg ?? 400);
const many = Number(manyArg ?? 16);
const url = `redis://127.0.0.1:${port}/`;

async function side(dir, tag) {
  const lk = require(dir);
  const client = await lk.Client.connect(url);
  const locks = Array.from({ length: many }, (_, i) =>
    client.lock(`q-${tag}-${i}`, { ttl: 10_000, watchdog: false }),
  );
  return { tag, client, locks };
}

// `tasks` loops, `n` cycles in all; each cycle's latency in µs into `lat`.
async function cycles(s, n, tasks, lat) {
  const per = Math.floor(n / tasks);
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    s.locks.slice(0, tasks).map(async (lock) => {
      for (let i = 0; i < per; i++) {
        const a = process.hrtime.bigint();
        await (await lock.acquire()).release();
        lat?.push(Number(process.hrtime.bigint() - a) / 1000);
      }
    }),
  );
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  const done = per * tasks;
  return { rate: done / wall, cpu: (c.user + c.system) / done };
}

const sorted = (xs) => Float64Array.from(xs).sort();
const pct = (s, p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
const median = (xs) => {
  const s = sorted(xs);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const mid = (xs) => {
  const s = sorted(xs);
  return `${median(xs).toFixed(3)} (${pct(s, 0.25).toFixed(3)}-${pct(s, 0.75).toFixed(3)})`;
};

(async () => {
  const sides = { A: await side(dirA, 'A'), B: await side(dirB, 'B') };
  const out = {};
  for (const [load, tasks] of [['one', 1], ['many', many]]) {
    for (const s of Object.values(sides)) await cycles(s, chunk, tasks); // warm-up
    const lat = { A: [], B: [] };
    const rate = { A: [], B: [] };
    const cpu = { A: [], B: [] };
    const ratio = { rate: [], cpu: [], p50: [] };
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 ? ['B', 'A'] : ['A', 'B'];
      const round = {};
      for (const t of order) {
        const l = [];
        round[t] = await cycles(sides[t], chunk, tasks, l);
        round[t].p50 = median(l);
        lat[t].push(...l);
        rate[t].push(round[t].rate);
        cpu[t].push(round[t].cpu);
      }
      ratio.rate.push(round.B.rate / round.A.rate);
      ratio.cpu.push(round.B.cpu / round.A.cpu);
      ratio.p50.push(round.B.p50 / round.A.p50);
    }
    const summary = (t) => {
      const s = sorted(lat[t]);
      return {
        p50_us: pct(s, 0.5).toFixed(1),
        p99_us: pct(s, 0.99).toFixed(1),
        cycles_per_s: median(rate[t]).toFixed(0),
        cpu_us_per_cycle: median(cpu[t]).toFixed(1),
      };
    };
    out[load] = {
      tasks,
      A: summary('A'),
      B: summary('B'),
      'B/A': { p50: mid(ratio.p50), cycles_per_s: mid(ratio.rate), cpu: mid(ratio.cpu) },
    };
  }
  console.log(JSON.stringify({ rounds, chunk, ...out }));
  for (const s of Object.values(sides)) await s.client.close();
})();
