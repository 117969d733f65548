//! The conformance check: the models of `latchkey_sim::model` send what
//! the real library sends. For each operation of a primitive the library
//! runs against a real `redis-server` (the test kit's, the server
//! `LATCHKEY_TEST_SERVER` names), a second connection records with
//! `MONITOR` what arrived; each model declares what it sends for the same
//! operation, from the code its steps send with
//! (`latchkey_sim::model::conform::Conforms`). Both are reduced to shapes
//! (the script by SHA-1, the KEYS' and ARGV's shapes) and must be equal: a
//! script's argument changed in the library or in the model, and not in
//! the other, fails here.

#[path = "conformance/configs.rs"]
mod configs;
#[path = "conformance/count.rs"]
mod count;
#[path = "conformance/elect.rs"]
mod elect;
#[path = "conformance/fair.rs"]
mod fair;
#[path = "conformance/lock.rs"]
mod lock;
#[path = "conformance/models.rs"]
mod models;
#[path = "conformance/monitor.rs"]
mod monitor;
#[path = "conformance/multi.rs"]
mod multi;
#[path = "conformance/others.rs"]
mod others;
#[path = "conformance/signal.rs"]
mod signal;
#[path = "conformance/tables.rs"]
mod tables;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use latchkey::protocol::script_text;
use latchkey::{Client, Ownership};
use latchkey_sim::model::common::Faults;
use latchkey_sim::model::conform::{Conforms, Scripts, Sent};
use latchkey_sim::model::lock::{Config, LockModel};
use latchkey_sim::model::rwlock::{Access, RwLockModel};
use latchkey_sim::model::semaphore::SemaphoreModel;
use latchkey_testkit::RedisServer;

use monitor::Recorder;

/// Every script of the library, by file name (`src/scripts/*.lua`).
fn script_files() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../latchkey/src/scripts");
    std::fs::read_dir(dir)
        .expect("the library's scripts folder")
        .map(|e| {
            e.expect("a folder entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".lua"))
        .collect()
}

/// A model configuration; only what decides the requests matters here.
fn lock_model(fenced: bool) -> LockModel {
    LockModel::new(Config {
        clients: 2,
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(16),
        max_faults: 0,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the model's scripts load")
}

/// A client of `server` whose session has run a script (a client's very
/// first try is the acquire script, which the models do not model).
async fn used_client(server: &RedisServer) -> Client {
    let client = Client::connect(&server.url()).await.expect("connect");
    let warm = client
        .lock("conform-warm-up", Duration::from_secs(5))
        .expect("lock");
    if let Some(guard) = warm.try_acquire().await.expect("warm-up try") {
        assert_eq!(
            guard.release().await.expect("warm-up release"),
            Ownership::Owned
        );
    }
    client
}

/// Compares a model's declared operations with what the library sent for
/// them: every recorded request of an operation must have the model's
/// shape. Returns the differences, and the operations compared.
fn compare(
    what: &str,
    scripts: &Scripts,
    model: &dyn Conforms,
    library: &BTreeMap<&'static str, Vec<lock::Recorded>>,
) -> (Vec<String>, BTreeSet<&'static str>) {
    let mut differences = Vec::new();
    let mut compared = BTreeSet::new();
    for declared in model.declared() {
        let Some(recorded) = library.get(declared.op) else {
            continue;
        };
        let expected = scripts.shape(&declared.request, &declared.roles);
        let text = |words: &[Vec<u8>]| -> Vec<String> {
            words
                .iter()
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect()
        };
        for r in recorded {
            let sent: Option<Sent> = scripts.shape_words(&r.words, &r.roles);
            if sent.as_ref() != Some(&expected) {
                differences.push(format!(
                    "{what}, {}:\n  the model sends   {expected:?}\n  the library sent  {sent:?}\n  (the library: {:?}; the model: {} {:?} {:?})",
                    declared.op,
                    text(&r.words),
                    declared.request.name,
                    text(&declared.request.keys),
                    declared.request.args
                ));
            }
        }
        compared.insert(declared.op);
    }
    (differences, compared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_model_sends_what_the_library_sends() {
    let started = Instant::now();
    let server = RedisServer::start();
    let files = script_files();
    let scripts = Scripts::new(files.iter().map(String::as_str));
    let texts = files.iter().filter_map(|f| script_text(f));
    monitor::load_scripts(server.addr(), texts).expect("SCRIPT LOAD the library's scripts");
    let holder = used_client(&server).await;
    let waiter = used_client(&server).await;
    let mut recorder = Recorder::start(server.addr()).expect("MONITOR the test's server");
    let mut differences = Vec::new();
    for fenced in [false, true] {
        let mut library = lock::record(&mut recorder, &holder, &waiter, fenced).await;
        library.extend(lock::record_lost_reply(&mut recorder, &server, fenced).await);
        let model = lock_model(fenced);
        let what = if fenced {
            "a lock made with_fencing"
        } else {
            "a plain lock"
        };
        let (found, compared) = compare(what, &scripts, &model, &library);
        differences.extend(found);
        // Every operation the model sends something for is compared, but,
        // fenced, the token's issue (the acquisition issued it).
        let declared: BTreeSet<&str> = model.declared().iter().map(|d| d.op).collect();
        let mut not_driven = BTreeSet::new();
        if fenced {
            not_driven.insert("issue fencing token");
        }
        let missing: Vec<&&str> = declared
            .difference(&compared)
            .filter(|op| !not_driven.contains(*op))
            .collect();
        assert!(
            missing.is_empty(),
            "{what}: the library's operations {missing:?} were not driven"
        );
        let unknown: Vec<&&str> = library
            .keys()
            .filter(|op| !declared.contains(*op))
            .collect();
        assert!(
            unknown.is_empty(),
            "{what}: the model declares no {unknown:?}"
        );
    }
    assert!(
        differences.is_empty(),
        "the model and the library send different requests:\n{}",
        differences.join("\n")
    );
    eprintln!(
        "conformance: the plain lock, fenced and not, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A semaphore model (N = 3, as the library's side uses) whose clients
/// take `takes`.
fn semaphore_model(fenced: bool, takes: Vec<u32>) -> SemaphoreModel {
    SemaphoreModel::new(latchkey_sim::model::semaphore::Config {
        permits: 3,
        takes,
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(10),
        max_faults: 0,
        fenced,
        watchdog: true,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the semaphore model")
}

/// A read-write lock model of a reader and a writer that may give up.
fn rwlock_model(fenced: bool) -> RwLockModel {
    RwLockModel::new(latchkey_sim::model::rwlock::Config {
        roles: vec![Access::Read, Access::Write],
        holds: 1,
        ttl: 10,
        tick: 2,
        max_time: Some(10),
        max_faults: 0,
        fenced,
        watchdog: true,
        give_up: true,
        faults: Faults::ALL,
        mutant: None,
    })
    .expect("the read-write lock model")
}

/// Each request `model` declares (but for the operations `not_driven`)
/// must be one the library sent: the model sends nothing the library does
/// not. The differences, each a line.
fn within(
    what: &str,
    scripts: &Scripts,
    model: &dyn Conforms,
    sent: &[(Sent, lock::Recorded)],
    not_driven: &[&str],
) -> Vec<String> {
    model
        .declared()
        .into_iter()
        .filter(|d| !not_driven.contains(&d.op))
        .filter_map(|d| {
            let shape = scripts.shape(&d.request, &d.roles);
            (!sent.iter().any(|(s, _)| *s == shape)).then(|| {
                format!(
                    "{what}, {}: the library sent no {shape:?}\n  (the model: {} {:?})",
                    d.op, d.request.name, d.request.args
                )
            })
        })
        .collect()
}

/// The other primitives: the semaphore and the read-write lock against
/// `tables.rs` (and their models' requests within what the library sent);
/// the fair lock, several locks at once with a lock kept while idle, the
/// election, the latch and the barrier against their models, both ways
/// (`models::check`); a fresh client's lock against `tables.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_sends_the_declared_shapes_of_the_other_primitives() {
    let started = Instant::now();
    let server = RedisServer::start();
    let files = script_files();
    let scripts = Scripts::new(files.iter().map(String::as_str));
    let texts = files.iter().filter_map(|f| script_text(f));
    monitor::load_scripts(server.addr(), texts).expect("SCRIPT LOAD the library's scripts");
    let a = used_client(&server).await;
    let b = used_client(&server).await;
    let mut recorder = Recorder::start(server.addr()).expect("MONITOR the test's server");
    let mut differences = Vec::new();
    let log = others::semaphore(&scripts, &mut recorder, &a, &b).await;
    differences.extend(tables::check("a semaphore", tables::SEMAPHORE, &log.sent));
    // And the semaphore model sends only what the library sent (holds of 1
    // and 2, fenced at the acquire and on demand).
    for (fenced, takes) in [(false, vec![1, 2]), (true, vec![1])] {
        let model = semaphore_model(fenced, takes);
        let not_driven = ["renew many"];
        differences.extend(within(
            "the semaphore model",
            &scripts,
            &model,
            &log.sent,
            &not_driven,
        ));
    }
    let log = others::rwlock(&scripts, &mut recorder, &a, &b).await;
    differences.extend(tables::check(
        "a read-write lock",
        tables::RWLOCK,
        &log.sent,
    ));
    // And the read-write lock model sends only what the library sent
    // (readers and writers, waiting and giving up, fenced and not).
    for fenced in [false, true] {
        let model = rwlock_model(fenced);
        differences.extend(within(
            "the read-write lock model",
            &scripts,
            &model,
            &log.sent,
            &[],
        ));
    }
    let log = fair::record(&scripts, &mut recorder, &server, &a, &b).await;
    // The library's side of a revocation is not driven (`Client::revoke`
    // revokes a name kind by kind).
    differences.extend(models::check(
        "the fair lock model",
        &scripts,
        &configs::fair_model(),
        &log.sent,
        &["revoke"],
    ));
    let log = multi::record_all(&scripts, &mut recorder, &a, &b).await;
    let mut sent = log.sent;
    let (log, ask) = multi::record_kept(&scripts, &mut recorder, &a, &b).await;
    sent.extend(log.sent);
    let ask_shape = scripts
        .shape_words(&ask.words, &ask.roles)
        .expect("a well-formed PUBLISH");
    sent.push((ask_shape, ask));
    // The library's plain lock here is the waiter for the kept hold: its
    // own renewal is not driven (the lock model's check drives it), nor is
    // a keeper waiting (a plain waiter's shape, with a caching token).
    differences.extend(models::check(
        "the several-names model",
        &scripts,
        &configs::multi_model(),
        &sent,
        &["renew", "keeper's waiter's try"],
    ));
    let log = elect::record(&scripts, &mut recorder, &a, &b).await;
    differences.extend(models::check(
        "the election model",
        &scripts,
        &configs::election_model(),
        &log.sent,
        &[],
    ));
    let log = count::latch(&scripts, &mut recorder, &a, &b).await;
    differences.extend(models::check(
        "the latch model",
        &scripts,
        &configs::latch_model(),
        &log.sent,
        &[],
    ));
    let log = count::barrier(&scripts, &mut recorder, &a, &b).await;
    // A waiting party's recheck of the generation comes only when its
    // wake-up is late (timing): not driven.
    differences.extend(models::check(
        "the barrier model",
        &scripts,
        &configs::barrier_model(),
        &log.sent,
        &["recheck"],
    ));
    let sent = signal::record(&scripts, &mut recorder, &a).await;
    differences.extend(models::check(
        "the signals model",
        &scripts,
        &configs::signal_model(),
        &sent,
        &[],
    ));
    let log = others::fresh_lock(&scripts, &mut recorder, &server.url()).await;
    differences.extend(tables::check(
        "a fresh client's lock",
        tables::FRESH_LOCK,
        &log.sent,
    ));
    assert!(
        differences.is_empty(),
        "the library sends what its tables or models do not say:\n{}",
        differences.join("\n")
    );
    eprintln!(
        "conformance: the semaphore, read-write lock, fair lock, lock_all and kept lock, \
         election, latch, barrier, signals and fresh client in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
