'use strict';
// Checks of what JavaScript passes (INVALID_ARGUMENT before any Redis
// call), and the one way every wait takes an AbortSignal and a timeout.
const native = require('./native');
const { fromNative, isAborted, invalid } = require('./errors');

const LIMITS = native.limits();

function name(value, what = 'name') {
  if (typeof value !== 'string') throw invalid(`${what} must be a string, not ${typeof value}`);
  if (value.length === 0) throw invalid(`${what} must not be empty`);
  if (Buffer.byteLength(value) > LIMITS.maxNameLen) {
    throw invalid(`${what} is longer than ${LIMITS.maxNameLen} bytes`);
  }
  return value;
}

function names(value) {
  if (!Array.isArray(value) || value.length === 0) throw invalid('names must be a non-empty array of strings');
  return value.map((n) => name(n));
}

function ms(value, what, { optional = false, positive = false } = {}) {
  if (value === undefined || value === null) {
    if (optional) return undefined;
    throw invalid(`${what} (milliseconds) is required`);
  }
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (positive && value === 0)) {
    throw invalid(`${what} must be a finite number of milliseconds${positive ? ' > 0' : ' >= 0'}, not ${String(value)}`);
  }
  return value;
}

function ttl(value, what = 'ttl') {
  ms(value, what, { positive: true });
  if (value < LIMITS.minTtlMs || value > LIMITS.maxTtlMs) {
    throw invalid(`${what} must be from ${LIMITS.minTtlMs} ms to ${LIMITS.maxTtlMs} ms, not ${value}`);
  }
  return value;
}

function count(value, what) {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 100000) {
    throw invalid(`${what} must be an integer from 1 to 100000, not ${String(value)}`);
  }
  return value;
}

function bool(value, what) {
  if (value !== undefined && typeof value !== 'boolean') throw invalid(`${what} must be a boolean`);
  return value;
}

/** `options` as an object whose keys are all in `allowed`. */
function options(value, allowed, what) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw invalid(`${what} options must be an object`);
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw invalid(`${what} takes no option ${JSON.stringify(key)} (it takes ${allowed.join(', ')})`);
  }
  return value;
}

function payload(value) {
  if (value === undefined) return Buffer.alloc(0);
  if (typeof value === 'string') return Buffer.from(value);
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw invalid('a payload is a string or a Uint8Array');
}

const WAIT = ['signal', 'timeout'];

/** `{ signal, timeout }` checked. */
function waitOptions(value, extra = [], what = 'a wait') {
  const o = options(value, [...WAIT, ...extra], what);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw invalid('signal must be an AbortSignal');
  ms(o.timeout, 'timeout', { optional: true });
  return o;
}

// The waits each AbortSignal cancels: one 'abort' listener per signal,
// however many waits share it (an EventTarget warns past 10 listeners).
const waitsOf = new WeakMap();

/** Cancels `cancel` when `signal` aborts: a function that stops it. */
function onAbort(signal, cancel) {
  let waits = waitsOf.get(signal);
  if (waits === undefined) {
    const made = new Set();
    waits = made;
    waitsOf.set(signal, made);
    signal.addEventListener(
      'abort',
      () => {
        waitsOf.delete(signal);
        for (const c of made) c.cancel();
        made.clear();
      },
      { once: true },
    );
  }
  waits.add(cancel);
  return () => waits.delete(cancel);
}

/**
 * Runs a native wait `call(timeoutMs, cancel)`: rejects with the signal's
 * reason when it aborts (the native future is dropped, which gives back
 * whatever it took), with WaitTimedOut when the timeout runs out.
 */
async function wait(o, call) {
  const { signal, timeout } = o;
  if (signal === undefined) {
    try {
      return await call(timeout ?? null, null);
    } catch (e) {
      throw fromNative(e);
    }
  }
  signal.throwIfAborted();
  const cancel = new native.Cancel();
  const stop = onAbort(signal, cancel);
  try {
    return await call(timeout ?? null, cancel);
  } catch (e) {
    if (isAborted(e)) throw signal.reason;
    throw fromNative(e);
  } finally {
    stop();
  }
}

/**
 * A native call's Promise with its errors as latchkey's classes. Given a
 * function, what it throws (bad input, checked in it) rejects too: a
 * Promise-returning method never throws.
 */
async function call(made) {
  try {
    return await (typeof made === 'function' ? made() : made);
  } catch (e) {
    throw fromNative(e);
  }
}

/** A native synchronous call with its errors as latchkey's classes. */
function sync(fn) {
  try {
    return fn();
  } catch (e) {
    throw fromNative(e);
  }
}

module.exports = { invalid, LIMITS, name, names, ms, ttl, count, bool, options, payload, waitOptions, onAbort, wait, call, sync };
