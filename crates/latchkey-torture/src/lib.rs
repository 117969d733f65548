//! The torture suite of latchkey (`latchkey torture`): W worker processes
//! contend for one lock while faults are injected, and checkers count what
//! went wrong, one row per scenario.
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
//! A library so that the `latchkey` command stays small: it flattens
//! [`TortureArgs`] into its `torture` subcommand and calls [`run`], which
//! returns the exit code or a [`Failure`] to print. The workers are the same
//! executable started again (`<exe> torture` with their spec in the
//! environment), so a user's `latchkey` is all the suite needs.
//!
//! The pieces: `args` (the command line), `plan` (which scenarios run),
//! `worker` (the contending process), `resource` (the recording counter),
//! `faults` (what an injection does), `scenario` (running one row),
//! `checker` (figures and verdicts), `report` (the table).

mod args;
mod checker;
pub mod cli_text;
mod contender;
mod events;
mod faults;
mod links;
mod plan;
mod report;
mod resource;
mod rng;
mod scenario;
mod worker;

use std::fmt;
use std::io::Write as _;
use std::time::Duration;

use checker::{Limits, Verdict};
use report::Row;
use rng::Rng;
use scenario::{Place, Settings};

pub use args::TortureArgs;

/// Exit code: every must-hold figure held.
pub const OK: u8 = 0;
/// Exit code: a must-hold figure failed (see the verdict column).
pub const MUST_HOLD_FAILED: u8 = 1;
/// Exit code: a usage error (a bad `--ttl` or `--duration`).
pub const USAGE: u8 = 2;
/// Exit code: Redis unavailable, or no redis-server to start (EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// Exit code: an internal error (EX_SOFTWARE).
pub const INTERNAL: u8 = 70;

/// The control scenario runs at least this long: time for about three pauses.
const CONTROL_MIN_DURATION: Duration = Duration::from_secs(6);

/// A run that could not be carried out: the exit code, and one line to
/// print (the CLI prefixes it with `latchkey: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    fn usage(message: impl Into<String>) -> Failure {
        Failure::new(USAGE, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Runs the suite and returns its exit code ([`OK`] or
/// [`MUST_HOLD_FAILED`]), or, in a process the suite started (with
/// `LATCHKEY_TORTURE_WORKER` set), runs one worker.
///
/// `urls` are the `--redis` URLs (empty: private redis-servers; several:
/// Redlock), `prefix` the `--prefix` (`None`: the library's default).
/// Workers are started as `<this executable> torture`, so the binary that
/// calls this must route its `torture` subcommand here.
pub async fn run(urls: &[String], prefix: Option<&str>, args: TortureArgs) -> Result<u8, Failure> {
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
    if args.fair && urls.len() > 1 {
        return Err(Failure::usage(
            "--fair: a Redlock (several --redis URLs) cannot be fair",
        ));
    }
    let place = match (urls.is_empty(), args.cluster, args.sentinel_set) {
        (_, true, true) => return Err(Failure::usage("--cluster and --sentinel-set: choose one")),
        (false, true, _) | (false, _, true) => {
            return Err(Failure::usage(
                "--cluster and --sentinel-set start servers of their own; leave out --redis",
            ))
        }
        (true, false, false) => Place::Private,
        (true, true, false) => Place::Cluster,
        (true, false, true) => Place::Sentinel {
            replicas: args.with_replicas,
        },
        (false, false, false) => Place::User(urls.to_vec()),
    };
    let faketime = plan::find_faketime();
    let settings = Settings {
        workers: args.workers,
        ttl,
        duration,
        // Shorter than the TTL, so a dead link is noticed within a lease;
        // longer than a delayed round trip (2 x TTL/5).
        command_timeout: ttl.min(latchkey::limits::DEFAULT_COMMAND_TIMEOUT),
        // At least TTL/10 so that a fault aimed at a holder that just read
        // lands before its write, even on a busy host.
        hold: (ttl / 10, ttl / 2),
        think: (ttl / 4, ttl / 2),
        prefix: prefix
            .unwrap_or(latchkey::limits::DEFAULT_PREFIX)
            .to_owned(),
        run_id: format!(
            "{:x}",
            (events::mono_ns() ^ u64::from(std::process::id())) & 0xff_ffff
        ),
        faketime: faketime.clone(),
        fair: args.fair,
        workload: args.workload.clone(),
    };
    if settings.workload != "lock" && matches!(&place, Place::User(urls) if urls.len() > 1) {
        return Err(Failure::usage(
            "--workload election, semaphore, rwlock, multi and cached run on one server or a cluster, not over Redlock; give one --redis URL",
        ));
    }
    if settings.workload == "cached" && settings.fair {
        return Err(Failure::usage(
            "--workload cached and --fair do not go together: a fair lock is never kept while idle",
        ));
    }
    let limits = Limits {
        ttl,
        // A waiter retries at the holder's TTL, or polls at most every
        // 500 ms (x1.5 jitter) without pub/sub; 1 s for scheduling on a busy host.
        recovery: ttl + Duration::from_millis(750) + Duration::from_secs(1),
        lost_tolerance: Duration::from_millis(50),
        slow_handoff: ttl / 5,
    };

    let mut scenarios = plan::plan(&args.faults, !args.no_fencing, &place);
    if settings.workload != "lock" {
        // Only a lock runs over Redlock: no Redlock minority to lose.
        scenarios.retain(|s| s.faults != [faults::Fault::RedlockMinority]);
    }
    println!(
        "latchkey torture: seed {seed} (replay with --seed {seed}){}",
        if settings.workload == "lock" {
            String::new()
        } else {
            format!(", workload {}", settings.workload)
        }
    );
    println!(
        "  {} workers, TTL {}, {} per scenario, {} scenarios, {}",
        settings.workers,
        cli_text::human(ttl),
        cli_text::human(duration),
        scenarios.len(),
        match &place {
            // The test kit's server: redis-server, or LATCHKEY_TEST_SERVER's.
            Place::Private => format!(
                "on private redis-servers ({})",
                latchkey_testkit::ServerProgram::name_of_this_run()
            ),
            Place::Cluster => "on a private Redis Cluster (3 primaries, a replica each)".to_owned(),
            Place::Sentinel { replicas: false } => "on a private Sentinel set".to_owned(),
            Place::Sentinel { replicas: true } => {
                "on a private Sentinel set, acquisitions acknowledged by the replica".to_owned()
            }
            Place::User(urls) => format!(
                "on {}",
                urls.iter()
                    .map(|u| cli_text::redact(u))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    );

    // The resource: a server of its own, or keys of their own on the user's first server.
    let private_resource = match place {
        Place::Private | Place::Cluster | Place::Sentinel { .. } => Some(
            tokio::task::spawn_blocking(|| latchkey_testkit::RedisServer::builder().try_start())
                .await
                .map_err(|e| Failure::new(INTERNAL, format!("starting redis-server: {e}")))?
                .map_err(|e| {
                    Failure::new(UNAVAILABLE, format!("cannot start redis-server: {e}"))
                })?,
        ),
        Place::User(_) => None,
    };
    let resource_url = match (&private_resource, &place) {
        (Some(server), _) => server.url(),
        (None, Place::User(urls)) => urls[0].clone(),
        (None, Place::Private | Place::Cluster | Place::Sentinel { .. }) => {
            unreachable!("a private run has a private resource")
        }
    };

    let mut rows = Vec::new();
    let mut details = Vec::new();
    for scn in &scenarios {
        let fair_redlock = (args.fair && scn.needs().redlock)
            .then(|| "a Redlock cannot be fair (--fair)".to_owned());
        let scn = match fair_redlock
            .map_or_else(|| plan::applicable(scn, &place, faketime.is_some()), Err)
        {
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
        print!("- {}: {} ... ", scn.name, plan::describe(&scn));
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
        .map_err(|e| Failure::new(UNAVAILABLE, format!("scenario {}: {e}", scn.name)))?;
        let figures = checker::figures(&record, &limits);
        let verdict = checker::judge(&figures, &limits, scn.fenced, scn.control);
        println!(
            "{} faults, {} holds: {}",
            figures.faults,
            figures.holds,
            verdict.label()
        );
        details.push(plan::detail(&scn.name, &figures, &record.notes));
        rows.push(Row {
            scenario: plan::label(&scn),
            outcome: Ok((figures, verdict)),
        });
    }

    println!();
    print!("{}", report::table(&rows, &limits));
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
        Ok(OK)
    } else {
        let names: Vec<&str> = failed.iter().map(|r| r.scenario.as_str()).collect();
        println!(
            "MUST-HOLD FIGURES FAILED in: {} (seed {seed}).",
            names.join(", ")
        );
        Ok(MUST_HOLD_FAILED)
    }
}
