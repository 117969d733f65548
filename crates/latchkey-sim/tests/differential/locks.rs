//! The plain lock's scripts and several locks at once, drawn with the
//! argument shapes the library sends (latchkey 0.4): a first try (four or
//! five arguments), a waiter's try (seven; or eight, with the lock's
//! waiting processes and the waiter's process, or `*` for a waiter that
//! listens on the release channel only), a release that wakes one waiting
//! process or every waiter (with the waiting processes, the fair queue,
//! the wake channels' stem and the releasing process, or `-` for one that
//! listens nowhere), or a Redlock retraction's (the lock alone); a
//! renewal, a token; `lock_all`'s scripts.

use crate::gen::{b, Rng, Step};
use crate::keys::{Keys, LISTENING, NAMES};

/// The processes a waiter's try registers: one listening on its shard
/// channel too ([`LISTENING`]), two others, and `*`.
const WAITERS: &[&str] = &[LISTENING, "0000000000000002", "00000000000000a3", "*"];

/// The owner tokens of [`step`]: two of the library's shape (one a
/// holder kept while idle), so that a waiter's try often finds the other
/// holding, and a release often is the holder's.
const HOLDERS: &[&str] = &["lk2:0001:aa:h1", "lk2:0003:cc:h3", "lk2:0002:bb:h2:c"];

/// A plain lock's try or release from few tokens and long TTLs: waiters
/// register while a holder lives, and its release wakes them one by one
/// (the other steps draw from more tokens and odd states, so that a
/// release that finds waiting processes is rare there).
pub fn step(rng: &mut Rng) -> Step {
    let keys = Keys::of(rng.pick(NAMES));
    let token = b(HOLDERS[usize::from(rng.chance(50)) + usize::from(rng.chance(10))]);
    let ttl = b(rng.pick(&["250", "700"]));
    match rng.below(20) {
        0..=3 => acquire(rng, &keys, token, ttl),
        4..=10 => waiter(rng, &keys, token, ttl),
        _ => release(rng, &keys, token),
    }
}

fn script(file: &'static str, keys: Vec<Vec<u8>>, args: Vec<Vec<u8>>) -> Step {
    Step::Script { file, keys, args }
}

/// A publish command: `PUBLISH`, which the test's pattern subscriber
/// hears on every channel, or now and then `SPUBLISH`, heard only on the
/// shard channels it listens on (`keys::shard_channels`).
fn publish(rng: &mut Rng) -> Vec<u8> {
    b(if rng.chance(30) {
        "SPUBLISH"
    } else {
        "PUBLISH"
    })
}

/// `acquire.lua` on `keys`' lock: four, five or seven arguments, or a
/// registering waiter's eight.
pub fn acquire(rng: &mut Rng, keys: &Keys, token: Vec<u8>, ttl: Vec<u8>) -> Step {
    let bit = |rng: &mut Rng| b(rng.pick(&["0", "1"]));
    let mut args = vec![
        token.clone(),
        ttl.clone(),
        bit(rng),
        bit(rng),
        bit(rng),
        keys.channel.clone(),
        b("PUBLISH"),
    ];
    match rng.below(5) {
        0 => args.truncate(4),
        1 => args.truncate(5),
        2 => {}
        _ => return waiter(rng, keys, token, ttl),
    }
    script(
        "acquire.lua",
        vec![keys.lock.clone(), keys.fence.clone()],
        args,
    )
}

/// `acquire.lua` as a registering waiter sends it: the lock's waiting
/// processes and the waiter's process (mostly waiting, `'1'`, as it is).
fn waiter(rng: &mut Rng, keys: &Keys, token: Vec<u8>, ttl: Vec<u8>) -> Step {
    let args = vec![
        token,
        ttl,
        b(rng.pick(&["0", "1"])),
        b(if rng.chance(85) { "1" } else { "0" }),
        b(rng.pick(&["0", "1"])),
        keys.channel.clone(),
        publish(rng),
        b(rng.pick(WAITERS)),
    ];
    let script_keys = vec![keys.lock.clone(), keys.fence.clone(), keys.wake.clone()];
    script("acquire.lua", script_keys, args)
}

/// `release.lua` on `keys`' lock.
pub fn release(rng: &mut Rng, keys: &Keys, token: Vec<u8>) -> Step {
    if rng.chance(20) {
        // A Redlock's retraction: no waiting processes.
        return script(
            "release.lua",
            vec![keys.lock.clone()],
            vec![token, keys.channel.clone(), b("PUBLISH")],
        );
    }
    script(
        "release.lua",
        vec![keys.lock.clone(), keys.wake.clone(), keys.queue.clone()],
        vec![token, keys.channel.clone(), publish(rng)],
    )
}

/// `multi_acquire.lua`, `multi_release.lua` or `multi_extend.lua` over
/// both names.
pub fn multi(rng: &mut Rng, token: Vec<u8>, ttl: Vec<u8>) -> Step {
    let (a, c) = (Keys::of(NAMES[0]), Keys::of(NAMES[1]));
    let publish = b("PUBLISH");
    match rng.below(3) {
        0 => {
            let waiting = rng.pick(&["0", "1"]);
            let mut locks = vec![a.lock, a.fence, c.lock, c.fence];
            // A waiter's: each lock's waiting processes, where it
            // registers as '*'.
            if waiting == "1" && rng.chance(70) {
                locks.extend([a.wake, c.wake]);
            }
            let args = vec![
                token,
                ttl,
                b(rng.pick(&["0", "1"])),
                b(waiting),
                publish,
                a.channel,
                c.channel,
            ];
            script("multi_acquire.lua", locks, args)
        }
        1 => script(
            "multi_release.lua",
            vec![a.lock, c.lock],
            vec![token, publish, a.channel, c.channel],
        ),
        _ => script("multi_extend.lua", vec![a.lock, c.lock], vec![token, ttl]),
    }
}
