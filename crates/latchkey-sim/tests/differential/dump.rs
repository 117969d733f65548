//! Keyspaces: the script that reads a real server's, the same form from
//! it as `Server::dump` gives, a simulator made from it, and the deadlines
//! in a simulator's.

use latchkey_sim::{Reply, Server, Value, ZSet};

/// Reads every key on the real server at one instant: `{seconds, µs,
/// seconds, µs, {key, type, value, expiry}…}` (the time at its start and
/// at its end), a value and expiry as `Server::dump` gives them (the test
/// sorts hashes and sets).
pub const DUMP: &str = r#"
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local ty = redis.call('TYPE', k).ok
  local v
  if ty == 'string' then v = redis.call('GET', k)
  elseif ty == 'hash' then v = redis.call('HGETALL', k)
  elseif ty == 'list' then v = redis.call('LRANGE', k, 0, -1)
  elseif ty == 'set' then v = redis.call('SMEMBERS', k)
  elseif ty == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  else v = 'unknown type' end
  out[#out + 1] = {k, ty, v, redis.call('PEXPIRETIME', k)}
end
local t2 = redis.call('TIME')
table.insert(out, 3, t2[1])
table.insert(out, 4, t2[2])
return out
"#;

/// Every instant (server ms) at which the simulator's state changes
/// meaning: key expiries, and sorted-set scores that are server times; and
/// every server time a value records (an acquisition record's, a hash
/// field's), from which a script may report a span (`inspect_any.lua`'s
/// `held_ms`): a step right after one would report a span small enough to
/// be compared exactly, off by the pipeline's delay.
pub fn deadlines(sim: &Server) -> Vec<i64> {
    let mut out = Vec::new();
    for entry in sim.dump() {
        let Reply::Array(Some(parts)) = entry else {
            continue;
        };
        if let Some(Reply::Int(expiry)) = parts.get(3) {
            if *expiry >= 0 {
                out.push(*expiry);
            }
        }
        let is_zset = matches!(parts.get(1), Some(Reply::Bulk(Some(ty))) if ty == b"zset");
        let records = matches!(parts.first(), Some(Reply::Bulk(Some(k)))
            if k.ends_with(latchkey::protocol::ALIVE_SUFFIX));
        match parts.get(2) {
            Some(Reply::Array(Some(items))) if is_zset => {
                let scores: Vec<(&[u8], Option<f64>)> = items
                    .chunks(2)
                    .filter_map(|pair| match pair {
                        [Reply::Bulk(Some(member)), Reply::Bulk(Some(s))] => Some((
                            member.as_slice(),
                            std::str::from_utf8(s)
                                .ok()
                                .and_then(|t| t.parse::<f64>().ok()),
                        )),
                        _ => None,
                    })
                    .collect();
                // A fair lock's process records are also dropped once their
                // deadline is more than the horizon past (`fair_renew.lua`,
                // `shared/live.lua`: below `now + horizon`, the member
                // 'horizon' scoring minus the longest entry lease written):
                // at deadline − horizon, those instants too.
                let horizon = scores
                    .iter()
                    .find(|(member, _)| records && *member == b"horizon")
                    .and_then(|(_, score)| *score)
                    .filter(|h| h.is_finite());
                for (_, score) in &scores {
                    if let Some(v) = score.filter(|v| *v >= 1e12 && *v < 1e15) {
                        out.push(v as i64);
                        if let Some(h) = horizon {
                            out.push((v - h) as i64);
                        }
                    }
                }
            }
            Some(Reply::Array(Some(items))) => {
                for item in items {
                    if let Reply::Bulk(Some(text)) = item {
                        out.extend(recorded_instants(text));
                    }
                }
            }
            Some(Reply::Bulk(Some(text))) => out.extend(recorded_instants(text)),
            _ => {}
        }
    }
    out
}

/// The server times in ms (digit runs from 10^12 to under 10^15) in a
/// stored value.
fn recorded_instants(text: &[u8]) -> Vec<i64> {
    text.split(|b| !b.is_ascii_digit())
        .filter(|run| (13..=15).contains(&run.len()))
        .filter_map(|run| std::str::from_utf8(run).ok()?.parse::<i64>().ok())
        .filter(|v| (1_000_000_000_000..1_000_000_000_000_000).contains(v))
        .collect()
}

/// A dump (the real one or the simulator's) in one order to compare:
/// keys sorted, hashes by field, sets sorted, and sorted sets by member.
/// A sorted set's own order is its scores' (then its members'), and each
/// score is compared, within the tolerance for instants: members whose
/// scores the two clocks made a millisecond apart, or equal, may stand in
/// either order, and that is no difference.
pub fn normalize(entries: &[Reply]) -> Vec<Reply> {
    let mut out: Vec<Reply> = entries
        .iter()
        .map(|entry| {
            let Reply::Array(Some(parts)) = entry else {
                return entry.clone();
            };
            let mut parts = parts.clone();
            if let (Some(Reply::Bulk(Some(ty))), Some(Reply::Array(Some(items)))) =
                (parts.get(1), parts.get(2))
            {
                let sorted = match ty.as_slice() {
                    b"hash" => {
                        let mut pairs: Vec<&[Reply]> = items.chunks(2).collect();
                        pairs.sort_by_key(|pair| bytes(&pair[0]));
                        Some(pairs.concat())
                    }
                    b"set" => {
                        let mut members = items.clone();
                        members.sort_by_key(bytes);
                        Some(members)
                    }
                    b"zset" => {
                        let mut pairs: Vec<&[Reply]> = items.chunks(2).collect();
                        pairs.sort_by_key(|pair| bytes(&pair[0]));
                        Some(pairs.concat())
                    }
                    _ => None,
                };
                if let Some(sorted) = sorted {
                    parts[2] = Reply::array(sorted);
                }
            }
            Reply::array(parts)
        })
        .collect();
    out.sort_by_key(|e| match e {
        Reply::Array(Some(p)) => p.first().map(bytes).unwrap_or_default(),
        _ => Vec::new(),
    });
    out
}

/// A bulk string's bytes (empty for anything else), to sort by.
fn bytes(reply: &Reply) -> Vec<u8> {
    match reply {
        Reply::Bulk(Some(b)) => b.clone(),
        _ => Vec::new(),
    }
}

/// A simulator at `micros` holding the keys of a real dump (as
/// `normalize` leaves it), with the test's subscriber: of every channel
/// by its pattern, and of its shard channels.
pub fn from_real(entries: &[Reply], micros: i64) -> Server {
    let mut sim = Server::new(micros);
    sim.psubscribe(b"*", 1);
    for channel in crate::keys::shard_channels() {
        sim.subscribe(&channel, true, 1);
    }
    for entry in entries {
        let Reply::Array(Some(parts)) = entry else {
            continue;
        };
        let [Reply::Bulk(Some(key)), Reply::Bulk(Some(ty)), value, Reply::Int(expiry)] = &parts[..]
        else {
            panic!("a dump entry {entry}")
        };
        let items: Vec<Vec<u8>> = match value {
            Reply::Array(Some(items)) => items.iter().map(bytes).collect(),
            _ => Vec::new(),
        };
        let value = match ty.as_slice() {
            b"string" => Value::Str(bytes(value)),
            b"hash" => Value::Hash(
                items
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            ),
            b"list" => Value::List(items.into_iter().collect()),
            b"set" => Value::Set(items.into_iter().collect()),
            _ => {
                let mut z = ZSet::default();
                for p in items.chunks(2) {
                    let score = std::str::from_utf8(&p[1]).ok().and_then(|t| t.parse().ok());
                    z.insert(p[0].clone(), score.expect("a score"));
                }
                Value::ZSet(z)
            }
        };
        sim.put(key, value, (*expiry >= 0).then_some(*expiry));
    }
    sim
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zset_entry(items: &[&str]) -> Reply {
        let bulk = |t: &str| Reply::Bulk(Some(t.as_bytes().to_vec()));
        Reply::array(vec![
            bulk("k"),
            bulk("zset"),
            Reply::array(items.iter().map(|t| bulk(t)).collect()),
            Reply::Int(-1),
        ])
    }

    #[test]
    fn a_process_record_is_dropped_the_horizon_after_its_deadline() {
        let mut sim = Server::new(1_796_000_000_000_000);
        let mut records = ZSet::default();
        records.insert(b"horizon".to_vec(), -200.0);
        records.insert(b"0000000000000001".to_vec(), 1_796_000_000_100.0);
        sim.put(b"{p:x}:alive", Value::ZSet(records), None);
        let mut leases = ZSet::default();
        leases.insert(b"e".to_vec(), 1_796_000_000_100.0);
        sim.put(b"{p:x}:leases", Value::ZSet(leases), None);
        let mut marks = deadlines(&sim);
        marks.sort_unstable();
        // The record's deadline, the moment fair_renew drops it (more than
        // 200 ms past), and the entry's lease (no horizon on the leases).
        assert_eq!(
            marks,
            [1_796_000_000_100, 1_796_000_000_100, 1_796_000_000_300]
        );
    }

    #[test]
    fn sorted_sets_compare_in_member_order() {
        let sim = normalize(&[zset_entry(&["b", "1796571134520", "a", "1796571134521"])]);
        let real = normalize(&[zset_entry(&["a", "1796571134521", "b", "1796571134521"])]);
        assert_eq!(sim.len(), 1);
        assert!(crate::compare::replies_close(
            &sim[0],
            &real[0],
            crate::compare::Place::Stored
        ));
        let far = normalize(&[zset_entry(&["a", "1796571134521", "b", "1796571134530"])]);
        assert!(!crate::compare::replies_close(
            &sim[0],
            &far[0],
            crate::compare::Place::Stored
        ));
    }
}
