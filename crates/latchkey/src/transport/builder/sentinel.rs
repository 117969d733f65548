//! The Sentinel options of [`ClientBuilder`]: which Sentinels to ask for
//! which master, and connecting through them (see `crate::transport::sentinel`).

use super::{ClientBuilder, Session};
use crate::transport::connection::{Connection, Kind};
use crate::transport::sentinel::{SentinelConnection, SentinelSpec};
use crate::transport::tls::server_name::{Override, Target};
use crate::vocab::error::{Error, Result};

impl ClientBuilder {
    /// Connects to the primary that the Redis Sentinels at `sentinels`
    /// (`host:port` each; a bare `host` means port 26379) name for the
    /// master `master`, and follows it across failovers (see
    /// `docs/reliability.md`, "Sentinel"). The URL
    /// the builder was made with then gives only the primary's settings
    /// (user, password, database), not its address. The URL form
    /// `redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]`
    /// does the same. A malformed address fails with
    /// [`Error::InvalidInput`]. The client moves to a new primary when a
    /// Sentinel announces it (`+switch-master`), and asks the Sentinels
    /// every [`pubsub_ping_every`](Self::pubsub_ping_every) besides.
    pub fn sentinel<S: AsRef<str>>(
        mut self,
        sentinels: impl IntoIterator<Item = S>,
        master: &str,
    ) -> Self {
        self.sentinel = Some(SentinelSpec {
            sentinels: sentinels
                .into_iter()
                .map(|s| s.as_ref().to_owned())
                .collect(),
            master: master.to_owned(),
        });
        self
    }
}

impl ClientBuilder {
    /// Connects to the primary the Sentinels of `spec` name; `template`
    /// gives its settings (user, password, db), not its address.
    pub(super) async fn open_sentinel(
        self,
        spec: SentinelSpec,
        template: Target,
        replicas: Vec<Target>,
        over: Option<Override>,
    ) -> Result<Session> {
        if spec.sentinels.is_empty() || spec.master.is_empty() {
            return Err(Error::InvalidInput(
                "Sentinel needs at least one address and a master name".into(),
            ));
        }
        for addr in &spec.sentinels {
            crate::transport::sentinel::sentinel_client(addr).map_err(|e| {
                let said = crate::vocab::error::Said(&e);
                Error::InvalidInput(format!("bad Sentinel address {addr:?}: {said}"))
            })?;
        }
        let info = template.client.get_connection_info().clone();
        let connecting = SentinelConnection::connect(
            spec,
            info,
            over,
            self.command_timeout,
            self.pubsub_ping_every,
        );
        let conn = match tokio::time::timeout(self.command_timeout * 2, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(Error::from_redis(e, &[], self.command_timeout)),
            Err(_) => {
                return Err(Error::Timeout {
                    op: "connect",
                    after: self.command_timeout * 2,
                })
            }
        };
        let conn = Connection(Kind::Sentinel(conn));
        self.session(template, replicas, conn, super::Probe::NotAsked)
            .await
    }
}
