'use strict';
// The async iterators: a signal listener and an election observer. Each
// keeps its subscription between items (nothing falls in a gap), and ends
// with close(), return() (a `for await` left early) or asyncDispose.
const native = require('./native');
const check = require('./checks');

/** One wait of an iterator, cancelled by its close(). */
class Waits {
  #cancels = new Set();
  async run(o, call) {
    const cancel = new native.Cancel();
    this.#cancels.add(cancel);
    const signal = o.signal;
    signal?.throwIfAborted();
    const stop = signal === undefined ? () => {} : check.onAbort(signal, cancel);
    try {
      return await call(o.timeout ?? null, cancel);
    } catch (e) {
      if (require('./errors').isAborted(e)) {
        if (signal?.aborted) throw signal.reason;
        return ABORTED;
      }
      throw require('./errors').fromNative(e);
    } finally {
      stop();
      this.#cancels.delete(cancel);
    }
  }
  cancelAll() {
    for (const c of this.#cancels) c.cancel();
  }
}
const ABORTED = Symbol('aborted by close()');

/** Signals of one or more names (or patterns), as they come. */
class Listener {
  #native;
  #waits = new Waits();
  #closed = false;
  /** @internal */
  constructor(nativeListener) {
    this.#native = nativeListener;
  }
  /**
   * The next signal, `{ name, payload: Buffer, unicast }`; null once closed.
   * `{ timeout }` rejects with WaitTimedOut, `{ signal }` with its reason.
   */
  async recv(options) {
    const o = check.waitOptions(options);
    if (this.#closed) return null;
    const got = await this.#waits.run(o, (timeout, cancel) => this.#native.recv(timeout, cancel));
    return got === ABORTED ? null : got;
  }
  /** A signal that already arrived and was not received yet, without waiting; null if none (or while a recv() waits). */
  tryRecv() {
    if (this.#closed) return null;
    return this.#native.tryRecv();
  }
  /** Whether a server confirmed the subscriptions on its current connection (false while reconnecting). */
  get subscribed() {
    return !this.#closed && this.#native.subscribed;
  }
  async next() {
    const value = await this.recv();
    return value === null ? { done: true, value: undefined } : { done: false, value };
  }
  async return() {
    await this.close();
    return { done: true, value: undefined };
  }
  [Symbol.asyncIterator]() {
    return this;
  }
  /** Unsubscribes; a recv() in flight resolves null. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#waits.cancelAll();
    await check.call(this.#native.close());
  }
  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

/** An election's leaders, change after change: `Leader | null` (nobody leads). */
class Observer {
  #native;
  #waits = new Waits();
  #closed = false;
  /** @internal */
  constructor(nativeObserver) {
    this.#native = nativeObserver;
  }
  /** How many changes could not be reported one by one (the state was re-read instead); null while a next() waits. */
  get missed() {
    return this.#native.missed();
  }
  async next(options) {
    const o = check.options(options, ['signal'], 'next');
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw check.invalid('signal must be an AbortSignal');
    if (this.#closed) return { done: true, value: undefined };
    const got = await this.#waits.run(o, (_timeout, cancel) => this.#native.next(cancel));
    if (got === ABORTED) return { done: true, value: undefined };
    return { done: false, value: got.leader ?? null };
  }
  async return() {
    await this.close();
    return { done: true, value: undefined };
  }
  [Symbol.asyncIterator]() {
    return this;
  }
  async close() {
    this.#closed = true;
    this.#waits.cancelAll();
    this.#native.close();
  }
  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

module.exports = { Listener, Observer };
