//! `latchkey wait NAME... [--any | --all] [--pattern] [--timeout D]`: wait
//! for signals.
//!
//! ```text
//! $ latchkey wait cache-warm --timeout 30s
//! v42
//! $ latchkey wait build test --all
//! build<TAB>ok
//! test<TAB>ok
//! $ latchkey wait 'job.*' --pattern
//! job.17<TAB>go
//! ```
//!
//! Prints the payload (raw bytes, then a newline). When several names or a
//! pattern are involved, each line is the signal's name, a tab, and the
//! payload: with `--all` one line per name (or pattern) in the order given,
//! otherwise the first signal. Exits 1 when the timeout passes first, 69
//! when it passes while not subscribed (Redis could not be reached, or the
//! connection was lost): an outage is not "nobody signalled".
//!
//! Only signals sent after `wait` has subscribed are seen: start it before
//! whatever will signal. `--replica URL` (repeatable) also listens on
//! replicas of the server, so the wait survives losing the connection to it.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use latchkey::{Client, Signal};

use crate::support::duration;
use crate::support::exit::{self, Failure, Outcome};
use crate::support::target::{redact, Target};

#[derive(Args, Debug)]
pub struct WaitArgs {
    /// The signal name(s), or glob patterns over names with --pattern.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Return on the first signal on any of the names (the default).
    #[arg(long, conflicts_with = "all")]
    pub any: bool,
    /// Return once every name has been signalled; print all of them.
    #[arg(long)]
    pub all: bool,
    /// Treat the names as Redis glob patterns (* ? [abc] \x).
    #[arg(long)]
    pub pattern: bool,
    /// Give up after this long (e.g. 500ms, 30s, 2m) and exit 1 [default: wait forever].
    #[arg(long, value_name = "DURATION", value_parser = crate::support::duration::parse)]
    pub timeout: Option<Duration>,
    /// A replica of the server to listen on as well (repeatable).
    #[arg(long = "replica", value_name = "URL")]
    pub replicas: Vec<String>,
}

pub async fn wait(target: &Target, args: WaitArgs) -> Outcome {
    // The timeout bounds the whole wait, connecting and subscribing
    // included: `--timeout 1s` must not take the 2 s connect timeout.
    let deadline = args
        .timeout
        .map(|timeout| tokio::time::Instant::now() + timeout);
    let subscribing = async {
        let client = connect(target, &args.replicas).await?;
        let listener = if args.pattern {
            client.listen_patterns(&args.names).await?
        } else {
            client.listen(&args.names).await?
        };
        Ok::<_, Failure>((client, listener))
    };
    // The client stays alive as long as the listener listens.
    let (_client, mut listener) = match (deadline, args.timeout) {
        (Some(deadline), Some(timeout)) => tokio::time::timeout_at(deadline, subscribing)
            .await
            // Never subscribed: nothing could have been heard, so this is
            // Redis being unavailable, not a timeout (exit 1 would tell a
            // script "nobody signalled").
            .map_err(|_| {
                Failure::new(
                    exit::UNAVAILABLE,
                    format!(
                        "could not subscribe within {}: Redis did not answer",
                        duration::human(timeout)
                    ),
                )
            })??,
        _ => subscribing.await?,
    };
    let receiving = async {
        if args.all {
            listener.recv_all().await
        } else {
            vec![listener.recv().await]
        }
    };
    let received = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, receiving).await,
        None => Ok(receiving.await),
    };
    let subscribed = listener.is_subscribed();
    // Unsubscribed before it exits: a `signal` sent once `wait` has
    // returned counts nobody for it (no wait when the connection is down).
    listener.close().await;
    let signals = match received {
        Ok(signals) => signals,
        Err(_) if !subscribed => {
            return Err(Failure::new(
                exit::UNAVAILABLE,
                "lost the connection to Redis: not subscribed when the timeout passed \
                     (signals sent meanwhile were lost)",
            ))
        }
        Err(_) => {
            return Err(Failure::new(
                exit::CONFLICT,
                "timed out waiting for a signal",
            ))
        }
    };
    let named = args.pattern || args.names.len() > 1;
    print(&signals, named)
        .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot write the signal: {e}")))?;
    Ok(exit::OK)
}

/// The target's one server, plus the replicas.
async fn connect(target: &Target, replicas: &[String]) -> Result<Client, Failure> {
    if replicas.is_empty() {
        return target.client("wait").await;
    }
    let url = target.single_url("wait")?;
    let mut builder = target.builder(&url);
    for replica in replicas {
        if replica.trim().is_empty() {
            return Err(Failure::usage("--replica: empty URL"));
        }
        builder = builder.replica(replica);
    }
    let client = builder
        .connect()
        .await
        .map_err(|e| crate::support::target::connect_failure(e, &redact(&url)))?;
    for replica in replicas {
        warn_unless_replica(replica).await;
    }
    Ok(client)
}

/// Warns when `url` answers `ROLE` as something other than a replica: it
/// then does not carry the primary's signals, and listening there adds no
/// redundancy. Only a warning: a replica promoted by a failover is a primary
/// now, and the wait should still start. A server that cannot be asked is
/// not judged (the wait tolerates a replica that is down).
async fn warn_unless_replica(url: &str) {
    let role = async {
        let client = redis::Client::open(url).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let reply: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.ok()?;
        match reply.first()? {
            redis::Value::BulkString(role) => Some(String::from_utf8_lossy(role).into_owned()),
            redis::Value::SimpleString(role) => Some(role.clone()),
            _ => None,
        }
    };
    let role = tokio::time::timeout(std::time::Duration::from_secs(2), role)
        .await
        .ok()
        .flatten();
    if let Some(role) = role.filter(|role| role != "slave") {
        eprintln!(
            "latchkey: warning: --replica {} is not a replica (ROLE: {role}); \
             it does not carry the primary's signals",
            redact(url)
        );
    }
}

fn print(signals: &[Signal], named: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for signal in signals {
        if named {
            out.write_all(&signal.name)?;
            out.write_all(b"\t")?;
        }
        out.write_all(&signal.payload)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
