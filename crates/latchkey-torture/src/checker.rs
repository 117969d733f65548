//! The checkers: from the resource's access log, the workers' events and
//! the fault windows to one row of figures per scenario ([`Figures`]), and
//! the verdict; `report` lays the rows out as a table.
//!
//! Each figure is defined in `docs/reliability.md`. Only some must hold
//! (see [`judge`]); the others describe how the system behaved.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::events::Event;
use super::faults::Window;
use super::resource::{Op, OpKind};

/// Everything one scenario recorded.
#[derive(Debug, Default)]
pub struct Record {
    /// Worker id and event, in the order they arrived.
    pub events: Vec<(u32, Event)>,
    /// The resource's log, in server order.
    pub ops: Vec<Op>,
    /// The logs of the other locks' resources (a multi workload), each in
    /// server order: each lock's exclusion is checked on its own.
    pub more_ops: Vec<Vec<Op>>,
    pub windows: Vec<Window>,
    /// When workers started and were told to stop (`mono_ns`).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The parent's wall clock (Unix ms) at `start_ns`, to tell a worker's
    /// jumped clock from a real one.
    pub wall_ms_at_start: u64,
    /// Faults that could not be carried out, and other remarks.
    pub notes: Vec<String>,
}

/// The bounds the figures are judged by.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub ttl: Duration,
    /// Longest allowed time from a fault that takes the lock to the next
    /// acquisition: TTL + the waiters' longest retry delay + a margin.
    pub recovery: Duration,
    /// A `lost()` that fires this long after the guard's deadline is late.
    pub lost_tolerance: Duration,
    /// A free lock with a waiter that stays free this long is a slow
    /// hand-over (a lost wake-up: the waiter slept through the release).
    pub slow_handoff: Duration,
}

/// The figures of one scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub faults: usize,
    /// Acquisitions reported by the workers.
    pub holds: usize,
    pub writes_accepted: usize,
    /// Holds whose accepted accesses have another hold's accepted access
    /// between them: two holders inside the critical section at once, as
    /// the resource saw it.
    pub overlaps: usize,
    /// Accepted writes of a value that had already been written: an
    /// increment was lost.
    pub lost_updates: usize,
    /// Accepted writes from a holder whose token was below one the resource
    /// had already seen.
    pub stale_accepted: usize,
    /// Accesses the resource refused because a higher token came first.
    pub stale_rejected: usize,
    /// Pairs of acquisitions where the later one (sent after the earlier
    /// one was answered) did not get a greater fencing token, plus tokens
    /// handed out twice.
    pub token_violations: usize,
    /// For each fault that takes the lock: time to the next acquisition.
    pub recoveries: Vec<Duration>,
    /// Faults that take the lock after which nobody acquired it again
    /// although the scenario ran on for longer than the bound.
    pub unrecovered: usize,
    pub lost_fired: usize,
    /// `lost()` fired no later than the guard's deadline (+ tolerance).
    pub lost_on_time: usize,
    /// Writes made after the writer's own guard had stopped claiming the lock.
    pub writes_after_lost: usize,
    /// Hand-overs to a waiter measured (outside fault windows) and how many were slow.
    pub handoffs: Vec<Duration>,
    pub slow_handoffs: usize,
    /// Acquisitions made while the worker's wall clock was off by more
    /// than a minute (the clock fault at work).
    pub clock_jumped: usize,
    /// Errors the workers reported (timeouts, refused connections, ...).
    pub errors: usize,
}

/// Computes the figures of one scenario.
pub fn figures(record: &Record, limits: &Limits) -> Figures {
    let mut f = Figures {
        faults: record.windows.len(),
        ..Figures::default()
    };
    for ops in std::iter::once(&record.ops).chain(&record.more_ops) {
        resource_figures(ops, &mut f);
    }
    let acquisitions = acquisitions(&record.events);
    f.holds = acquisitions.len();
    f.token_violations = token_violations(&acquisitions);
    recovery_figures(record, &acquisitions, limits, &mut f);
    for (_, event) in &record.events {
        match event {
            Event::Lost { t, deadline, .. } => {
                f.lost_fired += 1;
                if *t <= deadline + limits.lost_tolerance.as_nanos() as u64 {
                    f.lost_on_time += 1;
                }
            }
            Event::Wrote { held: false, .. } => f.writes_after_lost += 1,
            Event::Acquired {
                t_reply, wall_ms, ..
            } => {
                let expected = record.wall_ms_at_start as i64
                    + (t_reply.saturating_sub(record.start_ns) / 1_000_000) as i64;
                if (*wall_ms as i64 - expected).abs() > 60_000 {
                    f.clock_jumped += 1;
                }
            }
            Event::Error { .. } => f.errors += 1,
            _ => {}
        }
    }
    handoff_figures(record, &acquisitions, limits, &mut f);
    f
}

/// Overlaps, lost updates and stale accesses, from a resource's log (added
/// to what other resources' logs counted).
fn resource_figures(ops: &[Op], f: &mut Figures) {
    let accepted: Vec<&Op> = ops.iter().filter(|op| op.accepted).collect();
    let mut span: HashMap<u64, (usize, usize)> = HashMap::new();
    for (i, op) in accepted.iter().enumerate() {
        span.entry(op.fence)
            .and_modify(|s| s.1 = i)
            .or_insert((i, i));
    }
    f.overlaps += span
        .iter()
        .filter(|(fence, (first, last))| {
            accepted[*first..=*last]
                .iter()
                .any(|op| op.fence != **fence)
        })
        .count();

    let mut highest_written: Option<u64> = None;
    for op in ops {
        match (op.kind, op.accepted) {
            (OpKind::Write, true) => {
                f.writes_accepted += 1;
                if highest_written.is_some_and(|h| op.value <= h) {
                    f.lost_updates += 1;
                }
                highest_written = Some(highest_written.map_or(op.value, |h| h.max(op.value)));
                if op.stale {
                    f.stale_accepted += 1;
                }
            }
            (_, false) => f.stale_rejected += 1,
            (OpKind::Read, true) => {}
        }
    }
}

/// One acquisition: when its request was sent, when the answer came, the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquisition {
    pub worker: u32,
    pub t_send: u64,
    pub t_reply: u64,
    pub fence: u64,
}

fn acquisitions(events: &[(u32, Event)]) -> Vec<Acquisition> {
    let mut all: Vec<Acquisition> = events
        .iter()
        .filter_map(|(worker, event)| match event {
            Event::Acquired {
                t_send,
                t_reply,
                fence,
                ..
            } => Some(Acquisition {
                worker: *worker,
                t_send: *t_send,
                t_reply: *t_reply,
                fence: *fence,
            }),
            _ => None,
        })
        .collect();
    all.sort_by_key(|a| a.t_reply);
    all
}

/// Fencing tokens must grow in real-time order: when acquisition A was
/// answered before B was sent, A's token must be below B's. (Acquisitions
/// whose requests overlapped in time may come back in either order.)
/// Counts the Bs that break this, plus tokens issued more than once.
/// `sorted` is sorted by `t_reply`.
pub fn token_violations(sorted: &[Acquisition]) -> usize {
    // prefix_max[i] = the highest token among the first i answered acquisitions.
    let mut prefix_max = Vec::with_capacity(sorted.len() + 1);
    prefix_max.push(None);
    for a in sorted {
        let last = prefix_max.last().copied().flatten();
        prefix_max.push(Some(last.map_or(a.fence, |m: u64| m.max(a.fence))));
    }
    let mut violations = 0;
    for b in sorted {
        let answered_before = sorted.partition_point(|a| a.t_reply < b.t_send);
        if prefix_max[answered_before].is_some_and(|m| m >= b.fence) {
            violations += 1;
        }
    }
    let mut seen = HashSet::new();
    violations + sorted.iter().filter(|a| !seen.insert(a.fence)).count()
}

fn recovery_figures(record: &Record, sorted: &[Acquisition], limits: &Limits, f: &mut Figures) {
    for window in record.windows.iter().filter(|w| w.fault.takes_the_lock()) {
        let next = sorted.iter().find(|a| a.t_reply > window.start_ns);
        match next {
            Some(a) => f
                .recoveries
                .push(Duration::from_nanos(a.t_reply - window.start_ns)),
            None if record.end_ns.saturating_sub(window.start_ns)
                > limits.recovery.as_nanos() as u64 =>
            {
                f.unrecovered += 1
            }
            None => {}
        }
    }
}

/// Hand-overs: after a successful release, how long the lock stayed free
/// while another worker was waiting. Releases near a fault are left out:
/// there a slow hand-over is the fault's doing.
fn handoff_figures(record: &Record, sorted: &[Acquisition], limits: &Limits, f: &mut Figures) {
    let quiet_after = limits.ttl.as_nanos() as u64;
    // Who is waiting when: the time of each worker's Waiting events.
    let mut waiting_since: Vec<(u32, u64)> = Vec::new();
    for (worker, event) in &record.events {
        if let Event::Waiting { t } = event {
            waiting_since.push((*worker, *t));
        }
    }
    for (worker, event) in &record.events {
        let Event::Released {
            t_send,
            t_reply,
            outcome,
        } = event
        else {
            continue;
        };
        if outcome != "released" {
            continue;
        }
        let Some(next) = sorted.iter().find(|a| a.t_reply > *t_send) else {
            continue;
        };
        // Someone else was waiting when the release went out: they waited
        // before it and had not acquired since.
        let someone_waiting = waiting_since.iter().any(|(w, since)| {
            w != worker
                && since < t_send
                && !sorted
                    .iter()
                    .any(|a| a.worker == *w && a.t_reply > *since && a.t_reply <= *t_send)
        });
        let disturbed = record
            .windows
            .iter()
            .any(|w| w.start_ns <= next.t_reply && *t_send <= w.end_ns + quiet_after);
        if !someone_waiting || disturbed {
            continue;
        }
        let gap = Duration::from_nanos(next.t_reply.saturating_sub(*t_reply));
        if gap > limits.slow_handoff {
            f.slow_handoffs += 1;
        }
        f.handoffs.push(gap);
    }
}

/// What a scenario's figures mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every must-hold figure held.
    Pass,
    /// The control run showed violations, as it must.
    ControlShowedViolations,
    /// Must-hold figures that failed, with the reason.
    Fail(Vec<String>),
}

impl Verdict {
    pub fn failed(&self) -> bool {
        matches!(self, Verdict::Fail(_))
    }

    pub fn label(&self) -> String {
        match self {
            Verdict::Pass => "PASS".into(),
            Verdict::ControlShowedViolations => "VIOLATIONS SHOWN (expected)".into(),
            Verdict::Fail(why) => format!("FAIL: {}", why.join("; ")),
        }
    }
}

/// The must-hold figures. With fencing: no overlap, no lost update, no
/// stale write accepted. Always: fencing tokens in real-time order, every
/// lock taken by a fault acquired again within the bound, and at least one
/// acquisition. The control run (no fencing, pauses) must show a violation,
/// or the checker has proved nothing.
pub fn judge(figures: &Figures, limits: &Limits, fenced: bool, control: bool) -> Verdict {
    let mut failures = Vec::new();
    if figures.holds == 0 {
        failures.push("no worker ever acquired the lock".to_owned());
    }
    if figures.token_violations > 0 {
        failures.push(format!(
            "{} fencing tokens out of order",
            figures.token_violations
        ));
    }
    if let Some(worst) = figures
        .recoveries
        .iter()
        .max()
        .filter(|d| **d > limits.recovery)
    {
        failures.push(format!(
            "a lock taken by a fault was free again only after {worst:?} (bound {:?})",
            limits.recovery
        ));
    }
    if figures.unrecovered > 0 {
        failures.push(format!(
            "{} faults after which nobody acquired the lock again",
            figures.unrecovered
        ));
    }
    if fenced {
        if figures.overlaps > 0 {
            failures.push(format!("{} overlapping holds", figures.overlaps));
        }
        if figures.lost_updates > 0 {
            failures.push(format!("{} lost updates", figures.lost_updates));
        }
        if figures.stale_accepted > 0 {
            failures.push(format!("{} stale writes accepted", figures.stale_accepted));
        }
    }
    let violations = figures.overlaps + figures.lost_updates + figures.stale_accepted;
    if control && violations == 0 {
        failures.push("the control run showed no violation: the checker proved nothing".to_owned());
    }
    match (failures.is_empty(), control) {
        (false, _) => Verdict::Fail(failures),
        (true, true) => Verdict::ControlShowedViolations,
        (true, false) => Verdict::Pass,
    }
}

#[cfg(test)]
mod tests;
