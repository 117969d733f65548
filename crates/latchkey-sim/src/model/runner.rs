//! Long seeded random walks over every model (`./dev sim --seconds N`):
//! rotates over [`walks::targets`], one walk of each in turn, until the
//! time is up, printing progress every few seconds and a summary; stops
//! at the first violation with its shrunk trace and how to replay it.
//!
//! A run is its seed: walk `i` of a target walks from [`walk_seed`]`(seed,
//! name, i)`, so `--seed S --model NAME --walk I` replays one walk
//! exactly, whatever else the run did, on any machine.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crate::model::explore::Violation;
use crate::model::walks::{self, Target};

/// What a run does.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long to walk; at least one walk of every target runs anyway.
    pub duration: Duration,
    /// The run's seed, from which every walk's is derived.
    pub seed: u64,
    /// Only this target (`--model`); `None`: every one.
    pub only: Option<String>,
    /// Only this walk of it (`--walk`, a replay): run once, then stop.
    pub walk: Option<u64>,
    /// Steps a walk (`--steps`); `None`: each target's own.
    pub steps: Option<usize>,
    /// How often progress prints.
    pub progress: Duration,
}

/// What one target's walks covered.
#[derive(Clone, Debug)]
pub struct Tally {
    /// The target's name.
    pub name: &'static str,
    /// Walks finished.
    pub walks: u64,
    /// Steps taken in them, each followed by a check of every invariant.
    pub steps: u64,
    /// Time spent walking it.
    pub busy: Duration,
}

/// A walk that broke an invariant.
#[derive(Debug)]
pub struct Failure {
    /// The target walked.
    pub target: &'static str,
    /// The walk's index among that target's.
    pub walk: u64,
    /// The invariant broken and the shrunk trace (its seed: the walk's).
    pub violation: Box<Violation>,
}

/// A run's result.
#[derive(Debug)]
pub struct Summary {
    /// Per target, in rotation order.
    pub tallies: Vec<Tally>,
    /// The run's wall time.
    pub elapsed: Duration,
    /// The first violation, which ended the run.
    pub failure: Option<Failure>,
}

impl Summary {
    /// Walks finished, all targets.
    pub fn walks(&self) -> u64 {
        self.tallies.iter().map(|t| t.walks).sum()
    }

    /// Steps taken, all targets.
    pub fn steps(&self) -> u64 {
        self.tallies.iter().map(|t| t.steps).sum()
    }
}

/// SplitMix64's finaliser: spreads neighbouring inputs over all 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of walk `walk` of target `name` in a run seeded `seed`: a
/// function of the three only (FNV-1a of the name, then SplitMix64), so
/// that it does not depend on which targets a run includes or in what
/// order, nor on the platform.
pub fn walk_seed(seed: u64, name: &str, walk: u64) -> u64 {
    let name_hash = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    });
    mix(mix(mix(seed) ^ name_hash) ^ walk)
}

/// The command line that replays walk `walk` of `target` in a run seeded
/// `seed` (the `./dev` form; `cargo run --release -p latchkey-sim --bin
/// walks -- …` takes the same arguments).
pub fn replay_command(seed: u64, target: &str, walk: u64) -> String {
    format!("./dev sim --seed {seed} --model {target} --walk {walk}")
}

/// The targets a run walks: every one, or the one `only` names.
pub fn select(only: Option<&str>) -> Result<Vec<Target>, String> {
    let all = walks::targets()?;
    match only {
        None => Ok(all),
        Some(name) => {
            let names: Vec<&str> = all.iter().map(|t| t.name).collect();
            let picked: Vec<Target> = all.into_iter().filter(|t| t.name == name).collect();
            if picked.is_empty() {
                Err(format!(
                    "no model named {name:?}; the models: {}",
                    names.join(", ")
                ))
            } else {
                Ok(picked)
            }
        }
    }
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// Runs the walks `options` says over `targets`, writing progress and the
/// summary to `out`. A violation ends the run (see [`Summary::failure`]).
pub fn run(targets: &[Target], options: &Options, out: &mut dyn Write) -> io::Result<Summary> {
    let started = Instant::now();
    let mut tallies: Vec<Tally> = targets
        .iter()
        .map(|t| Tally {
            name: t.name,
            walks: 0,
            steps: 0,
            busy: Duration::ZERO,
        })
        .collect();
    let mut failure = None;
    let mut next_progress = options.progress;
    let first = options.walk.unwrap_or(0);
    'run: for round in 0.. {
        for (i, target) in targets.iter().enumerate() {
            // Every target walks once before the time is looked at.
            if round > 0 && (options.walk.is_some() || started.elapsed() >= options.duration) {
                break 'run;
            }
            let index = first + round;
            let seed = walk_seed(options.seed, target.name, index);
            let walk_started = Instant::now();
            let result = target.walk(seed, options.steps.unwrap_or(target.steps));
            let tally = &mut tallies[i];
            tally.busy += walk_started.elapsed();
            match result {
                Ok(steps) => {
                    tally.walks += 1;
                    tally.steps += steps as u64;
                }
                Err(violation) => {
                    failure = Some(Failure {
                        target: target.name,
                        walk: index,
                        violation,
                    });
                    break 'run;
                }
            }
            let elapsed = started.elapsed();
            if elapsed >= next_progress {
                // On the interval's marks, whatever a walk's length.
                while next_progress <= elapsed {
                    next_progress += options.progress.max(Duration::from_millis(100));
                }
                progress(&tallies, elapsed, out)?;
            }
        }
    }
    let summary = Summary {
        tallies,
        elapsed: started.elapsed(),
        failure,
    };
    report(targets, options, &summary, out)?;
    Ok(summary)
}

fn progress(tallies: &[Tally], elapsed: Duration, out: &mut dyn Write) -> io::Result<()> {
    let walks: u64 = tallies.iter().map(|t| t.walks).sum();
    let steps: u64 = tallies.iter().map(|t| t.steps).sum();
    writeln!(
        out,
        "[{:>6.0} s] {walks} walks, {steps} steps: {:.0} steps/s, {:.1} walks/s",
        elapsed.as_secs_f64(),
        rate(steps, elapsed),
        rate(walks, elapsed)
    )?;
    out.flush()
}

/// The summary: the totals and rates, each target's walks and steps, the
/// invariants checked, and a violation's trace and replay.
fn report(
    targets: &[Target],
    options: &Options,
    summary: &Summary,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (walks, steps, elapsed) = (summary.walks(), summary.steps(), summary.elapsed);
    writeln!(
        out,
        "\nseed {}: {walks} walks, {steps} steps (states checked) in {:.1} s: \
         {:.0} steps/s, {:.1} walks/s",
        options.seed,
        elapsed.as_secs_f64(),
        rate(steps, elapsed),
        rate(walks, elapsed)
    )?;
    writeln!(
        out,
        "{:<20} {:>8} {:>12} {:>10} {:>8}",
        "model", "walks", "steps", "steps/s", "time"
    )?;
    for t in &summary.tallies {
        writeln!(
            out,
            "{:<20} {:>8} {:>12} {:>10.0} {:>7.1}s",
            t.name,
            t.walks,
            t.steps,
            rate(t.steps, t.busy),
            t.busy.as_secs_f64()
        )?;
    }
    writeln!(out, "\ninvariants checked after every step:")?;
    let mut shown: Vec<&[&str]> = Vec::new();
    for t in targets {
        // Variants of one model (fenced or not) share their list.
        if shown.contains(&t.invariants) {
            continue;
        }
        shown.push(t.invariants);
        let same: Vec<&str> = targets
            .iter()
            .filter(|u| u.invariants == t.invariants)
            .map(|u| u.name)
            .collect();
        writeln!(out, "  {}:", same.join(", "))?;
        for inv in t.invariants {
            writeln!(out, "    - {inv}")?;
        }
    }
    if let Some(f) = &summary.failure {
        let seed = walk_seed(options.seed, f.target, f.walk);
        let target = targets.iter().find(|t| t.name == f.target);
        writeln!(
            out,
            "\nVIOLATION in walk {} of {} (walk seed {seed})",
            f.walk, f.target
        )?;
        writeln!(out, "{}", f.violation)?;
        writeln!(
            out,
            "replay: {}",
            replay_command(options.seed, f.target, f.walk)
        )?;
        if let Some(t) = target {
            let steps = options.steps.unwrap_or(t.steps);
            let call = t.replay.replace("SEED", &seed.to_string());
            let call = call.replace(&format!(", {})", t.steps), &format!(", {steps})"));
            writeln!(out, "or in Rust (latchkey_sim::model::walks): {call}")?;
        }
    }
    out.flush()
}
