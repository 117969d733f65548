'use strict';
// The deployments: a 3-primary Redis Cluster (a list of seed URLs), a
// primary found through Sentinels, and a Redlock over 3 independent servers.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startRedis, startCluster, startSentinels } = require('./support/redis');
const lk = require('..');

async function everyPrimitive(client, tag) {
  const lock = client.lock(`${tag}-lock`, { ttl: 5_000, fencing: true });
  const g = await lock.acquire({ timeout: 5_000 });
  assert.equal(await lock.tryAcquire(), null);
  const t = await g.fencingToken();
  await g.release();
  const fair = client.lock(`${tag}-fair`, { ttl: 5_000, fair: true });
  const holder = await fair.acquire();
  const waiting = fair.acquire({ timeout: 5_000 });
  await holder.release();
  await (await waiting).release();
  const all = await client.lockAll([`${tag}-a`, `${tag}-b`], { ttl: 5_000 }).acquire({ timeout: 5_000 });
  await all.release();
  const sem = client.semaphore(`${tag}-sem`, 2, { ttl: 5_000 });
  const p = await sem.acquire({ permits: 2 });
  assert.equal(await sem.tryAcquire(), null);
  await p.release();
  const rw = client.rwlock(`${tag}-rw`, { ttl: 5_000 });
  await (await rw.read()).release();
  await (await rw.write()).release();
  const latch = client.latch(`${tag}-latch`);
  await latch.create(1);
  await latch.countDown();
  await latch.wait({ timeout: 1_000 });
  const election = client.election(`${tag}-election`, { ttl: 5_000 });
  const lead = await election.campaign('me', { timeout: 5_000 });
  assert.equal((await election.leader()).term, lead.term);
  await lead.resign();
  const listener = await client.listen(`${tag}-sig`);
  assert.equal(await client.signal(`${tag}-sig`, 'hi'), 1);
  assert.equal((await listener.recv({ timeout: 5_000 })).payload.toString(), 'hi');
  await listener.close();
  return t;
}

test('a Redis Cluster of 3 primaries, from a list of seed URLs', async () => {
  const cluster = await startCluster();
  try {
    const client = await lk.Client.connect(cluster.urls);
    assert.equal(typeof (await everyPrimitive(client, 'cluster')), 'bigint');
    await client.close();
    const one = await lk.Client.connect(cluster.urls[1]); // any node's URL will do
    const g = await one.lock('cluster-lock', { ttl: 5_000 }).acquire();
    await g.release();
    await one.close();
  } finally {
    await cluster.stop();
  }
});

test('a primary found through Sentinels', async () => {
  const set = await startSentinels();
  try {
    const client = await lk.Client.connect('redis://ignored/', { sentinels: set.sentinels, master: set.master });
    await everyPrimitive(client, 'sentinel');
    assert.equal(set.primary.cli('exists', '{latchkey:sentinel-lock}:fence'), '1');
    await client.close();
  } finally {
    await set.stop();
  }
});

test('a Redlock over 3 independent servers: held by a majority, one down is fine', async () => {
  const servers = [await startRedis(), await startRedis(), await startRedis()];
  try {
    const redlock = await lk.Redlock.connect(servers.map((s) => s.url), { instanceTimeout: 200 });
    assert.deepEqual([redlock.instances, redlock.quorum], [3, 2]);
    const lock = redlock.lock('invoices', { ttl: 5_000, fencing: true });
    const g = await lock.acquire({ timeout: 2_000 });
    assert.equal(typeof g.issuedFencingToken, 'bigint');
    assert.equal(servers.filter((s) => s.cli('exists', 'latchkey:invoices') === '1').length, 3);
    await g.release();
    await servers[2].stop();
    // (Strict fencing raises every instance's counter: with one down, a
    // lock made without fencing shows the majority rule alone.)
    const g2 = await redlock.lock('invoices-2', { ttl: 5_000 }).acquire({ timeout: 2_000 });
    assert.ok(g2.isHeld());
    await g2.release();
    assert.equal(redlock.semaphore, undefined, 'a Redlock makes locks only');
    await redlock.close();
    await assert.rejects(lk.Redlock.connect([servers[0].url, 'redis://127.0.0.1:1/', 'redis://127.0.0.1:2/']), lk.NoQuorum);
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
});
