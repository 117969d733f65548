//! The tracing spans: acquire / wait / renew / release, each with the lock
//! name and a short prefix of the owner token, captured by a small layer.
//!
//! A binary of its own, apart from `tests/suite`: tracing caches whether a
//! span's call site is wanted across threads, and tests on other threads
//! (without a subscriber) hitting the same call sites while this one's
//! thread-local subscriber is set made it miss a span now and then.

#[path = "../suite/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey::Ownership;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use common::{client, RedisServer};

/// A closed span: its name and fields.
type Closed = (String, BTreeMap<String, String>);

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Collects every latchkey span, with its fields, when it closes.
struct Capture(Arc<Mutex<Vec<Closed>>>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let mut extensions = span.extensions_mut();
        values.record(extensions.get_mut::<Fields>().unwrap());
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).unwrap();
        if !span.metadata().target().starts_with("latchkey") {
            return;
        }
        let fields = span.extensions_mut().remove::<Fields>().unwrap_or_default();
        self.0
            .lock()
            .unwrap()
            .push((span.name().to_owned(), fields.0));
    }
}

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Runs `test` on a current-thread runtime, capturing every latchkey span.
fn captured<T>(test: impl std::future::Future<Output = T>) -> (T, Vec<Closed>) {
    let closed = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Capture(closed.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = tracing::subscriber::with_default(subscriber, || runtime.block_on(test));
    let closed = closed.lock().unwrap().clone();
    (result, closed)
}

#[test]
fn each_operation_has_a_span_with_the_name_and_a_token_prefix() {
    let server = RedisServer::start();
    let ((first, second), mut closed) = captured(async {
        {
            let client = client(&server.url()).await;
            let lock = client.lock("spans", Duration::from_secs(10)).unwrap();
            let guard = lock.try_acquire().await.unwrap().unwrap();
            let first = guard.token()[..12].to_owned();
            let waiter = tokio::spawn({
                let lock = lock.clone();
                async move { lock.acquire_until(Duration::from_secs(5)).await }
            });
            let _ = guard.extend(Duration::from_secs(10)).await.unwrap();
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
            let guard = waiter.await.unwrap().unwrap();
            let second = guard.token()[..12].to_owned();
            assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
            (first, second)
        }
    });
    assert!(first.starts_with("lk2:") && second.starts_with("lk2:"));
    let lock = ("lock", "spans");
    let kind = ("kind", "lock");
    // The first release's reply and the waiter's attempt (pipelined right
    // behind it) arrive together, so which span closes first is up to the
    // scheduler: compare as sets. Each operation has its one span.
    closed.sort();
    let mut expected: Vec<_> = vec![
        ("acquire".into(), fields(&[kind, lock, ("token", &first)])),
        ("renew".into(), fields(&[kind, lock, ("token", &first)])),
        ("release".into(), fields(&[kind, lock, ("token", &first)])),
        ("wait".into(), fields(&[kind, lock, ("token", &second)])),
        ("acquire".into(), fields(&[kind, lock, ("token", &second)])),
        ("release".into(), fields(&[kind, lock, ("token", &second)])),
    ];
    expected.sort();
    assert_eq!(closed, expected);
}

#[test]
fn every_primitive_has_the_same_spans_with_its_kind() {
    let server = RedisServer::start();
    let (tokens, mut closed) = captured(async {
        let client = client(&server.url()).await;
        let ttl = Duration::from_secs(10);
        let sem = client.semaphore("s", 1, ttl).unwrap();
        let permit = sem.try_acquire().await.unwrap().unwrap();
        let s = permit.token()[..12].to_owned();
        assert_eq!(permit.extend(sem.ttl()).await.unwrap(), Ownership::Owned);
        assert_eq!(permit.release().await.unwrap(), Ownership::Owned);
        let read = client
            .rwlock("rw", ttl)
            .unwrap()
            .read_until(ttl)
            .await
            .unwrap();
        let r = read.token()[..12].to_owned();
        assert_eq!(read.release().await.unwrap(), Ownership::Owned);
        let leader = client
            .election("e", ttl)
            .unwrap()
            .campaign("a")
            .await
            .unwrap();
        let e = leader.token()[..12].to_owned();
        assert_eq!(leader.resign().await.unwrap(), Ownership::Owned);
        let latch = client.latch("l", ttl).unwrap();
        assert!(latch.create(1).await.unwrap());
        assert_eq!(latch.count_down().await.unwrap(), 0);
        latch.wait_until(ttl).await.unwrap();
        let barrier = client.barrier("b", 1, ttl).unwrap();
        barrier.arrive_and_wait_until(ttl).await.unwrap();
        [s, r, e]
    });
    let [s, r, e] = tokens;
    closed.sort();
    let mut expected: Vec<Closed> = vec![
        (
            "acquire",
            fields(&[("kind", "semaphore"), ("lock", "s"), ("token", &s)]),
        ),
        (
            "renew",
            fields(&[("kind", "semaphore"), ("lock", "s"), ("token", &s)]),
        ),
        (
            "release",
            fields(&[("kind", "semaphore"), ("lock", "s"), ("token", &s)]),
        ),
        (
            "acquire",
            fields(&[("kind", "rwlock"), ("lock", "rw"), ("token", &r)]),
        ),
        (
            "wait",
            fields(&[("kind", "rwlock"), ("lock", "rw"), ("token", &r)]),
        ),
        (
            "release",
            fields(&[("kind", "rwlock"), ("lock", "rw"), ("token", &r)]),
        ),
        (
            "acquire",
            fields(&[("kind", "election"), ("lock", "e"), ("token", &e)]),
        ),
        (
            "wait",
            fields(&[("kind", "election"), ("lock", "e"), ("token", &e)]),
        ),
        (
            "release",
            fields(&[("kind", "election"), ("lock", "e"), ("token", &e)]),
        ),
        ("count_down", fields(&[("kind", "latch"), ("lock", "l")])),
        ("acquire", fields(&[("kind", "latch"), ("lock", "l")])),
        ("wait", fields(&[("kind", "latch"), ("lock", "l")])),
        ("acquire", fields(&[("kind", "barrier"), ("lock", "b")])),
        ("wait", fields(&[("kind", "barrier"), ("lock", "b")])),
    ]
    .into_iter()
    .map(|(name, fields)| (name.to_owned(), fields))
    .collect();
    expected.sort();
    assert_eq!(closed, expected);
}
