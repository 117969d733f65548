//! Tests of `RedisCluster` against real redis-server nodes, through
//! redis-rs's async cluster client where a client is needed.

use std::collections::HashSet;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use latchkey_testkit::{key_slot, ClusterNode, NodeRole, RedisCluster, SLOTS};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

/// Three primaries, no replicas: the fastest cluster, for tests that need
/// no failover.
fn three_primaries() -> RedisCluster {
    let started = Instant::now();
    let cluster = RedisCluster::builder().replicas_per_primary(0).start();
    eprintln!("3+0 cluster healthy after {:?}", started.elapsed());
    cluster
}

/// One runtime per test: a cluster connection runs a task on the runtime it
/// was made in, so it must not outlive it.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

async fn connect(cluster: &RedisCluster) -> ClusterConnection {
    ClusterClient::new(vec![cluster.seed_url()])
        .expect("a cluster client for the seed URL")
        .get_async_connection()
        .await
        .expect("a cluster connection")
}

async fn set(con: &mut ClusterConnection, key: &str, value: &str) {
    let reply: String = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(con)
        .await
        .unwrap_or_else(|e| panic!("SET {key}: {e}"));
    assert_eq!(reply, "OK");
}

async fn get(con: &mut ClusterConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(con)
        .await
        .unwrap_or_else(|e| panic!("GET {key}: {e}"))
}

fn ids(nodes: &[&ClusterNode]) -> HashSet<String> {
    nodes.iter().map(|n| n.id().to_owned()).collect()
}

fn pgrep(pattern: &str) -> String {
    let out = Command::new("pgrep")
        .args(["-a", "-f", pattern])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn keys_spread_over_the_primaries_and_are_served_through_a_cluster_client() {
    let rt = runtime();
    let cluster = three_primaries();
    assert_eq!(cluster.nodes().len(), 3);
    assert_eq!(cluster.primaries().len(), 3);
    assert!(cluster.replicas().is_empty());
    for node in cluster.nodes() {
        assert!(node.port() <= 55_535 && node.port() != 6379);
        assert_eq!(node.role(), Some(NodeRole::Primary));
        assert_eq!(node.id().len(), 40, "node id {:?}", node.id());
        assert_eq!(node.url(), format!("redis://127.0.0.1:{}/", node.port()));
    }
    assert_eq!(cluster.urls().len(), 3);
    assert!(cluster.urls().contains(&cluster.seed_url()));

    let keys: Vec<String> = (0..30).map(|i| format!("spread:{i}")).collect();
    rt.block_on(async {
        let mut con = connect(&cluster).await;
        for key in &keys {
            set(&mut con, key, &format!("v-{key}")).await;
        }
        for key in &keys {
            assert_eq!(get(&mut con, key).await, Some(format!("v-{key}")));
        }
    });

    // Each key sits on the primary `primary_for_key` names, and only there:
    // the others redirect with MOVED to it.
    let mut owners = HashSet::new();
    for key in &keys {
        let owner = cluster.primary_for_key(key);
        owners.insert(owner.id().to_owned());
        assert_eq!(owner.command(&["GET", key]).unwrap(), format!("v-{key}"));
        for other in cluster.nodes().iter().filter(|n| n.id() != owner.id()) {
            let err = other.command(&["GET", key]).unwrap_err().to_string();
            let moved = format!(
                "MOVED {} 127.0.0.1:{}",
                key_slot(key.as_bytes()),
                owner.port()
            );
            assert_eq!(err, moved);
        }
    }
    assert_eq!(owners.len(), 3, "30 keys should land on all 3 primaries");
}

#[test]
fn key_slot_matches_cluster_keyslot() {
    let cluster = three_primaries();
    let node = &cluster.nodes()[0];
    let mut keys: Vec<String> = [
        "",
        "a",
        "foo",
        "{a}b",
        "a{}b",
        "{}{a}",
        "a{b",
        "a}b{",
        "}a{b}",
        "{a}{b}",
        "{{a}}",
        "a{{b}}",
        "{}",
        "{",
        "}",
        "user:{1000}:lock",
        "{user:1000}",
        "clé{ünï}",
        "🔒",
    ]
    .map(String::from)
    .to_vec();
    keys.extend((0..300).map(|i| format!("key:{i}")));
    keys.extend((0..100).map(|i| format!("x{{tag{i}}}y{{z}}")));
    for key in &keys {
        let want: u16 = node
            .command(&["CLUSTER", "KEYSLOT", key])
            .unwrap()
            .parse()
            .expect("CLUSTER KEYSLOT returns a number");
        assert_eq!(key_slot(key.as_bytes()), want, "slot of {key:?}");
    }
    // The rule, spelled out: only a non-empty first tag counts.
    assert_eq!(key_slot(b"{a}b"), key_slot(b"a"));
    assert_ne!(key_slot(b"a{}b"), key_slot(b"b"));
    assert_ne!(key_slot(b"{}{a}"), key_slot(b"a"));
    let slots: HashSet<u16> = keys.iter().map(|k| key_slot(k.as_bytes())).collect();
    assert!(slots.iter().all(|&s| s < SLOTS));
    assert!(
        slots.len() > 300,
        "keys should hit many slots: {}",
        slots.len()
    );
}

#[test]
fn failover_promotes_the_replica_and_keeps_the_data() {
    let rt = runtime();
    let started = Instant::now();
    let cluster = RedisCluster::start();
    eprintln!("3+3 cluster healthy after {:?}", started.elapsed());
    assert_eq!(cluster.nodes().len(), 6);
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    assert_eq!(cluster.replicas().len(), 3);
    // Every primary has its own replica.
    for primary in &primaries {
        assert_eq!(cluster.replicas_of(primary).len(), 1);
    }

    let key = "{failover}fence";
    let mut con = rt.block_on(connect(&cluster));
    rt.block_on(set(&mut con, key, "41"));
    let old_primary = cluster.primary_for_key(key);
    let replica = cluster.replicas_of(old_primary)[0];

    let started = Instant::now();
    cluster.failover(replica);
    eprintln!("manual failover done after {:?}", started.elapsed());

    assert_eq!(replica.role(), Some(NodeRole::Primary));
    assert_eq!(old_primary.role(), Some(NodeRole::Replica));
    assert_eq!(cluster.primary_for_key(key).id(), replica.id());
    assert_eq!(ids(&cluster.replicas_of(replica)), ids(&[old_primary]));
    assert_eq!(replica.command(&["GET", key]).unwrap(), "41");
    // The old primary redirects now; clients old and new follow.
    let err = old_primary.command(&["GET", key]).unwrap_err().to_string();
    assert!(err.starts_with("MOVED "), "old primary answered {err:?}");
    rt.block_on(async {
        assert_eq!(
            get(&mut connect(&cluster).await, key).await.as_deref(),
            Some("41")
        );
        assert_eq!(get(&mut con, key).await.as_deref(), Some("41"));
    });
}

#[test]
fn a_killed_primary_is_replaced_by_its_replica_and_rejoins_as_a_replica() {
    let mut cluster = RedisCluster::builder()
        .node_timeout(Duration::from_millis(1000))
        .start();
    let key = "{kill}fence";
    let primary = cluster.primary_for_key(key);
    let replica_id = cluster.replicas_of(primary)[0].id().to_owned();
    // The replica has the write before its primary dies. One connection for
    // both: WAIT counts acknowledgements of its own connection's writes (on
    // a fresh one it has nothing to wait for and answers at once, which let
    // the primary die before the replica had the write).
    let mut conn = redis::Client::open(primary.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("7")
        .query(&mut conn)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1);
    let index = cluster
        .nodes()
        .iter()
        .position(|n| n.id() == primary.id())
        .expect("the primary is one of the nodes");

    let started = Instant::now();
    cluster.nodes_mut()[index].kill();
    // No manual failover: the other primaries fail the dead one and its
    // replica takes over on its own; wait_ok skips the dead node.
    cluster.wait_ok();
    eprintln!("automatic failover done after {:?}", started.elapsed());
    let new_primary = cluster.primary_for_key(key);
    assert_eq!(new_primary.id(), replica_id);
    // Right after its promotion the replica may still answer as it did
    // before (a nil for a key of a slot it does not yet serve); the write
    // it acknowledged must be there once it serves the slot.
    latchkey_testkit::eventually_blocking("the promoted replica serves the write", || {
        new_primary.command(&["GET", key]).unwrap() == "7"
    });
    assert_eq!(cluster.primaries().len(), 3);

    // Back with its node id, it learns it lost its slots and follows the
    // new primary.
    cluster.nodes_mut()[index].restart();
    cluster.wait_ok();
    let restarted = &cluster.nodes()[index];
    assert_eq!(restarted.role(), Some(NodeRole::Replica));
    let new_primary = cluster.primary_for_key(key);
    assert_eq!(new_primary.id(), replica_id);
    assert_eq!(ids(&cluster.replicas_of(new_primary)), ids(&[restarted]));
    assert_eq!(restarted.command(&["READONLY"]).unwrap(), "OK");
}

#[test]
fn migrate_slot_moves_the_slot_and_its_keys() {
    let rt = runtime();
    let cluster = three_primaries();
    let slot = key_slot(b"mig");
    let from = cluster.primary_for_slot(slot);
    let to = cluster
        .primaries()
        .into_iter()
        .find(|p| p.id() != from.id())
        .expect("another primary");
    let bystander_key = "stays-put";
    let bystander = cluster.primary_for_key(bystander_key);

    // More keys than one MIGRATE batch, all in one slot.
    let keys: Vec<String> = (0..250).map(|i| format!("{{mig}}{i}")).collect();
    let mut mset = vec!["MSET"];
    for key in &keys {
        mset.extend([key.as_str(), key.as_str()]);
    }
    from.command(&mset).unwrap();
    let mut con = rt.block_on(connect(&cluster));
    rt.block_on(set(&mut con, bystander_key, "here"));

    let started = Instant::now();
    cluster.migrate_slot(slot, to);
    eprintln!("migrated 250 keys after {:?}", started.elapsed());

    assert_eq!(cluster.primary_for_slot(slot).id(), to.id());
    let count =
        |node: &ClusterNode| node.command(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    assert_eq!(count(to).unwrap(), "250");
    assert_eq!(count(from).unwrap(), "0");
    // Every node, not only the one primary_for_slot asked, names the new owner.
    for node in cluster.nodes() {
        let got = node.command(&["GET", &keys[7]]);
        if node.id() == to.id() {
            assert_eq!(got.unwrap(), keys[7]);
        } else {
            let moved = format!("MOVED {slot} 127.0.0.1:{}", to.port());
            assert_eq!(got.unwrap_err().to_string(), moved);
        }
    }
    rt.block_on(async {
        // A connection from before the move follows the redirect.
        assert_eq!(
            get(&mut con, &keys[0]).await.as_deref(),
            Some(keys[0].as_str())
        );
        let mut fresh = connect(&cluster).await;
        assert_eq!(
            get(&mut fresh, &keys[249]).await.as_deref(),
            Some(keys[249].as_str())
        );
        assert_eq!(
            get(&mut fresh, bystander_key).await.as_deref(),
            Some("here")
        );
    });
    assert_eq!(cluster.primary_for_key(bystander_key).id(), bystander.id());

    // Migrating to the owner is a no-op; migrating back works too.
    cluster.migrate_slot(slot, to);
    cluster.migrate_slot(slot, from);
    assert_eq!(cluster.primary_for_slot(slot).id(), from.id());
    assert_eq!(count(from).unwrap(), "250");
}

#[test]
fn two_clusters_run_side_by_side() {
    let rt = runtime();
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(three_primaries);
        let b = s.spawn(three_primaries);
        (a.join().expect("cluster a"), b.join().expect("cluster b"))
    });
    let mut ports = HashSet::new();
    for node in a.nodes().iter().chain(b.nodes()) {
        assert!(ports.insert(node.port()), "port {} used twice", node.port());
        assert!(
            ports.insert(node.port() + 10_000),
            "bus port of {} used twice",
            node.port()
        );
    }
    // Each cluster knows only its own nodes (wait_ok checks the count too).
    let known = |node: &ClusterNode| {
        let info = node.command(&["CLUSTER", "INFO"]).unwrap();
        info.lines().any(|l| l.trim() == "cluster_known_nodes:3")
    };
    assert!(a.nodes().iter().chain(b.nodes()).all(known));
    rt.block_on(async {
        let (mut ca, mut cb) = (connect(&a).await, connect(&b).await);
        set(&mut ca, "which", "a").await;
        set(&mut cb, "which", "b").await;
        assert_eq!(get(&mut ca, "which").await.as_deref(), Some("a"));
        assert_eq!(get(&mut cb, "which").await.as_deref(), Some("b"));
    });
}

#[test]
fn dropping_the_cluster_stops_every_node_and_removes_its_dirs() {
    let mut cluster = three_primaries();
    // A killed node is cleaned up too, and the rest wait for it no longer.
    cluster.nodes_mut()[2].kill();
    assert!(!cluster.nodes()[2].is_running());
    let nodes: Vec<_> = cluster
        .nodes()
        .iter()
        .map(|n| (n.port(), n.server().pid(), n.server().dir().to_owned()))
        .collect();
    for (port, pid, dir) in &nodes[..2] {
        let running = pgrep(&format!("redis-server 127.0.0.1:{port} "));
        assert!(
            running.contains(&pid.expect("running").to_string()),
            "{running:?}"
        );
        assert!(dir.join("nodes.conf").exists());
    }
    drop(cluster);
    for (port, _, dir) in &nodes {
        let left = pgrep(&format!("127.0.0.1:{port}"));
        assert!(left.is_empty(), "left running: {left}");
        assert!(!dir.exists(), "left behind: {}", dir.display());
    }
}
