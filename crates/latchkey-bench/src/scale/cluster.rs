//! Curve 5, Redis Cluster: the names-in-flight and hand-off curves on a
//! private cluster of 3 and 6 primaries (no replicas), one cluster at a
//! time, beside the scenario's single server; and what a skewed name set
//! does to one shard. Information, no targets: every node and the client
//! share this machine's cores.
//!
//! * **Names in flight**: 64 tasks of one client, `acquire` + `release` on
//!   a random one of N names ([`super::names::run_named`]), on the cluster
//!   and on the single server, rounds alternating; per primary, its share
//!   of the commands the cluster ran (`INFO commandstats`, the snapshots'
//!   own `INFO` left out) and its Redis CPU per second (schedstat).
//! * **Skew**, the same loop on the same cluster with two skewed name sets:
//!   90 % of cycles on 1 % of the names (the hot names hash where they
//!   hash: a few slots, so a few primaries), and every name sharing the
//!   hash tag `{hot}` (one slot, so one primary, the worst case).
//! * **Hand-off**: 64 tasks of one client on one plain lock
//!   ([`super::waiters::row`], its commands and CPU summed over the nodes),
//!   on the cluster and on the single server, rounds alternating; the
//!   round with the median p99 of each.

use std::time::Duration;

use latchkey_testkit::{RedisCluster, RedisServer};

use super::names::run_named;
use super::probe::Snapshot;
use super::waiters;
use crate::many_keys::XorShift;
use crate::stats::{median, us};

/// Waiting tasks on the hand-off lock.
pub const WAITERS: usize = 64;

/// A name set of the names-in-flight loop.
#[derive(Clone, Copy, PartialEq)]
pub enum NameSet {
    Uniform,
    /// 90 % of cycles on the first 1 % of the names.
    Hot,
    /// Every name `{hot}:i`: one hash tag, one slot.
    OneTag,
}

impl NameSet {
    fn label(self) -> &'static str {
        match self {
            NameSet::Uniform => "uniform",
            NameSet::Hot => "90 % of cycles on 1 % of the names",
            NameSet::OneTag => "every name in hash tag `{hot}`",
        }
    }

    /// The name of one cycle. Prefixes differ by set, so that a set's keys
    /// are its own (a skewed set's hot names are not the uniform set's).
    fn draw(self, names: usize, rng: &mut XorShift) -> String {
        match self {
            NameSet::Uniform => format!("cn:{}", rng.below(names)),
            NameSet::Hot => {
                let hot = (names / 100).max(1);
                if rng.below(10) < 9 || names <= hot {
                    format!("cs:{}", rng.below(hot))
                } else {
                    format!("cs:{}", hot + rng.below(names - hot))
                }
            }
            NameSet::OneTag => format!("{{hot}}:{}", rng.below(names)),
        }
    }
}

/// What one primary did during the cluster's windows of one row.
pub struct NodeLoad {
    pub commands: u64,
    pub cpu: Duration,
}

pub struct NamesRow {
    pub primaries: usize,
    pub names: usize,
    pub set: NameSet,
    pub cluster: f64,
    /// The single server in the same rounds (uniform only).
    pub single: Option<f64>,
    /// Median of the rounds' cluster ÷ single.
    pub ratio: Option<f64>,
    pub rounds: usize,
    /// Per primary, in the kit's order; and the seconds measured.
    pub nodes: Vec<NodeLoad>,
    pub secs: f64,
}

pub struct HandoffRow {
    pub primaries: usize,
    /// On the cluster, or on the single server in the same rounds.
    pub cluster: bool,
    pub row: waiters::Row,
}

pub struct Sizes {
    pub primaries: &'static [usize],
    pub names: usize,
    pub rounds: usize,
    pub window: Duration,
    pub handoff_window: Duration,
}

/// Every row of the curve, and what could not be measured.
#[derive(Default)]
pub struct Curve {
    pub names: Vec<NamesRow>,
    pub handoffs: Vec<HandoffRow>,
    pub notes: Vec<String>,
}

/// Measures every point of `sizes` (one cluster at a time), with `server`
/// as the single-server reference.
pub async fn curve(server: &RedisServer, sizes: &Sizes) -> Curve {
    let mut out = Curve::default();
    let url = server.url();
    for &primaries in sizes.primaries {
        let cluster = match start(primaries).await {
            Ok(c) => c,
            Err(e) => {
                out.notes.push(e);
                continue;
            }
        };
        if let Err(e) = point(&cluster, primaries, &url, server, sizes, &mut out).await {
            out.notes.push(format!("{primaries} primaries: {e}"));
        }
        // Dropping the cluster stops its nodes before the next one starts:
        // never two clusters on the two cores at once.
        drop(cluster);
    }
    out
}

/// A cluster of `primaries` primaries and no replicas; the kit returns once
/// every node says `cluster_state:ok` and serves all slots. It panics on
/// failure (a test kit), so it runs on a blocking thread whose panic
/// becomes the error.
async fn start(primaries: usize) -> Result<RedisCluster, String> {
    tokio::task::spawn_blocking(move || {
        RedisCluster::builder()
            .primaries(primaries)
            .replicas_per_primary(0)
            .start()
    })
    .await
    .map_err(|e| {
        let why = if e.is_panic() {
            let p = e.into_panic();
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        } else {
            e.to_string()
        };
        format!("a cluster of {primaries} primaries did not start: {why}")
    })
}

async fn point(
    cluster: &RedisCluster,
    primaries: usize,
    url: &str,
    server: &RedisServer,
    sizes: &Sizes,
    out: &mut Curve,
) -> Result<(), String> {
    let nodes: Vec<&RedisServer> = cluster.primaries().iter().map(|n| n.server()).collect();
    if nodes.len() != primaries {
        return Err(format!("{} of {primaries} primaries answer", nodes.len()));
    }
    let on_cluster = latchkey::Client::connect(&cluster.seed_url())
        .await
        .map_err(|e| format!("connect to the cluster: {e}"))?;
    let on_single = latchkey::Client::connect(url)
        .await
        .map_err(|e| format!("connect to the single server: {e}"))?;
    let n = sizes.names;
    // Warm-up: a connection to every primary, the scripts loaded on each.
    let _ = run(&on_cluster, NameSet::Uniform, n, sizes.window / 4).await;
    let _ = run(&on_single, NameSet::Uniform, n, sizes.window / 4).await;

    // Uniform names, rounds alternating cluster and single (order rotating).
    let (mut ours, mut singles, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut load = Load::new(nodes.len());
    for round in 0..sizes.rounds {
        let single_first = round % 2 == 1;
        let mut s = 0.0;
        if single_first {
            s = run(&on_single, NameSet::Uniform, n, sizes.window).await;
        }
        let c = load
            .measure(&nodes, run(&on_cluster, NameSet::Uniform, n, sizes.window))
            .await;
        if !single_first {
            s = run(&on_single, NameSet::Uniform, n, sizes.window).await;
        }
        ours.push(c);
        singles.push(s);
        if s > 0.0 {
            ratios.push(c / s);
        }
    }
    out.names.push(NamesRow {
        primaries,
        names: n,
        set: NameSet::Uniform,
        cluster: median(&mut ours),
        single: Some(median(&mut singles)),
        ratio: (!ratios.is_empty()).then(|| median(&mut ratios)),
        rounds: sizes.rounds,
        secs: load.secs,
        nodes: load.nodes,
    });

    // Skewed name sets: one window each, on the cluster only.
    for set in [NameSet::Hot, NameSet::OneTag] {
        let mut load = Load::new(nodes.len());
        let c = load
            .measure(&nodes, run(&on_cluster, set, n, sizes.window))
            .await;
        out.names.push(NamesRow {
            primaries,
            names: n,
            set,
            cluster: c,
            single: None,
            ratio: None,
            rounds: 1,
            secs: load.secs,
            nodes: load.nodes,
        });
    }

    // Hand-off: rounds alternating the cluster and the single server (one
    // window's tail is at the mercy of the shared machine); each side's
    // row is its round with the median p99, as in the waiters curve.
    let settle = Duration::from_millis(200);
    let seed = cluster.seed_url();
    let mut by_side: [Vec<waiters::Row>; 2] = Default::default();
    for round in 0..sizes.rounds {
        for on_cluster in [round % 2 == 0, round % 2 == 1] {
            let (at, servers): (&str, &[&RedisServer]) = if on_cluster {
                (&seed, &nodes)
            } else {
                (url, &[server])
            };
            match waiters::row(at, servers, WAITERS, false, settle, sizes.handoff_window).await {
                Ok(row) => by_side[usize::from(on_cluster)].push(row),
                Err(e) => out.notes.push(format!(
                    "hand-off on {}, round {round}: {e}",
                    if on_cluster {
                        "the cluster"
                    } else {
                        "the single server"
                    }
                )),
            }
        }
    }
    for (side, rows) in by_side.into_iter().enumerate() {
        if let Some(row) = waiters::median_round(rows) {
            out.handoffs.push(HandoffRow {
                primaries,
                cluster: side == 1,
                row,
            });
        }
    }
    Ok(())
}

async fn run(client: &latchkey::Client, set: NameSet, names: usize, window: Duration) -> f64 {
    run_named(client, window, move |rng| set.draw(names, rng)).await
}

/// Commands and CPU per primary, added up over a row's windows.
struct Load {
    nodes: Vec<NodeLoad>,
    secs: f64,
}

impl Load {
    fn new(n: usize) -> Load {
        Load {
            nodes: (0..n)
                .map(|_| NodeLoad {
                    commands: 0,
                    cpu: Duration::ZERO,
                })
                .collect(),
            secs: 0.0,
        }
    }

    /// Runs `window` between a snapshot of every node before and after.
    async fn measure(
        &mut self,
        nodes: &[&RedisServer],
        window: impl std::future::Future<Output = f64>,
    ) -> f64 {
        let before: Vec<Snapshot> = nodes.iter().map(|s| Snapshot::take(s)).collect();
        let rate = window.await;
        let after: Vec<Snapshot> = nodes.iter().map(|s| Snapshot::take(s)).collect();
        for ((load, b), a) in self.nodes.iter_mut().zip(&before).zip(&after) {
            load.commands += a.commands_since(b);
            load.cpu += a.redis_cpu_since(b);
        }
        if let (Some(b), Some(a)) = (before.first(), after.first()) {
            self.secs += a.secs_since(b);
        }
        rate
    }
}

/// "34 / 33 / 33 %": each primary's share of the commands, in the kit's
/// order; and the busiest share.
fn shares(nodes: &[NodeLoad]) -> (String, f64) {
    let total: u64 = nodes.iter().map(|n| n.commands).sum();
    if total == 0 {
        return ("–".into(), 0.0);
    }
    let pct: Vec<f64> = nodes
        .iter()
        .map(|n| n.commands as f64 * 100.0 / total as f64)
        .collect();
    let busiest = pct.iter().copied().fold(0.0, f64::max);
    let text = pct
        .iter()
        .map(|p| format!("{p:.0}"))
        .collect::<Vec<_>>()
        .join(" / ");
    (format!("{text} %"), busiest)
}

pub fn names_table(rows: &[NamesRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (share, busiest) = shares(&r.nodes);
            let cpu = r
                .nodes
                .iter()
                .map(|n| format!("{:.0}", n.cpu.as_secs_f64() * 1e3 / r.secs.max(1e-9)))
                .collect::<Vec<_>>()
                .join(" / ");
            vec![
                r.primaries.to_string(),
                r.names.to_string(),
                r.set.label().to_owned(),
                format!("{:.0}", r.cluster),
                r.single.map_or("–".into(), |s| format!("{s:.0}")),
                r.ratio.map_or("–".into(), |x| format!("{x:.3}×")),
                share,
                format!("{busiest:.0} %"),
                cpu,
                r.rounds.to_string(),
            ]
        })
        .collect();
    crate::stats::table(
        &[
            "primaries",
            "distinct names",
            "name set",
            "cluster cycles/s",
            "single server cycles/s",
            "cluster ÷ single (median of rounds)",
            "commands per primary",
            "busiest primary",
            "Redis CPU per primary ms/s",
            "rounds",
        ],
        &cells,
    )
}

pub fn handoff_table(rows: &[HandoffRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|h| {
            let r = &h.row;
            vec![
                if h.cluster {
                    format!("cluster, {} primaries", h.primaries)
                } else {
                    format!("single server (beside {} primaries)", h.primaries)
                },
                r.waiters.to_string(),
                r.handoffs.to_string(),
                format!("{:.0}", r.handoffs_per_sec),
                us(r.p50),
                us(r.p99),
                format!("{}–{}", us(r.p99_range.0), us(r.p99_range.1)),
                r.rounds.to_string(),
                format!("{:.2}", r.cmds_per_handoff),
                format!("{:.1}", r.redis_us_per_handoff),
                format!("{:.1}", r.client_us_per_handoff),
            ]
        })
        .collect();
    crate::stats::table(
        &[
            "deployment",
            "waiters",
            "hand-offs",
            "hand-offs/s",
            "gap p50 µs",
            "gap p99 µs",
            "p99 of rounds µs",
            "rounds",
            "cmds/hand-off",
            "redis CPU µs/hand-off (all nodes)",
            "client CPU µs/hand-off",
        ],
        &cells,
    )
}
