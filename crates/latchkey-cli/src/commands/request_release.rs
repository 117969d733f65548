//! `latchkey request-release NAME`: ask the holders of a name to let go.
//!
//! ```text
//! $ latchkey request-release nightly-report
//! 1
//! ```
//!
//! Prints how many connections received the request (the holders that
//! listen, and waiters, which just try again); 0 when nobody holds NAME or
//! no holder listens. A `latchkey run` or `elect` holder sends SIGTERM to
//! its CMD's process group, then SIGKILL after `--grace`, and releases when
//! CMD has exited; a library holder's `release_requested()` completes.
//! Nothing is taken away: `latchkey revoke` does that. Exit 0 either way.

use clap::Args;

use crate::support::exit::{self, Outcome};
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct RequestReleaseArgs {
    /// The name whose holders are asked (a lock, fair lock, semaphore,
    /// read-write lock or election).
    pub name: String,
}

pub async fn request_release(target: &Target, args: RequestReleaseArgs) -> Outcome {
    let client = target.client("request-release").await?;
    let heard = client.request_release(&args.name).await?;
    println!("{heard}");
    Ok(exit::OK)
}
