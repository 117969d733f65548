//! `latchkey revoke NAME [--fence RESOURCE]... [--yes]`: an operator ends
//! every hold of a name, whoever holds it, and makes it harmless.
//!
//! ```text
//! $ latchkey revoke nightly-report --fence report-output --yes
//! revoked lock "nightly-report": 1 hold ended; fencing token 1764633600123456
//! fenced resource "report-output" raised to 1764633600123456
//! ```
//!
//! It shows who holds NAME (as `status` does: host, pid, for how long) and
//! asks before revoking (`y` on a terminal); without a terminal it refuses
//! unless `--yes` is given (exit 2). Exit 1 when nothing holds NAME, or
//! when NAME's key holds a value no latchkey client wrote (another
//! program's data: never deleted). `--fence` raises each fenced resource to
//! the revocation's fencing token, so a revoked holder's next write there
//! is refused at once; a resource whose key is one of NAME's own keys (a
//! lock's: `revoke x --fence x`) or holds something else is refused before
//! anything is revoked. On a free name, `--fence` still raises each
//! resource above NAME's last fencing token: that is how a fence that
//! failed after the revocation is retried. See `Client::revoke`.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;
use latchkey::inspect::PrimitiveInfo;
use latchkey::{Client, FencedResource};

use crate::support::exit::{self, Failure, Outcome};
use crate::support::kind_view;
use crate::support::target::Target;
use crate::support::text::escape;

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
    let name = quoted(&args.name);
    // A resource at one of NAME's own keys would be written where a hold
    // lives (`--fence NAME` makes the lock key a hash: every later
    // acquisition fails): refused before Redis is asked anything.
    for resource in &args.fence {
        if args.name == *resource {
            return Err(Failure::usage(format!(
                "--fence {name}: a fenced resource named like the lock would be written at the lock's key; name the resource its writes go to"
            )));
        }
    }
    let client = target.client("revoke").await?;
    let resources = fenced_resources(&client, &args).await?;
    let found = client.describe(&args.name).await?;
    if let Some(foreign) = found.iter().find_map(foreign_value) {
        return Err(Failure::new(
            exit::CONFLICT,
            format!("{name} holds {foreign}, which no latchkey client wrote (another program's data?): not revoked"),
        ));
    }
    let held: Vec<&PrimitiveInfo> = found.iter().filter(|i| kind_view::is_held(i)).collect();
    if held.is_empty() {
        return fence_free_name(&args, &found, &resources).await;
    }
    if !args.yes {
        confirm(&name, &held)?;
    }
    let revoked = match client.revoke(&args.name).await {
        Ok(revoked) => revoked,
        // It changed hands since it was shown: another program's key now.
        Err(latchkey::Error::ForeignValue { key }) => {
            return Err(Failure::new(
                exit::CONFLICT,
                format!(
                    "{name}: the key {} holds a value no latchkey client wrote: not revoked",
                    quoted(&key)
                ),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    if revoked.is_empty() {
        return fence_free_name(&args, &client.describe(&args.name).await?, &resources).await;
    }
    let mut highest = None;
    for r in &revoked {
        let fence = r
            .fencing_token
            .map_or_else(String::new, |t| format!("; fencing token {t}"));
        println!(
            "revoked {} {name}: {} {} ended{fence}",
            r.kind.as_str(),
            r.ended,
            if r.ended == 1 { "hold" } else { "holds" }
        );
        highest = highest.max(r.fencing_token);
    }
    match highest {
        Some(token) => raise(&args, &resources, token, true).await,
        None => Ok(exit::OK),
    }
}

/// `"name"`, escaped as `list` and `status` escape names.
fn quoted(name: &str) -> String {
    format!("\"{}\"", escape(name.as_bytes()))
}

/// Each `--fence` resource, checked before anything is revoked: not one of
/// NAME's keys, and a fenced resource or nothing at its key.
async fn fenced_resources(
    client: &Client,
    args: &RevokeArgs,
) -> Result<Vec<FencedResource>, Failure> {
    let own = own_keys(client.prefix(), args.name.as_bytes());
    let mut resources = Vec::with_capacity(args.fence.len());
    for name in &args.fence {
        let resource = client.fenced(name)?;
        let refused = |why: &str| {
            Failure::usage(format!(
                "--fence {}: {why}; name the resource its writes go to",
                quoted(name)
            ))
        };
        if own.iter().any(|k| k[..] == *resource.key()) {
            return Err(refused(&format!(
                "its key is one of {}'s own",
                quoted(&args.name)
            )));
        }
        match resource.read().await {
            Err(latchkey::Error::WrongType { .. }) => {
                return Err(refused(
                    "its key holds something other than a fenced resource (a lock?)",
                ))
            }
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        resources.push(resource);
    }
    Ok(resources)
}

/// Every key a primitive called `name` can have (`docs/protocol.md`).
fn own_keys(prefix: &[u8], name: &[u8]) -> Vec<Vec<u8>> {
    use latchkey::protocol::*;
    let lock: Vec<u8> = [prefix, name].concat();
    let mut keys = vec![[&lock[..], FENCE_SUFFIX].concat(), lock];
    let suffixes = [
        FENCE_SUFFIX,
        QUEUE_SUFFIX,
        LEASES_SUFFIX,
        ALIVE_SUFFIX,
        WAKE_SUFFIX,
        PERMITS_SUFFIX,
        PERMITS_FENCE_SUFFIX,
        LATCH_SUFFIX,
        BARRIER_SUFFIX,
        ELECTION_LEASE_SUFFIX,
        ELECTION_STATE_SUFFIX,
    ];
    let rw = RWLOCK_SUFFIXES[..6].iter().copied();
    keys.extend(
        suffixes
            .into_iter()
            .chain(rw)
            .map(|suffix| primitive_key(prefix, name, suffix)),
    );
    keys
}

/// `"important" (no TTL)` when a lock key holds another program's value.
fn foreign_value(info: &PrimitiveInfo) -> Option<String> {
    let lock = match info {
        PrimitiveInfo::Lock(lock) => lock,
        PrimitiveInfo::FairLock(fair) => &fair.lock,
        _ => return None,
    };
    let value = lock.value.as_deref().filter(|_| lock.holder.is_none())?;
    let ttl = lock.ttl.map_or("no TTL".to_owned(), |t| {
        format!("expires in {}", crate::support::duration::human(t))
    });
    Some(format!("the value \"{}\" ({ttl})", escape(value)))
}

/// Nothing holds NAME: without `--fence` a conflict (exit 1); with it, each
/// resource is raised above every fencing token NAME ever issued (a fence
/// that failed after a revocation is retried so).
async fn fence_free_name(
    args: &RevokeArgs,
    found: &[PrimitiveInfo],
    resources: &[FencedResource],
) -> Outcome {
    let name = quoted(&args.name);
    let nothing = format!("nothing holds {name}: there is nothing to revoke");
    if resources.is_empty() {
        return Err(Failure::new(exit::CONFLICT, nothing));
    }
    let last = found.iter().filter_map(kind_view::fence).max();
    let Some(last) = last else {
        return Err(Failure::new(
            exit::CONFLICT,
            format!("{nothing}, and it never had a fencing token to raise the resources to"),
        ));
    };
    println!("nothing holds {name}: nothing revoked; its last fencing token is {last}");
    raise(args, resources, last.saturating_add(1), false).await
}

/// Raises every resource to `token`; after a revocation (`revoked`), a
/// failure says how to retry.
async fn raise(
    args: &RevokeArgs,
    resources: &[FencedResource],
    token: u64,
    revoked: bool,
) -> Outcome {
    for (name, resource) in args.fence.iter().zip(resources) {
        match resource.raise(token).await {
            Ok(fence) => println!("fenced resource {} raised to {fence}", quoted(name)),
            Err(e) if revoked => {
                let mut failure = Failure::from(e);
                failure.message = format!(
                    "revoked, but raising fenced resource {} failed: {}; run the same command again to raise it (if {} is free by then; otherwise it revokes its next holder too)",
                    quoted(name),
                    failure.message,
                    quoted(&args.name)
                );
                return Err(failure);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(exit::OK)
}

/// What holds each kind, as `status` shows it: `lock: held by web-1 pid
/// 4242 for 3.20s, expires in 26.8s, fencing token 17`.
fn holders_text(held: &[&PrimitiveInfo]) -> Vec<String> {
    held.iter()
        .map(|info| {
            let summary = kind_view::summary(info);
            let details: Vec<String> = kind_view::detail_lines(info)
                .iter()
                .map(|l| l.trim().to_owned())
                .collect();
            let mut line = format!(
                "{}: {}",
                info.kind().as_str(),
                summary.trim_end_matches(':')
            );
            if !details.is_empty() {
                line.push_str(": ");
                line.push_str(&details.join("; "));
            }
            line
        })
        .collect()
}

/// Asks on the terminal, showing who holds NAME; refuses without one (a
/// script must say `--yes`).
fn confirm(name: &str, held: &[&PrimitiveInfo]) -> Result<(), Failure> {
    let holders = holders_text(held);
    if !std::io::stdin().is_terminal() {
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "revoke {name} ({}): stdin is not a terminal to confirm on; pass --yes",
                holders.join("; ")
            ),
        ));
    }
    eprintln!("{name} is held:");
    for line in &holders {
        eprintln!("  {line}");
    }
    eprint!("revoke every hold of {name}? [y/N] ");
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
            format!("revoke {name}: not confirmed"),
        )),
    }
}
