'use strict';
// The secured servers: TLS (a CA given in tlsCa, mutual TLS with tlsCert and
// tlsKey, a tlsServerName override) with certificates made here, and ACL
// users in the URL; each refusal is its typed error with its stable code.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startRedis } = require('./support/redis');
const { whyNoTls, makeCerts, startTlsRedis } = require('./support/tls');
const lk = require('..');

// (false, not null: node:test skips a test whose skip option is null.)
const skip = whyNoTls() ?? false;

/** A lock taken and given back through `client`, seen in Redis by `server.cli`. */
async function lockRoundTrip(client, server, name) {
  const lock = client.lock(name, { ttl: 10_000 });
  const guard = await lock.acquire({ timeout: 5_000 });
  assert.equal(server.cli('get', `latchkey:${name}`), guard.token);
  // A waiter is woken over the same TLS (its pub/sub connection).
  const waiting = lock.acquire({ timeout: 5_000 });
  assert.equal(await guard.release(), true);
  const next = await waiting;
  assert.equal(await next.release(), true);
  assert.equal(server.cli('exists', `latchkey:${name}`), '0');
}

/** Asserts that `connecting` rejects with a TlsError (code TLS) saying `why` (naming the option to give). */
async function refusedAsTls(connecting, why) {
  await assert.rejects(connecting, (e) => {
    assert.ok(e instanceof lk.TlsError, `${e.name}: ${e.message}`);
    assert.ok(e instanceof lk.LatchkeyError);
    assert.equal(e.code, 'TLS');
    assert.equal(e.transient, false, 'a retry does not fix a certificate');
    assert.match(e.message, why);
    return true;
  });
}

test('TLS: a lock over rediss:// trusting the CA in tlsCa; another CA is refused as TLS', { skip }, async () => {
  const certs = makeCerts();
  const server = await startTlsRedis(certs);
  try {
    const client = await lk.Client.connect(server.url, { tlsCa: certs.ca });
    await lockRoundTrip(client, server, 'tls-lock');
    await client.close();
    const stranger = makeCerts();
    await refusedAsTls(lk.Client.connect(server.url, { tlsCa: stranger.ca, commandTimeout: 2_000 }), /not signed by a CA we trust.*\(the tlsCa option\)/);
    // A Redlock takes the same options, for every instance.
    const redlock = await lk.Redlock.connect([server.url], { tlsCa: certs.ca });
    await lockRoundTrip(redlock, server, 'tls-redlock');
    await redlock.close();
  } finally {
    await server.stop();
  }
});

test('mutual TLS: tlsCert and tlsKey are presented; without them the server refuses, as TLS', { skip }, async () => {
  const certs = makeCerts();
  const server = await startTlsRedis(certs, 'yes');
  try {
    const client = await lk.Client.connect(server.url, {
      tlsCa: certs.ca,
      tlsCert: certs.clientCert,
      tlsKey: certs.clientKey,
    });
    await lockRoundTrip(client, server, 'mtls-lock');
    await client.close();
    await refusedAsTls(lk.Client.connect(server.url, { tlsCa: certs.ca, commandTimeout: 2_000 }), /requires a client certificate.*\(the tlsCert and tlsKey options\)/);
    await assert.rejects(lk.Client.connect(server.url, { tlsCa: certs.ca, tlsCert: certs.clientCert }), (e) => {
      assert.ok(e instanceof lk.InvalidArgument, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'INVALID_ARGUMENT');
      return true;
    });
  } finally {
    await server.stop();
  }
});

test('tlsServerName: a certificate for another name than the URL host is accepted only when told', { skip }, async () => {
  const certs = makeCerts(['redis.test.invalid']);
  const server = await startTlsRedis(certs);
  try {
    await refusedAsTls(lk.Client.connect(server.url, { tlsCa: certs.ca, commandTimeout: 2_000 }), /not valid for the host.*\(the tlsServerName option\)/);
    const client = await lk.Client.connect(server.url, { tlsCa: certs.ca, tlsServerName: 'redis.test.invalid' });
    await lockRoundTrip(client, server, 'tls-named');
    await client.close();
  } finally {
    await server.stop();
  }
});

test('ACL: a user and password in the URL; a wrong password is AUTH, keys out of reach NO_PERMISSION', async () => {
  const server = await startRedis();
  try {
    server.cli('acl', 'setuser', 'locker', 'on', '>s3cret', '~latchkey:*', '~{latchkey:*', '&*', '+@all');
    // A user that may connect but not touch latchkey's keys.
    server.cli('acl', 'setuser', 'outsider', 'on', '>pw', '~other:*', '&*', '+@all');
    const at = `127.0.0.1:${server.port}/`;
    const client = await lk.Client.connect(`redis://locker:s3cret@${at}`);
    await lockRoundTrip(client, server, 'acl-lock');
    await client.close();
    await assert.rejects(lk.Client.connect(`redis://locker:pw-9f3a@${at}`), (e) => {
      assert.ok(e instanceof lk.AuthError, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'AUTH');
      assert.doesNotMatch(e.message, /pw-9f3a/, 'the password is not repeated');
      return true;
    });
    const outsider = await lk.Client.connect(`redis://outsider:pw@${at}`);
    await assert.rejects(outsider.lock('acl-lock', { ttl: 5_000 }).tryAcquire(), (e) => {
      assert.ok(e instanceof lk.NoPermission, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'NO_PERMISSION');
      return true;
    });
    await outsider.close();
  } finally {
    await server.stop();
  }
});
