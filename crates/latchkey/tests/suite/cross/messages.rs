//! Messages say things as a user would: the name a user gave, not the
//! library's function names.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::Error;

#[tokio::test]
async fn a_lock_named_twice_is_said_in_the_users_words() {
    let redis = RedisServer::start();
    let c = client(&redis.url()).await;
    let Err(Error::InvalidInput(message)) = c.lock_all(&["du", "df", "du"], Duration::from_secs(5))
    else {
        panic!("a lock named twice is refused");
    };
    assert!(message.contains("\"du\" is named twice"), "{message}");
    assert!(!message.contains("lock_all"), "library words: {message}");
}
