'use strict';
// latchkey's errors: one base class with a stable `.code`, one subclass per
// kind. The native layer throws `[CODE] message`; fromNative() makes the
// instance of that code's class, with the same message.

class LatchkeyError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
    /** A stable code (`WAIT_TIMED_OUT`, `LOCK_LOST`, ...): each subclass sets its own. */
    this.code = 'LATCHKEY_ERROR';
  }
  /** True for what a retry may fix (the `Unavailable` kinds). */
  get transient() {
    return false;
  }
}

// [class name, code, base class name]
const KINDS = [
  ['WaitTimedOut', 'WAIT_TIMED_OUT', 'LatchkeyError'],
  ['LockLost', 'LOCK_LOST', 'LatchkeyError'],
  ['NotHeld', 'NOT_HELD', 'LatchkeyError'],
  ['InvalidArgument', 'INVALID_ARGUMENT', 'LatchkeyError'],
  ['Unsupported', 'UNSUPPORTED', 'InvalidArgument'],
  ['ClientClosed', 'CLIENT_CLOSED', 'LatchkeyError'],
  ['Unavailable', 'UNAVAILABLE', 'LatchkeyError'],
  ['Unreachable', 'UNREACHABLE', 'Unavailable'],
  ['Timeout', 'TIMEOUT', 'Unavailable'],
  ['NoQuorum', 'NO_QUORUM', 'Unavailable'],
  ['OutOfMemory', 'OUT_OF_MEMORY', 'Unavailable'],
  ['ReadOnlyReplica', 'READ_ONLY_REPLICA', 'Unavailable'],
  ['TooFewReplicas', 'TOO_FEW_REPLICAS', 'Unavailable'],
  ['TlsError', 'TLS', 'LatchkeyError'],
  ['AuthError', 'AUTH', 'LatchkeyError'],
  ['NoPermission', 'NO_PERMISSION', 'LatchkeyError'],
  ['WrongType', 'WRONG_TYPE', 'LatchkeyError'],
  ['BadFencingCounter', 'BAD_FENCING_COUNTER', 'LatchkeyError'],
  ['NotACluster', 'NOT_A_CLUSTER', 'LatchkeyError'],
  ['UnsupportedServer', 'UNSUPPORTED_SERVER', 'LatchkeyError'],
  ['MaxHoldReached', 'MAX_HOLD_REACHED', 'LatchkeyError'],
  ['ForeignValue', 'FOREIGN_VALUE', 'LatchkeyError'],
  ['LatchOpen', 'LATCH_OPEN', 'LatchkeyError'],
  ['CountedBelowZero', 'COUNTED_BELOW_ZERO', 'LatchkeyError'],
  ['NotFound', 'NOT_FOUND', 'LatchkeyError'],
  ['PartiesMismatch', 'PARTIES_MISMATCH', 'LatchkeyError'],
  ['RedisError', 'REDIS_ERROR', 'LatchkeyError'],
  ['ProtocolError', 'PROTOCOL_ERROR', 'LatchkeyError'],
  ['InternalError', 'INTERNAL', 'LatchkeyError'],
];

const classes = { LatchkeyError };
const byCode = new Map([['LATCHKEY_ERROR', LatchkeyError]]);
for (const [name, code, base] of KINDS) {
  const Base = classes[base];
  // A named class per kind, so that `instanceof`, `.name` and stack traces say it.
  const made = {
    [name]: class extends Base {
      constructor(message, options) {
        super(message, options);
        this.code = code;
      }
    },
  }[name];
  if (base === 'Unavailable' || name === 'Unavailable') {
    Object.defineProperty(made.prototype, 'transient', { get: () => true });
  }
  classes[name] = made;
  byCode.set(code, made);
}

/** Why a hold was lost, on `LockLost`: `REVOKED`, `MAX_HOLD`, `EXPIRED`, `GONE`, `TAKEN_OVER`, `UNREACHABLE`. */
function lockLost(name, reason, phrase) {
  const e = new classes.LockLost(`lost ${JSON.stringify(name)}: ${phrase}`);
  e.reason = reason;
  return e;
}

const CODED = /^\[([A-Z_]+)\] ([\s\S]*)$/;

/** The class instance of a native error (`[CODE] message`); others as they are. */
function fromNative(e) {
  if (e instanceof LatchkeyError || !(e instanceof Error)) return e;
  const m = CODED.exec(e.message);
  if (!m) return e;
  const Made = byCode.get(m[1]);
  if (!Made) return e;
  return new Made(m[2]);
}

/** Whether a native error says its wait was aborted (the facade's Cancel). */
function isAborted(e) {
  return e instanceof Error && !(e instanceof LatchkeyError) && e.message.startsWith('[ABORTED]');
}

function invalid(message) {
  return new classes.InvalidArgument(`invalid argument: ${message}`);
}

module.exports = { ...classes, fromNative, isAborted, invalid, lockLost, CODES: [...byCode.keys()] };
