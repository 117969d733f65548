'use strict';
// The clients: `Client` (one Redis, a Cluster, a Sentinel-watched primary)
// and `Redlock` (N independent servers, locks only).
const native = require('./native');
const check = require('./checks');
const { invalid } = require('./errors');
const p = require('./primitives');
const { Listener } = require('./iterators');

const CONNECT = ['prefix', 'commandTimeout', 'sentinels', 'master', 'tlsCa', 'tlsCert', 'tlsKey', 'tlsServerName'];

/** How long close() waits for background releases by default (ms). */
const CLOSE_WITHIN = 5000;
/** How long the process's exit waits to give back the holds of clients never closed (ms). */
const EXIT_WITHIN = 1000;

// An `exit` listener gives back the holds of every client of this thread
// not closed yet, also of clients JavaScript no longer references (their
// holds keep them in the native layer): the process exits normally or by
// process.exit(). It never keeps the event loop alive. A terminated
// worker's clients are closed by the native layer (an env cleanup hook).
let exitHooked = false;
function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  process.once('exit', () => native.closeAllBlocking(EXIT_WITHIN));
}

function urlsOf(url) {
  const urls = Array.isArray(url) ? url : [url];
  if (urls.length === 0) throw invalid('at least one URL is needed');
  for (const u of urls) {
    if (typeof u !== 'string' || !/^(redis|rediss|valkey|valkeys|unix|redis\+unix):\/\//.test(u)) {
      throw invalid(`expected redis://[user[:password]@]host[:port][/db], rediss://… for TLS, or unix:///path, not ${JSON.stringify(u)}`);
    }
  }
  return urls;
}

function connectOptions(urls, o, extra) {
  const strings = ['prefix', 'master', 'tlsCa', 'tlsCert', 'tlsKey', 'tlsServerName'];
  for (const k of strings) {
    if (o[k] !== undefined && typeof o[k] !== 'string') throw invalid(`${k} must be a string`);
  }
  if (o.sentinels !== undefined && (!Array.isArray(o.sentinels) || o.sentinels.some((s) => typeof s !== 'string'))) {
    throw invalid('sentinels must be an array of "host:port" strings');
  }
  return {
    urls,
    prefix: o.prefix,
    commandTimeoutMs: check.ms(o.commandTimeout, 'commandTimeout', { optional: true, positive: true }),
    sentinels: o.sentinels,
    master: o.master,
    tlsCa: o.tlsCa,
    tlsCert: o.tlsCert,
    tlsKey: o.tlsKey,
    tlsServerName: o.tlsServerName,
    ...extra,
  };
}

class BaseClient {
  #native;
  #closing;
  /** @internal */
  constructor(nativeClient) {
    if (!(nativeClient instanceof native.Client)) throw invalid('use Client.connect() or Redlock.connect()');
    this.#native = nativeClient;
    hookExit();
  }
  /** @internal */
  get _native() {
    return this.#native;
  }
  /** The key prefix in force. */
  get prefix() {
    return this.#native.prefix.toString();
  }
  /** A lock called `name`: `{ ttl }` ms (required), watchdog on unless `watchdog: false`. */
  lock(name, options) {
    check.name(name);
    const o = p.holdOptions(options, 'lock', p.LOCK);
    return new p.Lock(check.sync(() => this.#native.lock(name, o)), this, name, o.ttlMs);
  }
  /** Several locks at once, all or none, without deadlock whatever order callers name them in. */
  lockAll(names, options) {
    const n = check.names(names);
    const o = p.holdOptions(options, 'lockAll');
    return new p.Lock(check.sync(() => this.#native.lockAll(n, o)), this, n.join('+'), o.ttlMs);
  }
  /**
   * Gives back every hold taken through this client (and the holds cached
   * locks keep), waits at most `within` ms for background releases, and
   * refuses later calls (ClientClosed). Whether everything finished in time.
   */
  async close(options) {
    const o = check.options(options, ['within'], 'close');
    const within = check.ms(o.within, 'within', { optional: true }) ?? CLOSE_WITHIN;
    if (this.#closing === undefined) this.#closing = check.call(() => this.#native.close(within));
    return this.#closing;
  }
  /** Waits at most `within` ms for background releases (of aborted waits, of holds given back). */
  flush(options) {
    return check.call(() => {
      const o = check.options(options, ['within'], 'flush');
      return this.#native.flush(check.ms(o.within, 'within', { optional: true }) ?? CLOSE_WITHIN);
    });
  }
  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

class Client extends BaseClient {
  /**
   * Connects to one Redis (`redis://…`, `rediss://…`), or, given a list,
   * to the nodes of one Redis Cluster; with `{ sentinels, master }`, to the
   * primary the Sentinels name (the URL is the template of its URL).
   */
  static async connect(url, options) {
    const urls = urlsOf(url);
    const o = check.options(options, CONNECT, 'Client.connect');
    if (o.sentinels !== undefined && urls.length !== 1) throw invalid('with sentinels, give one URL (the template)');
    return new Client(await check.call(native.connect(connectOptions(urls, o, {}))));
  }
  /** At most `permits` holders at once; each permit a lease of `{ ttl }` ms. */
  semaphore(name, permits, options) {
    check.name(name);
    check.count(permits, 'permits');
    const o = p.holdOptions(options, 'semaphore');
    return new p.Semaphore(check.sync(() => this._native.semaphore(name, permits, o)), this, name);
  }
  /** Many readers or one writer, phase-fair. */
  rwlock(name, options) {
    check.name(name);
    const o = p.holdOptions(options, 'rwlock');
    return new p.RwLock(check.sync(() => this._native.rwlock(name, o)), this, name);
  }
  /** A count-down latch kept `{ ttl }` ms (default 1 h). */
  latch(name, options) {
    check.name(name);
    const o = check.options(options, ['ttl'], 'latch');
    return new p.Latch(check.sync(() => this._native.latch(name, check.ttl(o.ttl ?? 3_600_000))), name);
  }
  /** `parties` meet, round after round; kept `{ ttl }` ms after its last use (default 1 h). */
  barrier(name, parties, options) {
    check.name(name);
    check.count(parties, 'parties');
    const o = check.options(options, ['ttl'], 'barrier');
    return new p.Barrier(check.sync(() => this._native.barrier(name, parties, check.ttl(o.ttl ?? 3_600_000))), name);
  }
  /** A leader election whose leadership is a lease of `{ ttl }` ms. */
  election(name, options) {
    check.name(name);
    const o = check.options(options, ['ttl'], 'election');
    if (o.ttl === undefined) throw invalid('election needs { ttl } (milliseconds)');
    return new p.Election(check.sync(() => this._native.election(name, check.ttl(o.ttl))), this, name);
  }
  /** A resource that refuses writes with a fencing token below the highest seen. */
  fenced(name) {
    check.name(name);
    return new p.FencedResource(check.sync(() => this._native.fenced(name)), name);
  }
  /** Sends `payload` to everyone listening on `name` now: how many heard it. Nothing is kept. */
  signal(name, payload) {
    return check.call(() => this._native.signal(check.name(name), check.payload(payload), false));
  }
  /** Sends `payload` to one listener of `name`: how many heard it (0 or 1). */
  signalOne(name, payload) {
    return check.call(() => this._native.signal(check.name(name), check.payload(payload), true));
  }
  /** A Listener of `names` (glob patterns with `{ patterns: true }`): an async iterator of signals. */
  async listen(names, options) {
    const n = check.names(typeof names === 'string' ? [names] : names);
    const o = check.options(options, ['patterns'], 'listen');
    check.bool(o.patterns, 'patterns');
    return new Listener(await check.call(this._native.listen(n, o.patterns === true)));
  }
  /** Waits for one signal on `names` (a name or a list: whichever comes first): `{ name, payload, unicast }`. */
  async wait(names, options) {
    check.waitOptions(options);
    const listener = await this.listen(names);
    try {
      return await listener.recv(options);
    } finally {
      await listener.close();
    }
  }
  /** Ends every hold of `name` now (an operator's call): what was revoked. */
  revoke(name) {
    return check.call(() => this._native.revoke(check.name(name)));
  }
  /** Asks the holders of `name` to let go (cooperative): how many were asked. */
  requestRelease(name) {
    return check.call(() => this._native.requestRelease(check.name(name)));
  }
}

class Redlock extends BaseClient {
  /** Connects to N independent servers (not replicas): a lock is held while a majority agree. */
  static async connect(urls, options) {
    if (!Array.isArray(urls) || urls.length === 0) throw invalid('a Redlock needs a list of server URLs');
    urlsOf(urls);
    const o = check.options(options, [...CONNECT.filter((k) => !['sentinels', 'master'].includes(k)), 'instanceTimeout'], 'Redlock.connect');
    const extra = {
      redlock: true,
      instanceTimeoutMs: check.ms(o.instanceTimeout, 'instanceTimeout', { optional: true, positive: true }),
    };
    delete o.instanceTimeout;
    return new Redlock(await check.call(native.connect(connectOptions(urls, o, extra))));
  }
  get instances() {
    return this._native.quorum()[0];
  }
  get quorum() {
    return this._native.quorum()[1];
  }
}

module.exports = { Client, Redlock };
