//! The single-instance backend: one lock lives on one Redis server.
//! [`Single`] is a session seen as a lock's server: the scripts a lock
//! runs there, so that `Session` (transport) knows nothing of locks.

use std::time::{Duration, Instant};

use crate::vocab::error::{Error, Result};
use crate::vocab::names::{ttl_ms, LockKeys};
use crate::vocab::outcome::{Attempt, AttemptMode, Issued, Ownership, Renewal};
use crate::vocab::protocol::scripts;

crate::transport::session::session_view! {
    /// A session as the server of locks (a Redis Cluster or a
    /// Sentinel-watched primary is one too: a kind of connection).
    Single
}

impl Single<'_> {
    /// One acquire attempt, one round trip.
    ///
    /// A first try of a plain lock (neither `fenced` nor `ask_ttl`) is a
    /// bare `SET key token NX PX ttl GET`: no script (a script that writes
    /// costs Redis more server time than the same write sent bare; the
    /// figures are in `docs/fencing.md`); `GET` makes a key of the wrong
    /// type an error instead of a lock that looks busy forever. Otherwise
    /// the acquire script: it also issues the fencing token (`fenced`), and
    /// a busy reply carries the holder's TTL, which a waiter sleeps on
    /// (`ask_ttl`): in one command, where a `PTTL` after the `SET` would
    /// cost Redis a second round trip of its own; and marks the holder's
    /// token, so that its release publishes (only then: a wake-up nobody
    /// waits for is a measurable cost; see `docs/protocol.md`, "The waiting
    /// mark"). Until a script has run on the session, the first try is the
    /// script too: a user Redis does not let run scripts is refused
    /// (`NoPermission`) before it takes a key it could not release.
    pub(crate) async fn try_once(
        self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        mode: AttemptMode,
    ) -> Result<Attempt> {
        let sent = Instant::now();
        let valid_until = crate::vocab::names::valid_until(sent, ttl);
        if !mode.fenced && !mode.ask_ttl && self.scripts_ran() {
            // Sized up front: growing the command's buffers argument by
            // argument cost more than filling them.
            let mut set =
                redis::Cmd::with_capacity(7, 3 + keys.key.len() + token.len() + 2 + 2 + 20 + 3);
            set.arg("SET")
                .arg(&keys.key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms(ttl))
                .arg("GET");
            let holder: Option<redis::Value> = self.query("acquire", set, &keys.key).await?;
            if holder.is_none() {
                return Ok(Attempt::Acquired {
                    fencing_token: None,
                    valid_until,
                });
            }
            let kept_idle = matches!(&holder, Some(redis::Value::BulkString(v)) if crate::vocab::token::is_kept_idle(v));
            return Ok(Attempt::Busy {
                retry_in: None,
                announced: false,
                holder: None,
                kept_idle,
            });
        }
        let ttl_arg = ttl_ms(ttl).to_string();
        let issue = if mode.fenced { "1" } else { "0" };
        let waiting = if mode.ask_ttl && mode.mark { "1" } else { "0" };
        // A waiter registers: by its process (which listens on the lock's
        // wake channel: `Backend::waiter_wakeups`), or as '*' (one that
        // listens on release channels only: woken by broadcast).
        let process = match (waiting == "1" && !keys.wake.is_empty(), mode.register) {
            (true, true) => Some(self.subscriber().process_id()),
            (true, false) => Some("*"),
            (false, _) => None,
        };
        let args: [&[u8]; 8] = [
            token.as_bytes(),
            ttl_arg.as_bytes(),
            issue.as_bytes(),
            waiting.as_bytes(),
            // Naming the holder only for a waiter that asks it to let go.
            if mode.ask_ttl && mode.holder {
                b"1"
            } else {
                b"0"
            },
            // Where a marking waiter tells a holder kept idle it is wanted.
            &keys.channel,
            self.publish_command(),
            process.map_or(&b""[..], str::as_bytes),
        ];
        let args = match (
            process.is_some(),
            waiting == "1" || (mode.ask_ttl && mode.holder),
        ) {
            (true, _) => &args[..],
            (false, true) => &args[..7],
            (false, false) => &args[..4],
        };
        let all_keys = [&keys.key[..], &keys.fence_key, keys.waiting()];
        let script_keys = match process {
            Some(_) => &all_keys[..],
            None => &all_keys[..2],
        };
        // {acquired, value} or, busy, {0, pttl, announced} (and the holder).
        let reply: Vec<i64> = self
            .eval("acquire", &scripts::ACQUIRE, script_keys, args)
            .await?;
        let (acquired, value) = match reply[..] {
            [acquired, value, ..] => (acquired, value),
            _ => {
                return Err(Error::Protocol(format!(
                    "acquire script returned {reply:?}"
                )))
            }
        };
        match acquired {
            1 => Ok(Attempt::Acquired {
                fencing_token: match mode.fenced {
                    true => Some(fencing_token(value)?),
                    false => None,
                },
                valid_until,
            }),
            0 => Ok(Attempt::Busy {
                retry_in: u64::try_from(value).ok().map(Duration::from_millis),
                announced: reply.get(2) == Some(&1),
                holder: reply.get(3).and_then(|&h| u64::try_from(h).ok()),
                // 2: this try did not mark, and met a holder kept idle (a
                // marking attempt publishes `wanted` itself).
                kept_idle: reply.get(2) == Some(&2),
            }),
            other => Err(Error::Protocol(format!("acquire script returned {other}"))),
        }
    }

    /// Issues the fencing token of the hold of `token`, if it still holds
    /// the lock: `Ok(Ok(token))`, or `Ok(Err(outcome))` saying why not
    /// (`Expired` or `HeldByOther`).
    pub(crate) async fn issue_fence_once(self, keys: &LockKeys, token: &str) -> Issued {
        let (issued, value): (i64, i64) = self
            .eval(
                "issue fencing token",
                &scripts::ISSUE_FENCE,
                &keys.counted(),
                &[token.as_bytes()],
            )
            .await?;
        match issued {
            1 => Ok(Ok(fencing_token(value)?)),
            0 => Ok(Err(Ownership::Expired)),
            -1 => Ok(Err(Ownership::HeldByOther)),
            other => Err(Error::Protocol(format!(
                "issue fence script returned {other}"
            ))),
        }
    }

    /// Compare-and-delete; publishes a wake-up on success if a waiter marked
    /// the token.
    pub(crate) async fn release_once(self, keys: &LockKeys, token: &str) -> Result<Ownership> {
        if keys.fair.is_some() {
            // Boxed: every release's future would carry the fair one.
            return Box::pin(self.fair_release(keys, token, None)).await;
        }
        let args = keys.release_args(token.as_bytes(), self.publish_command());
        let (script_keys, n_keys) = keys.release_keys();
        let outcome: i64 = self
            .eval("release", &scripts::RELEASE, &script_keys[..n_keys], &args)
            .await?;
        ownership("release", outcome)
    }

    /// [`Client::release_once`] sent as the whole script (`EVAL`), for a
    /// release that cleans up after a failure or a cancellation: it takes
    /// effect in one request even when the script cache is empty and the
    /// replies are being lost.
    pub(crate) async fn release_whole(self, keys: &LockKeys, token: &str) -> Result<Ownership> {
        if keys.fair.is_some() {
            // A fair lock hands itself on: its own script (EVALSHA).
            return self.fair_release(keys, token, None).await;
        }
        let mut eval = redis::cmd("EVAL");
        let (script_keys, n_keys) = keys.release_keys();
        let args = keys.release_args(token.as_bytes(), self.publish_command());
        eval.arg(scripts::RELEASE_BODY)
            .arg(n_keys)
            .arg(&script_keys[..n_keys])
            .arg(&args[..]);
        let outcome: i64 = self.query("release", eval, &keys.key).await?;
        ownership("release", outcome)
    }
}

/// What `release.lua` or `extend.lua` (`script`) found: `1` ours, `0`
/// expired, `-1` someone else's.
pub(crate) fn ownership(script: &str, outcome: i64) -> Result<Ownership> {
    match outcome {
        1 => Ok(Ownership::Owned),
        0 => Ok(Ownership::Expired),
        -1 => Ok(Ownership::HeldByOther),
        other => Err(Error::Protocol(format!("{script} script returned {other}"))),
    }
}

impl Single<'_> {
    /// Compare-and-pexpire. On success also returns the new validity
    /// deadline. `batch_by`: see `Session::eval_renewal`; the deadline
    /// counts from before the renewal waited in a batch (earlier than it
    /// left: on the safe side).
    pub(crate) async fn extend_once(
        self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> Renewal {
        let sent = Instant::now();
        let ttl_arg = ttl_ms(ttl).to_string();
        let outcome: i64 = self
            .eval_renewal(
                "extend",
                &scripts::EXTEND,
                &[&keys.key],
                &[token.as_bytes(), ttl_arg.as_bytes()],
                batch_by,
            )
            .await?;
        Ok((
            ownership("extend", outcome)?,
            crate::vocab::names::valid_until(sent, ttl),
        ))
    }
}

fn fencing_token(value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Protocol(format!("negative fencing token {value}")))
}
