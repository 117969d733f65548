//! Failed commands, counted by the kind of their error (its code, in lower
//! case).

use std::collections::BTreeMap;
use std::time::Duration;

use latchkey::metrics as m;
use latchkey::MetricsLabels;
use redis::AsyncCommands;

use super::common::{raw, RedisServer};
use crate::common::recorded::{client_with, recorded, Recorded};

#[test]
fn a_failed_command_is_counted_by_the_kind_of_its_error() {
    let server = RedisServer::start();
    recorded(|snapshotter| async move {
        let client = client_with(&server.url(), MetricsLabels::None).await;
        let _: () = raw(&server.url())
            .await
            .hset("test:h", "f", "v")
            .await
            .unwrap();
        let err = client
            .lock("h", Duration::from_secs(10))
            .unwrap()
            .try_acquire()
            .await;
        assert!(
            matches!(err, Err(latchkey::Error::WrongType { .. })),
            "{err:?}"
        );
        let mut rec = Recorded::default();
        rec.add(&snapshotter);
        assert_eq!(
            rec.counters_of(m::REDIS_ERRORS),
            BTreeMap::from([("latchkey_redis_errors_total{kind=wrong_type}", 1)])
        );
    });
}
