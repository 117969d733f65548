'use strict';
// TLS for the tests: a private CA and the certificates it signs, made at
// test time with `openssl` (as the Python package's tests make theirs), and
// a redis-server that serves TLS on a port of its own. Each `makeCerts()`
// is a new CA: a client trusting one refuses a server another one signed.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis, freePort } = require('./redis');

/** Why TLS cannot be tested here (no `openssl`), or null. */
function whyNoTls() {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return null;
  } catch {
    return 'openssl is not installed';
  }
}

const dirs = new Set();
process.on('exit', () => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * A CA, a server certificate for `names` (DNS names or IP addresses) and a
 * client certificate, all signed by the CA, as PEM files: the paths of
 * `ca`, `serverCert`, `serverKey`, `clientCert`, `clientKey`.
 */
function makeCerts(names = ['127.0.0.1', 'localhost']) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'latchkey-node-tls-'));
  dirs.add(dir);
  const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  // P-256 keys: quick to make, and what rustls and redis-server both speak.
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...key, '-days', '2', '-subj', '/CN=latchkey-test-ca', '-keyout', 'ca.key', '-out', 'ca.pem');
  const sign = (who, cn, ext) => {
    fs.writeFileSync(path.join(dir, `${who}.ext`), ext);
    ssl('req', ...key, '-subj', `/CN=${cn}`, '-keyout', `${who}.key`, '-out', `${who}.csr`);
    ssl('x509', '-req', '-in', `${who}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-days', '2', '-extfile', `${who}.ext`, '-out', `${who}.pem`);
  };
  const san = names.map((n) => (/^[\d.]+$/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  sign('server', names[0], `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  sign('client', 'latchkey-test-client', 'extendedKeyUsage=clientAuth\n');
  const at = (f) => path.join(dir, f);
  return {
    ca: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
  };
}

/**
 * A redis-server serving TLS with `certs` (`clientAuth`: 'no', 'optional'
 * or 'yes', redis's `tls-auth-clients`). Its plain port stays open for the
 * test's own readiness check and `cli`; `url` is the TLS port's rediss://.
 */
async function startTlsRedis(certs, clientAuth = 'no') {
  const tlsPort = await freePort();
  const server = await startRedis([
    '--tls-port', String(tlsPort),
    '--tls-cert-file', certs.serverCert,
    '--tls-key-file', certs.serverKey,
    '--tls-ca-cert-file', certs.ca,
    '--tls-auth-clients', clientAuth,
  ]);
  return { ...server, tlsPort, url: `rediss://127.0.0.1:${tlsPort}/` };
}

module.exports = { whyNoTls, makeCerts, startTlsRedis };
