//! An in-process TCP proxy between a client and Redis, for fault injection.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::{self, Instant};

/// Largest chunk read from a socket at once.
const CHUNK_SIZE: usize = 16 * 1024;
/// Chunks buffered per direction. Once full, the proxy stops reading, so a
/// blackholed or delayed peer sees TCP backpressure instead of the proxy
/// buffering without bound.
const MAX_QUEUED_CHUNKS: usize = 64;
/// Back-off after a failed `accept` (e.g. out of file descriptors), so the
/// accept loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// How a [`Proxy`] treats the bytes it forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward everything as soon as it arrives.
    Pass,
    /// Forward each chunk this long after it was read, in order. The delay is
    /// one-way and applies to each direction, so a request/reply round trip
    /// takes at least twice as long.
    Delay(Duration),
    /// Keep accepting connections and reading, but forward nothing in either
    /// direction: the network between client and server has gone silent. The
    /// bytes are held, not dropped, and delivered once the mode changes back.
    Blackhole,
    /// Forward requests (client to server) at once, and throw away every
    /// reply (server to client): the server acts on each request, the
    /// client never learns the result. Replies dropped are gone for good,
    /// also after the mode changes back.
    DropReplies,
    /// Forward everything until a request containing these bytes passes
    /// (e.g. `"EVALSHA"`), then, on that connection, throw away every reply
    /// as [`ProxyMode::DropReplies`] does: a client that connected normally
    /// loses the reply of one chosen command and all after it.
    DropRepliesFrom(&'static str),
}

/// Which way a [`forward`] copies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

/// A TCP proxy on a free loopback port that forwards to an upstream address
/// (usually a [`RedisServer`](crate::RedisServer)) and can delay, hold or cut
/// the traffic on demand.
///
/// It runs as tasks on the tokio runtime that calls [`Proxy::start`]. Mode
/// changes apply at once to new and already-open connections. Dropping the
/// proxy stops accepting and closes every proxied connection.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use latchkey_testkit::{Proxy, ProxyMode, RedisServer};
///
/// let redis = RedisServer::start();
/// let proxy = Proxy::start(redis.addr()).await;
/// // Point the client under test at `proxy.url()` instead of `redis.url()`,
/// // then break the network between them:
/// proxy.set_mode(ProxyMode::Blackhole);
/// assert_eq!(proxy.mode(), ProxyMode::Blackhole);
/// proxy.reset_connections();
/// assert_eq!(proxy.connection_count(), 0);
/// # }
/// ```
pub struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

/// State shared between the [`Proxy`] handle and its tasks.
struct Shared {
    /// A watch channel rather than a plain mutex so that forwarders waiting
    /// out a delay or a blackhole wake up as soon as the mode changes.
    mode: watch::Sender<ProxyMode>,
    connections: Mutex<Connections>,
}

#[derive(Default)]
struct Connections {
    next_id: u64,
    /// Open connections; the handle is `None` for the moment between
    /// registering a connection and spawning its task.
    open: HashMap<u64, Option<AbortHandle>>,
}

impl Proxy {
    /// Starts a proxy to `upstream`, listening on `127.0.0.1` on a free port,
    /// in [`ProxyMode::Pass`].
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound, or when called outside a tokio
    /// runtime.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap_or_else(|e| panic!("latchkey-testkit: proxy cannot bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("latchkey-testkit: proxy cannot read its port: {e}"));
        let shared = Arc::new(Shared {
            mode: watch::channel(ProxyMode::Pass).0,
            connections: Mutex::default(),
        });
        let accept_task = tokio::spawn(accept_loop(listener, upstream, Arc::clone(&shared)));
        Proxy {
            addr,
            upstream,
            shared,
            accept_task,
        }
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `127.0.0.1:port` of the proxy.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address the proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// `redis://127.0.0.1:PORT/` pointing at the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    /// Switches the mode for new and existing connections, effective at once.
    /// Bytes held by a blackhole or delay are released according to the new
    /// mode (immediately for [`ProxyMode::Pass`]).
    pub fn set_mode(&self, mode: ProxyMode) {
        // send_replace, unlike send, also works while no connection (and so no
        // receiver) exists.
        self.shared.mode.send_replace(mode);
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        *self.shared.mode.borrow()
    }

    /// Aborts every open proxied connection: both sockets are closed, so the
    /// client sees EOF or a reset, like after a network partition healed by a
    /// connection-killing middlebox. Bytes held for them are discarded. New
    /// connections are still accepted.
    pub fn reset_connections(&self) {
        self.shared.abort_all();
    }

    /// The number of currently open proxied connections.
    pub fn connection_count(&self) -> usize {
        self.shared.connections().open.len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Dropping the accept task drops the listener: new connects are refused.
        self.accept_task.abort();
        self.shared.abort_all();
    }
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream)
            .field("mode", &self.mode())
            .field("connections", &self.connection_count())
            .finish()
    }
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Connections> {
        // Critical sections are tiny map updates that cannot leave the map
        // inconsistent, so a poisoned lock is safe to use.
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn abort_all(&self) {
        let handles: Vec<_> = self.connections().open.drain().collect();
        // Aborting outside the lock: a task's `Registration` takes it on drop.
        for handle in handles.into_iter().filter_map(|(_, h)| h) {
            handle.abort();
        }
    }

    /// Spawns the task serving one accepted connection and registers it.
    fn spawn_connection(self: &Arc<Self>, client: TcpStream, upstream: SocketAddr) {
        let id = {
            let mut connections = self.connections();
            let id = connections.next_id;
            connections.next_id += 1;
            connections.open.insert(id, None);
            id
        };
        let registration = Registration {
            shared: Arc::clone(self),
            id,
        };
        let mode = self.mode.subscribe();
        let task = tokio::spawn(async move {
            let _registration = registration;
            serve(client, upstream, mode).await;
        });
        // Not spawned under the lock: a task dropped during spawn (runtime
        // shutting down) would deadlock taking it in `Registration::drop`.
        match self.connections().open.get_mut(&id) {
            Some(slot) => *slot = Some(task.abort_handle()),
            // Either the task already finished (abort is a no-op) or
            // reset_connections ran before we got its handle (abort is due).
            None => task.abort(),
        }
    }
}

/// Removes a connection from the registry when its task ends or is aborted.
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.connections().open.remove(&self.id);
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => shared.spawn_connection(client, upstream),
            Err(_) => time::sleep(ACCEPT_RETRY).await,
        }
    }
}

/// Forwards one connection in both directions until both sides are done or
/// either fails.
async fn serve(client: TcpStream, upstream: SocketAddr, mode: watch::Receiver<ProxyMode>) {
    // If the upstream is down, closing the client connection is the closest
    // a proxy can get to "connection refused".
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    // Small RESP commands must not sit in Nagle's buffer, or every Delay
    // measurement would be off by tens of milliseconds.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Set once a request matched `DropRepliesFrom`: replies are cut from then on.
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = tokio::try_join!(
        forward(
            client_read,
            server_write,
            mode.clone(),
            Direction::Request,
            cut.clone()
        ),
        forward(server_read, client_write, mode, Direction::Reply, cut),
    );
}

/// One chunk read from a socket; empty `data` stands for EOF.
struct Chunk {
    read_at: Instant,
    data: Vec<u8>,
}

/// Copies `from` to `to`, releasing each chunk when the mode allows.
///
/// Reading and writing are separate futures joined by a bounded queue, so
/// reading continues (and records arrival times) while writing waits out a
/// delay or a blackhole.
async fn forward(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut mode: watch::Receiver<ProxyMode>,
    direction: Direction,
    cut: Arc<std::sync::atomic::AtomicBool>,
) -> io::Result<()> {
    let (queue, mut queued) = mpsc::channel::<Chunk>(MAX_QUEUED_CHUNKS);
    let read = async move {
        let mut buf = vec![0; CHUNK_SIZE];
        loop {
            let n = from.read(&mut buf).await?;
            let chunk = Chunk {
                read_at: Instant::now(),
                data: buf[..n].to_vec(),
            };
            // An error means the writer has failed and the connection is
            // being torn down anyway.
            if queue.send(chunk).await.is_err() || n == 0 {
                return Ok::<_, io::Error>(());
            }
        }
    };
    let write = async move {
        while let Some(chunk) = queued.recv().await {
            let mut forward = wait_for_release(&mut mode, chunk.read_at, direction).await?;
            if let ProxyMode::DropRepliesFrom(pattern) = *mode.borrow() {
                let pattern = pattern.as_bytes();
                match direction {
                    Direction::Request => {
                        if chunk
                            .data
                            .windows(pattern.len().max(1))
                            .any(|w| w == pattern)
                        {
                            cut.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                    Direction::Reply => forward = !cut.load(std::sync::atomic::Ordering::SeqCst),
                }
            }
            if !forward && !chunk.data.is_empty() {
                continue;
            }
            if chunk.data.is_empty() {
                // Pass the half-close on, after the data before it: this is
                // how a client's QUIT-and-close reaches the server.
                return to.shutdown().await;
            }
            to.write_all(&chunk.data).await?;
        }
        Ok(())
    };
    tokio::try_join!(read, write).map(|_| ())
}

/// Waits until a chunk read at `read_at` may be forwarded under the current
/// mode, re-evaluating whenever the mode changes; `false` when the chunk is
/// to be dropped instead.
async fn wait_for_release(
    mode: &mut watch::Receiver<ProxyMode>,
    read_at: Instant,
    direction: Direction,
) -> io::Result<bool> {
    loop {
        let current = *mode.borrow_and_update();
        let changed = match current {
            ProxyMode::Pass | ProxyMode::DropRepliesFrom(_) => return Ok(true),
            ProxyMode::DropReplies => return Ok(direction == Direction::Request),
            // A delay too large to represent is as good as a blackhole.
            ProxyMode::Delay(delay) => match read_at.checked_add(delay) {
                Some(due) => tokio::select! {
                    () = time::sleep_until(due) => return Ok(true),
                    changed = mode.changed() => changed,
                },
                None => mode.changed().await,
            },
            ProxyMode::Blackhole => mode.changed().await,
        };
        // The sender lives in the proxy; if it is gone, so is the proxy.
        changed.map_err(|_| io::Error::other("proxy dropped"))?;
    }
}
