//! [`Observer`]: follows an election's leader, woken by its change messages
//! (layer 4).
//!
//! User docs (example, ordering) are on the type.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::primitives::election::spec::{parse_change, ElectionSpec, Leader, Reading};
use crate::primitives::wait::waker::Waker;
use crate::primitives::wait::Woken;
use crate::vocab::error::Result;
use crate::vocab::retry::Retry;

/// Follows the leader of an election. Made by
/// [`Election::observe`](crate::Election::observe).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let election = client.election("scheduler", Duration::from_secs(10))?;
/// let mut observer = election.observe().await?;
/// loop {
///     match observer.next().await? {
///         Some(leader) => println!("leader {} (term {})", leader.value_lossy(), leader.term),
///         None => println!("no leader"),
///     }
/// }
/// # }
/// ```
///
/// # Ordering
/// Every campaign, proclaim, resign (and the record of a lease that ran
/// out) increments the election's change counter and publishes the new
/// state with it. An observer applies messages in counter order and never
/// goes back. When it sees a gap in the counter, a resubscription (the
/// connection dropped) or the end of the leader's lease, it re-reads the
/// state instead, and counts the changes it could not see one by one in
/// [`Observer::missed`]. States equal to the one just reported (the same
/// term and value) are not reported twice.
pub struct Observer {
    election: Arc<ElectionSpec>,
    /// The change messages, or polling without pub/sub (the wait core's).
    changes: Waker,
    /// The change counter of the last state taken in.
    change: u64,
    /// The last state reported (`None` before the first).
    shown: Option<Option<Leader>>,
    /// States to report, in order.
    queue: VecDeque<Option<Leader>>,
    /// When to re-read: the end of the leader's lease, if not renewed.
    recheck_at: Option<Instant>,
    /// A re-read is due (a gap, a resubscription, or an interrupted read).
    must_read: bool,
    missed: u64,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("election", &self.election.display_name())
            .field("change", &self.change)
            .field("missed", &self.missed)
            .finish()
    }
}

impl Observer {
    pub(crate) async fn start(election: Arc<ElectionSpec>) -> Result<Observer> {
        let channel = election.keys.channel.clone();
        let changes = Waker::subscribe(&election.session, channel, None).await;
        let reading = election.read().await?;
        let mut observer = Observer {
            election,
            changes,
            change: reading.change,
            shown: None,
            queue: VecDeque::new(),
            recheck_at: None,
            must_read: false,
            missed: 0,
        };
        observer.take_reading(reading);
        Ok(observer)
    }

    /// The next state of the election: `Some(leader)` or `None` (nobody
    /// leads). The first call returns the state read by
    /// [`observe`](crate::Election::observe) at once; later calls wait for
    /// the next change. A re-read that fails is retried with backoff; an
    /// error that persists 30 s is returned, and leaves the observer usable:
    /// call `next` again.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is lost when the future is dropped; an
    /// interrupted re-read is done again by the next call.
    pub async fn next(&mut self) -> Result<Option<Leader>> {
        loop {
            if let Some(state) = self.queue.pop_front() {
                self.shown = Some(state.clone());
                return Ok(state);
            }
            if self.must_read {
                let reading = self.read().await?;
                self.must_read = false;
                self.take_reading(reading);
                continue;
            }
            // A message, the end of the leader's lease, a resubscription,
            // a periodic re-read, or a poll without pub/sub.
            match self.changes.sleep(self.recheck_at, None).await {
                Woken::Message(payload) => self.take_message(&payload),
                Woken::Start | Woken::Recheck | Woken::Released => self.must_read = true,
            }
        }
    }

    /// How many changes this observer could not report one by one (it
    /// learned of them by re-reading: messages lost with a connection, or
    /// changes faster than it read them).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The observer as a [`Stream`](futures_util::Stream) of
    /// [`next`](Observer::next)'s results; it never ends.
    pub fn into_stream(self) -> impl futures_util::Stream<Item = Result<Option<Leader>>> {
        futures_util::stream::unfold(self, |mut observer| async move {
            let item = observer.next().await;
            Some((item, observer))
        })
    }

    /// Reads, retrying transient errors (a connection being re-established,
    /// a failover) by the one failure policy (`vocab/retry.rs`): without a
    /// deadline, for at most [`GIVE_UP_AFTER`](crate::vocab::retry::GIVE_UP_AFTER).
    async fn read(&self) -> Result<Reading> {
        let mut retry = Retry::until(None);
        let what = self.election.display_name();
        loop {
            match self.election.read().await {
                Err(e) => retry.after_failure(e, &what).await?,
                Ok(reading) => {
                    retry.answered(&what);
                    return Ok(reading);
                }
            }
        }
    }

    fn take_message(&mut self, payload: &[u8]) {
        let Some((change, state)) = parse_change(payload) else {
            self.must_read = true;
            return;
        };
        if change <= self.change {
            return; // already known (a re-read got ahead of the message)
        }
        if change > self.change + 1 {
            self.must_read = true;
            return;
        }
        self.change = change;
        // Re-read when the leader's lease would end if not renewed (the
        // reading then says how long it really has).
        self.recheck_at = state
            .as_ref()
            .and_then(|(_, lease)| *lease)
            .map(|lease| Instant::now() + lease + Duration::from_millis(1));
        let state = state.map(|(leader, _)| leader);
        self.offer(state);
    }

    fn take_reading(&mut self, reading: Reading) {
        if reading.change > self.change + 1 {
            self.missed += reading.change - self.change - 1;
        }
        // A smaller counter: Redis lost the election's state (a restart
        // without persistence). Start over from it.
        self.change = reading.change;
        self.recheck_at = reading
            .lease_left
            .map(|left| Instant::now() + left + Duration::from_millis(1));
        self.offer(reading.leader);
    }

    fn offer(&mut self, state: Option<Leader>) {
        let last = self.queue.back().or(self.shown.as_ref());
        let same = match (last, &state) {
            (Some(Some(a)), Some(b)) => a.same_as(b),
            (Some(None), None) => true,
            _ => false,
        };
        if !same {
            self.queue.push_back(state);
        }
    }
}
