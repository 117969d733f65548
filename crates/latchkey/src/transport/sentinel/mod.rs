//! Sentinel (layer 2, transport): the primary that a set of Redis Sentinels
//! names for a master name, followed across failovers.
//!
//! A Sentinel connection is a kind of [`Connection`](crate::Connection), not
//! a new algorithm: every command goes to the server the Sentinels announce
//! as the primary now. redis-rs has no reconnecting Sentinel connection, so
//! this is one:
//!
//! * the first command (and the first after the connection broke) asks the
//!   Sentinels, in turn, `SENTINEL GET-MASTER-ADDR-BY-NAME`, connects there
//!   and checks with `ROLE` that the server says it is a primary (a freshly
//!   promoted replica may not yet, a demoted primary no longer does);
//! * a command that fails for the connection's sake (reset, refused, timed
//!   out, `READONLY`: the server was demoted) drops it, so the next command
//!   asks again. A `READONLY` command was not run, so it is retried once, at
//!   once, on the server asked anew; other failures go back to the caller,
//!   whose retry (a waiter's, a watchdog's) reaches the new primary;
//! * a background task asks the Sentinels every `poll` (the client's
//!   pub/sub ping interval), and at once when a Sentinel announces a
//!   failover (`+switch-master`), and drops the connection when they name
//!   another server. Sentinel leaves a demoted primary that still runs alone for
//!   seconds before it makes it a replica (and closes its clients), so
//!   without this a client could go on writing to the old primary.
//!
//! [`Source`] is what the shared subscriber connects with: a fixed server,
//! or the primary the Sentinels name (the subscriber reconnects when it
//! changes, and so re-subscribes on the new primary).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
};
use tokio::sync::watch;

use crate::transport::current::{config, Current};
use crate::transport::tls::server_name::{Override, Target};

mod follow;
mod source;
mod url;

pub(crate) use source::Source;
pub(crate) use url::parse_url;

/// The Sentinels to ask and the master name to ask them for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SentinelSpec {
    /// `host:port` (or a `redis://` URL) of each Sentinel.
    pub(crate) sentinels: Vec<String>,
    /// The master name the Sentinels monitor.
    pub(crate) master: String,
}

/// A reconnecting connection to the primary the Sentinels name (cheap to
/// clone); see the module docs.
#[derive(Clone)]
pub(crate) struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    spec: SentinelSpec,
    sentinels: Vec<redis::Client>,
    /// The primary's connection settings (user, password, db, TLS); only
    /// the address is replaced by the one the Sentinels give.
    template: ConnectionInfo,
    /// The TLS server-name override: the name the primary's certificate
    /// is checked against, whichever address the Sentinels give.
    over: Option<Override>,
    timeout: Duration,
    /// The primary's connection in use (one lookup at a time).
    current: Current,
    /// A connection per Sentinel, kept between lookups.
    sentinel_conns: tokio::sync::Mutex<Vec<Option<MultiplexedConnection>>>,
    /// The primary last named by the Sentinels.
    primary: watch::Sender<Option<(String, u16)>>,
}

impl SentinelConnection {
    /// Asks the Sentinels for the primary and connects to it; `template`
    /// gives everything but the address. Starts the task that follows
    /// failovers by asking again every `poll`.
    pub(crate) async fn connect(
        spec: SentinelSpec,
        template: ConnectionInfo,
        over: Option<Override>,
        timeout: Duration,
        poll: Duration,
    ) -> RedisResult<SentinelConnection> {
        let sentinels = spec
            .sentinels
            .iter()
            .map(|s| sentinel_client(s))
            .collect::<RedisResult<Vec<_>>>()?;
        let conn = SentinelConnection {
            shared: Arc::new(Shared {
                sentinel_conns: tokio::sync::Mutex::new(vec![None; sentinels.len()]),
                spec,
                sentinels,
                template,
                over,
                timeout,
                current: Current::default(),
                primary: watch::channel(None).0,
            }),
        };
        conn.current().await?;
        tokio::spawn(follow::follow(Arc::downgrade(&conn.shared), poll));
        Ok(conn)
    }

    /// `host:port` of the primary in use (or last named), for messages.
    pub(crate) fn server(&self) -> String {
        match &*self.shared.primary.borrow() {
            Some((host, port)) => format!("{host}:{port}"),
            None => format!("sentinel master {}", self.shared.spec.master),
        }
    }

    /// The primary's address as last named, and a receiver told when the
    /// Sentinels name another.
    pub(crate) fn primary(&self) -> watch::Receiver<Option<(String, u16)>> {
        self.shared.primary.subscribe()
    }

    /// The primary the Sentinels name now (no `ROLE` check: for the
    /// subscriber, whose messages reach it on any server of the set).
    pub(crate) async fn primary_target(&self) -> RedisResult<Target> {
        let addr = self.shared.ask_sentinels().await?;
        self.shared.named(&addr);
        self.shared.target(&addr)
    }

    /// The connection in use, or a new one to the primary named now.
    async fn current(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let shared = &self.shared;
        let connect = || async {
            match tokio::time::timeout(shared.timeout, shared.connect_primary()).await {
                Ok(result) => result,
                Err(_) => Err(timed_out("connecting to the primary the Sentinels name")),
            }
        };
        shared.current.get(connect).await
    }

    /// Drops the connection of `epoch` if it is still the one in use.
    fn drop_conn(&self, epoch: u64) {
        self.shared.current.drop_if(epoch);
    }

    /// Runs `request` on the primary; see the module docs for what a failure does.
    async fn run(&self, request: Request<'_>) -> RedisResult<Reply> {
        let (epoch, mut conn) = self.current().await?;
        match request.send(&mut conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly) => {
                // Refused, so not run: run it where the Sentinels point now.
                self.drop_conn(epoch);
                let (epoch, mut conn) = self.current().await?;
                let result = request.send(&mut conn).await;
                if result.as_ref().is_err_and(broken) {
                    self.drop_conn(epoch);
                }
                result
            }
            Err(e) if broken(&e) => {
                self.drop_conn(epoch);
                Err(e)
            }
            result => result,
        }
    }
}

/// A command or a pipeline, to send (perhaps twice).
#[derive(Clone, Copy)]
enum Request<'a> {
    One(&'a Cmd),
    Many(&'a Pipeline, usize, usize),
}

enum Reply {
    One(Value),
    Many(Vec<Value>),
}

impl Request<'_> {
    async fn send(self, conn: &mut MultiplexedConnection) -> RedisResult<Reply> {
        match self {
            Request::One(cmd) => conn.req_packed_command(cmd).await.map(Reply::One),
            Request::Many(pipeline, offset, count) => conn
                .req_packed_commands(pipeline, offset, count)
                .await
                .map(Reply::Many),
        }
    }
}

impl Shared {
    /// The address one of the Sentinels names, asking them in turn.
    async fn ask_sentinels(&self) -> RedisResult<(String, u16)> {
        let mut conns = self.sentinel_conns.lock().await;
        let mut last = None;
        for (client, cached) in self.sentinels.iter().zip(conns.iter_mut()) {
            let mut conn = match cached.take() {
                Some(conn) => conn,
                None => match client
                    .get_multiplexed_async_connection_with_config(&config(self.timeout))
                    .await
                {
                    Ok(conn) => conn,
                    Err(e) => {
                        last = Some(e);
                        continue;
                    }
                },
            };
            let mut cmd = redis::cmd("SENTINEL");
            cmd.arg("GET-MASTER-ADDR-BY-NAME").arg(&self.spec.master);
            let asked = cmd.query_async::<Option<(String, u16)>>(&mut conn);
            match tokio::time::timeout(self.timeout, asked).await {
                Ok(Ok(Some(addr))) => {
                    *cached = Some(conn);
                    return Ok(addr);
                }
                Ok(Ok(None)) => {
                    *cached = Some(conn);
                    last = Some(RedisError::from((
                        ErrorKind::InvalidClientConfig,
                        "a Sentinel does not know the master name",
                        format!("{:?}", self.spec.master),
                    )));
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => last = Some(timed_out("SENTINEL GET-MASTER-ADDR-BY-NAME")),
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((ErrorKind::InvalidClientConfig, "no Sentinel given"))
        }))
    }

    /// Connects to the primary the Sentinels name and checks it is one.
    async fn connect_primary(&self) -> RedisResult<MultiplexedConnection> {
        let addr = self.ask_sentinels().await?;
        self.named(&addr);
        let mut conn = self.target(&addr)?.connect(config(self.timeout)).await?;
        let role = redis::cmd("ROLE")
            .query_async::<Vec<Value>>(&mut conn)
            .await;
        match role {
            Ok(role) if matches!(role.first(), Some(Value::BulkString(r)) if r == b"master") => {
                Ok(conn)
            }
            // A user not allowed ROLE: take the Sentinels' word for it.
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) => Ok(conn),
            Err(e) => Err(e),
            Ok(_) => Err(RedisError::from((
                ErrorKind::Server(ServerErrorKind::ReadOnly),
                "the server the Sentinels name is not a primary (yet)",
                format!("{}:{}", addr.0, addr.1),
            ))),
        }
    }

    /// The template's settings at `addr`.
    fn at(&self, (host, port): &(String, u16)) -> ConnectionInfo {
        let addr = match self.template.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.clone(),
                port: *port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.clone(), *port),
        };
        self.template.clone().set_addr(addr)
    }

    /// The server at `addr`, under the server-name override if there is one.
    fn target(&self, addr: &(String, u16)) -> RedisResult<Target> {
        match &self.over {
            Some(over) => over.target(self.at(addr)),
            None => Ok(Target::plain(redis::Client::open(self.at(addr))?)),
        }
    }

    /// Records `addr` as the primary; tells the subscriber when it moved.
    fn named(&self, addr: &(String, u16)) {
        self.primary.send_if_modified(|known| {
            let moved = known.as_ref() != Some(addr);
            if moved {
                tracing::info!(master = %self.spec.master, primary = %format!("{}:{}", addr.0, addr.1), "the Sentinels name a primary");
                *known = Some(addr.clone());
            }
            moved
        });
    }
}

/// A client for the Sentinel at `addr`: `host:port`, `host` (port 26379,
/// Sentinel's own), `[v6]:port`, or a `redis://` URL.
pub(crate) fn sentinel_client(addr: &str) -> RedisResult<redis::Client> {
    if addr.contains("://") {
        return redis::Client::open(addr);
    }
    let has_port = match addr.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => addr.contains(':'),
    };
    match has_port {
        true => redis::Client::open(format!("redis://{addr}/")),
        false => redis::Client::open(format!("redis://{addr}:26379/")),
    }
}

/// Whether `e` means the connection (or the server behind it) is no good:
/// the next command should ask the Sentinels again.
fn broken(e: &RedisError) -> bool {
    crate::transport::current::broken(e)
        || matches!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

fn timed_out(what: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match self.run(Request::One(cmd)).await? {
                Reply::One(value) => Ok(value),
                Reply::Many(values) => Ok(Value::Array(values)),
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            match self.run(Request::Many(pipeline, offset, count)).await? {
                Reply::Many(values) => Ok(values),
                Reply::One(value) => Ok(vec![value]),
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.template.redis_settings().db()
    }
}
