//! What a worker tells the parent: one event per line on its stdout, each
//! stamped with the host's monotonic clock.
//!
//! ```text
//! acquired 81234000000 81234001500 1732900000123456 1732900000123
//! read 81234002000 1 41
//! wrote 81234150000 1 42 1
//! released 81234151000 81234152000 released
//! ```
//!
//! `CLOCK_MONOTONIC` is one clock for every process on a Linux host, so the
//! parent can put its own fault injections and all workers' events on one
//! time line. It keeps running while a process is stopped (SIGSTOP), and
//! libfaketime leaves it alone when told to (the clock fault only moves the
//! wall clock), so it measures real elapsed time in every scenario.

use std::io::Write as _;
use std::time::{Duration, Instant};

/// Nanoseconds on the host's monotonic clock.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass; CLOCK_MONOTONIC
    // always exists on Linux, so it cannot fail.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// An [`Instant`] (same clock, opaque) as [`mono_ns`] nanoseconds.
pub fn instant_ns(at: Instant) -> u64 {
    let (now, now_ns) = (Instant::now(), mono_ns());
    if at >= now {
        now_ns + (at - now).as_nanos() as u64
    } else {
        now_ns.saturating_sub((now - at).as_nanos() as u64)
    }
}

/// The [`Instant`] at [`mono_ns`] nanoseconds.
pub fn ns_instant(ns: u64) -> Instant {
    let (now, now_ns) = (Instant::now(), mono_ns());
    if ns >= now_ns {
        now + Duration::from_nanos(ns - now_ns)
    } else {
        now.checked_sub(Duration::from_nanos(now_ns - ns))
            .unwrap_or(now)
    }
}

/// One thing a worker did. Times are [`mono_ns`] values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Connected and about to contend.
    Ready { pid: u32 },
    /// About to wait for the lock.
    Waiting { t: u64 },
    /// Got the lock. `t_send` is when the successful attempt was sent
    /// (derived from the guard's deadline), `t_reply` when its answer came;
    /// `wall_ms` is the worker's wall clock then (Unix ms), which shows
    /// whether a clock fault took effect.
    Acquired {
        t_send: u64,
        t_reply: u64,
        fence: u64,
        wall_ms: u64,
    },
    /// Read the counter (`accepted` false: the resource refused our token).
    Read { t: u64, accepted: bool, value: u64 },
    /// Wrote the counter. `held`: the guard still claimed the lock just
    /// before the write (a careful client would have skipped the write otherwise).
    Wrote {
        t: u64,
        accepted: bool,
        value: u64,
        held: bool,
    },
    /// The guard's `lost()` fired at `t`; its deadline was then `deadline`.
    Lost { t: u64, deadline: u64, fence: u64 },
    /// Released: `outcome` is `released`, `expired`, `held-by-other` or `error`.
    Released {
        t_send: u64,
        t_reply: u64,
        outcome: String,
    },
    /// Something failed; the worker carries on.
    Error { t: u64, message: String },
    /// The scenario's end came; the worker exits.
    Done,
}

impl Event {
    /// The line a worker prints (without the newline).
    pub fn to_line(&self) -> String {
        match self {
            Event::Ready { pid } => format!("ready {pid}"),
            Event::Waiting { t } => format!("waiting {t}"),
            Event::Acquired {
                t_send,
                t_reply,
                fence,
                wall_ms,
            } => format!("acquired {t_send} {t_reply} {fence} {wall_ms}"),
            Event::Read { t, accepted, value } => {
                format!("read {t} {} {value}", u8::from(*accepted))
            }
            Event::Wrote {
                t,
                accepted,
                value,
                held,
            } => {
                format!(
                    "wrote {t} {} {value} {}",
                    u8::from(*accepted),
                    u8::from(*held)
                )
            }
            Event::Lost { t, deadline, fence } => format!("lost {t} {deadline} {fence}"),
            Event::Released {
                t_send,
                t_reply,
                outcome,
            } => format!("released {t_send} {t_reply} {outcome}"),
            // One line, whatever the error said.
            Event::Error { t, message } => {
                format!("error {t} {}", message.replace(['\n', '\r'], " "))
            }
            Event::Done => "done".into(),
        }
    }

    /// Parses a line; `None` for anything else (a worker's stray output).
    pub fn parse(line: &str) -> Option<Event> {
        let mut words = line.split(' ');
        let kind = words.next()?;
        let mut num = || -> Option<u64> { words.next()?.parse().ok() };
        let event = match kind {
            "ready" => Event::Ready {
                pid: u32::try_from(num()?).ok()?,
            },
            "waiting" => Event::Waiting { t: num()? },
            "acquired" => Event::Acquired {
                t_send: num()?,
                t_reply: num()?,
                fence: num()?,
                wall_ms: num()?,
            },
            "read" => Event::Read {
                t: num()?,
                accepted: num()? == 1,
                value: num()?,
            },
            "wrote" => Event::Wrote {
                t: num()?,
                accepted: num()? == 1,
                value: num()?,
                held: num()? == 1,
            },
            "lost" => Event::Lost {
                t: num()?,
                deadline: num()?,
                fence: num()?,
            },
            "released" => {
                let (t_send, t_reply) = (num()?, num()?);
                Event::Released {
                    t_send,
                    t_reply,
                    outcome: words.next()?.to_owned(),
                }
            }
            "error" => {
                let t = num()?;
                Event::Error {
                    t,
                    message: words.collect::<Vec<_>>().join(" "),
                }
            }
            "done" => Event::Done,
            _ => return None,
        };
        Some(event)
    }
}

/// Prints events, one line each, flushed at once: a worker killed with
/// SIGKILL must not take buffered events with it.
pub(crate) struct Emitter;

impl Emitter {
    pub(crate) fn emit(&self, event: Event) {
        let mut out = std::io::stdout().lock();
        // A parent that went away is not the worker's problem; it dies with
        // it (PR_SET_PDEATHSIG) anyway.
        let _ = writeln!(out, "{}", event.to_line());
        let _ = out.flush();
    }

    pub(crate) fn error(&self, message: impl Into<String>) {
        self.emit(Event::Error {
            t: mono_ns(),
            message: message.into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let events = [
            Event::Ready { pid: 42 },
            Event::Waiting { t: 1 },
            Event::Acquired {
                t_send: 1,
                t_reply: 2,
                fence: u64::MAX,
                wall_ms: 3,
            },
            Event::Read {
                t: 3,
                accepted: true,
                value: 7,
            },
            Event::Wrote {
                t: 4,
                accepted: false,
                value: 8,
                held: true,
            },
            Event::Lost {
                t: 5,
                deadline: 6,
                fence: 9,
            },
            Event::Released {
                t_send: 7,
                t_reply: 8,
                outcome: "held-by-other".into(),
            },
            Event::Error {
                t: 9,
                message: "redis down: connection refused".into(),
            },
            Event::Done,
        ];
        for event in events {
            assert_eq!(Event::parse(&event.to_line()), Some(event));
        }
        assert_eq!(Event::parse("garbage 1 2"), None);
        assert_eq!(Event::parse("acquired 1 x 3"), None);
    }

    #[test]
    fn instants_convert_both_ways() {
        let later = Instant::now() + Duration::from_millis(250);
        let back = ns_instant(instant_ns(later));
        let diff = if back > later {
            back - later
        } else {
            later - back
        };
        assert!(diff < Duration::from_millis(5), "{diff:?}");
    }
}
