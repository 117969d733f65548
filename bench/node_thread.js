'use strict';
// What latchkey-node's thread hop costs, run by bench/node_thread.sh: three
// clients in one Node process, chunks of uncontended acquire+release cycles
// rotated round by round (A N R, N R A, R A N, ...):
//   A = latchkey-node as shipped (each call's future on the runtime's worker
//       thread: JavaScript thread -> worker -> JavaScript thread),
//   N = the same facade over the native layer of bench/node_thread.patch
//       (each call's future on the JavaScript thread: no hop),
//   R = node-redlock over ioredis (all in the JavaScript thread).
// Per cycle: client CPU (process.cpuUsage: every thread of the process) and
// wall time, medians over rounds; ratios per round, then their median and
// middle half. Prints one JSON line.
// Usage: node bench/node_thread.js PORT DIR_A DIR_N NODE_MODULES [ROUNDS] [CHUNK]
const [port, dirA, dirN, mods, roundsArg, chunkArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 30);
const chunk = Number(chunkArg ?? 400);
const url = `redis://127.0.0.1:${port}/`;
const path = require('node:path');

async function latchkey(dir, tag) {
  const lk = require(dir);
  const client = await lk.Client.connect(url);
  const lock = client.lock(`ab-${tag}`, { ttl: 10_000, watchdog: false });
  return { tag, close: () => client.close(), acquire: () => lock.acquire(), release: (g) => g.release() };
}
async function redlock() {
  const Redis = require(path.join(mods, 'ioredis'));
  const { Redlock } = require(path.join(mods, '@sesamecare-oss/redlock'));
  const client = new Redis({ host: '127.0.0.1', port: Number(port), lazyConnect: true });
  await client.connect();
  const r = new Redlock([client]);
  r.on('error', () => {});
  return { tag: 'R', close: () => client.quit(), acquire: () => r.acquire(['ab-R'], 10_000), release: (l) => l.release() };
}
async function cycles(s, n) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await s.release(await s.acquire());
  const t1 = process.hrtime.bigint();
  const c = process.cpuUsage(c0);
  return { cpu: (c.user + c.system) / n, wall: Number(t1 - t0) / 1000 / n };
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const q = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(p * (s.length - 1))]; };
(async () => {
  const sides = [await latchkey(dirA, 'A'), await latchkey(dirN, 'N'), await redlock()];
  for (const s of sides) await cycles(s, chunk);
  const cpu = { A: [], N: [], R: [] }, wall = { A: [], N: [], R: [] };
  const ratio = { NA_cpu: [], A_R_speed: [], N_R_speed: [] };
  for (let r = 0; r < rounds; r++) {
    const order = sides.slice(r % 3).concat(sides.slice(0, r % 3));
    const out = {};
    for (const s of order) out[s.tag] = await cycles(s, chunk);
    for (const t of 'ANR') { cpu[t].push(out[t].cpu); wall[t].push(out[t].wall); }
    ratio.NA_cpu.push(out.N.cpu / out.A.cpu);
    ratio.A_R_speed.push(out.R.wall / out.A.wall);
    ratio.N_R_speed.push(out.R.wall / out.N.wall);
  }
  const f = (x) => x.toFixed(3);
  console.log(JSON.stringify({
    rounds, chunk,
    cpu: { A: median(cpu.A).toFixed(1), N: median(cpu.N).toFixed(1), R: median(cpu.R).toFixed(1) },
    wall: { A: median(wall.A).toFixed(1), N: median(wall.N).toFixed(1), R: median(wall.R).toFixed(1) },
    ratios: Object.fromEntries(Object.entries(ratio).map(([k, v]) => [k, `${f(median(v))} (${f(q(v, 0.25))}-${f(q(v, 0.75))})`])),
  }));
  for (const s of sides) await s.close();
})();
