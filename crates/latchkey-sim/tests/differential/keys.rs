//! The keys and channels of the primitives under test, made by the
//! library's own layout functions (`latchkey::protocol`).

use latchkey::protocol as p;

/// The prefix every name of the test lives under.
const PREFIX: &[u8] = b"dt:";
/// The names: two, so that steps on one name meet steps on the other only
/// through the scripts that take several.
pub const NAMES: &[&[u8]] = &[b"a", b"b"];

/// Every key of a name's primitives.
pub struct Keys {
    pub lock: Vec<u8>,
    pub fence: Vec<u8>,
    pub channel: Vec<u8>,
    /// The plain lock's waiting processes (`S:wake`) and the stem of its
    /// wake channels (`S:wake:`).
    pub wake: Vec<u8>,
    pub wake_stem: Vec<u8>,
    pub queue: Vec<u8>,
    pub leases: Vec<u8>,
    pub alive: Vec<u8>,
    pub acquired: Vec<u8>,
    pub handoff: Vec<u8>,
    pub permits: Vec<u8>,
    pub permits_fence: Vec<u8>,
    pub permits_channel: Vec<u8>,
    pub rw: Vec<Vec<u8>>,
    pub rw_acquired: Vec<u8>,
    pub latch: Vec<u8>,
    pub latch_channel: Vec<u8>,
    pub leader: Vec<u8>,
    pub election: Vec<u8>,
    pub changes: Vec<u8>,
    pub barrier: Vec<u8>,
    pub barrier_channel: Vec<u8>,
    pub resource: Vec<u8>,
}

impl Keys {
    pub fn of(name: &[u8]) -> Keys {
        let lock = [PREFIX, name].concat();
        let stem = p::tag_stem(&lock);
        let under = |suffix: &[u8]| p::primitive_key(PREFIX, name, suffix);
        Keys {
            fence: p::fence_key(&lock),
            channel: p::release_channel(&lock),
            wake: [&stem[..], p::WAKE_SUFFIX].concat(),
            wake_stem: [&stem[..], p::WAKE_SUFFIX, b":"].concat(),
            queue: [&stem[..], p::QUEUE_SUFFIX].concat(),
            leases: [&stem[..], p::LEASES_SUFFIX].concat(),
            alive: [&stem[..], p::ALIVE_SUFFIX].concat(),
            acquired: [&stem[..], p::ACQUIRED_SUFFIX].concat(),
            handoff: [&stem[..], p::HANDOFF_SUFFIX].concat(),
            permits: under(p::PERMITS_SUFFIX),
            permits_fence: under(p::PERMITS_FENCE_SUFFIX),
            permits_channel: under(p::PERMITS_RELEASED_SUFFIX),
            rw: p::RWLOCK_SUFFIXES.iter().map(|s| under(s)).collect(),
            rw_acquired: under(p::RWLOCK_WRITER_ACQUIRED_SUFFIX),
            latch: under(p::LATCH_SUFFIX),
            latch_channel: under(p::LATCH_OPENED_SUFFIX),
            leader: under(p::ELECTION_LEASE_SUFFIX),
            election: under(p::ELECTION_STATE_SUFFIX),
            changes: under(p::ELECTION_CHANGES_SUFFIX),
            barrier: under(p::BARRIER_SUFFIX),
            barrier_channel: under(p::BARRIER_RELEASED_SUFFIX),
            resource: [&lock[..], b":res"].concat(),
            lock,
        }
    }

    /// The keys a plain command may hit (channels are no keys).
    pub fn all(&self) -> Vec<Vec<u8>> {
        let mut all = vec![
            self.lock.clone(),
            self.fence.clone(),
            self.wake.clone(),
            self.queue.clone(),
            self.leases.clone(),
            self.alive.clone(),
            self.acquired.clone(),
            self.permits.clone(),
            self.permits_fence.clone(),
            self.latch.clone(),
            self.leader.clone(),
            self.election.clone(),
            self.barrier.clone(),
            self.resource.clone(),
        ];
        all.extend(self.rw[..6].iter().cloned());
        all
    }
}

/// The one waiting process that listens on a shard channel (`SSUBSCRIBE`
/// to its wake channel of each name): a release sent with `SPUBLISH`
/// wakes it, and finds every other process deaf (the test's pattern
/// subscriber hears no shard channel), so `wake_one` pops on past them.
pub const LISTENING: &str = "0000000000000001";

/// The shard channels the test listens on: [`LISTENING`]'s wake channels.
pub fn shard_channels() -> Vec<Vec<u8>> {
    NAMES
        .iter()
        .map(|name| [&Keys::of(name).wake_stem[..], LISTENING.as_bytes()].concat())
        .collect()
}
