//! What a run consists of: the scenarios ([`plan`]), which of them can run
//! here ([`applicable`]), and how each is named and summed up in the output.

use std::path::PathBuf;

use crate::checker;
use crate::faults::Fault;
use crate::links;
use crate::report;
use crate::scenario::{Place, Scenario};

/// The scenarios of a run: a baseline without faults (unless faults were
/// chosen), each fault alone, all of them mixed, and the control.
pub fn plan(chosen: &[Fault], fenced: bool, place: &Place) -> Vec<Scenario> {
    let mut faults: Vec<Fault> = Vec::new();
    // By default the faults this deployment can take: a cluster's own and
    // those of any server; a Sentinel set's failover and those of any
    // server; a single server's (or Redlock's) and those of any server.
    let (cluster, replicated) = match place {
        Place::Cluster => (true, true),
        Place::Sentinel { .. } => (false, true),
        Place::Private | Place::User(_) => (false, false),
    };
    let default: Vec<Fault> = Fault::ALL
        .into_iter()
        .filter(|f| {
            let needs = f.needs();
            (cluster || !needs.cluster)
                && (!cluster || !needs.single)
                && (replicated || !needs.replicated)
        })
        .collect();
    for f in if chosen.is_empty() {
        &default[..]
    } else {
        chosen
    } {
        if !faults.contains(f) {
            faults.push(*f);
        }
    }
    let mut scenarios = Vec::new();
    if chosen.is_empty() {
        scenarios.push(Scenario {
            name: "none".into(),
            faults: vec![],
            fenced,
            control: false,
        });
    }
    for f in &faults {
        scenarios.push(Scenario {
            name: f.name().into(),
            faults: vec![*f],
            fenced,
            control: false,
        });
    }
    // Mixed: one server setup for all, so neither the AOF restart nor
    // the Redlock minority (which need servers of their own) take part.
    let mixable: Vec<Fault> = faults
        .iter()
        .copied()
        .filter(|f| !matches!(f, Fault::RestartAof | Fault::RedlockMinority))
        .collect();
    if mixable.len() > 1 {
        scenarios.push(Scenario {
            name: "mixed".into(),
            faults: mixable,
            fenced,
            control: false,
        });
    }
    scenarios.push(Scenario {
        name: "control".into(),
        faults: vec![Fault::Pause],
        fenced: false,
        control: true,
    });
    scenarios
}

/// The scenario as it can run here: faults that cannot are dropped from a
/// mix, and a scenario left with none that it needs is skipped.
pub fn applicable(scn: &Scenario, place: &Place, faketime: bool) -> Result<Scenario, String> {
    let why_not = |f: Fault| -> Option<String> {
        let needs = f.needs();
        let user = matches!(place, Place::User(_));
        let cluster = matches!(place, Place::Cluster);
        let sentinel = matches!(place, Place::Sentinel { .. });
        if needs.cluster && !cluster {
            return Some("needs a Redis Cluster (--cluster)".into());
        }
        if needs.replicated && !cluster && !sentinel {
            return Some("needs --cluster or --sentinel-set".into());
        }
        if needs.single && cluster {
            return Some("needs a single server, not a cluster".into());
        }
        if sentinel && (needs.proxy || needs.redlock || needs.aof || f == Fault::Restart) {
            return Some("not with --sentinel-set (no proxy, no restart of a Sentinel set)".into());
        }
        if needs.private_server && user {
            return Some(
                "needs a redis-server of its own (it would disturb your server's other clients)"
                    .into(),
            );
        }
        if needs.proxy {
            if let Place::User(urls) = place {
                if urls.iter().any(|u| links::host_port(u).is_none()) {
                    return Some("cannot proxy a rediss:// or unix URL".into());
                }
            }
        }
        if needs.faketime && !faketime {
            return Some("libfaketime is not installed (apt-get install faketime)".into());
        }
        None
    };
    let mut kept = Vec::new();
    let mut reasons = Vec::new();
    for f in &scn.faults {
        match why_not(*f) {
            None => kept.push(*f),
            Some(reason) => reasons.push(format!("{}: {reason}", f.name())),
        }
    }
    if !scn.faults.is_empty() && (kept.is_empty() || (scn.faults.len() == 1 && !reasons.is_empty()))
    {
        return Err(reasons.join("; "));
    }
    Ok(Scenario {
        faults: kept,
        ..scn.clone()
    })
}

pub fn describe(scn: &Scenario) -> String {
    match &scn.faults[..] {
        [] => "no faults".into(),
        [one] if scn.control => format!("NO FENCING, {}", one.about()),
        [one] => one.about().into(),
        many => format!(
            "random mix of {}",
            many.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
        ),
    }
}

pub fn label(scn: &Scenario) -> String {
    if scn.fenced {
        scn.name.clone()
    } else {
        format!("{} (unfenced)", scn.name)
    }
}

/// The figures that do not fit the table, one line per scenario.
pub fn detail(name: &str, f: &checker::Figures, notes: &[String]) -> String {
    let handoff = match (
        report::percentile(&f.handoffs, 50),
        report::percentile(&f.handoffs, 99),
    ) {
        (Some(p50), Some(p99)) => format!(
            "hand-over p50 {} p99 {}",
            report::secs(p50),
            report::secs(p99)
        ),
        _ => "no hand-overs measured".into(),
    };
    let mut line = format!(
        "{name}: {handoff}; lost() fired {} times; {} writes after lost(); {} worker errors",
        f.lost_fired, f.writes_after_lost, f.errors
    );
    if f.clock_jumped > 0 {
        line.push_str(&format!(
            "; {} acquisitions with the wall clock an hour off",
            f.clock_jumped
        ));
    }
    for note in notes {
        line.push_str(&format!("; note: {note}"));
    }
    line
}

/// libfaketime's preload library, where Debian (or a local build) puts it.
pub fn find_faketime() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        for entry in entries.flatten() {
            candidates.push(entry.path().join("faketime/libfaketime.so.1"));
        }
    }
    candidates.push(PathBuf::from("/usr/lib/faketime/libfaketime.so.1"));
    candidates.push(PathBuf::from("/usr/local/lib/faketime/libfaketime.so.1"));
    candidates.into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan_covers_every_fault_and_ends_with_the_control() {
        let scenarios = plan(&[], true, &Place::Private);
        assert_eq!(scenarios[0].name, "none");
        // Every fault but the cluster's, which a cluster run has.
        for f in Fault::ALL
            .into_iter()
            .filter(|f| !f.needs().cluster && !f.needs().replicated)
        {
            assert!(
                scenarios.iter().any(|s| s.faults == [f] && s.fenced),
                "{f:?}"
            );
        }
        let last = scenarios.last().unwrap();
        assert!(last.control && !last.fenced && last.faults == [Fault::Pause]);
        assert!(scenarios.iter().any(|s| s.name == "mixed"));
        // Without --sentinel-set the failover is left out, not skipped.
        let plain = plan(&[], true, &Place::Private);
        assert!(plain.iter().all(|s| !s.faults.contains(&Fault::Failover)));
    }

    #[test]
    fn the_failover_needs_the_sentinel_set_which_skips_proxies_and_restarts() {
        let sentinel = Place::Sentinel { replicas: false };
        let failover = &plan(&[Fault::Failover], true, &Place::Private)[0];
        assert!(applicable(failover, &Place::Private, true).is_err());
        assert!(applicable(failover, &sentinel, true).is_ok());
        for f in [Fault::Restart, Fault::Blackhole, Fault::RedlockMinority] {
            assert!(applicable(&plan(&[f], true, &Place::Cluster)[0], &sentinel, true).is_err());
        }
        assert!(applicable(
            &plan(&[Fault::Kill], true, &Place::Cluster)[0],
            &sentinel,
            true
        )
        .is_ok());
    }

    #[test]
    fn chosen_faults_run_alone_then_mixed() {
        let scenarios = plan(
            &[Fault::Kill, Fault::Pause, Fault::Kill],
            true,
            &Place::Private,
        );
        let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["kill", "pause", "mixed", "control"]);
        let one = plan(&[Fault::Kill], false, &Place::Private);
        assert_eq!(one.len(), 2);
        assert!(!one[0].fenced);
    }

    #[test]
    fn user_servers_skip_what_would_disturb_them() {
        let user = Place::User(vec!["redis://db:6379/".into()]);
        let restart = &plan(&[Fault::Restart], true, &Place::Private)[0];
        assert!(applicable(restart, &user, true).is_err());
        assert!(applicable(restart, &Place::Private, true).is_ok());
        let mixed = plan(&[Fault::Restart, Fault::Kill], true, &Place::Private)
            .pop()
            .unwrap();
        assert_eq!(mixed.name, "control");
        let mixed = &plan(&[Fault::Restart, Fault::Kill], true, &Place::Private)[2];
        assert_eq!(
            applicable(mixed, &user, true).unwrap().faults,
            [Fault::Kill]
        );
        let clock = &plan(&[Fault::Clock], true, &Place::Private)[0];
        assert!(applicable(clock, &Place::Private, false)
            .unwrap_err()
            .contains("libfaketime"));
        let tls = Place::User(vec!["rediss://db:6379/".into()]);
        assert!(applicable(
            &plan(&[Fault::Blackhole], true, &Place::Private)[0],
            &tls,
            true
        )
        .is_err());
    }

    #[test]
    fn a_cluster_run_has_the_cluster_faults_and_no_single_server_ones() {
        let scenarios = plan(&[], true, &Place::Cluster);
        let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
        for cluster_fault in [
            "primary-kill",
            "failover",
            "slot-migration",
            "kill",
            "pubsub-kill",
        ] {
            assert!(names.contains(&cluster_fault), "{names:?}");
        }
        for single in [
            "restart",
            "restart-aof",
            "blackhole",
            "delay",
            "redlock-minority",
        ] {
            assert!(!names.contains(&single), "{names:?}");
        }
        assert!(!plan(&[], true, &Place::Private)
            .iter()
            .any(|s| s.name == "failover"));
        let failover = &plan(&[Fault::Failover], true, &Place::Cluster)[0];
        assert!(applicable(failover, &Place::Private, true).is_err());
        assert!(applicable(failover, &Place::Cluster, true).is_ok());
        let restart = &plan(&[Fault::Restart], true, &Place::Private)[0];
        assert!(applicable(restart, &Place::Cluster, true).is_err());
    }
}
