//! `latchkey latch NAME --count N`, `latchkey latch NAME count-down`,
//! `latchkey latch NAME wait [--timeout D]`: a count-down latch; and
//! `latchkey barrier NAME --parties N [--timeout D]`: a barrier.
//!
//! ```text
//! $ latchkey latch deploy --count 3        # creates it (or leaves it as it is)
//! 3
//! $ latchkey latch deploy count-down       # on each of the 3 machines
//! 2
//! $ latchkey latch deploy wait --timeout 10m && ./smoke-test.sh
//! $ latchkey barrier step --parties 4 --timeout 1m
//! 0
//! ```
//!
//! `--count` prints the count left (N if it created the latch, else the
//! existing latch's) and exits 1 when the latch is open already (a latch
//! opens once: count again under a new name); `count-down` prints the count
//! left after it (exit 1 when the latch is open already or does not exist);
//! `wait` prints nothing and exits 0 once the latch is open (at once if it
//! is already), 1 when the timeout passes first (69 when the last read
//! could not reach Redis); `barrier` prints the generation released and
//! exits 0 when all parties arrived, 1 when the timeout (default: the TTL)
//! passes first (its arrival is taken back). A latch lives `--ttl` (default
//! 1h) after its creation (count-downs keep it); a barrier `--ttl` after
//! its last arrival, and while parties wait at least as long as their
//! `--timeout`.

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct LatchArgs {
    /// The latch's name.
    pub name: String,
    /// Create the latch with this count (1 to 100000), unless it exists.
    #[arg(long, value_name = "N", value_parser = crate::support::count::parse, allow_negative_numbers = true)]
    pub count: Option<u64>,
    /// How long the latch lives after its creation (count-downs keep it).
    #[arg(long, value_name = "D", value_parser = parse_latch_ttl, default_value = "1h", global = true)]
    pub ttl: Duration,
    #[command(subcommand)]
    pub action: Option<LatchAction>,
}

#[derive(Subcommand, Debug)]
pub enum LatchAction {
    /// Count the latch down by one; prints the count left.
    CountDown,
    /// Wait until the latch is open (its count is 0); exits 1 on timeout.
    Wait {
        /// Give up after this long [default: wait forever].
        #[arg(long, value_name = "D", value_parser = duration::parse)]
        timeout: Option<Duration>,
    },
}

#[derive(Args, Debug)]
pub struct BarrierArgs {
    /// The barrier's name.
    pub name: String,
    /// How many parties the barrier waits for (1 to 100000).
    #[arg(long, value_name = "N", value_parser = crate::support::count::parse, allow_negative_numbers = true)]
    pub parties: u64,
    /// Give up after this long; the arrival is taken back [default: the TTL].
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    pub timeout: Option<Duration>,
    /// How long the barrier lives after its last arrival (while parties
    /// wait, at least as long as their --timeout).
    #[arg(long, value_name = "D", value_parser = parse_barrier_ttl, default_value = "1h")]
    pub ttl: Duration,
}

/// `--ttl` of a latch: [`duration::parse_ttl`], with advice for a latch
/// rather than a lock's (there is no hold to keep alive).
fn parse_latch_ttl(text: &str) -> Result<Duration, String> {
    within_a_day(
        text,
        "a latch lives at most 24h after its creation: create it when the work it counts starts, or count longer work on one latch per stage",
    )
}

/// `--ttl` of a barrier, as [`parse_latch_ttl`].
fn parse_barrier_ttl(text: &str) -> Result<Duration, String> {
    within_a_day(
        text,
        "a barrier lives at most 24h after its last arrival (parties that wait keep it for their --timeout)",
    )
}

fn within_a_day(text: &str, advice: &str) -> Result<Duration, String> {
    let ttl = duration::parse_ttl(text);
    match ttl {
        Err(_) if duration::parse(text).is_ok_and(|d| d > latchkey::limits::MAX_TTL) => {
            Err(format!("invalid ttl {:?}: {advice}", text.trim()))
        }
        other => other,
    }
}

pub async fn latch(target: &Target, args: LatchArgs) -> Outcome {
    match (&args.count, &args.action) {
        (Some(_), Some(_)) => {
            return Err(Failure::usage(
                "--count creates a latch; give it without count-down or wait",
            ))
        }
        (None, None) => {
            return Err(Failure::usage(
                "give --count N to create the latch, or count-down, or wait",
            ))
        }
        _ => {}
    }
    let client = target.client("latch").await?;
    let latch = client.latch(&args.name, args.ttl)?;
    match (args.count, args.action) {
        (Some(count), None) => {
            latch.create(count).await?;
            // Created or not, the count it has now (a racing count-down may
            // already have moved it).
            let left = latch.count().await?.unwrap_or(count);
            println!("{left}");
            Ok(exit::OK)
        }
        (None, Some(LatchAction::CountDown)) => {
            println!("{}", latch.count_down().await?);
            Ok(exit::OK)
        }
        (None, Some(LatchAction::Wait { timeout })) => {
            let opened = match timeout {
                Some(timeout) => latch.wait_until(timeout).await,
                None => latch.wait().await,
            };
            match opened {
                Ok(()) => Ok(exit::OK),
                Err(latchkey::Error::WaitTimedOut { .. }) => Err(Failure::new(
                    exit::CONFLICT,
                    format!(
                        "timed out after {} waiting for latch {:?} to open",
                        duration::human(timeout.unwrap_or_default()),
                        args.name
                    ),
                )),
                Err(e) => Err(e.into()),
            }
        }
        _ => Err(Failure::usage("give one of --count N, count-down, wait")),
    }
}

pub async fn barrier(target: &Target, args: BarrierArgs) -> Outcome {
    let client = target.client("barrier").await?;
    let barrier = client.barrier(&args.name, args.parties, args.ttl)?;
    let timeout = args.timeout.unwrap_or(args.ttl);
    match barrier.arrive_and_wait_until(timeout).await {
        Ok(generation) => {
            println!("{generation}");
            Ok(exit::OK)
        }
        Err(e) if !matches!(e, latchkey::Error::WaitTimedOut { .. }) => Err(e.into()),
        Err(_) => Err(Failure::new(
            exit::CONFLICT,
            format!(
                "timed out after {} waiting at barrier {:?} for {} parties",
                duration::human(timeout),
                args.name,
                args.parties
            ),
        )),
    }
}
