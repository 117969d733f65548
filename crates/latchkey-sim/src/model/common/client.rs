//! A client's life as the lock-shaped models see it (the plain lock, the
//! semaphore, several names at once): a first try, a wait, a hold of the
//! model's own kind `H`, the clean-up of an acquire whose reply was lost.

/// Where a client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase<H> {
    /// About to make a first try.
    Idle,
    /// Waiting to try again: at `recheck_at` (ms) or on a wake-up.
    Waiting {
        /// When it tries again without a wake-up.
        recheck_at: i64,
    },
    /// Holds what it acquired, as far as it knows.
    Held(H),
    /// An acquire's reply was lost: release with that attempt's token.
    Cleanup {
        /// The attempt whose token to release.
        attempt: u32,
    },
    /// Took all its holds.
    Done,
}

/// One client of the plain lock, the semaphore or the read-write lock,
/// in its phase `P` (most: [`Phase`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client<P> {
    /// Where it is.
    pub phase: P,
    /// Paused: takes no step while time runs.
    pub paused: bool,
    /// Attempts made (each has its own token).
    pub attempts: u32,
    /// Holds taken (and released).
    pub holds: u8,
    /// A wake-up arrived and was not acted on yet.
    pub woken: bool,
}

impl<P> Client<P> {
    /// A client about to make its first try, in `phase`.
    pub fn starting(phase: P) -> Client<P> {
        Client {
            phase,
            paused: false,
            attempts: 0,
            holds: 0,
            woken: false,
        }
    }
}

impl<H> crate::model::common::Waits for Phase<H> {
    fn waits(&self) -> bool {
        matches!(self, Phase::Waiting { .. })
    }
}
