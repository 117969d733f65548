//! `latchkey elect NAME [--value V] [--ttl D] [--grace D] [--once] -- CMD [ARGS...]`:
//! run CMD only while this process leads election NAME; and
//! `latchkey leader NAME [--watch] [--json]`: who leads it.
//!
//! ```sh
//! # On every machine: one scheduler runs at a time; another takes over
//! # within the TTL when its machine dies.
//! latchkey elect scheduler --value "$(hostname)" --ttl 10s -- ./scheduler
//! latchkey leader scheduler --watch
//! ```
//!
//! `elect`:
//! 1. Campaigns (waits until elected). A SIGINT/SIGTERM/SIGHUP while
//!    campaigning ends it: exit 128+signal.
//! 2. Starts CMD as `run` does (under a guardian in its own process group:
//!    killed or stopped with `latchkey`; not at all if the term ran out
//!    first, then it campaigns again) with `LATCHKEY_NAME`, `LATCHKEY_TERM` (the term: a fencing
//!    token), `LATCHKEY_VALUE` and `LATCHKEY_TOKEN`. The watchdog renews the
//!    lease every `ttl / 3`; signals are forwarded to CMD's group.
//! 3. If leadership is lost while CMD runs, CMD's group gets SIGTERM
//!    `--grace` before the lease could end (at most half the TTL), then
//!    SIGKILL at its end; then `elect` campaigns again and starts CMD anew
//!    when re-elected, or, with `--once`, exits 75 (77 when revoked).
//! 4. A release request (`latchkey request-release NAME`) stops CMD the same
//!    way (SIGTERM, then SIGKILL after `--grace`); `elect` resigns, so
//!    another candidate takes over, and stays a standby: it campaigns again
//!    (with `--once` it exits with CMD's code).
//! 5. When CMD exits on its own, `elect` resigns (another candidate takes
//!    over at once) and exits with CMD's code, as `run` does.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;
use latchkey::{Election, Leader};
use serde_json::json;

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::hold_run::{self, run_once, stop_margin, Ran, Supervision};
use crate::support::holdable::Holdable;
use crate::support::patience::Patience;
use crate::support::signals::{unless_interrupted, Signals};
use crate::support::target::Target;
use crate::support::text::escape;

#[derive(Args, Debug)]
pub struct ElectArgs {
    /// The election's name.
    pub name: String,

    /// What the leader announces (observers and `latchkey leader` see it);
    /// default: HOSTNAME:PID.
    #[arg(long, value_name = "V")]
    pub value: Option<String>,

    /// Lease TTL. The watchdog renews it every third of this; if latchkey
    /// dies, another candidate is elected after at most this long.
    #[arg(long, value_name = "D", value_parser = duration::parse_ttl, default_value = "10s")]
    pub ttl: Duration,

    /// A cap on the leadership, even with the watchdog renewing it:
    /// renewals never take it past D after it was acquired; CMD gets
    /// SIGTERM --grace before D (at most D/2 before) and SIGKILL at D. At
    /// least 100ms. Default: none.
    #[arg(long = "max-hold", value_name = "D", value_parser = duration::parse_max_hold, allow_hyphen_values = true)]
    pub max_hold: Option<Duration>,

    /// How long CMD has to stop: when leadership can no longer be proven,
    /// CMD gets SIGTERM this long before the lease could end (at most half
    /// the --ttl), and SIGKILL at the end; after a release request or a
    /// forwarded signal, SIGKILL this long after SIGTERM.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5s", allow_hyphen_values = true)]
    pub grace: Duration,

    /// Exit (75) when leadership is lost, instead of campaigning again.
    #[arg(long)]
    pub once: bool,

    /// The command to run while leader, and its arguments (after `--`).
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

#[derive(Args, Debug)]
pub struct LeaderArgs {
    /// The election's name.
    pub name: String,
    /// Keep printing: one line per change of leader or value, until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Print JSON (one object per line with --watch).
    #[arg(long)]
    pub json: bool,
}

pub async fn elect(target: &Target, args: ElectArgs) -> Outcome {
    let mut signals = Signals::install()?;
    // A standby has no timeout: one started while Redis is down, or that
    // meets an outage of any length while campaigning, keeps trying (a
    // line per outage; `patience.rs`) until elected or signalled.
    let connecting = target.client_within("elect", Patience::Forever);
    let client = unless_interrupted(connecting, &mut signals, || {
        format!("connecting for election {:?}", args.name)
    })
    .await?;
    let margin = stop_margin(args.grace, args.ttl, args.max_hold);
    let mut election = client
        .election(&args.name, args.ttl)?
        .with_stop_margin(margin)
        .map_err(Failure::from)?;
    if let Some(cap) = args.max_hold {
        election = election.with_max_hold(cap)?;
    }
    let value = args.value.clone().unwrap_or_else(default_value);
    let campaign = Campaign {
        election: &election,
        candidacy: election.candidacy(&value),
    };
    let how = Supervision {
        target,
        command: &args.command,
        grace: args.grace,
        margin,
    };
    loop {
        // A standby waits as long as it takes, through outages.
        let campaigning = Patience::Forever.retry("campaigning", || election.campaign(&value));
        let campaigning = async { campaigning.await.map_err(Failure::from) };
        let leadership = unless_interrupted(campaigning, &mut signals, || {
            format!("campaigning in election {:?}", args.name)
        })
        .await?;
        tracing::info!(election = %args.name, term = leadership.term(), "elected; starting the command");
        let env = vec![
            ("LATCHKEY_NAME", args.name.clone()),
            ("LATCHKEY_TERM", leadership.term().to_string()),
            (
                "LATCHKEY_VALUE",
                String::from_utf8_lossy(&leadership.value()).into_owned(),
            ),
            ("LATCHKEY_TOKEN", leadership.token().to_owned()),
        ];
        match run_once(&campaign, Box::new(leadership), &env, &how, &mut signals).await? {
            Ran::Exited(code) => return Ok(code),
            Ran::Requested(code) if args.once => return Ok(code),
            Ran::Requested(code) => eprintln!(
                "latchkey: resigned from {:?} on request (latchkey request-release); the command exited {code}; campaigning again",
                args.name
            ),
            Ran::Lost { reason, what, how } if args.once => {
                return Err(hold_run::lost(reason, &what, &how));
            }
            Ran::Lost { reason, what, how } => eprintln!(
                "latchkey: lost {what}: {}{}; campaigning again",
                reason.map_or("it could no longer be proven", latchkey::LostReason::describe),
                hold_run::told(&how)
            ),
            Ran::TooLate => {
                // The term ran out before CMD could start (we were paused):
                // no CMD; campaign again.
                tracing::warn!(election = %args.name, "the term ran out before the command could start; campaigning again");
            }
        }
    }
}

/// Leading an election, as something `run_once` can hold.
struct Campaign<'a> {
    election: &'a Election,
    candidacy: latchkey::Candidacy,
}

impl Holdable for Campaign<'_> {
    fn acquirer(&self) -> &dyn latchkey::Acquire {
        &self.candidacy
    }

    fn what(&self) -> String {
        format!(
            "leadership of {:?}",
            String::from_utf8_lossy(self.election.name())
        )
    }

    async fn busy(&self, _target: &Target) -> String {
        format!(
            "election {:?} has a leader",
            String::from_utf8_lossy(self.election.name())
        )
    }
}

/// `HOSTNAME:PID`.
fn default_value() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let host = if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".to_owned()
    };
    format!("{host}:{}", std::process::id())
}

pub async fn leader(target: &Target, args: LeaderArgs) -> Outcome {
    // `--watch` has no end: it rides out outages of any length.
    let patience = match args.watch {
        true => Patience::Forever,
        false => Patience::Once,
    };
    let client = target.client_within("leader", patience).await?;
    // The TTL only matters to candidates; a reader passes any valid one.
    let election = client.election(&args.name, Duration::from_secs(10))?;
    if !args.watch {
        print_state(&args, election.leader().await?.as_ref());
        return Ok(exit::OK);
    }
    let mut signals = Signals::install()?;
    let mut observer = patience.retry("watching", || election.observe()).await?;
    loop {
        tokio::select! {
            state = next_state(&mut observer) => print_state(&args, state?.as_ref()),
            _ = signals.recv() => return Ok(exit::OK),
        }
    }
}

/// The observer's next state, through outages of any length (an observer
/// returns an error that lasted 30 s; it reads again when asked again).
async fn next_state(observer: &mut latchkey::Observer) -> latchkey::Result<Option<Leader>> {
    let mut outage = false;
    loop {
        match observer.next().await {
            Err(e) if e.is_transient() => {
                if !std::mem::replace(&mut outage, true) {
                    eprintln!("latchkey: warning: watching: {e}; retrying until it answers");
                }
            }
            other => return other,
        }
    }
}

fn print_state(args: &LeaderArgs, state: Option<&Leader>) {
    let since_ms = |l: &Leader| {
        l.since
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    if args.json {
        let line = match state {
            Some(l) => json!({
                "name": args.name,
                "leader": true,
                "value": l.value_lossy(),
                "term": l.term,
                "since_ms": since_ms(l),
            }),
            None => json!({ "name": args.name, "leader": false }),
        };
        println!("{line}");
        return;
    }
    match state {
        Some(l) => {
            let age = std::time::SystemTime::now()
                .duration_since(l.since)
                .unwrap_or_default();
            println!(
                "{}: leader {} term {} for {}",
                escape(args.name.as_bytes()),
                escape(&l.value),
                l.term,
                duration::human(age)
            );
        }
        None => println!("{}: no leader", escape(args.name.as_bytes())),
    }
}
