//! What an [`Election`](crate::Election) is (layer 4), shared by the
//! recipe, its leaderships and observers: its keys, and the reads every one
//! of them needs (the leader, the change messages).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::primitives::lease::options::LeaseOptions;
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::kind::Kind;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{check_primitive, LockKeys};
use crate::vocab::protocol::scripts;

/// What an [`Election`] is, shared with its leaderships and observers.
#[derive(Clone)]
pub struct ElectionSpec {
    pub(crate) session: Session,
    pub(crate) name: Arc<[u8]>,
    /// `key`: the lease; `fence_key`: the state hash; `channel`: changes.
    pub(crate) keys: Arc<LockKeys>,
    /// TTL, cap, margin; the watchdog always renews (every `ttl / 3`
    /// unless [`Election::with_renewal_every`](crate::Election::with_renewal_every)
    /// says otherwise); the term is the fencing token, issued with the hold.
    pub(crate) lease: LeaseOptions,
    pub(crate) metrics_label: LockLabel,
}

impl ElectionSpec {
    pub(crate) fn display_name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    pub(crate) fn state_key(&self) -> &[u8] {
        &self.keys.fence_key
    }

    /// Checks the name and TTL and computes the keys.
    pub(crate) fn new(session: &Session, name: &[u8], ttl: Duration) -> Result<ElectionSpec> {
        check_primitive(session.prefix(), session.is_cluster(), name, ttl)?;
        let stem = crate::vocab::protocol::tag_stem(&[session.prefix(), name].concat());
        let keys = LockKeys {
            key: [&stem[..], crate::vocab::protocol::ELECTION_LEASE_SUFFIX].concat(),
            fence_key: [&stem[..], crate::vocab::protocol::ELECTION_STATE_SUFFIX].concat(),
            channel: [&stem[..], crate::vocab::protocol::ELECTION_CHANGES_SUFFIX].concat(),
            wake: Vec::new(),
            wake_len: 0,
            fair: None,
        };
        Ok(ElectionSpec {
            metrics_label: LockLabel::new(&session.inner.metrics_labels, Kind::Election, name),
            session: session.clone(),
            name: Arc::from(name),
            keys: Arc::new(keys),
            lease: LeaseOptions {
                renew_every: Some(ttl / 3),
                fenced: true,
                ..LeaseOptions::new(ttl)
            },
        })
    }

    /// Reads the leader, the change counter and the lease's TTL atomically.
    pub(crate) async fn read(&self) -> Result<Reading> {
        let reply: Vec<redis::Value> = self
            .session
            .eval(
                "leader",
                &scripts::ELECT_LEADER,
                &[&self.keys.key, self.state_key()],
                &[],
            )
            .await
            .map_err(wrong_type(self))?;
        let bad = || Error::Protocol(format!("leader script returned {reply:?}"));
        let int = |i: usize| match reply.get(i) {
            Some(redis::Value::Int(n)) => Ok(*n),
            _ => Err(bad()),
        };
        let change = non_negative(int(1)?, "change counter")?;
        let lease = |pttl: i64| u64::try_from(pttl).ok().map(Duration::from_millis);
        match int(0)? {
            1 => {
                let value = match reply.get(5) {
                    Some(redis::Value::BulkString(v)) => v.clone(),
                    _ => return Err(bad()),
                };
                Ok(Reading {
                    leader: Some(Leader {
                        value,
                        term: non_negative(int(2)?, "term")?,
                        since: SystemTime::UNIX_EPOCH
                            + Duration::from_millis(non_negative(int(3)?, "since")?),
                        change,
                    }),
                    change,
                    lease_left: lease(int(4)?),
                })
            }
            0 => Ok(Reading {
                leader: None,
                change,
                lease_left: None,
            }),
            -1 => Ok(Reading {
                leader: None,
                change,
                lease_left: lease(int(2)?),
            }),
            _ => Err(bad()),
        }
    }
}

/// The leader of an election, as read from Redis.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let election = client.election("scheduler", Duration::from_secs(10))?;
/// if let Some(leader) = election.leader().await? {
///     println!("{} leads, term {}", leader.value_lossy(), leader.term);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The value the leader campaigned with, or proclaimed since.
    pub value: Vec<u8>,
    /// The leader's term: greater than every earlier leader's (a fencing token).
    pub term: u64,
    /// When it was elected (the server's clock, millisecond precision).
    pub since: SystemTime,
    /// The election's change counter when this was read or announced.
    pub change: u64,
}

impl Leader {
    /// The value, lossily decoded as UTF-8.
    pub fn value_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.value)
    }

    /// Same leader, same value (the change counter aside).
    pub(crate) fn same_as(&self, other: &Leader) -> bool {
        self.term == other.term && self.value == other.value
    }
}

/// One read of an election: the leader (if any), the change counter, and
/// how long the leader's lease has left.
pub(crate) struct Reading {
    pub(crate) leader: Option<Leader>,
    pub(crate) change: u64,
    pub(crate) lease_left: Option<Duration>,
}

/// A WRONGTYPE from an election's script names the first key; either may
/// be the culprit.
pub(crate) fn wrong_type(spec: &ElectionSpec) -> impl Fn(Error) -> Error + '_ {
    move |e| match e {
        Error::WrongType { .. } => Error::WrongType {
            key: format!(
                "{} or {}",
                String::from_utf8_lossy(&spec.keys.key),
                String::from_utf8_lossy(spec.state_key())
            ),
        },
        other => other,
    }
}

pub(crate) fn non_negative(n: i64, what: &str) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::Protocol(format!("negative {what} {n}")))
}

/// A leader as announced by a change message, with how long its lease had
/// left then.
pub(crate) type Announced = (Leader, Option<Duration>);

/// Parses a change message: `<change> -` (nobody leads) or
/// `<change> <term> <since_ms> <lease_ms> <value>` (`lease_ms`: how long the
/// leader's lease had left when it was sent; negative: no TTL). `None` for
/// anything else.
pub(crate) fn parse_change(payload: &[u8]) -> Option<(u64, Option<Announced>)> {
    let mut parts = payload.splitn(5, |&b| b == b' ');
    fn number<T: std::str::FromStr>(p: Option<&[u8]>) -> Option<T> {
        std::str::from_utf8(p?).ok()?.parse().ok()
    }
    let change = number(parts.next())?;
    let second = parts.next()?;
    if second == b"-" {
        return parts.next().is_none().then_some((change, None));
    }
    let term = number(Some(second))?;
    let since = number(parts.next())?;
    let lease: i64 = number(parts.next())?;
    let value = parts.next()?.to_vec();
    let leader = Leader {
        value,
        term,
        since: SystemTime::UNIX_EPOCH + Duration::from_millis(since),
        change,
    };
    Some((
        change,
        Some((leader, u64::try_from(lease).ok().map(Duration::from_millis))),
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_change;

    #[test]
    fn change_messages_parse() {
        let (change, leader) = parse_change(b"7 100 5 900 host a:1").unwrap();
        assert_eq!(change, 7);
        let (leader, lease) = leader.unwrap();
        assert_eq!((leader.term, &leader.value[..]), (100, &b"host a:1"[..]));
        assert_eq!(lease, Some(std::time::Duration::from_millis(900)));
        assert_eq!(parse_change(b"8 -").unwrap(), (8, None));
        let (_, empty) = parse_change(b"9 1 2 -1 ").unwrap();
        let (empty, lease) = empty.unwrap();
        assert_eq!((&empty.value[..], lease), (&b""[..], None));
        for bad in [
            &b""[..],
            b"x -",
            b"1",
            b"1 - extra",
            b"1 2 3",
            b"1 2 3 4",
            b"-1 -",
        ] {
            assert!(
                parse_change(bad).is_none(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
