'use strict';
// A hold of any kind (a lock's, several locks', permits, a read or write
// hold, a leadership): one class over the native `Guard`.
const { lockLost, invalid } = require('./errors');
const check = require('./checks');

class Guard {
  #native;
  #owner;
  #controller;
  /** @internal */
  constructor(nativeGuard, owner) {
    this.#native = nativeGuard;
    // The client: kept reachable while the hold is (close() gives it back).
    this.#owner = owner;
  }

  get name() {
    return this.#native.name;
  }
  /** The owner token Redis keeps for the hold. */
  get token() {
    return this.#native.token;
  }
  /** The TTL of each acquisition or renewal, in ms. */
  get ttl() {
    return this.#native.ttlMs;
  }
  /** Until when the hold may be assumed, on `Date.now()`'s clock; null once released. */
  get deadline() {
    return this.#native.deadline();
  }
  /** The fencing token if it was issued already (with `fencing: true`, or after fencingToken()). */
  get issuedFencingToken() {
    return this.#native.issuedFencingToken();
  }
  /** Why the hold was lost (`GONE`, `REVOKED`, ...), or null while held. */
  get lostReason() {
    return this.#native.lostReason()?.[0] ?? null;
  }

  /**
   * Aborted, with a `LockLost` reason, when the hold can no longer be proven
   * ours: a stop margin before its TTL or cap, or at once when it is found
   * gone. Never aborted by release(). Made on first use.
   */
  get signal() {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      const name = this.name;
      // The native layer calls back with [code, phrase].
      this.#native.onLost(([reason, phrase]) => controller.abort(lockLost(name, reason, phrase)));
    }
    return this.#controller.signal;
  }

  /** True while the hold is not known lost and its stop margin has not come. Asks nobody. */
  isHeld() {
    return this.#native.isHeld();
  }

  /** Releases if still ours: true when it was ours to the end (idempotent: false after). */
  release() {
    return check.call(this.#native.release());
  }

  /** Resets the TTL to `ttl` ms from now: true while still ours. */
  extend(ttl) {
    check.ttl(ttl);
    return check.call(this.#native.extend(ttl));
  }

  /** The fencing token: greater than every earlier hold's (one round trip the first time). */
  fencingToken() {
    return check.call(this.#native.fencingToken());
  }

  /** Every fencing token (one per lock of a lockAll, in the order named). */
  fencingTokens() {
    return check.call(this.#native.fencingTokens());
  }

  /**
   * Lets go without releasing: no more renewals, and the key stays in Redis
   * until its TTL (for a process given the token: `latchkey release --token`).
   * The token; null if it was released already.
   */
  forget() {
    return check.call(this.#native.forget());
  }

  /** The names of several locks held at once (lockAll), else null. */
  get names() {
    return this.#native.names();
  }

  /** The fencing token of one lock of a lockAll's (one round trip the first time). */
  fencingTokenOf(name) {
    check.name(name);
    return check.call(this.#native.fencingTokenOf(name));
  }

  /** Which lock of a lockAll's was lost (a round trip to each), or null while all are held. */
  lostLock() {
    return check.call(this.#native.lostLock());
  }

  /** How many permits a semaphore's hold has (1 for a read or write hold), else null. */
  get permits() {
    return this.#native.permits();
  }

  /** `'read'` or `'write'` for a read-write lock's hold, else null. */
  get access() {
    return this.#native.access();
  }

  /** Calls `listener()` each time another process asks for the hold (requestRelease, `asking` waiters). */
  onReleaseRequested(listener) {
    if (typeof listener !== 'function') throw invalid('listener must be a function');
    this.#native.onReleaseRequested(listener);
  }

  async [Symbol.asyncDispose]() {
    await this.release();
  }
}

/** A leadership: a Guard whose term is its fencing token. */
class Leadership extends Guard {
  #native;
  /** @internal */
  constructor(nativeGuard, owner) {
    super(nativeGuard, owner);
    this.#native = nativeGuard;
  }
  /** The term: a fencing token, greater than every earlier leader's. */
  get term() {
    return this.issuedFencingToken;
  }
  /** The value we lead with: the campaign's, or the last proclaim()'s. */
  get value() {
    return this.#native.value;
  }
  /** When this leadership began, in ms since the epoch (the server's clock). */
  get since() {
    return this.#native.since();
  }
  /** Whether we lead (isHeld()). */
  isLeader() {
    return this.isHeld();
  }
  /** Changes our value (observers see it): true while we still lead. */
  proclaim(value) {
    return check.call(this.#native.proclaim(check.payload(value)));
  }
  /** Steps down (the same as release()). */
  resign() {
    return this.release();
  }
}

module.exports = { Guard, Leadership };
