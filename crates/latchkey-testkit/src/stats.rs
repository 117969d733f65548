//! What a server has seen, for tests that count commands or subscribers
//! instead of guessing from timing.

use std::collections::HashMap;

use crate::RedisServer;

impl RedisServer {
    /// Calls per command since start (or `CONFIG RESETSTAT`), from `INFO
    /// commandstats`, by lower-case name (`"evalsha"`, `"publish"`; commands
    /// run by scripts count too). A command never run is absent; a server
    /// that does not answer gives an empty map.
    pub fn command_calls(&self) -> HashMap<String, u64> {
        let info = self.command(&["INFO", "commandstats"]).unwrap_or_default();
        info.lines()
            .filter_map(|line| {
                let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
                Some((name.to_owned(), rest.split(',').next()?.parse().ok()?))
            })
            .collect()
    }

    /// How many times the server ran `command` (lower case): 0 if never.
    pub fn calls(&self, command: &str) -> u64 {
        self.command_calls().get(command).copied().unwrap_or(0)
    }

    /// Subscribers of `channel` (`PUBSUB NUMSUB`; pattern subscriptions do
    /// not count). The sign that a waiter is listening, to wait for with
    /// [`eventually`](crate::eventually) instead of sleeping.
    pub fn subscribers(&self, channel: &str) -> u64 {
        let reply = self
            .command(&["PUBSUB", "NUMSUB", channel])
            .unwrap_or_default();
        // Rendered as "channel\ncount".
        reply
            .lines()
            .nth(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Subscribers of the sharded `channel` on this node (`PUBSUB
    /// SHARDNUMSUB`): on a cluster, who listens to a lock's wake-ups there.
    pub fn shard_subscribers(&self, channel: &str) -> u64 {
        let reply = self
            .command(&["PUBSUB", "SHARDNUMSUB", channel])
            .unwrap_or_default();
        reply
            .lines()
            .nth(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_commands_and_subscribers() {
        let redis = RedisServer::start();
        assert_eq!(redis.calls("incr"), 0);
        redis.command(&["INCR", "n"]).unwrap();
        redis.command(&["INCR", "n"]).unwrap();
        assert_eq!(redis.calls("incr"), 2);
        assert_eq!(redis.command_calls().get("incr"), Some(&2));
        assert_eq!(redis.subscribers("nobody"), 0);
    }
}
