//! Where the locks live: the Redis URL(s) from `--redis` / `LATCHKEY_REDIS_URL`
//! and the key prefix, turned into a [`latchkey::Client`] or a [`latchkey::Lock`].
//!
//! ```text
//! latchkey --redis redis://10.0.0.5:6379/ status nightly
//! LATCHKEY_REDIS_URL=redis://a:6379,redis://b:6379,redis://c:6379 latchkey run ...
//! ```
//!
//! With `--sentinel HOST:PORT` (repeatable) and `--master NAME` every
//! command talks to the primary the Sentinels name, and follows failovers;
//! `--redis` then gives only the primary's password and database. The URL
//! form `redis+sentinel://[:password@]host:port[,host:port...]/master[/db]`
//! does the same.
//!
//! Several URLs make `run`, `acquire`, `release` and `extend` use Redlock
//! over those (independent) servers; `status`, `list` and `demo` talk to one
//! server, and `doctor` checks each in turn.

use std::sync::Arc;
use std::time::Duration;

use latchkey::{Client, Lock, Redlock};

use crate::support::exit::Failure;
use crate::support::patience::Patience;

/// The server used when neither `--redis` nor `LATCHKEY_REDIS_URL` is given.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The connection options shared by every subcommand.
#[derive(Debug, Clone)]
pub struct Target {
    /// As given; empty means "not given" (the demo then starts its own server).
    pub urls: Vec<String>,
    pub prefix: Option<String>,
    /// `--tls-ca`, `--tls-cert`, `--tls-key`.
    pub tls: crate::support::tls_args::TlsArgs,
    /// `--sentinel` addresses and `--master` name, when given.
    pub sentinel: Option<(Vec<String>, String)>,
    /// What this invocation connected (shared by clones).
    pub connected: Arc<Connected>,
}

impl Target {
    /// The URLs in force: the ones given, else [`DEFAULT_URL`].
    pub fn urls(&self) -> Vec<String> {
        if self.urls.is_empty() {
            vec![DEFAULT_URL.to_owned()]
        } else {
            self.urls.clone()
        }
    }

    /// The one URL, for subcommands that talk to one server.
    pub fn single_url(&self, what: &str) -> Result<String, Failure> {
        match &self.urls()[..] {
            [one] => Ok(one.clone()),
            _ => Err(Failure::usage(format!(
                "{what} talks to one Redis server; give a single --redis URL"
            ))),
        }
    }

    /// The options for `url`: the prefix, the TLS files and the Sentinels.
    pub fn builder(&self, url: &str) -> latchkey::ClientBuilder {
        let builder = self.with_options(Client::builder(url));
        match &self.sentinel {
            Some((sentinels, master)) => builder.sentinel(sentinels, master),
            None => builder,
        }
    }

    /// The prefix and the TLS files (a Redlock instance's too).
    fn with_options(&self, mut builder: latchkey::ClientBuilder) -> latchkey::ClientBuilder {
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix);
        }
        self.tls.apply(builder)
    }

    /// The client for `url`: connected with the prefix on first use, the same
    /// one after (a busy lock's holder is described over the connection that
    /// found it busy, not a second one), transient failures retried within
    /// `patience` on first use. Errors name the server (password hidden).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropped while connecting, nothing is kept and the next
    /// call connects again.
    pub async fn client_for_within(
        &self,
        url: &str,
        patience: Patience,
    ) -> Result<Client, Failure> {
        let mut clients = self.connected.clients.lock().await;
        if let Some((_, client)) = clients.iter().find(|(known, _)| known == url) {
            return Ok(client.clone());
        }
        let client = self.new_client_within(url, patience).await?;
        clients.push((url.to_owned(), client.clone()));
        Ok(client)
    }

    /// A client for `url` of its own, never shared with [`Target::client_for_within`]'s
    /// callers (the demo's workers are separate clients, as separate
    /// processes would be); still flushed at exit.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropped while connecting, nothing is kept.
    pub async fn new_client_for(&self, url: &str) -> Result<Client, Failure> {
        self.new_client_within(url, Patience::Once).await
    }

    /// [`Self::new_client_for`], retrying transient failures within `patience`.
    async fn new_client_within(&self, url: &str, patience: Patience) -> Result<Client, Failure> {
        let whom = match &self.sentinel {
            Some((sentinels, master)) => {
                format!("Sentinel master {master:?} (via {})", sentinels.join(","))
            }
            None => redact(url),
        };
        let client = patience
            .retry(&format!("connecting to {whom}"), || {
                self.builder(url).connect()
            })
            .await
            .map_err(|e| connect_failure(e, &whom))?;
        self.connected.remember(client.clone());
        Ok(client)
    }

    /// The client of the one server (see [`Target::client_for_within`]).
    ///
    /// # Cancel safety
    ///
    /// As [`Target::client_for_within`].
    pub async fn client(&self, what: &str) -> Result<Client, Failure> {
        self.client_within(what, Patience::Once).await
    }

    /// [`Self::client`], retrying transient failures within `patience`
    /// (a command started while Redis is down: see `patience.rs`).
    /// Several URLs (without Sentinels) are seeds of one Redis Cluster.
    pub async fn client_within(&self, what: &str, patience: Patience) -> Result<Client, Failure> {
        let urls = self.urls();
        if urls.len() < 2 || self.sentinel.is_some() {
            return self
                .client_for_within(&self.single_url(what)?, patience)
                .await;
        }
        match self.seeded(&urls, patience).await {
            Ok(client) => Ok(client),
            Err(e @ latchkey::Error::NotACluster { .. }) => Err(Failure::usage(format!(
                "{what} talks to one Redis server (give a single --redis URL) or to one cluster given by its nodes; {e}"
            ))),
            Err(e) => Err(connect_failure(e, &seeds_label(&urls))),
        }
    }

    /// A client of the Redis Cluster whose nodes `urls` are (the first that
    /// answers is asked, the others are its seeds), retried within
    /// `patience`; [`latchkey::Error::NotACluster`] when the server that
    /// answered is a standalone one.
    async fn seeded(&self, urls: &[String], patience: Patience) -> latchkey::Result<Client> {
        let connect = || {
            let builder = urls[1..]
                .iter()
                .fold(self.builder(&urls[0]), |b, seed| b.seed(seed));
            builder.connect()
        };
        let client = patience
            .retry(&format!("connecting to {}", seeds_label(urls)), connect)
            .await?;
        self.connected.remember(client.clone());
        Ok(client)
    }

    /// The lock `name` with `ttl` on the configured server(s): several URLs
    /// mean Redlock (held while a majority of them agree). Made
    /// [`with_fencing`](Lock::with_fencing): every command that takes a lock
    /// prints or passes on its fencing token.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropped while connecting, nothing is held.
    pub async fn lock(&self, name: &str, ttl: Duration) -> Result<Lock, Failure> {
        self.lock_within(name, ttl, Patience::Once).await
    }

    /// [`Self::lock`], its connection retried within `patience`.
    pub async fn lock_within(
        &self,
        name: &str,
        ttl: Duration,
        patience: Patience,
    ) -> Result<Lock, Failure> {
        let client = self.lock_client(patience).await?;
        client
            .lock(name, ttl)
            .map(Lock::with_fencing)
            .map_err(Failure::from)
    }

    /// The client locks are taken with: of the one server, of the cluster
    /// whose nodes the URLs are, or else of a Redlock over them.
    async fn lock_client(&self, patience: Patience) -> Result<Client, Failure> {
        let urls = self.urls();
        if let [url] = &urls[..] {
            return self.client_for_within(url, patience).await;
        }
        // Several URLs: the nodes of one cluster (seeds), or else
        // independent servers for Redlock, whose connect refuses a cluster
        // node among them (exit 2).
        if self.sentinel.is_none() {
            match self.seeded(&urls, patience).await {
                Ok(client) => return Ok(client),
                Err(latchkey::Error::NotACluster { .. }) => {}
                Err(e) => return Err(connect_failure(e, &seeds_label(&urls))),
            }
        }
        if let Some(why) = redlock_size_warning(urls.len()) {
            // Always, not only with -v: the operator chose the servers.
            eprintln!("latchkey: warning: {why}; use an odd number, at least 3");
        }
        let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
        let redlock = patience
            .retry("connecting the Redlock servers", || {
                Redlock::connect_with(&refs, |builder| self.with_options(builder))
            })
            .await
            .map_err(|e| connect_failure(e, &format!("Redlock over {} servers", urls.len())))?;
        let client = Client::from(redlock);
        self.connected.remember(client.clone());
        Ok(client)
    }
}

/// Several URLs, for messages (passwords hidden).
fn seeds_label(urls: &[String]) -> String {
    let urls: Vec<String> = urls.iter().map(|u| redact(u)).collect();
    format!("the Redis servers {}", urls.join(", "))
}

/// The `--sentinel` and `--master` options, checked: both or neither, and
/// at most one `--redis` URL (the primary's settings) beside them.
pub fn sentinel_target(
    sentinels: Vec<String>,
    master: Option<String>,
    urls: &[String],
) -> Result<Option<(Vec<String>, String)>, Failure> {
    let sentinels: Vec<String> = sentinels
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    match (sentinels.is_empty(), master) {
        (true, None) => Ok(None),
        (true, Some(_)) => Err(Failure::usage(
            "--master needs --sentinel HOST:PORT (or LATCHKEY_SENTINEL)",
        )),
        (false, None) => Err(Failure::usage(
            "--sentinel needs --master NAME (or LATCHKEY_SENTINEL_MASTER)",
        )),
        (false, Some(master)) if master.trim().is_empty() => {
            Err(Failure::usage("--master: empty master name"))
        }
        (false, Some(_)) if urls.len() > 1 => Err(Failure::usage(
            "--sentinel takes at most one --redis URL (the primary's password and database)",
        )),
        (false, Some(master)) => Ok(Some((sentinels, master))),
    }
}

/// `--redis` values split at commas (for Redlock), put back together where
/// they were one `redis+sentinel://a:1,b:2/master` URL.
pub fn rejoin_sentinel_url(urls: Vec<String>) -> Vec<String> {
    let mut joined: Vec<String> = Vec::with_capacity(urls.len());
    for url in urls {
        match joined.last_mut() {
            Some(last) if last.starts_with("redis+sentinel://") && !url.contains("://") => {
                last.push(',');
                last.push_str(&url);
            }
            _ => joined.push(url),
        }
    }
    joined
}

/// What this invocation connected, kept for two reasons: one client per
/// server (a second use of the same URL reuses it, where a `static` list
/// of everything made used to let each use connect anew), and
/// [`Target::flush`], which waits for the releases they left running in the
/// background (a failed or cancelled acquisition, a guard dropped on an
/// error path) before the process exits and its runtime would cancel them,
/// leaving the lock held until its TTL.
#[derive(Default)]
pub struct Connected {
    /// The shared clients by URL. An async mutex, held while connecting, so
    /// that two concurrent first uses of one URL make one client.
    clients: tokio::sync::Mutex<Vec<(String, Client)>>,
    /// Every client made (a Redlock's included), shared or not, for the flush.
    made: std::sync::Mutex<Vec<Client>>,
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let made = self.made.lock().map_or(0, |made| made.len());
        write!(f, "Connected({made} made)")
    }
}

impl Connected {
    fn remember(&self, made: Client) {
        self.made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(made);
    }
}

impl Target {
    /// Waits, at most `within` in all, for the background releases of every
    /// client (a Redlock's included) this invocation made. Called by `main` before
    /// exiting.
    ///
    /// # Cancel safety
    ///
    /// Not meant to be cancelled: what it has not flushed yet is forgotten
    /// (those locks free themselves at their TTL).
    pub async fn flush(&self, within: Duration) {
        let made = std::mem::take(
            &mut *self
                .connected
                .made
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        let deadline = tokio::time::Instant::now() + within;
        for client in made {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !client.flush(left).await {
                tracing::warn!(
                    "a background release did not finish before exit; its lock frees itself at its TTL"
                );
            }
        }
    }
}

/// The failure of a connection attempt, its message led by `whom`. A
/// server that refuses the URL's database (`/99` where it has 16) is a bad
/// URL: exit 2 with the cause, not 70 ("internal error"). Any other refusal
/// while setting the connection up is the server being unusable: 69.
pub fn connect_failure(error: latchkey::Error, whom: &str) -> Failure {
    let mut failure = Failure::from(error);
    if failure.message.contains("DB index is out of range")
        || failure.message.contains("switch database")
    {
        failure.code = crate::support::exit::USAGE;
        failure.message = format!(
            "{whom}: the URL's database does not exist on this server ({})",
            failure.message
        );
        return failure;
    }
    if failure.code == crate::support::exit::INTERNAL {
        failure.code = crate::support::exit::UNAVAILABLE;
    }
    failure.message = format!("{whom}: {}", failure.message);
    failure
}

/// Why a Redlock over `servers` servers is a poor choice, if it is: an
/// even number tolerates no more failures than one server fewer (4 servers
/// need 3, tolerate 1, as 3 do), and 2 tolerate none.
pub fn redlock_size_warning(servers: usize) -> Option<String> {
    if servers < 2 || servers % 2 == 1 {
        return None;
    }
    let majority = servers / 2 + 1;
    Some(format!(
        "Redlock over {servers} servers needs {majority} of them and tolerates {} failure(s), \
         no more than {} servers would",
        servers - majority,
        servers - 1
    ))
}

/// `url` with any password replaced by `***`, for messages. The torture
/// suite's copy, the only one: see `latchkey_torture::cli_text` for why it
/// lives there.
pub use latchkey_torture::cli_text::redact;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls_split_at_commas_are_put_back_together() {
        let split = ["redis+sentinel://a:1", "b:2/m", "redis://c:3"].map(String::from);
        assert_eq!(
            rejoin_sentinel_url(split.to_vec()),
            ["redis+sentinel://a:1,b:2/m", "redis://c:3"]
        );
        let plain = ["redis://a:1", "redis://b:2"].map(String::from);
        assert_eq!(rejoin_sentinel_url(plain.to_vec()), plain);
    }

    #[test]
    fn sentinel_needs_a_master_and_one_url_at_most() {
        let s = vec!["h:1".to_owned()];
        assert!(sentinel_target(s.clone(), None, &[]).is_err());
        assert!(sentinel_target(vec![], Some("m".into()), &[]).is_err());
        let two = ["redis://a".to_owned(), "redis://b".to_owned()];
        assert!(sentinel_target(s.clone(), Some("m".into()), &two).is_err());
        assert_eq!(
            sentinel_target(s.clone(), Some("m".into()), &[]).unwrap(),
            Some((s, "m".to_owned()))
        );
    }
}
