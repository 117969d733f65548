//! Whether the cluster subscriber's channels are really heard at their
//! slots' owners (see `sharded.rs`). After the primary that owned a slot is
//! killed, redis-rs may answer a re-`SSUBSCRIBE` routed to the dead node
//! with success (it keeps the subscription to replay when it reconnects to
//! that node, which never comes back) and, routing nothing else there,
//! never learns that the slot has a new owner: the waiters would go deaf.
//! So after a node is lost the actor asks each slot's
//! owner, `PUBSUB SHARDNUMSUB`, until every wanted channel has a
//! subscriber there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::registry::Topic;

/// True when the primary that owns each channel's slot counts at least one
/// subscriber of it (ours, or another client's: the count does not say
/// whose; a channel nobody else listens to is ours). False when one has
/// none, or its owner cannot be reached. A server that refuses the check
/// (an ACL user without `pubsub|shardnumsub`, which `docs/security.md`
/// adds for a cluster but `latchkey::acl`'s rule, the same on every
/// deployment, leaves out) cannot tell: taken as heard, as before this
/// check existed.
pub(super) async fn all_heard(
    conn: &ClusterConnection,
    topics: &[Arc<Topic>],
    timeout: Duration,
) -> bool {
    let each = topics.iter().map(|topic| {
        let mut conn = conn.clone();
        let channel = topic.bytes().to_vec();
        async move {
            let mut cmd = redis::cmd("PUBSUB");
            cmd.arg("SHARDNUMSUB").arg(&channel);
            let owner = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                Route::with_key(&channel, SlotAddr::Master),
            ));
            // A refusal comes back as a value: made an error first.
            let asked = tokio::time::timeout(timeout, conn.route_command(cmd, owner))
                .await
                .map(|reply| reply.and_then(redis::Value::extract_error));
            let reply = match asked {
                Ok(Ok(reply)) => reply,
                Ok(Err(e))
                    if matches!(
                        e.kind(),
                        redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
                    ) =>
                {
                    return true
                }
                _ => return false,
            };
            let counts: HashMap<Vec<u8>, i64> = match redis::from_redis_value(reply) {
                Ok(counts) => counts,
                Err(_) => return false,
            };
            counts.get(&channel).is_some_and(|n| *n >= 1)
        }
    });
    futures_util::future::join_all(each)
        .await
        .into_iter()
        .all(|heard| heard)
}
