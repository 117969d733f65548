//! The deployments the matrix runs on: a standalone server, a 3-primary
//! Redis Cluster and a Sentinel set (a primary, a replica, 3 Sentinels),
//! each started once per test function and shared by its checks.

use std::time::Duration;

use latchkey::Client;
use latchkey_testkit::{eventually, RedisCluster, RedisServer, SentinelSet};

/// Which deployment a test of the matrix runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Standalone,
    Cluster,
    Sentinel,
}

/// Where the suite runs.
pub enum Deployment {
    Standalone(RedisServer),
    Cluster(RedisCluster),
    Sentinel(SentinelSet),
}

impl Deployment {
    /// The deployment of `kind`, without replicas on a cluster.
    pub async fn start(kind: Kind) -> Deployment {
        Deployment::start_with(kind, 0).await
    }

    /// The deployment of `kind` with `replicas` per primary on a cluster
    /// (a Sentinel set always has one replica; a failover needs it).
    pub async fn start_with(kind: Kind, replicas: usize) -> Deployment {
        tokio::task::spawn_blocking(move || match kind {
            Kind::Cluster => Deployment::Cluster(
                RedisCluster::builder()
                    .primaries(3)
                    .replicas_per_primary(replicas)
                    // A crashed primary's replica takes over within seconds.
                    .node_timeout(Duration::from_millis(1000))
                    .start(),
            ),
            Kind::Standalone => Deployment::Standalone(RedisServer::start()),
            Kind::Sentinel => Deployment::Sentinel(SentinelSet::builder().start()),
        })
        .await
        .expect("start the deployment")
    }

    pub fn kind(&self) -> Kind {
        match self {
            Deployment::Standalone(_) => Kind::Standalone,
            Deployment::Cluster(_) => Kind::Cluster,
            Deployment::Sentinel(_) => Kind::Sentinel,
        }
    }

    pub async fn client(&self) -> Client {
        let builder = match self {
            Deployment::Standalone(server) => Client::builder(&server.url()),
            Deployment::Cluster(cluster) => Client::builder(&cluster.seed_url()),
            Deployment::Sentinel(set) => {
                Client::builder_sentinel(set.sentinel_addrs(), set.master_name())
            }
        };
        let client = builder
            .prefix("test:")
            .command_timeout(Duration::from_secs(1))
            .pubsub_ping_every(Duration::from_millis(200))
            .connect()
            .await
            .expect("connect");
        assert_eq!(
            client.connection().is_cluster(),
            self.kind() == Kind::Cluster
        );
        client
    }

    /// The server that holds `key` (on a cluster: the primary of its slot;
    /// on a Sentinel set: the primary the Sentinels announce now).
    pub fn server_of(&self, key: &str) -> &RedisServer {
        match self {
            Deployment::Standalone(server) => server,
            Deployment::Cluster(cluster) => cluster.primary_for_key(key).server(),
            Deployment::Sentinel(set) => set.primary(),
        }
    }

    /// A raw command on the server that holds `key`.
    pub fn command(&self, key: &str, args: &[&str]) -> String {
        self.server_of(key).command(args).expect("raw command")
    }

    /// Waits until `channel` (of the lock or signal named by `key`) has a
    /// subscriber where its messages are published.
    pub async fn until_subscribed(&self, key: &str, channel: &str) {
        eventually(&format!("a subscriber of {channel}"), || async {
            let server = self.server_of(key);
            match self {
                Deployment::Cluster(_) => server.shard_subscribers(channel) >= 1,
                _ => server.subscribers(channel) >= 1,
            }
        })
        .await
    }

    /// Waits until `channel` has a subscriber that its messages reach: on
    /// a cluster at any node of the slot's shard (sharded messages go to
    /// the primary's replicas too, so a subscriber left on a demoted
    /// primary still hears them), elsewhere where [`Self::until_subscribed`]
    /// looks.
    pub async fn until_heard_in_shard(&self, key: &str, channel: &str) {
        let Deployment::Cluster(cluster) = self else {
            return self.until_subscribed(key, channel).await;
        };
        eventually(
            &format!("a subscriber of {channel} in its shard"),
            || async {
                let primary = cluster.primary_for_key(key);
                std::iter::once(primary)
                    .chain(cluster.replicas_of(primary))
                    .any(|node| node.server().shard_subscribers(channel) >= 1)
            },
        )
        .await
    }

    /// Waits until some channel matching `pattern` (a glob, for channels
    /// with a per-connection part such as a fair lock's hand-off) has a
    /// subscriber where the primitive named by `key` publishes.
    pub async fn until_subscribed_like(&self, key: &str, pattern: &str) {
        eventually(&format!("a subscriber of {pattern}"), || async {
            let which = match self {
                Deployment::Cluster(_) => "SHARDCHANNELS",
                _ => "CHANNELS",
            };
            let reply = self.server_of(key).command(&["PUBSUB", which, pattern]);
            reply.is_ok_and(|channels| !channels.trim().is_empty())
        })
        .await
    }
}
