//! One round: the same command to many instances at once, stopping as soon
//! as the answers decide the outcome.
//!
//! ```text
//! acquire on 5, quorum 3:   i2 ✓   i0 ✓   i4 ✓  ── decided ──► return      (i1, i3: unanswered)
//! release on 5, quorum 3:   i2 ✓   i0 ✓   i4 ✓  ── decided ── grace ──► return
//! ```
//!
//! Waiting for every instance would make each round as slow as the slowest
//! instance, and a dead one as slow as the per-instance timeout (redis-rs
//! makes a command on a lost connection wait for its reconnection
//! attempts). Stopping at the decision makes a round as fast as the
//! quorum-th fastest instance. What happens to the requests the round stops
//! waiting for depends on how they were made: requests made by
//! [`Group::gather`] are dropped (one already written to its connection
//! still runs on the server; one not yet written is not sent; a release
//! repeats them in a task of its own), while requests started with
//! [`Group::spawn_each`] (acquire, fence raise) run to the end in their
//! own tasks, so every reachable instance gets them.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::task::JoinHandle;

use super::Group;
use crate::backend::single::Single;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::LockKeys;

/// The least grace given to the rest after a decision, when asked for.
const MIN_GRACE: Duration = Duration::from_millis(2);

/// What a round collected.
pub(super) struct Gathered<T> {
    /// The answers in the order they came, by instance index.
    pub(super) answers: Vec<(usize, Result<T>)>,
    /// The instances asked that had not answered when the round stopped.
    pub(super) unanswered: Vec<usize>,
}

impl Group {
    /// Runs `call` on the instances at `indices` at once, each bounded by
    /// `timeout` (an instance without a connection fails at once), until all
    /// answered or `decided(answers so far, still pending)` says the rest
    /// cannot change the outcome. With `grace`, the rest then get as long
    /// again as the round took so far (at least 2 ms) to answer too: for
    /// rounds whose every answer is worth having (release counts, wake-ups).
    pub(super) async fn gather<'a, T, Fut>(
        &'a self,
        indices: impl IntoIterator<Item = usize>,
        timeout: Duration,
        op: &'static str,
        call: impl Fn(&'a Session) -> Fut,
        decided: impl Fn(&[(usize, Result<T>)], usize) -> bool,
        grace: bool,
    ) -> Gathered<T>
    where
        Fut: Future<Output = Result<T>> + 'a,
    {
        // Boxed, as in `spawn_each`: the round's futures then move a
        // pointer, not the request's whole state machine.
        let requests: Vec<(usize, Option<std::pin::Pin<Box<Fut>>>)> = indices
            .into_iter()
            .map(|i| {
                let client = self.inner.instances[i].client.get();
                (i, client.map(|c| Box::pin(call(c))))
            })
            .collect();
        self.gather_requests(requests, Some(timeout), op, decided, grace)
            .await
    }

    /// [`gather`](Group::gather) over requests already made: one per
    /// instance index, `None` for an instance without a connection. Each
    /// is bounded by `timeout`; `None` for requests that bound themselves
    /// (the tasks of [`Group::spawn_each`]): a second timer each would
    /// cost as much as the rest of the round's bookkeeping and never fire
    /// first.
    pub(super) async fn gather_requests<T, Fut>(
        &self,
        requests: impl IntoIterator<Item = (usize, Option<Fut>)>,
        timeout: Option<Duration>,
        op: &'static str,
        decided: impl Fn(&[(usize, Result<T>)], usize) -> bool,
        grace: bool,
    ) -> Gathered<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        let start = Instant::now();
        let mut asked = Vec::new();
        let mut pending: FuturesUnordered<_> = requests
            .into_iter()
            .map(|(i, request)| {
                asked.push(i);
                let label = &self.inner.instances[i].label;
                async move {
                    let result = match request {
                        None => Err(not_connected()),
                        Some(request) => match timeout {
                            None => request.await,
                            Some(after) => match tokio::time::timeout(after, request).await {
                                Ok(result) => result,
                                Err(_) => Err(Error::Timeout { op, after }),
                            },
                        },
                    };
                    if let Err(e) = &result {
                        tracing::debug!(instance = %label, op, error = %e, "Redlock instance failed");
                    }
                    (i, result)
                }
            })
            .collect();
        let mut answers = Vec::with_capacity(asked.len());
        let mut grace_until: Option<Instant> = None;
        loop {
            let next = match grace_until {
                None => pending.next().await,
                Some(until) => match tokio::time::timeout_at(until.into(), pending.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
            };
            let Some(answer) = next else { break };
            answers.push(answer);
            if grace_until.is_none() && decided(&answers, pending.len()) {
                if !grace {
                    break;
                }
                grace_until = Some(Instant::now() + start.elapsed().max(MIN_GRACE));
            }
        }
        let unanswered = asked
            .into_iter()
            .filter(|i| !answers.iter().any(|(j, _)| j == i))
            .collect();
        Gathered {
            answers,
            unanswered,
        }
    }

    /// Starts `call` on every instance at `indices` in a task of its own,
    /// bounded by `timeout` from now (not from when the task first runs, so
    /// that a round awaiting the task needs no timer of its own), that runs to the end whether or not a round
    /// still listens: for requests that should reach every instance even
    /// after the round has been decided. `None` for an instance without a
    /// connection. Await one with [`finish`], by reference, so that the
    /// task can still be awaited (or handed on) after the round.
    pub(super) fn spawn_each<T, Fut>(
        &self,
        indices: impl IntoIterator<Item = usize>,
        timeout: Duration,
        op: &'static str,
        call: impl Fn(Session) -> Fut,
    ) -> Vec<(usize, Option<JoinHandle<Result<T>>>)>
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        indices
            .into_iter()
            .map(|i| {
                let task = self.inner.instances[i].client.get().map(|client| {
                    // Boxed: the task then holds a pointer, and spawning
                    // copies a few words instead of the whole request's
                    // state machine several times over (the copies were a
                    // tenth of a Redlock acquire's client instructions).
                    let request = Box::pin(call(client.clone()));
                    tokio::spawn(async move {
                        match tokio::time::timeout_at(deadline, request).await {
                            Ok(result) => result,
                            Err(_) => Err(Error::Timeout { op, after: timeout }),
                        }
                    })
                });
                (i, task)
            })
            .collect()
    }

    /// Compare-and-delete on the instances at `indices`, each in a task of
    /// its own (bounded by `timeout`), so that it runs to the end whether
    /// or not the caller waits for it: the returned handles complete when
    /// the tasks do. For instances where a request of ours may still land
    /// (it is undone: the release follows it on the same connection).
    pub(super) fn release_detached(
        &self,
        indices: &[usize],
        keys: LockKeys,
        token: &str,
        timeout: Duration,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let keys = Arc::new(keys);
        let token: Arc<str> = Arc::from(token);
        indices
            .iter()
            .filter_map(|&i| self.inner.instances[i].client.get().cloned())
            .map(|client| {
                let (keys, token) = (keys.clone(), token.clone());
                self.inner.background.spawn(async move {
                    let _ =
                        tokio::time::timeout(timeout, Single(&client).release_whole(&keys, &token))
                            .await;
                })
            })
            .collect()
    }
}

impl Group {
    /// For each acquire in `late` (an instance's, still running), waits
    /// for it (at most `timeout`), then compare-and-deletes on that
    /// instance: in the background, tracked, so that a release cannot be
    /// overtaken by the acquire it gives back (late.rs).
    pub(super) fn release_after(
        &self,
        late: Vec<super::late::LateAcquire>,
        keys: &LockKeys,
        token: &str,
        timeout: Duration,
    ) {
        for (i, task) in late {
            let (group, keys, token) = (self.clone(), keys.clone(), token.to_owned());
            self.inner.background.spawn(async move {
                let _ = tokio::time::timeout(timeout, task).await;
                for release in group.release_detached(&[i], keys, &token, timeout) {
                    let _ = release.await;
                }
            });
        }
    }
}

fn not_connected() -> Error {
    Error::Unreachable(redis::RedisError::from((
        redis::ErrorKind::Io,
        "not connected yet",
    )))
}

/// The outcome of a task from [`Group::spawn_each`]. A named function,
/// not a closure: a future made in a closure over `&mut` is not `Send` for
/// every lifetime, and `Lock::acquire` must stay spawnable.
pub(super) async fn finish<T>(task: &mut JoinHandle<Result<T>>) -> Result<T> {
    task.await
        .unwrap_or_else(|e| Err(Error::Internal(format!("Redlock task failed: {e}"))))
}
