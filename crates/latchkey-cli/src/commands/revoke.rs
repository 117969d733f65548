//! `latchkey revoke NAME [--fence RESOURCE]... [--yes]`: an operator ends
//! every hold of a name, whoever holds it, and makes it harmless.
//!
//! ```text
//! $ latchkey revoke nightly-report --fence report-output --yes
//! revoked lock "nightly-report": 1 hold ended; fencing token 1764633600123456
//! fenced resource "report-output" raised to 1764633600123456
//! ```
//!
//! It shows what holds NAME and asks before revoking (`y` on a terminal);
//! without a terminal it refuses unless `--yes` is given (exit 2). Exit 1
//! when nothing holds NAME. The holders learn it at their next renewal:
//! `run` stops CMD (exit 75), `elect` campaigns again. `--fence` raises each
//! fenced resource to the revocation's fencing token, so a revoked holder's
//! next write there is refused at once. See `Client::revoke`.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;

use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::Target;

#[derive(Args, Debug)]
pub struct RevokeArgs {
    /// The name whose holds end (a lock, fair lock, semaphore, read-write
    /// lock or election of that name).
    pub name: String,
    /// A fenced resource to raise to the revocation's fencing token (repeat
    /// for several): the revoked holders' next writes there are refused.
    #[arg(long = "fence", value_name = "RESOURCE")]
    pub fence: Vec<String>,
    /// Revoke without asking (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

pub async fn revoke(target: &Target, args: RevokeArgs) -> Outcome {
    let client = target.client("revoke").await?;
    // Checked before anything is revoked: a bad resource name revokes nothing.
    let resources = args
        .fence
        .iter()
        .map(|r| client.fenced(r))
        .collect::<latchkey::Result<Vec<_>>>()?;
    let held: Vec<_> = client
        .describe(&args.name)
        .await?
        .into_iter()
        .filter(|i| {
            i.holders() > 0 && !matches!(i.kind(), latchkey::Kind::Latch | latchkey::Kind::Barrier)
        })
        .collect();
    if held.is_empty() {
        return Err(nothing_held(&args.name));
    }
    if !args.yes {
        let what: Vec<String> = held
            .iter()
            .map(|i| format!("{} ({} held)", i.kind().as_str(), i.holders()))
            .collect();
        confirm(&args.name, &what.join(", "))?;
    }
    let revoked = client.revoke(&args.name).await?;
    if revoked.is_empty() {
        return Err(nothing_held(&args.name));
    }
    let mut highest = None;
    for r in &revoked {
        let fence = r
            .fencing_token
            .map_or_else(String::new, |t| format!("; fencing token {t}"));
        println!(
            "revoked {} {:?}: {} {} ended{fence}",
            r.kind.as_str(),
            args.name,
            r.ended,
            if r.ended == 1 { "hold" } else { "holds" }
        );
        highest = highest.max(r.fencing_token);
    }
    if let Some(token) = highest {
        for (name, resource) in args.fence.iter().zip(&resources) {
            let fence = resource.raise(token).await?;
            println!("fenced resource {name:?} raised to {fence}");
        }
    }
    Ok(exit::OK)
}

fn nothing_held(name: &str) -> Failure {
    Failure::new(
        exit::CONFLICT,
        format!("nothing holds {name:?}: there is nothing to revoke"),
    )
}

/// Asks on the terminal; refuses without one (a script must say `--yes`).
fn confirm(name: &str, what: &str) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::new(
            exit::USAGE,
            format!("revoke {name:?} ({what}): stdin is not a terminal to confirm on; pass --yes"),
        ));
    }
    eprint!("revoke every hold of {name:?}: {what}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::new(exit::USAGE, format!("cannot read the answer: {e}")))?;
    match answer.trim() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err(Failure::new(
            exit::CONFLICT,
            format!("revoke {name:?}: not confirmed"),
        )),
    }
}
