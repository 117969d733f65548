/// <reference types="node" />
// latchkey-redis: the types of the package's facade (lib/*.js). Durations
// are milliseconds (numbers); fencing tokens and terms are bigints.

/** What every wait takes. */
export interface WaitOptions {
  /** Aborting it rejects the wait with `signal.reason` (as `fetch` does); whatever the wait took is given back. */
  signal?: AbortSignal;
  /** Milliseconds: past it the wait rejects with `WaitTimedOut`. */
  timeout?: number;
}

export interface ConnectOptions {
  /** The key prefix (default `"latchkey:"`); `""` shares locks with node-redlock's bare keys. */
  prefix?: string;
  /** Milliseconds each Redis command may take (default 2000). */
  commandTimeout?: number;
  /** `host:port` of each Sentinel; the URL is then the template of the primary's (password, db, TLS). */
  sentinels?: string[];
  /** The name of the master the Sentinels watch. */
  master?: string;
  /** PEM file of the CA to trust (`rediss://`). */
  tlsCa?: string;
  /** PEM files of the client certificate and its key (mutual TLS). */
  tlsCert?: string;
  tlsKey?: string;
  /** The name the server's certificate is checked against, when not the URL's host. */
  tlsServerName?: string;
}

export interface RedlockOptions extends Omit<ConnectOptions, 'sentinels' | 'master'> {
  /** Milliseconds each instance may take to answer (default ttl / 10). */
  instanceTimeout?: number;
}

/** How a lease primitive's holds are taken and kept. */
export interface HoldOptions {
  /** Milliseconds each acquisition or renewal holds for (10 ms to 24 h). Required. */
  ttl: number;
  /** Renew holds in the background (default true). */
  watchdog?: boolean;
  /** Issue the fencing token with every acquisition. */
  fencing?: boolean;
  /** Milliseconds: cap every hold at this much from its acquisition. */
  maxHold?: number;
  /** Milliseconds before the deadline or cap at which `guard.signal` aborts (default ttl / 5). */
  stopMargin?: number;
  /** Milliseconds between renewals (default ttl / 3). */
  renewEvery?: number;
  /** Waiters ask the holders to let go (`guard.onReleaseRequested`). */
  asking?: boolean;
  /** Milliseconds: keep every hold at least this long from its acquisition; a release before then leaves it held until then. */
  holdAtLeast?: number;
}

export interface LockOptions extends HoldOptions {
  /** Waiters queue in Redis in arrival order across processes. */
  fair?: boolean;
  /** Milliseconds a released hold is kept in Redis while idle (re-taking it costs no round trip). */
  cached?: number;
}

/** Why a hold was lost: `LockLost.reason`, `Guard.lostReason`. */
export type LostReason = 'REVOKED' | 'MAX_HOLD' | 'EXPIRED' | 'GONE' | 'TAKEN_OVER' | 'UNREACHABLE' | 'CLOSED' | 'LOST';

/**
 * Any hold: a lock's, several locks', permits, a read or write hold, a
 * leadership. It ends when it is released, lost (`signal` says so), its
 * client is closed or the process exits; never because this object was
 * garbage-collected: an unreleased guard is renewed until close() or exit.
 */
export class Guard implements AsyncDisposable {
  protected constructor();
  readonly name: string;
  /** The owner token Redis keeps for the hold. */
  readonly token: string;
  /** Milliseconds each renewal holds for. */
  readonly ttl: number;
  /** Until when the hold may be assumed, on `Date.now()`'s clock (ms); null once released. */
  readonly deadline: number | null;
  /** The fencing token if issued already (`fencing: true`, or after `fencingToken()`). */
  readonly issuedFencingToken: bigint | null;
  readonly lostReason: LostReason | null;
  /**
   * Aborted with a `LockLost` reason when the hold can no longer be proven
   * ours: a stop margin before its TTL or cap, or at once when found gone.
   * Each read of `aborted`, `reason` or `throwIfAborted()` looks at the
   * deadline too (a process stopped past it reads `EXPIRED` at once).
   * Never aborted by `release()`; aborted with `CLOSED` by its client's
   * `close()`. It does not keep the process alive.
   */
  readonly signal: AbortSignal;
  /** Not known lost, and its stop margin has not come. Asks nobody. */
  isHeld(): boolean;
  /** Releases if still ours: true when it was ours to the end; false after (idempotent). */
  release(): Promise<boolean>;
  /** Resets the TTL to `ttl` ms from now: true while still ours. */
  extend(ttl: number): Promise<boolean>;
  /** The fencing token, greater than every earlier hold's (one round trip the first time). */
  fencingToken(): Promise<bigint>;
  /** Every fencing token (one per lock of a `lockAll`, in the order named). */
  fencingTokens(): Promise<bigint[]>;
  /** Calls `listener` each time another process asks for the hold. */
  onReleaseRequested(listener: () => void): void;
  /**
   * Lets go without releasing: no more renewals; the key stays in Redis until
   * its TTL (for a process given the token). The token; null if released already.
   */
  forget(): Promise<string | null>;
  /** The names of several locks held at once (`lockAll`), else null. */
  readonly names: string[] | null;
  /** The fencing token of one lock of a `lockAll`'s. */
  fencingTokenOf(name: string): Promise<bigint>;
  /** Which lock of a `lockAll`'s was lost (a round trip to each), or null while all are held. */
  lostLock(): Promise<string | null>;
  /** How many permits a semaphore's hold has (1 for a read or write hold), else null. */
  readonly permits: number | null;
  /** `'read'` or `'write'` for a read-write lock's hold, else null. */
  readonly access: 'read' | 'write' | null;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A leadership: a Guard whose term is its fencing token. */
export class Leadership extends Guard {
  readonly term: bigint;
  /** The value we lead with: the campaign's, or the last `proclaim()`'s. */
  readonly value: Buffer;
  /** When this leadership began: ms since the epoch (the server's clock). */
  readonly since: number;
  /** Whether we lead (`isHeld()`). */
  isLeader(): boolean;
  /** Changes our value (observers see it): true while we still lead. */
  proclaim(value: string | Uint8Array): Promise<boolean>;
  resign(): Promise<boolean>;
}

export class Lock {
  protected constructor();
  readonly name: string;
  /** Milliseconds each acquisition or renewal holds for. */
  readonly ttl: number;
  /** A cached lock gives its kept idle hold back to Redis now: whether one was kept (false for other locks). */
  giveBack(): Promise<boolean>;
  /** A guard, or null when someone else holds the lock. One round trip. */
  tryAcquire(): Promise<Guard | null>;
  acquire(options?: WaitOptions): Promise<Guard>;
  /** Acquires, runs `fn(signal, guard)` (signal aborted when the lock is lost), releases; rejects with `LockLost` if it was lost meanwhile. */
  using<T>(fn: (signal: AbortSignal, guard: Guard) => Promise<T> | T, options?: WaitOptions): Promise<T>;
}

export interface PermitOptions {
  /** How many permits, all or none (default 1). */
  permits?: number;
}

export interface PermitHolder {
  token: string;
  host: string | null;
  pid: number | null;
  /** ms since the epoch. */
  acquiredAt: number | null;
  ttlLeftMs: number;
}

export class Semaphore {
  protected constructor();
  readonly name: string;
  readonly permits: number;
  tryAcquire(options?: PermitOptions): Promise<Guard | null>;
  acquire(options?: WaitOptions & PermitOptions): Promise<Guard>;
  using<T>(fn: (signal: AbortSignal, guard: Guard) => Promise<T> | T, options?: WaitOptions & PermitOptions): Promise<T>;
  holders(): Promise<PermitHolder[]>;
}

export class RwLock {
  protected constructor();
  readonly name: string;
  read(options?: WaitOptions): Promise<Guard>;
  write(options?: WaitOptions): Promise<Guard>;
  tryRead(): Promise<Guard | null>;
  tryWrite(): Promise<Guard | null>;
}

export class Latch {
  protected constructor();
  readonly name: string;
  /** Creates it with `count`: false when it existed already. */
  create(count: number): Promise<boolean>;
  /** Counts down by one: what is left. */
  countDown(): Promise<number>;
  /** What is left, or null when there is no such latch. */
  count(): Promise<number | null>;
  /** Resolves when it opens (at once when open already). */
  wait(options?: WaitOptions): Promise<void>;
}

export class Barrier {
  protected constructor();
  readonly name: string;
  readonly parties: number;
  /** [generation, parties arrived], or null when the barrier does not exist. */
  state(): Promise<[generation: bigint, arrived: number] | null>;
  /** Arrives and waits for the other parties: the generation met. */
  wait(options?: WaitOptions): Promise<bigint>;
}

export interface Leader {
  value: Buffer;
  term: bigint;
  /** ms since the epoch (the server's clock). */
  since: number;
}

export class Election {
  protected constructor();
  readonly name: string;
  campaign(value: string | Uint8Array, options?: WaitOptions): Promise<Leadership>;
  tryCampaign(value: string | Uint8Array): Promise<Leadership | null>;
  leader(): Promise<Leader | null>;
  /** Every state of the election, the current one first: a leader, or null when nobody leads. */
  observe(): Promise<Observer>;
}

export class Observer implements AsyncIterableIterator<Leader | null>, AsyncDisposable {
  protected constructor();
  /** How many changes could not be reported one by one (the state was re-read instead); null while a next() waits. */
  readonly missed: number | null;
  next(options?: { signal?: AbortSignal }): Promise<IteratorResult<Leader | null, undefined>>;
  return(): Promise<IteratorResult<Leader | null, undefined>>;
  [Symbol.asyncIterator](): Observer;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface Signal {
  name: string;
  payload: Buffer;
  /** Sent by `signalOne` (to this listener alone). */
  unicast: boolean;
}

export class Listener implements AsyncIterableIterator<Signal>, AsyncDisposable {
  protected constructor();
  /** The next signal; null once closed. */
  recv(options?: WaitOptions): Promise<Signal | null>;
  /** A signal that already arrived and was not received yet, without waiting; null if none. */
  tryRecv(): Signal | null;
  /** Whether a server confirmed the subscriptions on its current connection (false while reconnecting). */
  readonly subscribed: boolean;
  next(): Promise<IteratorResult<Signal, undefined>>;
  return(): Promise<IteratorResult<Signal, undefined>>;
  [Symbol.asyncIterator](): Listener;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class FencedResource {
  protected constructor();
  readonly name: string;
  /** Stores `value` unless a write with a higher token was accepted: whether it was stored. */
  write(token: bigint, value: string | Uint8Array): Promise<boolean>;
  read(): Promise<[Buffer, bigint] | null>;
  raise(token: bigint): Promise<bigint>;
}

export interface Revocation {
  kind: string;
  ended: number;
  fencingToken: bigint | null;
}

declare class BaseClient implements AsyncDisposable {
  protected constructor();
  readonly prefix: string;
  lock(name: string, options: LockOptions): Lock;
  lockAll(names: string[], options: HoldOptions): Lock;
  /** Gives back every hold (each guard's signal aborts: `CLOSED`), ends pending waits (they reject with ClientClosed), waits at most `within` ms (default 5000) for background releases; later calls reject with ClientClosed. */
  close(options?: { within?: number }): Promise<boolean>;
  flush(options?: { within?: number }): Promise<boolean>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class Client extends BaseClient {
  /** One Redis URL, or the node URLs of one Redis Cluster. */
  static connect(url: string | string[], options?: ConnectOptions): Promise<Client>;
  semaphore(name: string, permits: number, options: HoldOptions): Semaphore;
  rwlock(name: string, options: HoldOptions): RwLock;
  latch(name: string, options?: { ttl?: number }): Latch;
  barrier(name: string, parties: number, options?: { ttl?: number }): Barrier;
  election(name: string, options: { ttl: number }): Election;
  fenced(name: string): FencedResource;
  signal(name: string, payload?: string | Uint8Array): Promise<number>;
  signalOne(name: string, payload?: string | Uint8Array): Promise<number>;
  listen(names: string | string[], options?: { patterns?: boolean }): Promise<Listener>;
  wait(names: string | string[], options?: WaitOptions): Promise<Signal | null>;
  revoke(name: string): Promise<Revocation[]>;
  requestRelease(name: string): Promise<number>;
}

export class Redlock extends BaseClient {
  /** N independent servers: a lock is held while a majority agree. */
  static connect(urls: string[], options?: RedlockOptions): Promise<Redlock>;
  readonly instances: number;
  readonly quorum: number;
}

export type ErrorCode =
  | 'LATCHKEY_ERROR' | 'WAIT_TIMED_OUT' | 'LOCK_LOST' | 'NOT_HELD' | 'INVALID_ARGUMENT' | 'UNSUPPORTED'
  | 'CLIENT_CLOSED' | 'UNAVAILABLE' | 'UNREACHABLE' | 'TIMEOUT' | 'NO_QUORUM' | 'OUT_OF_MEMORY'
  | 'READ_ONLY_REPLICA' | 'TOO_FEW_REPLICAS' | 'TLS' | 'AUTH' | 'NO_PERMISSION' | 'WRONG_TYPE'
  | 'BAD_FENCING_COUNTER' | 'NOT_A_CLUSTER' | 'UNSUPPORTED_SERVER' | 'MAX_HOLD_REACHED' | 'FOREIGN_VALUE' | 'LATCH_OPEN'
  | 'COUNTED_BELOW_ZERO' | 'NOT_FOUND' | 'PARTIES_MISMATCH' | 'REDIS_ERROR' | 'PROTOCOL_ERROR' | 'INTERNAL';

/** What `new Error(message, options)` takes (ES2022's ErrorOptions, declared here for older targets). */
export interface LatchkeyErrorOptions {
  cause?: unknown;
}

export class LatchkeyError extends Error {
  constructor(message?: string, options?: LatchkeyErrorOptions);
  readonly code: ErrorCode;
  /** True for what a retry may fix (the Unavailable kinds). */
  readonly transient: boolean;
}
export class WaitTimedOut extends LatchkeyError {}
export class LockLost extends LatchkeyError {
  readonly reason: LostReason;
}
export class NotHeld extends LatchkeyError {}
export class InvalidArgument extends LatchkeyError {}
export class Unsupported extends InvalidArgument {}
export class ClientClosed extends LatchkeyError {}
export class Unavailable extends LatchkeyError {}
export class Unreachable extends Unavailable {}
export class Timeout extends Unavailable {}
export class NoQuorum extends Unavailable {}
export class OutOfMemory extends Unavailable {}
export class ReadOnlyReplica extends Unavailable {}
export class TooFewReplicas extends Unavailable {}
export class TlsError extends LatchkeyError {}
export class AuthError extends LatchkeyError {}
export class NoPermission extends LatchkeyError {}
export class WrongType extends LatchkeyError {}
export class BadFencingCounter extends LatchkeyError {}
export class NotACluster extends LatchkeyError {}
/** The server is too old (Redis before 7.0, Valkey before 7.2): refused at connect. */
export class UnsupportedServer extends LatchkeyError {}
export class MaxHoldReached extends LatchkeyError {}
export class ForeignValue extends LatchkeyError {}
export class LatchOpen extends LatchkeyError {}
export class CountedBelowZero extends LatchkeyError {}
export class NotFound extends LatchkeyError {}
export class PartiesMismatch extends LatchkeyError {}
export class RedisError extends LatchkeyError {}
export class ProtocolError extends LatchkeyError {}
export class InternalError extends LatchkeyError {}

export const ERROR_CODES: ErrorCode[];
/** The shortest TTL, in ms. */
export const MIN_TTL: number;
/** The longest TTL, in ms. */
export const MAX_TTL: number;
/** The longest name, in bytes. */
export const MAX_NAME_LEN: number;
/** The version of the Rust library inside. */
export const version: string;

// Only the declarations marked `export` above are the module's: without
// this, a declaration file exports every top-level one (BaseClient too),
// and TypeScript would offer `import { BaseClient }`, which Node's ESM
// loader does not find in lib/index.js.
export {};
