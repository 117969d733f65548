//! Plain commands on the keys under test: odd states for the scripts (a
//! foreign value, a key of the wrong type, a TTL cut short or removed),
//! and the options the simulator implements beyond what the scripts use.

use crate::gen::{b, Rng};
use crate::keys::Keys;

/// A plain command on one of the name's keys, `token` and `ttl` drawn
/// by the caller.
pub fn command(rng: &mut Rng, keys: &Keys, token: Vec<u8>, ttl: Vec<u8>) -> Vec<Vec<u8>> {
    let all = keys.all();
    let key = all[rng.below(all.len())].clone();
    let other = all[rng.below(all.len())].clone();
    let value = if rng.chance(60) {
        token
    } else {
        b(rng.pick(&["7", "x", "-1", "1.5"]))
    };
    match rng.below(16) {
        0..=2 => {
            let mut w = vec![b("SET"), key, value];
            // Mostly with a TTL: a string without one on a sorted set's
            // key fails the scripts that use it until it is deleted.
            if rng.chance(80) {
                w.extend([b("PX"), ttl]);
            }
            if rng.chance(20) {
                w.push(b(rng.pick(&["NX", "XX", "GET", "KEEPTTL"])));
            }
            w
        }
        3..=6 => vec![b("DEL"), key, other],
        7 => {
            let mut w = vec![
                b("PEXPIRE"),
                key,
                b(rng.pick(&["40", "250", "0", "-5", "x"])),
            ];
            if rng.chance(30) {
                w.push(b(rng.pick(&["NX", "XX", "GT", "LT"])));
            }
            w
        }
        // A key of another type: rarer than the rest, since it stays
        // until deleted or given a TTL and fails most scripts meanwhile.
        8 => match rng.below(4) {
            0 => vec![b("HSET"), key, b("f"), value],
            1 => vec![b("RPUSH"), key, value],
            2 => vec![b("SADD"), key, value],
            _ => {
                let mut w = vec![b("ZADD"), key];
                if rng.chance(40) {
                    w.push(b(rng.pick(&["XX", "NX", "GT", "LT", "CH"])));
                }
                w.extend([b(rng.pick(&["5", "1.5", "-inf", "x"])), value]);
                w
            }
        },
        9 => vec![b("APPEND"), key, b("+w")],
        10 => vec![
            b("HINCRBY"),
            key,
            b(rng.pick(&["arrived", "gen", "value"])),
            b(rng.pick(&["1", "-1", "x"])),
        ],
        11 => vec![b("LREM"), key, b(rng.pick(&["0", "1", "-1"])), value],
        12 => {
            let mut w = vec![
                b("ZRANGEBYSCORE"),
                key,
                b(rng.pick(&["-inf", "(5", "0"])),
                b(rng.pick(&["+inf", "5", "(1e20"])),
            ];
            if rng.chance(50) {
                w.push(b("WITHSCORES"));
            }
            if rng.chance(40) {
                w.extend([
                    b("LIMIT"),
                    b(rng.pick(&["0", "1"])),
                    b(rng.pick(&["1", "-1"])),
                ]);
            }
            w
        }
        13 => match rng.below(2) {
            0 => vec![b("LPOP"), key, b(rng.pick(&["1", "2"]))],
            _ => {
                let mut w = vec![b("ZPOPMIN"), key];
                if rng.chance(60) {
                    w.push(b(rng.pick(&["0", "1", "2", "-1", "x"])));
                }
                w
            }
        },
        14 => vec![b("EXISTS"), key, other],
        _ => vec![
            b(rng.pick(&["GET", "PTTL", "TYPE", "PERSIST", "ZCARD", "SCARD"])),
            key,
        ],
    }
}
