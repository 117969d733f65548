'use strict';
// Every primitive of a client: a lock (and several at once), a semaphore,
// a read-write lock, a latch, a barrier, an election, a fenced resource.
const check = require('./checks');
const { Guard, Leadership } = require('./guard');
const { Observer } = require('./iterators');
const { lockLost } = require('./errors');

const HOLD = ['ttl', 'watchdog', 'fencing', 'maxHold', 'stopMargin', 'renewEvery', 'asking', 'holdAtLeast'];
const LOCK = [...HOLD, 'fair', 'cached'];

/** Options of a lease primitive as the native layer takes them (ms). */
function holdOptions(o, what, allowed = HOLD) {
  check.options(o, allowed, what);
  if (o === undefined || o === null || o.ttl === undefined) throw check.invalid(`${what} needs { ttl } (milliseconds)`);
  for (const b of ['watchdog', 'fencing', 'asking', 'fair']) check.bool(o[b], b);
  return {
    ttlMs: check.ttl(o.ttl),
    watchdog: o.watchdog,
    fencing: o.fencing,
    asking: o.asking,
    fair: o.fair,
    maxHoldMs: check.ms(o.maxHold, 'maxHold', { optional: true, positive: true }),
    stopMarginMs: check.ms(o.stopMargin, 'stopMargin', { optional: true }),
    renewEveryMs: check.ms(o.renewEvery, 'renewEvery', { optional: true, positive: true }),
    cachedMs: check.ms(o.cached, 'cached', { optional: true, positive: true }),
    holdAtLeastMs: check.ms(o.holdAtLeast, 'holdAtLeast', { optional: true, positive: true }),
  };
}

/** Acquires through a native Acquirer: Guards (or `Made`) owned by `owner`. */
class Acquisitions {
  #acquirer;
  #owner;
  #Made;
  constructor(acquirer, owner, Made = Guard) {
    this.#acquirer = acquirer;
    this.#owner = owner;
    this.#Made = Made;
  }
  async tryAcquire() {
    const g = await check.call(this.#acquirer.tryAcquire());
    return g === null ? null : new this.#Made(g, this.#owner);
  }
  async acquire(o) {
    const g = await check.wait(o, (timeout, cancel) => this.#acquirer.acquire(timeout, cancel));
    return new this.#Made(g, this.#owner);
  }
}

/**
 * Runs `fn(signal, guard)` while holding, then releases (redlock's
 * `using`); rejects with LockLost when the lock was lost meanwhile, even
 * if `fn` returned (its work may have run unprotected).
 */
async function using(acquire, fn) {
  if (typeof fn !== 'function') throw check.invalid('using takes a function');
  const guard = await acquire();
  const signal = guard.signal;
  let returned = false;
  try {
    const result = await fn(signal, guard);
    returned = true;
    return result;
  } finally {
    // Read before the release: after it nothing is lost any more. A guard
    // `fn` released itself (deadline null) is not a loss.
    const lost = signal.aborted;
    const held = guard.deadline !== null;
    const ours = await guard.release();
    if (returned && (lost || (held && !ours))) {
      // eslint-disable-next-line no-unsafe-finally
      throw lost ? signal.reason : lockLost(guard.name, 'GONE', 'it was no longer ours at its release');
    }
  }
}

class Lock {
  #take;
  #native;
  /** @internal */
  constructor(nativeAcquirer, owner, name, ttl) {
    this.#take = new Acquisitions(nativeAcquirer, owner);
    this.#native = nativeAcquirer;
    this.name = name;
    /** The TTL of each acquisition or renewal, in ms. */
    this.ttl = ttl;
  }
  /** A cached lock gives its kept idle hold back to Redis now: whether one was kept (false for other locks). */
  giveBack() {
    return check.call(() => this.#native.giveBack());
  }
  /** A guard, or null when someone else holds the lock. One round trip. */
  tryAcquire() {
    return this.#take.tryAcquire();
  }
  /** Waits for the lock: `{ signal }` aborts (rejects with its reason), `{ timeout }` ms rejects with WaitTimedOut. */
  async acquire(options) {
    check.waitOptions(options);
    return this.#take.acquire(options ?? {});
  }
  /** Acquires, runs `fn(signal, guard)` (signal: aborted when the lock is lost), releases; rejects with LockLost if it was lost meanwhile. */
  using(fn, options) {
    return using(() => this.acquire(options), fn);
  }
}

class Semaphore {
  #native;
  #owner;
  #byCount = new Map();
  /** @internal */
  constructor(nativeSemaphore, owner, name) {
    this.#native = nativeSemaphore;
    this.#owner = owner;
    this.name = name;
  }
  get permits() {
    return this.#native.permits;
  }
  #take(permits = 1) {
    check.count(permits, 'permits');
    let take = this.#byCount.get(permits);
    if (take === undefined) {
      take = new Acquisitions(check.sync(() => this.#native.acquirer(permits)), this.#owner);
      this.#byCount.set(permits, take);
    }
    return take;
  }
  /** `{ permits }` (default 1, all or none) at once, or null when they are not free. */
  async tryAcquire(options) {
    const o = check.options(options, ['permits'], 'tryAcquire');
    return this.#take(o.permits).tryAcquire();
  }
  async acquire(options) {
    const o = check.waitOptions(options, ['permits']);
    return this.#take(o.permits).acquire(o);
  }
  using(fn, options) {
    return using(() => this.acquire(options), fn);
  }
  /** Who holds the permits now. */
  holders() {
    return check.call(() => this.#native.holders());
  }
}

class RwLock {
  #read;
  #write;
  /** @internal */
  constructor(nativeRwLock, owner, name) {
    this.#read = new Acquisitions(nativeRwLock.reader(), owner);
    this.#write = new Acquisitions(nativeRwLock.writer(), owner);
    this.name = name;
  }
  async read(options) {
    check.waitOptions(options);
    return this.#read.acquire(options ?? {});
  }
  async write(options) {
    check.waitOptions(options);
    return this.#write.acquire(options ?? {});
  }
  tryRead() {
    return this.#read.tryAcquire();
  }
  tryWrite() {
    return this.#write.tryAcquire();
  }
}

class Latch {
  #native;
  /** @internal */
  constructor(nativeLatch, name) {
    this.#native = nativeLatch;
    this.name = name;
  }
  /** Creates it with `count`: false when it existed already. */
  create(count) {
    return check.call(() => this.#native.create(check.count(count, 'count')));
  }
  /** Counts down by one: what is left. */
  countDown() {
    return check.call(() => this.#native.countDown());
  }
  /** What is left, or null when there is no such latch. */
  count() {
    return check.call(() => this.#native.count());
  }
  /** Resolves when it opens (at once when open already). */
  async wait(options) {
    const o = check.waitOptions(options);
    return check.wait(o, (timeout, cancel) => this.#native.wait(timeout, cancel));
  }
}

class Barrier {
  #native;
  /** @internal */
  constructor(nativeBarrier, name) {
    this.#native = nativeBarrier;
    this.name = name;
  }
  get parties() {
    return this.#native.parties;
  }
  /** [generation (bigint), parties arrived], or null when the barrier does not exist. */
  state() {
    return check.call(() => this.#native.state());
  }
  /** Arrives and waits for the other parties: the generation met (bigint). */
  async wait(options) {
    const o = check.waitOptions(options);
    return check.wait(o, (timeout, cancel) => this.#native.wait(timeout, cancel));
  }
}

class Election {
  #native;
  #owner;
  /** @internal */
  constructor(nativeElection, owner, name) {
    this.#native = nativeElection;
    this.#owner = owner;
    this.name = name;
  }
  #candidate(value) {
    return new Acquisitions(this.#native.candidate(check.payload(value)), this.#owner, Leadership);
  }
  /** Waits until elected: a Leadership (its term is a fencing token). */
  async campaign(value, options) {
    check.waitOptions(options);
    return this.#candidate(value).acquire(options ?? {});
  }
  /** Leads now if nobody does: a Leadership, or null. */
  async tryCampaign(value) {
    return this.#candidate(value).tryAcquire();
  }
  /** The leader now ({ value, term, since }), or null. */
  leader() {
    return check.call(() => this.#native.leader());
  }
  /** Every change of leader, as an async iterator of `Leader | null`. */
  async observe() {
    return new Observer(await check.call(() => this.#native.observe()));
  }
}

class FencedResource {
  #native;
  /** @internal */
  constructor(nativeFenced, name) {
    this.#native = nativeFenced;
    this.name = name;
  }
  /** Stores `value` unless a write with a higher token was accepted: whether it was stored. */
  async write(token, value) {
    if (typeof token !== 'bigint') throw check.invalid('a fencing token is a bigint');
    const outcome = await check.call(() => this.#native.write(token, check.payload(value)));
    return outcome.accepted;
  }
  /** [value, token] of the last accepted write, or null. */
  read() {
    return check.call(() => this.#native.read());
  }
  /** Raises the highest token seen to `token` (after a revocation). */
  async raise(token) {
    if (typeof token !== 'bigint') throw check.invalid('a fencing token is a bigint');
    return check.call(() => this.#native.raise(token));
  }
}

module.exports = { HOLD, LOCK, holdOptions, Lock, Semaphore, RwLock, Latch, Barrier, Election, FencedResource };
