//! The single-instance backend: one lock lives on one Redis server.

use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::lock::{Attempt, Extend, Release};
use crate::names::{drift, ttl_ms, LockKeys};
use crate::scripts;

impl Client {
    /// One acquire attempt: `SET NX PX` plus the fencing token, in one script.
    pub(crate) async fn try_once(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
    ) -> Result<Attempt> {
        let sent = Instant::now();
        let ttl_arg = ttl_ms(ttl).to_string();
        let (acquired, value): (i64, i64) = self
            .eval(
                "acquire",
                &scripts::ACQUIRE,
                &[&keys.key, &keys.fence_key],
                &[token.as_bytes(), ttl_arg.as_bytes()],
            )
            .await?;
        match acquired {
            1 => Ok(Attempt::Acquired {
                fencing_token: u64::try_from(value)
                    .map_err(|_| Error::Protocol(format!("negative fencing token {value}")))?,
                valid_until: sent + ttl - drift(ttl),
            }),
            0 => Ok(Attempt::Busy {
                retry_in: u64::try_from(value).ok().map(Duration::from_millis),
            }),
            other => Err(Error::Protocol(format!("acquire script returned {other}"))),
        }
    }

    /// Compare-and-delete; publishes a wake-up on success.
    pub(crate) async fn release_once(&self, keys: &LockKeys, token: &str) -> Result<Release> {
        let outcome: i64 = self
            .eval(
                "release",
                &scripts::RELEASE,
                &[&keys.key],
                &[token.as_bytes(), &keys.channel],
            )
            .await?;
        match outcome {
            1 => Ok(Release::Released),
            0 => Ok(Release::Expired),
            -1 => Ok(Release::HeldByOther),
            other => Err(Error::Protocol(format!("release script returned {other}"))),
        }
    }

    /// Compare-and-pexpire. On success also returns the new validity deadline.
    pub(crate) async fn extend_once(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
    ) -> Result<(Extend, Instant)> {
        let sent = Instant::now();
        let ttl_arg = ttl_ms(ttl).to_string();
        let outcome: i64 = self
            .eval(
                "extend",
                &scripts::EXTEND,
                &[&keys.key],
                &[token.as_bytes(), ttl_arg.as_bytes()],
            )
            .await?;
        let valid_until = sent + ttl - drift(ttl);
        match outcome {
            1 => Ok((Extend::Extended, valid_until)),
            0 => Ok((Extend::Expired, valid_until)),
            -1 => Ok((Extend::HeldByOther, valid_until)),
            other => Err(Error::Protocol(format!("extend script returned {other}"))),
        }
    }
}
