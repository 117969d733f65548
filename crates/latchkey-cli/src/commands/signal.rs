//! `latchkey signal NAME [PAYLOAD] [--one]`: wake the waiters on a name.
//!
//! ```text
//! $ latchkey signal cache-warm v42
//! 1
//! $ latchkey signal jobs job-17 --one
//! 1
//! $ tar c report/ | latchkey signal report -     # the payload from stdin
//! 1
//! ```
//!
//! Prints the number of receivers: for a broadcast, the subscriber
//! connections (a process's waiters share one) and pattern subscriptions
//! that got it; with `--one`, 1 if a waiter was picked, 0 if nobody waits.
//! 0 means the signal is gone: pub/sub keeps nothing. Exit 0 either way;
//! errors exit as usual (2 bad name, 69 Redis unavailable).

use clap::Args;

use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct SignalArgs {
    /// The signal's name.
    pub name: String,
    /// What to send (empty if not given); `-` reads it from stdin (any
    /// bytes, any size Redis accepts).
    #[arg(default_value = "")]
    pub payload: String,
    /// Deliver to exactly one waiter, picked at random, instead of all.
    #[arg(long)]
    pub one: bool,
}

pub async fn signal(target: &Target, args: SignalArgs) -> Outcome {
    let payload = if args.payload == "-" {
        // Read before connecting: a payload that cannot be read sends nothing.
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes).map_err(|e| {
            Failure::new(
                exit::USAGE,
                format!("cannot read the payload from stdin: {e}"),
            )
        })?;
        bytes
    } else {
        args.payload.into_bytes()
    };
    let client = target.client("signal").await?;
    let receivers = if args.one {
        usize::from(client.signal_one(&args.name, &payload).await?)
    } else {
        client.signal(&args.name, &payload).await?
    };
    println!("{receivers}");
    Ok(exit::OK)
}
