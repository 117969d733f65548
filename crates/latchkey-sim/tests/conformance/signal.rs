//! Signals, sent through the real library to a real server and recorded,
//! to be compared with the signals model's (`models::check`). Neither send
//! names a key (`signal_one.lua` finds the waiters' channels by pattern),
//! so each is found by what it is, not by its key.

use latchkey::Client;
use latchkey_sim::model::conform::{Roles, Scripts, Sent};

use crate::lock::Recorded;
use crate::monitor::Recorder;

/// A `signal_one` and a broadcast (`Client::signal`) on one name; no one
/// waits (what is sent does not depend on it).
pub async fn record(
    scripts: &Scripts,
    recorder: &mut Recorder,
    a: &Client,
) -> Vec<(Sent, Recorded)> {
    let name = "conform-signal";
    let roles = Roles::default();
    let shape = |words: &[Vec<u8>]| scripts.shape_words(words, &roles);
    let mut sent = Vec::new();
    a.signal_one(name, "go").await.expect("signal_one");
    let is = |script: &'static str| {
        move |words: &[Vec<u8>]| shape(words).is_some_and(|s| s.script == script)
    };
    let words = recorder
        .next_where(is("signal_one.lua"), "signal_one")
        .await;
    sent.push(words);
    a.signal(name, "go").await.expect("a broadcast");
    let words = recorder.next_where(is("PUBLISH"), "a broadcast").await;
    sent.push(words);
    sent.into_iter()
        .map(|words| {
            let s = shape(&words).expect("a well-formed call");
            let roles = Roles::default();
            (s, Recorded { words, roles })
        })
        .collect()
}
