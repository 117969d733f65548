//! `latchkey status NAME [--json]` and `latchkey list [PATTERN] [--json]`:
//! every kind of primitive (lock, fair lock, semaphore, read-write lock,
//! latch, barrier, election), read by [`Client::describe`] and
//! [`Client::list_all`] (one script call per name).
//!
//! ```text
//! $ latchkey status nightly-report
//! nightly-report: held by web-1 pid 4242 for 12.30s, expires in 17.7s, fencing token 1718000000000123
//! $ latchkey status jobs
//! jobs: 2 semaphore permit(s) held:
//!   web-1 pid 4242 for 3.20s, expires in 26.8s
//!   web-2 pid 77 for 1.10s, expires in 28.9s
//! $ latchkey list --json
//! [{"name":"jobs","kind":"semaphore","held":true,"permits":[…],"fencing_token":null}, …]
//! ```
//!
//! `list --json` prints one object per primitive (a name that is two kinds
//! is two objects), sorted by name, then kind: `name`, `kind`, `held`, and
//! the kind's fields ([`kind_view::to_json`]; a lock's are those of 0.3:
//! `ttl_ms`, `holder`, `age_ms`, `fencing_token`). `status --json` prints
//! one object: the lock fields of NAME's lock (free when there is none),
//! `held` (anything holds NAME: the lock, a permit, a reader or writer, a
//! leader), `kind` (the first kind found, `lock` when none), `kinds`,
//! `primitives` (one `list` object per kind found) and, for a semaphore,
//! `permits` as before. An owner token is never printed, in text or JSON.
//!
//! [`Client::describe`]: latchkey::Client::describe
//! [`Client::list_all`]: latchkey::Client::list_all

use clap::Args;
use latchkey::inspect::{LockInfo, PrimitiveInfo};
use serde_json::{json, Value};

use crate::support::duration::human;
use crate::support::exit::{self, Outcome};
use crate::support::kind_view;
use crate::support::target::Target;
use crate::support::text::{cut, escape};

/// The widest NAME and HOLDER cells of `list`: a 1 KiB name must not make
/// every row 1,000 columns wide (`--json` has the names whole).
const LIST_CELL_WIDTH: usize = 40;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The name: of a lock, semaphore, read-write lock, latch, barrier or election.
    pub name: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Glob over names (Redis MATCH syntax: * ? [abc] \x).
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn status(target: &Target, args: StatusArgs) -> Outcome {
    let client = target.client("status").await?;
    let found = client.describe(&args.name).await?;
    warn_bad_counters(&client, &found);
    let name = escape(args.name.as_bytes());
    if args.json {
        println!("{}", status_json(&args.name, &found));
        return Ok(exit::OK);
    }
    if found.is_empty() {
        println!("{name}: free, never acquired");
    }
    for info in &found {
        println!("{name}: {}", kind_view::summary(info));
        for line in kind_view::detail_lines(info) {
            println!("{line}");
        }
    }
    Ok(exit::OK)
}

/// `status --json`'s one object (see the module docs).
fn status_json(name: &str, found: &[PrimitiveInfo]) -> Value {
    let lock = found.iter().find_map(|info| match info {
        PrimitiveInfo::Lock(lock) => Some(lock),
        PrimitiveInfo::FairLock(fair) => Some(&fair.lock),
        _ => None,
    });
    let mut map = match lock {
        Some(lock) => kind_view::lock_json(lock),
        None => serde_json::Map::from_iter([
            ("name".to_owned(), json!(name)),
            ("ttl_ms".to_owned(), Value::Null),
            ("holder".to_owned(), Value::Null),
            ("age_ms".to_owned(), Value::Null),
            ("fencing_token".to_owned(), Value::Null),
        ]),
    };
    map.insert("held".into(), json!(found.iter().any(kind_view::is_held)));
    let kinds: Vec<&str> = found.iter().map(|i| i.kind().as_str()).collect();
    map.insert(
        "kind".into(),
        json!(kinds.first().copied().unwrap_or("lock")),
    );
    map.insert("kinds".into(), json!(kinds));
    for info in found {
        if let PrimitiveInfo::Semaphore(s) = info {
            map.insert("permits".into(), kind_view::holdings_json(&s.permits));
        }
    }
    map.insert(
        "primitives".into(),
        Value::Array(found.iter().map(kind_view::to_json).collect()),
    );
    Value::Object(map)
}

pub async fn list(target: &Target, args: ListArgs) -> Outcome {
    let client = target.client("list").await?;
    let infos = client.list_all(&args.pattern).await?;
    warn_bad_counters(&client, &infos);
    if args.json {
        println!(
            "{}",
            Value::Array(infos.iter().map(kind_view::to_json).collect())
        );
        return Ok(exit::OK);
    }
    if infos.is_empty() {
        println!("nothing matches \"{}\"", escape(args.pattern.as_bytes()));
        return Ok(exit::OK);
    }
    let header = [
        "NAME",
        "KIND",
        "HELD",
        "TTL",
        "HOLDER",
        "AGE",
        "FENCING TOKEN",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = std::iter::once(header)
        .chain(infos.iter().map(|info| {
            let held = kind_view::is_held(info);
            [
                cut(&escape(info.name()), LIST_CELL_WIDTH),
                info.kind().to_string(),
                if held { "yes" } else { "no" }.to_owned(),
                ttl_text(info, held),
                cut(&kind_view::holder_cell(info), LIST_CELL_WIDTH),
                info.oldest().map_or("-".into(), |(_, age)| human(age)),
                fence_text(info),
            ]
        }))
        .collect();
    let widths: Vec<usize> = (0..7)
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

/// The locks among `infos` (plain or fair).
fn locks(infos: &[PrimitiveInfo]) -> impl Iterator<Item = &LockInfo> {
    infos.iter().filter_map(|info| match info {
        PrimitiveInfo::Lock(lock) => Some(lock),
        PrimitiveInfo::FairLock(fair) => Some(&fair.lock),
        _ => None,
    })
}

/// One warning line on stderr per lock whose fencing counter holds garbage:
/// the lock is still shown (one bad key must not hide the others), and the
/// operator learns which key to delete.
fn warn_bad_counters(client: &latchkey::Client, infos: &[PrimitiveInfo]) {
    for info in locks(infos) {
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

/// The FENCING TOKEN cell: the token, `invalid` for a lock counter holding
/// garbage, `-` when none was issued.
fn fence_text(info: &PrimitiveInfo) -> String {
    let bad = locks(std::slice::from_ref(info)).any(|l| l.bad_fencing_counter.is_some());
    match (kind_view::fence(info), bad) {
        (Some(token), _) => token.to_string(),
        (None, true) => "invalid".to_owned(),
        (None, false) => "-".to_owned(),
    }
}

/// The TTL cell: `never` for a lock held without a TTL, `-` when free.
fn ttl_text(info: &PrimitiveInfo, held: bool) -> String {
    match (kind_view::ttl(info), held) {
        (Some(ttl), _) => human(ttl),
        (None, true) => "never".to_owned(),
        (None, false) => "-".to_owned(),
    }
}
