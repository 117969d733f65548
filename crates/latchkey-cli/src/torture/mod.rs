//! `latchkey torture`: W worker processes contend for one lock while faults
//! are injected, and checkers count what went wrong, one row per scenario.
//!
//! ```text
//! latchkey torture --quick                  # every scenario, 2.5 s each (CI)
//! latchkey torture --fault pause --seed 42  # one fault, replayable
//! latchkey torture --no-fencing             # see what fencing prevents
//! latchkey --redis redis://db:6379/ torture --fault kill --fault delete-key
//! ```
//!
//! Without `--redis` every scenario gets redis-servers of its own (the test
//! kit's); with it, the lock lives on the given server(s) (several: Redlock)
//! and faults that would disturb other clients of that server are skipped.
//! What each fault and figure means, and the figures of a full run, are in
//! `docs/reliability.md`.
//!
//! The pieces: [`worker`] (the contending process), [`resource`] (the
//! recording counter), [`faults`] (what an injection does), [`scenario`]
//! (running one row), [`checker`] (figures and verdicts).

mod checker;
mod events;
mod faults;
mod links;
mod resource;
mod rng;
mod scenario;
mod worker;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::connect::{redact, Target};
use crate::duration;
use crate::exit::{Failure, Outcome};

use checker::{Limits, Row, Verdict};
use faults::Fault;
use rng::Rng;
use scenario::{Place, Scenario, Settings};

/// The control scenario runs at least this long: time for about three pauses.
const CONTROL_MIN_DURATION: Duration = Duration::from_secs(6);

/// Exit code when a must-hold figure failed.
pub const MUST_HOLD_FAILED: u8 = 1;

const HELP: &str = "\
Faults (--fault NAME, repeatable; default: all, each alone, then mixed):
  kill              kill -9 the holder (it is restarted as a new process)
  pause             SIGSTOP the holder for 2 x TTL, then SIGCONT
  restart           crash and restart Redis without persistence
  restart-aof       crash and restart Redis with AOF, fsync always
  blackhole         silence the holder's network link for 1.5 x TTL
  delay             delay the holder's link by TTL/5 each way for 2 x TTL
  clock             jump the holder's wall clock by an hour (needs libfaketime)
  script-flush      SCRIPT FLUSH
  delete-key        DEL the lock key under the holder
  overwrite-key     SET the lock key to a foreign value under the holder
  pubsub-kill       CLIENT KILL TYPE pubsub
  redlock-minority  Redlock over 3 instances: crash one, restart it empty

A control scenario (no fencing, pause) always runs and must show violations.

Exit codes:
    0  every must-hold figure held
    1  a must-hold figure failed (see the verdict column)
    2  usage error
   69  Redis unavailable, or no redis-server to start
   70  internal error";

/// `latchkey torture`.
#[derive(clap::Args, Debug)]
#[command(after_help = HELP)]
pub struct TortureArgs {
    /// The CI profile: every scenario for 2.5s with a 500ms TTL (under a minute in all).
    #[arg(long)]
    quick: bool,

    /// Plain writes instead of fenced ones in every scenario; violations are
    /// then expected: reported, not failures.
    #[arg(long)]
    no_fencing: bool,

    /// Inject only this fault (repeatable): each alone, then all mixed.
    #[arg(long = "fault", value_name = "NAME", value_parser = parse_fault)]
    faults: Vec<Fault>,

    /// Seed of the fault schedule and the workers' timings, for a replay.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,

    /// Worker processes contending for the lock.
    #[arg(long, value_name = "W", default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    workers: u32,

    /// How long each scenario runs [default: 60s; with --quick: 2.5s; the
    /// control at least 6s].
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    duration: Option<Duration>,

    /// The lock's TTL [default: 1s; with --quick: 500ms].
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    ttl: Option<Duration>,
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    Fault::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        format!("unknown fault {name:?}; known: {}", names.join(", "))
    })
}

/// Runs the suite, or, in a process started by it, one worker.
pub async fn run(target: &Target, args: TortureArgs) -> Outcome {
    if let Ok(spec) = std::env::var(worker::WORKER_ENV) {
        return Ok(worker::run(&spec).await);
    }
    let ttl = args.ttl.unwrap_or(if args.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(1)
    });
    if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&ttl) {
        return Err(Failure::usage("--ttl must be between 100ms and 60s"));
    }
    let duration = args.duration.unwrap_or(if args.quick {
        Duration::from_millis(2500)
    } else {
        Duration::from_secs(60)
    });
    if duration < Duration::from_secs(1) {
        return Err(Failure::usage("--duration must be at least 1s"));
    }
    let seed = args.seed.unwrap_or_else(Rng::fresh_seed);
    let mut rng = Rng::new(seed);
    let place = if target.urls.is_empty() {
        Place::Private
    } else {
        Place::User(target.urls.clone())
    };
    let faketime = find_faketime();
    let settings = Settings {
        workers: args.workers,
        ttl,
        duration,
        // Shorter than the TTL, so a dead link is noticed within a lease;
        // longer than a delayed round trip (2 x TTL/5).
        command_timeout: ttl.min(latchkey::DEFAULT_COMMAND_TIMEOUT),
        // At least TTL/10 so that a fault aimed at a holder that just read
        // lands before its write, even on a busy host.
        hold: (ttl / 10, ttl / 2),
        think: (ttl / 4, ttl / 2),
        prefix: target
            .prefix
            .clone()
            .unwrap_or_else(|| latchkey::DEFAULT_PREFIX.to_owned()),
        run_id: format!(
            "{:x}",
            (events::mono_ns() ^ u64::from(std::process::id())) & 0xff_ffff
        ),
        faketime: faketime.clone(),
    };
    let limits = Limits {
        ttl,
        // A waiter retries at the holder's TTL, or polls at most every
        // 500 ms (x1.5 jitter) without pub/sub; 1 s for scheduling on a busy host.
        recovery: ttl + Duration::from_millis(750) + Duration::from_secs(1),
        lost_tolerance: Duration::from_millis(50),
        slow_handoff: ttl / 5,
    };

    let scenarios = plan(&args.faults, !args.no_fencing);
    println!("latchkey torture: seed {seed} (replay with --seed {seed})");
    println!(
        "  {} workers, TTL {}, {} per scenario, {} scenarios, {}",
        settings.workers,
        duration::human(ttl),
        duration::human(duration),
        scenarios.len(),
        match &place {
            Place::Private => "on private redis-servers".to_owned(),
            Place::User(urls) => format!(
                "on {}",
                urls.iter()
                    .map(|u| redact(u))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    );

    // The resource: a server of its own, or keys of their own on the user's first server.
    let private_resource = match place {
        Place::Private => Some(
            tokio::task::spawn_blocking(|| latchkey_testkit::RedisServer::builder().try_start())
                .await
                .map_err(|e| {
                    Failure::new(crate::exit::INTERNAL, format!("starting redis-server: {e}"))
                })?
                .map_err(|e| {
                    Failure::new(
                        crate::exit::UNAVAILABLE,
                        format!("cannot start redis-server: {e}"),
                    )
                })?,
        ),
        Place::User(_) => None,
    };
    let resource_url = match (&private_resource, &place) {
        (Some(server), _) => server.url(),
        (None, Place::User(urls)) => urls[0].clone(),
        (None, Place::Private) => unreachable!("a private run has a private resource"),
    };

    let mut rows = Vec::new();
    let mut details = Vec::new();
    for scn in &scenarios {
        let scn = match applicable(scn, &place, faketime.is_some()) {
            Ok(scn) => scn,
            Err(reason) => {
                println!("- {}: skipped: {reason}", scn.name);
                rows.push(Row {
                    scenario: scn.name.clone(),
                    outcome: Err(reason),
                });
                continue;
            }
        };
        print!("- {}: {} ... ", scn.name, describe(&scn));
        let _ = std::io::stdout().flush();
        // The control must show a violation for the run to mean anything:
        // give it time for several pauses even in the quick profile.
        let scn_settings = Settings {
            duration: if scn.control {
                duration.max(CONTROL_MIN_DURATION)
            } else {
                duration
            },
            ..settings.clone()
        };
        let record = scenario::run(
            &scn,
            &scn_settings,
            &place,
            &resource_url,
            &mut Rng::new(rng.fork()),
        )
        .await
        .map_err(|e| {
            Failure::new(
                crate::exit::UNAVAILABLE,
                format!("scenario {}: {e}", scn.name),
            )
        })?;
        let figures = checker::figures(&record, &limits);
        let verdict = checker::judge(&figures, &limits, scn.fenced, scn.control);
        println!(
            "{} faults, {} holds: {}",
            figures.faults,
            figures.holds,
            verdict.label()
        );
        details.push(detail(&scn.name, &figures, &record.notes));
        rows.push(Row {
            scenario: label(&scn),
            outcome: Ok((figures, verdict)),
        });
    }

    println!();
    print!("{}", checker::table(&rows, &limits));
    println!();
    for line in details {
        println!("{line}");
    }
    println!();
    let failed: Vec<&Row> = rows
        .iter()
        .filter(|r| matches!(&r.outcome, Ok((_, v)) if v.failed()))
        .collect();
    let control_shown = rows
        .iter()
        .any(|r| matches!(&r.outcome, Ok((_, Verdict::ControlShowedViolations))));
    if control_shown {
        println!("The control run (no fencing, holders paused past their TTL) shows violations, as it must:");
        println!("the checker can see them, so its zeros elsewhere mean something. Not a failure.");
    }
    if args.no_fencing {
        println!(
            "--no-fencing: overlaps, lost updates and stale writes are reported, not failures."
        );
    }
    if failed.is_empty() {
        println!("All must-hold figures held (seed {seed}).");
        Ok(crate::exit::OK)
    } else {
        let names: Vec<&str> = failed.iter().map(|r| r.scenario.as_str()).collect();
        println!(
            "MUST-HOLD FIGURES FAILED in: {} (seed {seed}).",
            names.join(", ")
        );
        Ok(MUST_HOLD_FAILED)
    }
}

/// The scenarios of a run: a baseline without faults (unless faults were
/// chosen), each fault alone, all of them mixed, and the control.
fn plan(chosen: &[Fault], fenced: bool) -> Vec<Scenario> {
    let mut faults: Vec<Fault> = Vec::new();
    for f in if chosen.is_empty() {
        &Fault::ALL[..]
    } else {
        chosen
    } {
        if !faults.contains(f) {
            faults.push(*f);
        }
    }
    let mut scenarios = Vec::new();
    if chosen.is_empty() {
        scenarios.push(Scenario {
            name: "none".into(),
            faults: vec![],
            fenced,
            control: false,
        });
    }
    for f in &faults {
        scenarios.push(Scenario {
            name: f.name().into(),
            faults: vec![*f],
            fenced,
            control: false,
        });
    }
    // Mixed: one server setup for all, so neither the AOF restart nor
    // the Redlock minority (which need servers of their own) take part.
    let mixable: Vec<Fault> = faults
        .iter()
        .copied()
        .filter(|f| !matches!(f, Fault::RestartAof | Fault::RedlockMinority))
        .collect();
    if mixable.len() > 1 {
        scenarios.push(Scenario {
            name: "mixed".into(),
            faults: mixable,
            fenced,
            control: false,
        });
    }
    scenarios.push(Scenario {
        name: "control".into(),
        faults: vec![Fault::Pause],
        fenced: false,
        control: true,
    });
    scenarios
}

/// The scenario as it can run here: faults that cannot are dropped from a
/// mix, and a scenario left with none that it needs is skipped.
fn applicable(scn: &Scenario, place: &Place, faketime: bool) -> Result<Scenario, String> {
    let why_not = |f: Fault| -> Option<String> {
        let needs = f.needs();
        let user = matches!(place, Place::User(_));
        if needs.private_server && user {
            return Some(
                "needs a redis-server of its own (it would disturb your server's other clients)"
                    .into(),
            );
        }
        if needs.proxy {
            if let Place::User(urls) = place {
                if urls.iter().any(|u| links::host_port(u).is_none()) {
                    return Some("cannot proxy a rediss:// or unix URL".into());
                }
            }
        }
        if needs.faketime && !faketime {
            return Some("libfaketime is not installed (apt-get install faketime)".into());
        }
        None
    };
    let mut kept = Vec::new();
    let mut reasons = Vec::new();
    for f in &scn.faults {
        match why_not(*f) {
            None => kept.push(*f),
            Some(reason) => reasons.push(format!("{}: {reason}", f.name())),
        }
    }
    if !scn.faults.is_empty() && (kept.is_empty() || (scn.faults.len() == 1 && !reasons.is_empty()))
    {
        return Err(reasons.join("; "));
    }
    Ok(Scenario {
        faults: kept,
        ..scn.clone()
    })
}

fn describe(scn: &Scenario) -> String {
    match &scn.faults[..] {
        [] => "no faults".into(),
        [one] if scn.control => format!("NO FENCING, {}", one.about()),
        [one] => one.about().into(),
        many => format!(
            "random mix of {}",
            many.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn label(scn: &Scenario) -> String {
    if scn.fenced {
        scn.name.clone()
    } else {
        format!("{} (unfenced)", scn.name)
    }
}

/// The figures that do not fit the table, one line per scenario.
fn detail(name: &str, f: &checker::Figures, notes: &[String]) -> String {
    let handoff = match (
        checker::percentile(&f.handoffs, 50),
        checker::percentile(&f.handoffs, 99),
    ) {
        (Some(p50), Some(p99)) => format!(
            "hand-over p50 {} p99 {}",
            checker::secs(p50),
            checker::secs(p99)
        ),
        _ => "no hand-overs measured".into(),
    };
    let mut line = format!(
        "{name}: {handoff}; lost() fired {} times; {} writes after lost(); {} worker errors",
        f.lost_fired, f.writes_after_lost, f.errors
    );
    if f.clock_jumped > 0 {
        line.push_str(&format!(
            "; {} acquisitions with the wall clock an hour off",
            f.clock_jumped
        ));
    }
    for note in notes {
        line.push_str(&format!("; note: {note}"));
    }
    line
}

/// libfaketime's preload library, where Debian (or a local build) puts it.
fn find_faketime() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        for entry in entries.flatten() {
            candidates.push(entry.path().join("faketime/libfaketime.so.1"));
        }
    }
    candidates.push(PathBuf::from("/usr/lib/faketime/libfaketime.so.1"));
    candidates.push(PathBuf::from("/usr/local/lib/faketime/libfaketime.so.1"));
    candidates.into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan_covers_every_fault_and_ends_with_the_control() {
        let scenarios = plan(&[], true);
        assert_eq!(scenarios[0].name, "none");
        for f in Fault::ALL {
            assert!(
                scenarios.iter().any(|s| s.faults == [f] && s.fenced),
                "{f:?}"
            );
        }
        let last = scenarios.last().unwrap();
        assert!(last.control && !last.fenced && last.faults == [Fault::Pause]);
        assert!(scenarios.iter().any(|s| s.name == "mixed"));
    }

    #[test]
    fn chosen_faults_run_alone_then_mixed() {
        let scenarios = plan(&[Fault::Kill, Fault::Pause, Fault::Kill], true);
        let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["kill", "pause", "mixed", "control"]);
        let one = plan(&[Fault::Kill], false);
        assert_eq!(one.len(), 2);
        assert!(!one[0].fenced);
    }

    #[test]
    fn the_help_names_every_fault() {
        for f in Fault::ALL {
            assert!(
                HELP.contains(&format!("\n  {:<18}", f.name())),
                "{f:?} missing from --help"
            );
        }
    }

    #[test]
    fn user_servers_skip_what_would_disturb_them() {
        let user = Place::User(vec!["redis://db:6379/".into()]);
        let restart = &plan(&[Fault::Restart], true)[0];
        assert!(applicable(restart, &user, true).is_err());
        assert!(applicable(restart, &Place::Private, true).is_ok());
        let mixed = plan(&[Fault::Restart, Fault::Kill], true).pop().unwrap();
        assert_eq!(mixed.name, "control");
        let mixed = &plan(&[Fault::Restart, Fault::Kill], true)[2];
        assert_eq!(
            applicable(mixed, &user, true).unwrap().faults,
            [Fault::Kill]
        );
        let clock = &plan(&[Fault::Clock], true)[0];
        assert!(applicable(clock, &Place::Private, false)
            .unwrap_err()
            .contains("libfaketime"));
        let tls = Place::User(vec!["rediss://db:6379/".into()]);
        assert!(applicable(&plan(&[Fault::Blackhole], true)[0], &tls, true).is_err());
    }
}
