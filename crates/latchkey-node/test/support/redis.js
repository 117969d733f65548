'use strict';
// Private redis-server processes on free loopback ports (never 6379), as
// crates/latchkey-testkit starts them for the Rust tests: one server, a
// 3-primary cluster, a primary watched by a Sentinel set. Each is stopped
// by stop() (and killed with the test process in any case).
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.unref();
      s.on('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => resolve(port));
      });
    });
    // A cluster node also listens on port + 10000.
    if (port !== 6379 && port < 55000) return port;
  }
}

function ping(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
    s.on('error', () => resolve(false));
  });
}

async function until(what, check, within = 10_000) {
  const end = Date.now() + within;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`test redis: ${what} did not happen within ${within} ms`);
}

const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** One redis-server; `args` are extra command-line options, `program` another server's binary. */
async function startRedis(args = [], { sentinel = false, program = 'redis-server' } = {}) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'latchkey-node-redis-'));
  let argv = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...args];
  if (sentinel) {
    const conf = path.join(dir, 'sentinel.conf');
    fs.writeFileSync(conf, `port ${port}\nbind 127.0.0.1\n${args.join('\n')}\n`);
    argv = [conf, '--sentinel'];
  }
  const child = spawn(program, argv, { stdio: 'ignore' });
  children.add(child);
  child.unref();
  await until(`redis-server on ${port}`, () => ping(port));
  return {
    port,
    pid: child.pid,
    url: `redis://127.0.0.1:${port}/`,
    cli: (...a) => execFileSync('redis-cli', ['-p', String(port), ...a]).toString().trim(),
    async stop() {
      children.delete(child);
      const gone = () => child.exitCode !== null || child.signalCode !== null;
      if (!gone()) {
        child.kill('SIGKILL');
        // Looked at on a timer: an unref'd child's exit event would not keep
        // this process up to hear it.
        await until(`redis-server on ${port} to exit`, gone);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A Redis Cluster of 3 primaries (no replicas). */
async function startCluster() {
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(await startRedis(['--cluster-enabled', 'yes', '--cluster-node-timeout', '2000']));
  }
  execFileSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
  await until('cluster_state:ok', () => nodes.every((n) => n.cli('cluster', 'info').includes('cluster_state:ok')));
  return {
    nodes,
    urls: nodes.map((n) => n.url),
    stop: () => Promise.all(nodes.map((n) => n.stop())),
  };
}

/** A primary and 3 Sentinels watching it as `master`. */
async function startSentinels(master = 'mymaster') {
  const primary = await startRedis();
  const sentinels = [];
  for (let i = 0; i < 3; i++) {
    sentinels.push(
      await startRedis(
        [`sentinel monitor ${master} 127.0.0.1 ${primary.port} 2`, `sentinel down-after-milliseconds ${master} 2000`],
        { sentinel: true },
      ),
    );
  }
  await until('sentinels see the primary', () =>
    sentinels.every((s) => s.cli('sentinel', 'get-master-addr-by-name', master).includes(String(primary.port))),
  );
  return {
    primary,
    master,
    sentinels: sentinels.map((s) => `127.0.0.1:${s.port}`),
    stop: () => Promise.all([primary, ...sentinels].map((s) => s.stop())),
  };
}

module.exports = { startRedis, startCluster, startSentinels, freePort, until };

/**
 * Awaits a notification that is weak by design (a loss, a release
 * request: they never keep a process alive by themselves), with a timer
 * keeping this test process alive meanwhile, as a holder's work would.
 */
async function alive(promise) {
  const timer = setInterval(() => {}, 1_000);
  try {
    return await promise;
  } finally {
    clearInterval(timer);
  }
}
module.exports.alive = alive;
