'use strict';
// latchkey-redis: distributed locks, fencing tokens, leases and signals on
// Redis; the Rust library latchkey, as a native package.
const native = require('./native');
const errors = require('./errors');
const { Client, Redlock } = require('./client');
const { Guard, Leadership } = require('./guard');
const { Lock, Semaphore, RwLock, Latch, Barrier, Election, FencedResource } = require('./primitives');
const { Listener, Observer } = require('./iterators');
const { LIMITS } = require('./checks');

module.exports = {
  Client,
  Redlock,
  Lock,
  Guard,
  Leadership,
  Semaphore,
  RwLock,
  Latch,
  Barrier,
  Election,
  Observer,
  Listener,
  FencedResource,
  LatchkeyError: errors.LatchkeyError,
  WaitTimedOut: errors.WaitTimedOut,
  LockLost: errors.LockLost,
  NotHeld: errors.NotHeld,
  InvalidArgument: errors.InvalidArgument,
  Unsupported: errors.Unsupported,
  ClientClosed: errors.ClientClosed,
  Unavailable: errors.Unavailable,
  Unreachable: errors.Unreachable,
  Timeout: errors.Timeout,
  NoQuorum: errors.NoQuorum,
  OutOfMemory: errors.OutOfMemory,
  ReadOnlyReplica: errors.ReadOnlyReplica,
  TooFewReplicas: errors.TooFewReplicas,
  TlsError: errors.TlsError,
  AuthError: errors.AuthError,
  NoPermission: errors.NoPermission,
  WrongType: errors.WrongType,
  BadFencingCounter: errors.BadFencingCounter,
  NotACluster: errors.NotACluster,
  MaxHoldReached: errors.MaxHoldReached,
  ForeignValue: errors.ForeignValue,
  LatchOpen: errors.LatchOpen,
  CountedBelowZero: errors.CountedBelowZero,
  NotFound: errors.NotFound,
  PartiesMismatch: errors.PartiesMismatch,
  RedisError: errors.RedisError,
  ProtocolError: errors.ProtocolError,
  InternalError: errors.InternalError,
  ERROR_CODES: errors.CODES,
  MIN_TTL: LIMITS.minTtlMs,
  MAX_TTL: LIMITS.maxTtlMs,
  MAX_NAME_LEN: LIMITS.maxNameLen,
  version: native.version(),
};
