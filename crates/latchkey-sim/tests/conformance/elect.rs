//! An election's operations, driven through the real library against a
//! real server; every request sent on its keys is recorded, to be compared
//! with the election model's (`models::check`).

use std::time::Duration;

use latchkey::{Client, Ownership};
use latchkey_sim::model::conform::{Roles, Scripts};

use crate::lock::WATCHED_TTL;
use crate::monitor::Recorder;
use crate::others::{ms, Log, PREFIX};

/// A campaign won, renewed (a leadership is always renewed, every
/// `ttl/3`: the TTL is short so that it comes soon), the leader read, a
/// candidate of another client waiting, a new value proclaimed, the
/// resignation that lets the waiter win, its resignation.
pub async fn record<'a>(
    scripts: &'a Scripts,
    recorder: &'a mut Recorder,
    a: &Client,
    b: &Client,
) -> Log<'a> {
    let name = "conform-elect";
    let election = a.election(name, WATCHED_TTL).expect("an election");
    let roles = Roles::election(PREFIX, name.as_bytes(), ms(WATCHED_TTL));
    let lease = roles.names[0].0.clone();
    let mut log = Log {
        scripts,
        recorder,
        keys: vec![lease],
        roles,
        sent: Vec::new(),
    };
    // Values that are no word, so that they read as values (`Other`).
    let leading = election
        .try_campaign("node-1")
        .await
        .expect("campaign")
        .expect("a vacant election is won");
    log.until_any("elect_campaign.lua", "a campaign").await;
    log.until_any("extend.lua", "the leader's renewal").await;
    election.leader().await.expect("the leader").expect("one");
    log.until_any("elect_leader.lua", "reading the leader")
        .await;
    let candidate = b.election(name, WATCHED_TTL).expect("an election");
    let wait = tokio::spawn(async move {
        candidate
            .campaign_until("node-2", Duration::from_secs(20))
            .await
    });
    log.until_any("elect_campaign.lua", "a waiting candidate's campaign")
        .await;
    assert_eq!(
        leading.proclaim("node-1b").await.expect("proclaim"),
        Ownership::Owned
    );
    log.until_any("elect_proclaim.lua", "a proclamation").await;
    assert_eq!(leading.resign().await.expect("resign"), Ownership::Owned);
    log.until_any("elect_resign.lua", "the resignation").await;
    let next = wait
        .await
        .expect("the waiting task")
        .expect("the waiter wins");
    assert_eq!(next.resign().await.expect("resign"), Ownership::Owned);
    log.until_any("elect_resign.lua", "the next leader's resignation")
        .await;
    log
}
