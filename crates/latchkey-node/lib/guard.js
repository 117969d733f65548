'use strict';
// A hold of any kind (a lock's, several locks', permits, a read or write
// hold, a leadership): one class over the native `Guard`.
const { lockLost, invalid } = require('./errors');
const check = require('./checks');

const ABORTED = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;
const REASON = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'reason').get;
const THROW_IF_ABORTED = AbortSignal.prototype.throwIfAborted;

// A guard JavaScript collects while it is still held is not released (its
// client keeps the hold until it is released, lost, closed or the process
// exits): said once per process, since it usually is a leak.
let warned = false;
const unreleased = new FinalizationRegistry(({ native, name }) => {
  if (warned || !native.isHeld()) return;
  warned = true;
  process.emitWarning(
    `a guard of ${JSON.stringify(name)} was garbage-collected while held: the hold is kept (renewed) until it is lost, ` +
      'its client is closed or the process exits. Release every guard (await using, lock.using(), try/finally).',
    { type: 'LatchkeyWarning', code: 'LATCHKEY_UNRELEASED_GUARD' },
  );
});

class Guard {
  #native;
  #owner;
  #controller;
  /** @internal */
  constructor(nativeGuard, owner) {
    this.#native = nativeGuard;
    // The client: kept reachable while the hold is (close() gives it back).
    this.#owner = owner;
    unreleased.register(this, { native: nativeGuard, name: nativeGuard.name });
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
   * gone. Every read of its `aborted`, `reason` or `throwIfAborted()` also
   * looks at the deadline then, so a process stopped or starved past it
   * (SIGSTOP, a long synchronous stretch) finds it aborted on its first
   * look. Never aborted by release(); aborted (CLOSED) by its client's
   * close(). Made on first use; it outlives the guard object (it
   * references the hold, not the guard).
   */
  get signal() {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      const native = this.#native;
      const name = this.name;
      const signal = controller.signal;
      const look = () => {
        if (ABORTED.call(signal)) return;
        const lost = native.lostReason();
        if (lost != null) controller.abort(lockLost(name, lost[0], lost[1]));
      };
      Object.defineProperties(signal, {
        aborted: { get: () => (look(), ABORTED.call(signal)), configurable: true },
        reason: { get: () => (look(), REASON.call(signal)), configurable: true },
        throwIfAborted: { value: () => (look(), THROW_IF_ABORTED.call(signal)), configurable: true, writable: true },
      });
      // The native layer calls back with [code, phrase].
      native.onLost(([reason, phrase]) => controller.abort(lockLost(name, reason, phrase)));
    }
    const signal = this.#controller.signal;
    void signal.aborted; // looks at the deadline now
    return signal;
  }

  /** True while the hold is not known lost and its stop margin has not come. Asks nobody. */
  isHeld() {
    return this.#native.isHeld();
  }

  /** Releases if still ours: true when it was ours to the end (idempotent: false after). */
  release() {
    return check.call(() => this.#native.release());
  }

  /** Resets the TTL to `ttl` ms from now: true while still ours. */
  extend(ttl) {
    return check.call(() => this.#native.extend(check.ttl(ttl)));
  }

  /** The fencing token: greater than every earlier hold's (one round trip the first time). */
  fencingToken() {
    return check.call(() => this.#native.fencingToken());
  }

  /** Every fencing token (one per lock of a lockAll, in the order named). */
  fencingTokens() {
    return check.call(() => this.#native.fencingTokens());
  }

  /**
   * Lets go without releasing: no more renewals, and the key stays in Redis
   * until its TTL (for a process given the token: `latchkey release --token`).
   * The token; null if it was released already.
   */
  forget() {
    return check.call(() => this.#native.forget());
  }

  /** The names of several locks held at once (lockAll), else null. */
  get names() {
    return this.#native.names();
  }

  /** The fencing token of one lock of a lockAll's (one round trip the first time). */
  fencingTokenOf(name) {
    return check.call(() => this.#native.fencingTokenOf(check.name(name)));
  }

  /** Which lock of a lockAll's was lost (a round trip to each), or null while all are held. */
  lostLock() {
    return check.call(() => this.#native.lostLock());
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
    return check.call(() => this.#native.proclaim(check.payload(value)));
  }
  /** Steps down (the same as release()). */
  resign() {
    return this.release();
  }
}

module.exports = { Guard, Leadership };
