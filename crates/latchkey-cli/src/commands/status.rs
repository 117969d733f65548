//! `latchkey status NAME [--json]` and `latchkey list [PATTERN] [--json]`.
//!
//! ```text
//! $ latchkey status nightly-report
//! nightly-report: held by web-1 pid 4242 for 12.30s, expires in 17.7s, fencing token 1718000000000123
//! $ latchkey list 'nightly-*' --json
//! [{"name":"nightly-report","held":true,"ttl_ms":17700,"holder":{"host":"web-1","pid":4242,"acquired_at_ms":1718000000000},"age_ms":12300,"fencing_token":1718000000000123}]
//! ```
//!
//! JSON fields: `name`; `held`; `ttl_ms` (null when free, or when held
//! without a TTL by another client); `holder` (null when free;
//! `{"host", "pid", "acquired_at_ms"}` for a latchkey holder;
//! `{"value"}` with the raw key value for another client's lock); `age_ms`
//! (null unless the holder is known); `fencing_token` (the last one issued
//! for the name, null if none ever was). `status` prints one object,
//! `list` an array sorted by name.
//!
//! `status` also shows the permits held of a semaphore of the same name
//! (`latchkey run --permits N NAME`), one line each, and in JSON a
//! `permits` array of `{"host", "pid", "acquired_at_ms", "ttl_ms"}` (only
//! when some are held). A permit's owner token is never printed, in text or
//! JSON: whoever has it can release the permit.

use std::time::UNIX_EPOCH;

use clap::Args;
use latchkey::LockInfo;
use serde_json::{json, Value};

use crate::support::describe::{describe, holder_text};
use crate::support::duration::human;
use crate::support::exit::{self, Outcome};
use crate::support::target::Target;
use crate::support::text::{cut, escape};

/// The widest NAME and HOLDER cells of `list`: a 1 KiB name must not make
/// every row 1,000 columns wide (`--json` has the names whole).
const LIST_CELL_WIDTH: usize = 40;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The lock's name.
    pub name: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Glob over lock names (Redis MATCH syntax: * ? [abc] \x).
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn status(target: &Target, args: StatusArgs) -> Outcome {
    let client = target.client("status").await?;
    let info = client.inspect(&args.name).await?;
    warn_bad_counters(&client, std::slice::from_ref(&info));
    // The permits of a semaphore of the same name, if any are held. Best
    // effort: a permits key that cannot be read must not hide the lock.
    let permits = match client
        .semaphore(&args.name, 1, std::time::Duration::from_secs(1))?
        .holders()
        .await
    {
        Ok(permits) => permits,
        Err(e) => {
            eprintln!("latchkey: warning: cannot read the semaphore permits of this name: {e}");
            Vec::new()
        }
    };
    if args.json {
        let mut object = to_json(&info);
        if let (Value::Object(map), false) = (&mut object, permits.is_empty()) {
            map.insert("permits".into(), permits_json(&permits));
        }
        println!("{object}");
    } else {
        println!("{}: {}", escape(args.name.as_bytes()), describe(&info));
        if !permits.is_empty() {
            println!(
                "{}: {} semaphore permit(s) held:",
                escape(args.name.as_bytes()),
                permits.len()
            );
            for permit in &permits {
                println!("  {}", describe_permit(permit));
            }
        }
    }
    Ok(exit::OK)
}

/// One permit holder: who, for how long, until when.
fn describe_permit(permit: &latchkey::PermitHolder) -> String {
    let who = match &permit.holder {
        Some(h) => format!(
            "{} pid {} for {}",
            escape(h.host.as_bytes()),
            h.pid,
            human(
                std::time::SystemTime::now()
                    .duration_since(h.acquired_at)
                    .unwrap_or_default()
            )
        ),
        // Not latchkey's token format: say so, without the token itself.
        None => "another client".to_owned(),
    };
    format!("{who}, expires in {}", human(permit.ttl_left))
}

/// `[{"host", "pid", "acquired_at_ms", "ttl_ms"}]` (host, pid and
/// acquired_at_ms null for a token not made by latchkey). No owner token.
fn permits_json(permits: &[latchkey::PermitHolder]) -> Value {
    Value::Array(
        permits
            .iter()
            .map(|p| {
                json!({
                    "host": p.holder.as_ref().map(|h| h.host.clone()),
                    "pid": p.holder.as_ref().map(|h| h.pid),
                    "acquired_at_ms": p.holder.as_ref().map(|h| h
                        .acquired_at
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64)),
                    "ttl_ms": p.ttl_left.as_millis() as u64,
                })
            })
            .collect(),
    )
}

pub async fn list(target: &Target, args: ListArgs) -> Outcome {
    let client = target.client("list").await?;
    let infos = client.list(&args.pattern).await?;
    warn_bad_counters(&client, &infos);
    if args.json {
        println!("{}", Value::Array(infos.iter().map(to_json).collect()));
        return Ok(exit::OK);
    }
    if infos.is_empty() {
        println!("no locks match \"{}\"", escape(args.pattern.as_bytes()));
        return Ok(exit::OK);
    }
    let header = ["NAME", "HELD", "TTL", "HOLDER", "AGE", "FENCING TOKEN"].map(String::from);
    let rows: Vec<[String; 6]> = std::iter::once(header)
        .chain(infos.iter().map(|info| {
            [
                cut(&escape(&info.name), LIST_CELL_WIDTH),
                if info.held { "yes" } else { "no" }.to_owned(),
                ttl_text(info),
                cut(
                    &holder_text(info).unwrap_or_else(|| "-".into()),
                    LIST_CELL_WIDTH,
                ),
                info.age.map_or("-".into(), human),
                fence_text(info),
            ]
        }))
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|col| {
            rows.iter()
                .map(|row| row[col].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    Ok(exit::OK)
}

/// One warning line on stderr per lock whose fencing counter holds garbage:
/// the lock is still shown (one bad key must not hide the others), and the
/// operator learns which key to delete.
fn warn_bad_counters(client: &latchkey::Client, infos: &[LockInfo]) {
    for info in infos {
        if let Some(raw) = &info.bad_fencing_counter {
            let key = latchkey::protocol::fence_key(&[client.prefix(), &info.name[..]].concat());
            eprintln!(
                "latchkey: warning: fencing counter \"{}\" holds \"{}\", not a fencing token \
                 (another program wrote it); delete it to reset the lock's fencing",
                escape(&key),
                escape(raw)
            );
        }
    }
}

/// The FENCING TOKEN cell: the token, `invalid` for a counter holding
/// garbage, `-` when none was issued.
fn fence_text(info: &LockInfo) -> String {
    match (info.fencing_token, &info.bad_fencing_counter) {
        (Some(token), _) => token.to_string(),
        (None, Some(_)) => "invalid".to_owned(),
        (None, None) => "-".to_owned(),
    }
}

fn ttl_text(info: &LockInfo) -> String {
    match (info.held, info.ttl) {
        (true, Some(ttl)) => human(ttl),
        (true, None) => "never".to_owned(),
        (false, _) => "-".to_owned(),
    }
}

fn to_json(info: &LockInfo) -> Value {
    let holder = match (&info.holder, &info.value) {
        (Some(h), _) => json!({
            "host": h.host,
            "pid": h.pid,
            "acquired_at_ms": h.acquired_at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        }),
        (None, Some(value)) => json!({ "value": String::from_utf8_lossy(value) }),
        (None, None) => Value::Null,
    };
    json!({
        "name": String::from_utf8_lossy(&info.name),
        "held": info.held,
        "ttl_ms": info.ttl.map(|t| t.as_millis() as u64),
        "holder": holder,
        "age_ms": info.age.map(|a| a.as_millis() as u64),
        "fencing_token": info.fencing_token,
    })
}
