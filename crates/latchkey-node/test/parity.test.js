'use strict';
// The same library: every public member of the Python package's classes has
// a Node counterpart (snake_case → camelCase), or a reviewed reason below. A
// method added in Python fails this test until Node has it or lists why.
// (Python's own test holds it to the Rust library's recipes and guards.)
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const lk = require('..');

const REPO = path.join(__dirname, '..', '..', '..');
const PYTHON = process.env.LATCHKEY_PYTHON || path.join(REPO, 'target', 'py-venv', 'bin', 'python');
const havePython = fs.existsSync(PYTHON) && spawnSync(PYTHON, ['-c', 'import latchkey']).status === 0;

// Python class → the Node class that answers for it (one Guard for every
// hold, one Lock for a lock and several).
const BOUND = {
  Client: lk.Client,
  Redlock: lk.Redlock,
  Lock: lk.Lock,
  MultiLock: lk.Lock,
  LockGuard: lk.Guard,
  MultiGuard: lk.Guard,
  Permit: lk.Guard,
  Leadership: lk.Leadership,
  Semaphore: lk.Semaphore,
  RwLock: lk.RwLock,
  Latch: lk.Latch,
  Barrier: lk.Barrier,
  Election: lk.Election,
  Observer: lk.Observer,
  Listener: lk.Listener,
  FencedResource: lk.FencedResource,
};

// Deliberately not in Node, and why (reviewed). `Class.member` or `member`.
const EXCEPTIONS = {
  connect: 'a static method in Node: Client.connect(url), Redlock.connect(urls)',
  flush_blocking: 'Node has no blocking calls: await client.flush()',
  lost: "Python's LostEvent; Node's is guard.signal (an AbortSignal, aborted with LockLost)",
  release_requested: "Python's awaitable; Node's is guard.onReleaseRequested(listener)",
  raise_to: 'raise() in Node (`raise` is a keyword only in Python)',
  wait_any: 'client.wait(names) takes a list',
  acquire_many: 'acquire({ permits: k })',
  try_acquire_many: 'tryAcquire({ permits: k })',
  'Barrier.arrive_and_wait': "Barrier.wait in Node (Python's wait is its deprecated alias)",
  // redis-py's Lock.locked(), for Python users who come from it; node-redlock
  // has none, and a check is stale by the next tryAcquire().
  'Lock.locked': "redis-py's spelling; Node's tryAcquire() answers for real",
  'MultiLock.locked': 'as Lock.locked',
  // Python's Redlock has every factory and each raises Unsupported; Node's
  // Redlock class offers only what works on one: lock and lockAll.
  'Redlock.barrier': 'locks only on a Redlock', 'Redlock.election': 'locks only on a Redlock',
  'Redlock.fenced': 'locks only on a Redlock', 'Redlock.latch': 'locks only on a Redlock',
  'Redlock.listen': 'locks only on a Redlock', 'Redlock.request_release': 'locks only on a Redlock',
  'Redlock.revoke': 'locks only on a Redlock', 'Redlock.rwlock': 'locks only on a Redlock',
  'Redlock.semaphore': 'locks only on a Redlock', 'Redlock.signal': 'locks only on a Redlock',
  'Redlock.signal_one': 'locks only on a Redlock', 'Redlock.wait': 'locks only on a Redlock',
};

const camel = (snake) => snake.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** Every member a Node class offers: its prototype chain's and, for recipes, their own fields. */
function nodeMembers(Class) {
  const names = new Set(Object.getOwnPropertyNames(Class));
  for (let p = Class.prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const n of Object.getOwnPropertyNames(p)) names.add(n);
  }
  return names;
}

// Recipes keep name and ttl as fields of the instance, not the prototype.
const FIELDS = new Set(['name', 'ttl']);

function pythonMembers() {
  const script = `
import json, latchkey
print(json.dumps({n: sorted(a for a in dir(getattr(latchkey, n)) if not a.startswith('_'))
                  for n in ${JSON.stringify(Object.keys(BOUND))}}))`;
  const run = spawnSync(PYTHON, ['-c', script], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout);
}

test('every public member of the Python classes has a Node counterpart', { skip: !havePython && 'no Python package (./dev test builds it)' }, () => {
  const missing = [];
  for (const [pyClass, members] of Object.entries(pythonMembers())) {
    const node = nodeMembers(BOUND[pyClass]);
    for (const m of members) {
      if (EXCEPTIONS[m] || EXCEPTIONS[`${pyClass}.${m}`]) continue;
      if (node.has(camel(m)) || FIELDS.has(m)) continue;
      missing.push(`${pyClass}.${m} (Node: ${BOUND[pyClass].name}.${camel(m)})`);
    }
  }
  assert.deepEqual(missing, [], `Python members with no Node counterpart (bind them or list why):\n${missing.join('\n')}`);
});

test('every listed exception is still a Python member', { skip: !havePython && 'no Python package (./dev test builds it)' }, () => {
  const python = pythonMembers();
  const every = new Set(Object.entries(python).flatMap(([c, ms]) => ms.flatMap((m) => [m, `${c}.${m}`])));
  const stale = Object.keys(EXCEPTIONS).filter((e) => !every.has(e));
  assert.deepEqual(stale, [], `listed but gone from Python: ${stale.join(', ')}`);
});
