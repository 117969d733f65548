//! Scripts sent to one server: one on its own ([`evalsha`]), or the
//! watchdog renewals of many holds together ([`RenewalBatcher`]), one
//! pipeline a round trip.
//!
//! # Why renewals are batched
//! Every hold with a watchdog renews itself every third of its TTL: a
//! process holding 100,000 of them made 100,000 round trips an interval,
//! each one a request and a reply the server and the client handle on
//! their own. Instead, a watch due to renew at `next` hands its script to
//! its session's batcher from `next - slack` on (`renew.rs`), saying it
//! must be sent by `next`; the batcher sends everything queued as one
//! pipeline when the earliest of those times arrives. Holds whose windows
//! overlap share a round trip, and once they have, their next renewals
//! fall due together: a process's holds settle into a few batches an
//! interval, whatever their number. The program's own `extend` is never
//! batched (it pays no wait).
//!
//! One batcher per session: one per server, so a Redlock has one per
//! instance. A Redis Cluster is not batched: a pipeline goes to one node,
//! and redis-rs's cluster client refuses a pipeline whose keys lie in
//! several slots (grouping by node would need its slot map, which it does
//! not expose); there every renewal is sent on its own, as before.
//!
//! # Cancel safety
//! A watch that stops (its hold released, lost or dropped) while its
//! renewal waits drops the receiver of the reply: the batcher leaves that
//! renewal out of a pipeline not yet sent. One already sent runs on the
//! server, and is harmless: every renewal script compares the owner token,
//! so a renewal that arrives after the hold's release finds the key gone
//! or someone else's and changes nothing (as a renewal whose future was
//! dropped after its request left always could).

use std::time::{Duration, Instant};

use redis::{FromRedisValue, Script, Value};
use tokio::sync::{mpsc, oneshot};

use crate::transport::connection::Connection;

/// The most renewals one pipeline carries: a larger batch is split into
/// several, sent one after the other. Bounds how long the server is busy
/// with one request (a few ms), so that the other commands on the shared
/// connection (acquisitions, releases) wait for one pipeline at most, not
/// for every renewal of the tick, while 100,000 holds still cost a
/// hundred round trips an interval.
pub(crate) const MAX_BATCH: usize = 1000;

/// What a renewal gets back: the script's reply, or the error of the
/// pipeline that carried it (a timeout as an I/O `TimedOut`, which
/// `Error::from_redis` reads as [`Error::Timeout`](crate::Error::Timeout)).
type BatchReply = redis::RedisResult<Value>;

/// One renewal waiting in the batch.
struct Queued {
    /// The `EVALSHA`, built by the caller.
    cmd: redis::Cmd,
    /// Its script, loaded after a `NOSCRIPT`.
    script: &'static Script,
    /// The latest it may be sent.
    by: Instant,
    reply: oneshot::Sender<BatchReply>,
}

/// A session's renewal batcher: a queue and the task that sends it; see
/// the module docs. The task ends when the session (the queue's sender)
/// is dropped.
pub(crate) struct RenewalBatcher {
    /// The queue of the task, started by the first renewal; started again
    /// by the next one when it has ended (its runtime shut down, while the
    /// session lives on to be used from another).
    queue: std::sync::Mutex<Option<mpsc::UnboundedSender<Queued>>>,
    conn: Connection,
    timeout: Duration,
}

impl RenewalBatcher {
    /// A batcher that sends on `conn`, each batch bounded by `timeout`.
    pub(crate) fn new(conn: Connection, timeout: Duration) -> RenewalBatcher {
        RenewalBatcher {
            queue: std::sync::Mutex::new(None),
            conn,
            timeout,
        }
    }

    /// Queues `queued`, starting the task if it is not running (on the
    /// caller's runtime: a watch runs on one); `false` if the task ended
    /// meanwhile.
    fn enqueue(&self, queued: Queued) -> bool {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let running = queue.as_ref().filter(|q| !q.is_closed());
        let queue = match running {
            Some(queue) => queue,
            None => {
                let (queue_tx, queue_rx) = mpsc::unbounded_channel();
                tokio::spawn(run(queue_rx, self.conn.clone(), self.timeout));
                queue.insert(queue_tx)
            }
        };
        queue.send(queued).is_ok()
    }

    /// Sends `script` with `keys` and `args` in a batch that leaves by
    /// `by` (at once when `by` has come), and waits for its reply.
    ///
    /// # Cancel safety
    /// Cancel safe: see the module docs.
    pub(crate) async fn send<T: FromRedisValue>(
        &self,
        script: &'static Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        by: Instant,
    ) -> redis::RedisResult<T> {
        let (reply, answer) = oneshot::channel();
        let queued = Queued {
            cmd: evalsha_cmd(script, keys, args),
            script,
            by,
            reply,
        };
        if !self.enqueue(queued) {
            return Err(gone());
        }
        match answer.await {
            Ok(value) => Ok(redis::from_redis_value(value?)?),
            // The task ended without answering (its runtime shut down).
            Err(_) => Err(gone()),
        }
    }
}

/// The error of a renewal whose batcher is gone: transient (a connection
/// error), so the watch tries again until its stop margin.
fn gone() -> redis::RedisError {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the renewal batcher stopped",
    )
    .into()
}

/// The batcher's task: collects renewals until the earliest `by` among
/// them, then sends them all (each batch from a task of its own, so that
/// collecting goes on while it is in flight).
async fn run(mut queued: mpsc::UnboundedReceiver<Queued>, conn: Connection, timeout: Duration) {
    let mut batch: Vec<Queued> = Vec::new();
    let mut due: Option<Instant> = None;
    loop {
        // Checked first: a steady stream of renewals arriving must not
        // keep a due batch waiting.
        if due.is_some_and(|at| Instant::now() >= at) {
            // The watches woken with this one are about to hand theirs in
            // (late, all of them, when the runtime is busy): each that is
            // ready runs before this task does again, and goes too, rather
            // than each late renewal going in a batch of its own.
            tokio::task::yield_now().await;
            while let Ok(next) = queued.try_recv() {
                batch.push(next);
            }
            dispatch(std::mem::take(&mut batch), &conn, timeout);
            due = None;
        }
        let next = match due {
            None => queued.recv().await,
            Some(at) => tokio::select! {
                biased;
                next = queued.recv() => next,
                _ = tokio::time::sleep_until(at.into()) => continue,
            },
        };
        let Some(next) = next else {
            // The session is gone: what is queued still goes.
            dispatch(batch, &conn, timeout);
            return;
        };
        due = Some(due.map_or(next.by, |at| at.min(next.by)));
        batch.push(next);
    }
}

/// Sends `batch` (those still awaited) from a task of its own, in
/// pipelines of at most [`MAX_BATCH`], one after the other.
fn dispatch(mut batch: Vec<Queued>, conn: &Connection, timeout: Duration) {
    batch.retain(|q| !q.reply.is_closed());
    if batch.is_empty() {
        return;
    }
    let conn = conn.clone();
    tokio::spawn(async move {
        let mut batch = batch.into_iter().peekable();
        while batch.peek().is_some() {
            let chunk: Vec<Queued> = batch.by_ref().take(MAX_BATCH).collect();
            crate::vocab::metrics::renewal_round_trip();
            send_pipeline(chunk, conn.clone(), timeout).await;
        }
    });
}

/// Sends one pipeline and answers each renewal in it. A renewal refused
/// with `NOSCRIPT` (the server's script cache was flushed) is sent again
/// once its script is loaded, as [`evalsha`] does; a second `NOSCRIPT` is
/// transient (`TRYAGAIN`).
async fn send_pipeline(batch: Vec<Queued>, mut conn: Connection, timeout: Duration) {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let mut waiting = Vec::with_capacity(batch.len());
    for queued in batch {
        pipe.add_command(queued.cmd);
        waiting.push((queued.script, queued.reply));
    }
    let replies = match query(&pipe, &mut conn, timeout).await {
        Ok(replies) => replies,
        Err(e) => return answer_all(waiting, e),
    };
    let mut again = redis::pipe();
    again.ignore_errors();
    let mut waiting_again = Vec::new();
    for ((cmd, (script, reply)), answer) in pipe.cmd_iter().zip(waiting).zip(replies) {
        match answer {
            Err(e) if is_noscript(&e) => {
                again.add_command(cmd.clone());
                waiting_again.push((script, reply));
            }
            // A receiver gone (the watch stopped) wants no answer.
            answer => drop(reply.send(answer)),
        }
    }
    if waiting_again.is_empty() {
        return;
    }
    let mut scripts: Vec<&'static Script> = waiting_again.iter().map(|(s, _)| *s).collect();
    scripts.sort_by_key(|s| s.get_hash());
    scripts.dedup_by_key(|s| s.get_hash());
    for script in scripts {
        let loaded = tokio::time::timeout(timeout, script.load_async(&mut conn)).await;
        if let Err(e) = loaded.unwrap_or_else(|_| Err(timed_out())) {
            return answer_all(waiting_again, e);
        }
    }
    let replies = match query(&again, &mut conn, timeout).await {
        Ok(replies) => replies,
        Err(e) => return answer_all(waiting_again, e),
    };
    for ((_, reply), answer) in waiting_again.into_iter().zip(replies) {
        let answer = match answer {
            Err(e) if is_noscript(&e) => Err(try_again(&e)),
            answer => answer,
        };
        drop(reply.send(answer));
    }
}

/// The renewals of one pipeline still to answer: each one's script, and
/// where its reply goes.
type Waiting = Vec<(&'static Script, oneshot::Sender<BatchReply>)>;

/// Sends `pipe`, bounded by `timeout`: each reply (or its error) in its
/// place. A reply count that does not match the commands' is an error,
/// never a panic.
async fn query(
    pipe: &redis::Pipeline,
    conn: &mut Connection,
    timeout: Duration,
) -> redis::RedisResult<Vec<BatchReply>> {
    let sent = pipe.cmd_iter().count();
    let replies = tokio::time::timeout(timeout, pipe.query_async::<Vec<BatchReply>>(conn))
        .await
        .unwrap_or_else(|_| Err(timed_out()))?;
    match replies.len() == sent {
        true => Ok(replies),
        false => Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "renewal batch",
            format!("{} replies to {sent} renewals", replies.len()),
        ))),
    }
}

/// A pipeline not answered within the command timeout.
fn timed_out() -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "renewal batch timed out").into()
}

/// Answers every renewal of `waiting` with the failure of its pipeline.
fn answer_all(waiting: Waiting, failure: redis::RedisError) {
    for (_, reply) in waiting {
        drop(reply.send(Err(failure.clone())));
    }
}

/// The `EVALSHA` of `script`, built in one buffer sized up front: the
/// invocation redis-rs offers copies every key and argument into a `Vec`
/// of its own and then again into the command, which cost more than the
/// rest of a release's client-side work.
fn evalsha_cmd(script: &Script, keys: &[&[u8]], args: &[&[u8]]) -> redis::Cmd {
    let hash = script.get_hash();
    let data =
        keys.iter().chain(args).map(|a| a.len()).sum::<usize>() + "EVALSHA".len() + hash.len() + 2;
    let mut cmd = redis::Cmd::with_capacity(3 + keys.len() + args.len(), data);
    cmd.arg("EVALSHA").arg(hash).arg(keys.len());
    for arg in keys.iter().chain(args) {
        cmd.arg(*arg);
    }
    cmd
}

/// What `ScriptInvocation::invoke_async` does (`EVALSHA`; on `NOSCRIPT`,
/// `SCRIPT LOAD` and the same `EVALSHA` again; a second `NOSCRIPT` is a
/// transient error, as `TRYAGAIN` is), over [`evalsha_cmd`].
pub(crate) async fn evalsha<T: FromRedisValue>(
    script: &Script,
    keys: &[&[u8]],
    args: &[&[u8]],
    conn: &mut Connection,
) -> redis::RedisResult<T> {
    let cmd = evalsha_cmd(script, keys, args);
    match cmd.query_async(conn).await {
        Err(e) if is_noscript(&e) => {
            // Boxed: rare, and every script call's future would carry it.
            Box::pin(async {
                script.load_async(conn).await?;
                match cmd.query_async(conn).await {
                    // Loaded, and the node that answered still lacks it: on
                    // a cluster, one the load did not reach (a replica
                    // promoted a moment ago, not yet in the client's map).
                    // Transient, so that a wait tries again once the
                    // topology has settled.
                    Err(e) if is_noscript(&e) => Err(try_again(&e)),
                    result => result,
                }
            })
            .await
        }
        result => result,
    }
}

/// A `NOSCRIPT` after the script was loaded, as a transient error.
fn try_again(e: &redis::RedisError) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain),
        "TRYAGAIN",
        format!("a script loaded is unknown where it was sent (a failover?): {e}"),
    ))
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}
