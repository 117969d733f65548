//! The simulated clock: server time in microseconds that moves only when
//! told to. `TIME` answers from it and every expiry is judged by it; a
//! script runs at one frozen instant, since nothing moves the clock while
//! it runs.

/// Server time in microseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Clock {
    micros: i64,
}

impl Clock {
    /// A clock at `micros` µs since the epoch.
    pub fn at_micros(micros: i64) -> Clock {
        Clock { micros }
    }

    /// The time in µs.
    pub fn micros(&self) -> i64 {
        self.micros
    }

    /// The time in ms, as Redis judges expiry (`mstime()`).
    pub fn millis(&self) -> i64 {
        self.micros.div_euclid(1000)
    }

    /// Moves the clock to `micros` (backwards too: a restarted server's
    /// clock may be behind).
    pub fn set_micros(&mut self, micros: i64) {
        self.micros = micros;
    }

    /// Moves the clock `ms` milliseconds on.
    pub fn advance_ms(&mut self, ms: i64) {
        self.micros = self.micros.saturating_add(ms.saturating_mul(1000));
    }

    /// The `TIME` reply's two numbers: seconds and the microseconds within.
    pub fn time(&self) -> (i64, i64) {
        (
            self.micros.div_euclid(1_000_000),
            self.micros.rem_euclid(1_000_000),
        )
    }
}
