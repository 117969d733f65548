// Type-checked by tsc --noEmit --strict (test/types.test.js): a program
// that uses every export of the package. Never run.
import * as lk from 'latchkey-redis';
import {
  Client, Redlock, Lock, Guard, Leadership, Semaphore, RwLock, Latch, Barrier, Election, Observer,
  Listener, FencedResource, LatchkeyError, WaitTimedOut, LockLost, NotHeld, InvalidArgument, Unsupported,
  ClientClosed, Unavailable, Unreachable, Timeout, NoQuorum, OutOfMemory, ReadOnlyReplica, TooFewReplicas,
  TlsError, AuthError, NoPermission, WrongType, BadFencingCounter, NotACluster, UnsupportedServer, MaxHoldReached, ForeignValue,
  LatchOpen, CountedBelowZero, NotFound, PartiesMismatch, RedisError, ProtocolError, InternalError,
  ERROR_CODES, MIN_TTL, MAX_TTL, MAX_NAME_LEN, version,
} from 'latchkey-redis';

declare function runReport(token: bigint, o: { signal: AbortSignal }): Promise<void>;

async function main(): Promise<void> {
  const client: Client = await Client.connect('redis://127.0.0.1:6380/', { prefix: 'latchkey:', commandTimeout: 2_000 });
  const lock: Lock = client.lock('nightly-report', { ttl: 30_000, fencing: true, fair: false, cached: undefined, maxHold: 60_000, asking: true, stopMargin: 1_000, renewEvery: 5_000, watchdog: true });
  {
    await using guard = await lock.acquire({ signal: AbortSignal.timeout(5_000) });
    const token: bigint = await guard.fencingToken();
    await runReport(token, { signal: guard.signal });
    const tokens: bigint[] = await guard.fencingTokens();
    const held: boolean = guard.isHeld();
    const when: number | null = guard.deadline;
    const why: lk.LostReason | null = guard.lostReason;
    const issued: bigint | null = guard.issuedFencingToken;
    guard.onReleaseRequested(() => {});
    const extended: boolean = await guard.extend(30_000);
    void [tokens, held, when, why, issued, extended, guard.name, guard.token, guard.ttl];
  }
  const g: Guard | null = await lock.tryAcquire();
  const forgotten: string | null = (await g?.forget()) ?? null;
  const lockTtl: number = lock.ttl;
  const gaveBack: boolean = await lock.giveBack();
  const done: boolean = (await g?.release()) ?? false;
  const n: number = await lock.using(async (signal: AbortSignal, guard: Guard) => (signal.aborted ? 0 : guard.ttl), { timeout: 1_000 });
  const all: Lock = client.lockAll(['a', 'b'], { ttl: 5_000 });
  const sem: Semaphore = client.semaphore('pool', 3, { ttl: 5_000 });
  const permit: Guard = await sem.acquire({ permits: 2, timeout: 1_000 });
  const taken: number | null = permit.permits;
  const both: Guard = await all.acquire();
  const names: string[] | null = both.names;
  const tokenOfA: bigint = await both.fencingTokenOf('a');
  const lostOne: string | null = await both.lostLock();
  const holders: lk.PermitHolder[] = await sem.holders();
  const rw: RwLock = client.rwlock('catalog', { ttl: 5_000 });
  const r: Guard = await rw.read();
  const w: Guard | null = await rw.tryWrite();
  const access: 'read' | 'write' | null = r.access;
  const latch: Latch = client.latch('loaded', { ttl: 60_000 });
  const created: boolean = await latch.create(3);
  const left: number = await latch.countDown();
  await latch.wait({ timeout: 1_000 });
  const barrier: Barrier = client.barrier('step', 2);
  const generation: bigint = await barrier.wait();
  const state: [bigint, number] | null = await barrier.state();
  const election: Election = client.election('scheduler', { ttl: 10_000 });
  const lead: Leadership = await election.campaign('node-a');
  const term: bigint = lead.term;
  const since: number = lead.since;
  const leading: boolean = lead.isLeader() && (await lead.proclaim('node-a, v2'));
  const observer: Observer = await election.observe();
  const missed: number | null = observer.missed;
  for await (const leader of observer) {
    const t: bigint | undefined = leader?.term;
    void t;
    break;
  }
  await lead.resign();
  const heard: number = await client.signal('deploy-done', 'v42');
  await using listener: Listener = await client.listen(['deploy-done'], { patterns: false });
  const early: lk.Signal | null = listener.subscribed ? listener.tryRecv() : null;
  for await (const s of listener) {
    const payload: Buffer = s.payload;
    void payload;
    break;
  }
  const s1: lk.Signal | null = await client.wait('x', { timeout: 100 });
  const s2: lk.Signal | null = await client.wait(['x', 'y'], { timeout: 100 });
  const out: FencedResource = client.fenced('output');
  const ok: boolean = await out.write(term, 'data');
  const revoked: lk.Revocation[] = await client.revoke('x');
  const asked: number = await client.requestRelease('x');
  const redlock: Redlock = await Redlock.connect(['redis://a', 'redis://b', 'redis://c'], { instanceTimeout: 500 });
  const q: number = redlock.quorum + redlock.instances;
  await redlock.close({ within: 1_000 });
  await client.close();
  try {
    await lock.acquire({ timeout: 10 });
  } catch (e) {
    if (e instanceof WaitTimedOut) {
      const code: lk.ErrorCode = e.code;
      void code;
    }
    if (e instanceof LockLost) {
      const reason: lk.LostReason = e.reason;
      void reason;
    }
    if (e instanceof LatchkeyError && e.transient) throw e;
  }
  const classes = [NotHeld, InvalidArgument, Unsupported, ClientClosed, Unavailable, Unreachable, Timeout, NoQuorum,
    OutOfMemory, ReadOnlyReplica, TooFewReplicas, TlsError, AuthError, NoPermission, WrongType, BadFencingCounter,
    NotACluster, UnsupportedServer, MaxHoldReached, ForeignValue, LatchOpen, CountedBelowZero, NotFound, PartiesMismatch, RedisError,
    ProtocolError, InternalError];
  const codes: lk.ErrorCode[] = ERROR_CODES;
  const limits: number = MIN_TTL + MAX_TTL + MAX_NAME_LEN;
  const v: string = version;
  void [forgotten, lockTtl, gaveBack, taken, names, tokenOfA, lostOne, access, state, since, leading, missed, early, s2, done, n, all, permit, holders, r, w, created, left, generation, heard, s1, ok, revoked, asked, q, classes, codes, limits, v];
}
void main;
