//! The subscriber against a real redis-server: keyed delivery.

use std::time::Duration;

use latchkey_testkit::RedisServer;

use super::{Event, Subscriber, Subscription, Topic, EVENT_BUFFER};
use crate::transport::sentinel::Source;
use crate::transport::tls::server_name::Target;

async fn payload(subscription: &mut Subscription) -> String {
    match tokio::time::timeout(Duration::from_secs(10), subscription.recv()).await {
        Ok(Event::Message(m)) => String::from_utf8_lossy(&m.payload).into_owned(),
        Ok(Event::Resubscribed) => panic!("resubscribed"),
        Err(_) => panic!("no message within 10 s"),
    }
}

/// A client of `server`, and a subscriber connected to it.
fn subscriber_of(server: &RedisServer) -> (redis::Client, Subscriber) {
    let client = redis::Client::open(server.url()).unwrap();
    let source = Source::Fixed(Box::new(Target::plain(client.clone())));
    let subscriber = Subscriber::start(source, Duration::from_secs(5), Duration::from_secs(30));
    (client, subscriber)
}

fn topic() -> Topic {
    Topic::Channel(b"handoffs".to_vec())
}

/// Nothing is waiting in `subscription` now.
async fn nothing_more(subscription: &mut Subscription) {
    let next = tokio::time::timeout(Duration::ZERO, subscription.recv()).await;
    assert!(next.is_err(), "a message it was not named in");
}

#[tokio::test]
async fn a_keyed_subscription_gets_only_the_messages_that_name_it() {
    let server = RedisServer::start();
    let (client, subscriber) = subscriber_of(&server);
    let mut subscriptions = subscriber
        .subscribe_keyed(vec![
            (topic(), EVENT_BUFFER, Some(b"a".to_vec())),
            (topic(), EVENT_BUFFER, Some(b"b".to_vec())),
            (topic(), EVENT_BUFFER, None),
        ])
        .await
        .unwrap();
    let mut all = subscriptions.pop().unwrap();
    let mut b = subscriptions.pop().unwrap();
    let mut a = subscriptions.pop().unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut publish = async |payload: &str| {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("handoffs")
            .arg(payload)
            .query_async(&mut conn)
            .await
            .unwrap();
    };
    for p in ["b:1", "a:2", "ab:3", "b"] {
        publish(p).await;
    }
    // The one that takes every message got them all, so every message has
    // been handed out (the keyed ones first).
    for p in ["b:1", "a:2", "ab:3", "b"] {
        assert_eq!(payload(&mut all).await, p);
    }
    assert_eq!(payload(&mut a).await, "a:2");
    nothing_more(&mut a).await;
    assert_eq!(payload(&mut b).await, "b:1");
    assert_eq!(payload(&mut b).await, "b");
    nothing_more(&mut b).await;

    // Keyed again: only the new key's messages from then on.
    a.set_key(b"ab");
    drop(b);
    for p in ["a:4", "b:5", "ab:6"] {
        publish(p).await;
    }
    for p in ["a:4", "b:5", "ab:6"] {
        assert_eq!(payload(&mut all).await, p);
    }
    assert_eq!(payload(&mut a).await, "ab:6");
    nothing_more(&mut a).await;
}

#[tokio::test]
async fn a_keyed_subscription_hears_a_reconnection() {
    // Messages published while the connection was down are lost: every
    // subscription, keyed or not, is told, so that a fair waiter looks.
    let server = RedisServer::start();
    let (_, subscriber) = subscriber_of(&server);
    let mut subscriptions = subscriber
        .subscribe_keyed(vec![
            (topic(), EVENT_BUFFER, Some(b"a".to_vec())),
            (topic(), EVENT_BUFFER, None),
        ])
        .await
        .unwrap();
    let mut all = subscriptions.pop().unwrap();
    let mut a = subscriptions.pop().unwrap();
    server
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .expect("CLIENT KILL");
    for subscription in [&mut a, &mut all] {
        let event = tokio::time::timeout(Duration::from_secs(10), subscription.recv()).await;
        assert!(
            matches!(event, Ok(Event::Resubscribed)),
            "not told of the reconnection: {event:?}"
        );
    }
}
