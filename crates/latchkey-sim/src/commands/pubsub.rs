//! PUBLISH and SPUBLISH (into the outbox), PUBSUB CHANNELS, NUMSUB,
//! SHARDCHANNELS, SHARDNUMSUB.

use std::collections::BTreeMap;

use crate::db::{Db, Published};
use crate::reply::Reply;

fn publish_to(db: &mut Db, args: &[Vec<u8>], sharded: bool) -> Reply {
    db.outbox.push(Published {
        sharded,
        channel: args[1].clone(),
        payload: args[2].clone(),
    });
    // The clients it reaches, as its reply counts them: the channel's
    // subscribers and, unsharded, those of every pattern that matches it
    // (sharded channels have no patterns). A script that stops at the
    // first process that heard its wake-up reads this count.
    if sharded {
        return Reply::Int(db.shard_subscribers.get(&args[1]).copied().unwrap_or(0));
    }
    let by_pattern: i64 = db
        .patterns
        .iter()
        .filter(|(pattern, _)| glob_match(pattern, &args[1]))
        .map(|(_, n)| *n)
        .sum();
    Reply::Int(db.subscribers.get(&args[1]).copied().unwrap_or(0) + by_pattern)
}

pub(super) fn publish(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    publish_to(db, args, false)
}

pub(super) fn spublish(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    publish_to(db, args, true)
}

fn channels(table: &BTreeMap<Vec<u8>, i64>, pattern: Option<&[u8]>) -> Reply {
    Reply::array(
        table
            .iter()
            .filter(|(c, n)| **n > 0 && pattern.is_none_or(|p| glob_match(p, c)))
            .map(|(c, _)| Reply::bulk(c.clone()))
            .collect(),
    )
}

fn numsub(table: &BTreeMap<Vec<u8>, i64>, names: &[Vec<u8>]) -> Reply {
    Reply::array(
        names
            .iter()
            .flat_map(|c| {
                [
                    Reply::bulk(c.clone()),
                    Reply::Int(table.get(c).copied().unwrap_or(0)),
                ]
            })
            .collect(),
    )
}

pub(super) fn pubsub(db: &mut Db, args: &[Vec<u8>]) -> Reply {
    let rest = &args[2..];
    match args[1].to_ascii_uppercase().as_slice() {
        b"CHANNELS" if rest.len() <= 1 => {
            channels(&db.subscribers, rest.first().map(Vec::as_slice))
        }
        b"SHARDCHANNELS" if rest.len() <= 1 => {
            channels(&db.shard_subscribers, rest.first().map(Vec::as_slice))
        }
        b"NUMSUB" => numsub(&db.subscribers, rest),
        b"SHARDNUMSUB" => numsub(&db.shard_subscribers, rest),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// Redis's glob (`stringmatchlen`): `*`, `?`, `[…]` with ranges and `^`,
/// and `\` escaping the next byte.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob_match(rest, &text[i..])),
        Some((b'?', rest)) => !text.is_empty() && glob_match(rest, &text[1..]),
        Some((b'[', rest)) => {
            let Some((&c, tail)) = text.split_first() else {
                return false;
            };
            let (negate, mut p) = match rest.split_first() {
                Some((b'^', r)) => (true, r),
                _ => (false, rest),
            };
            let mut matched = false;
            loop {
                match p {
                    [] => break,
                    [b']', r @ ..] => {
                        p = r;
                        break;
                    }
                    [b'\\', e, r @ ..] => {
                        matched |= *e == c;
                        p = r;
                    }
                    [a, b'-', z, r @ ..] if *z != b']' => {
                        let (lo, hi) = if a <= z { (*a, *z) } else { (*z, *a) };
                        matched |= (lo..=hi).contains(&c);
                        p = r;
                    }
                    [a, r @ ..] => {
                        matched |= *a == c;
                        p = r;
                    }
                }
            }
            matched != negate && glob_match(p, tail)
        }
        Some((b'\\', rest)) if !rest.is_empty() => {
            text.first() == Some(&rest[0]) && glob_match(&rest[1..], &text[1..])
        }
        Some((&p, rest)) => text.first() == Some(&p) && glob_match(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;
    use crate::commands::run;
    use crate::db::Db;
    use crate::reply::Reply;

    fn call(db: &mut Db, words: &[&str]) -> Reply {
        let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        run(db, &words)
    }

    #[test]
    fn globs_match_as_redis_matches_them() {
        assert!(glob_match(b"a*c", b"abbbc"));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"x\\*y", b"x*y"));
        assert!(!glob_match(b"x\\*y", b"xay"));
    }

    #[test]
    fn publish_counts_channel_and_pattern_subscribers() {
        let mut db = Db::new(1_796_000_000_000_000);
        db.patterns.insert(b"{x}:*".to_vec(), 1);
        db.subscribers.insert(b"{x}:wake:01".to_vec(), 2);
        let publish = |db: &mut Db, command, channel| call(db, &[command, channel, "m"]);
        assert_eq!(publish(&mut db, "PUBLISH", "{x}:wake:01"), Reply::Int(3));
        assert_eq!(publish(&mut db, "PUBLISH", "{x}:wake:02"), Reply::Int(1));
        assert_eq!(publish(&mut db, "PUBLISH", "{y}:wake:01"), Reply::Int(0));
        // Sharded channels have subscribers of their own, no patterns.
        assert_eq!(publish(&mut db, "SPUBLISH", "{x}:wake:01"), Reply::Int(0));
        assert_eq!(db.outbox.len(), 4);
    }
}
