//! The protocol simulation: many seeds keep every invariant, the runs really exercise the faults
//! and the recovery paths, a seed reproduces its run, and a protocol broken on purpose is caught.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use zonekeep_fleet::sim::{run, Breakage, SimConfig, SimReport, Violation, ViolationKind};
use zonekeep_fleet::Timing;

/// Runs `seeds` and returns the reports, failing on the first violation with its trace.
fn run_all(seeds: std::ops::Range<u64>, config: &SimConfig) -> Vec<SimReport> {
    seeds
        .map(|seed| match run(seed, config) {
            Ok(report) => report,
            Err(v) => panic!("{v}"),
        })
        .collect()
}

/// The first violation among `seeds`, if any.
fn first_violation(seeds: std::ops::Range<u64>, config: &SimConfig) -> Option<Violation> {
    seeds.filter_map(|seed| run(seed, config).err()).next()
}

#[test]
fn three_hundred_seeds_keep_every_invariant_and_exercise_every_fault() {
    let reports = run_all(0..300, &SimConfig::default());
    let sum = |f: fn(&SimReport) -> u64| reports.iter().map(f).sum::<u64>();
    // A run that injected nothing would pass trivially: each fault and each recovery path must
    // have happened in these seeds.
    for (what, n) in [
        ("takeovers", sum(|r| r.takeovers)),
        ("reloads", sum(|r| r.reloads)),
        ("stale writes refused", sum(|r| r.stale_writes_refused)),
        ("lease lapses", sum(|r| r.lease_lapses)),
        ("expulsions", sum(|r| r.expulsions)),
        ("delayed registrations", sum(|r| r.registrations_delayed)),
        ("pauses", sum(|r| r.pauses)),
        ("partitions", sum(|r| r.partitions)),
        ("crashes", sum(|r| r.crashes)),
        ("graceful stops", sum(|r| r.leaves)),
        ("slow queries", sum(|r| r.slow_queries)),
        ("hung queries", sum(|r| r.hung_queries)),
        ("lost queries", sum(|r| r.lost_queries)),
    ] {
        assert!(n > 0, "no {what} in 300 seeds");
    }
    for hosts in 3..=5 {
        assert!(
            reports.iter().any(|r| r.hosts == hosts),
            "no run with {hosts} hosts"
        );
    }
}

#[test]
fn a_seed_reproduces_its_run() {
    let config = SimConfig::default();
    for seed in [1, 42, 299] {
        assert_eq!(run(seed, &config), run(seed, &config));
    }
    assert_ne!(run(1, &config), run(2, &config));
}

#[test]
fn hosts_that_ignore_their_lease_are_caught_acting_together() {
    let config = SimConfig {
        breakage: Breakage::HostsIgnoreLease,
        ..SimConfig::default()
    };
    let v = first_violation(0..100, &config).expect("no violation caught");
    assert!(matches!(v.kind, ViolationKind::TwoActors { .. }), "{v}");
    assert!(!v.trace.is_empty());
    // The report names the seed, which reproduces the same violation.
    assert_eq!(run(v.seed, &config).err(), Some(v));
}

#[test]
fn a_fence_bound_beyond_the_takeover_bound_is_caught() {
    let timing = Timing {
        fence_after: Duration::from_secs(12),
        ..Timing::default()
    };
    assert!(!timing.is_safe());
    let config = SimConfig {
        timing,
        ..SimConfig::default()
    };
    let v = first_violation(0..100, &config).expect("no violation caught");
    assert!(matches!(v.kind, ViolationKind::TwoActors { .. }), "{v}");
}

#[test]
fn a_database_that_ignores_epochs_is_caught_accepting_stale_writes() {
    let config = SimConfig {
        breakage: Breakage::DatabaseIgnoresEpoch,
        ..SimConfig::default()
    };
    let v = first_violation(0..100, &config).expect("no violation caught");
    assert!(
        matches!(v.kind, ViolationKind::StaleWriteAccepted { .. }),
        "{v}"
    );
}

#[test]
fn hosts_that_never_reload_their_zones_are_caught_leaving_them_orphaned() {
    let config = SimConfig {
        breakage: Breakage::HostsNeverReload,
        ..SimConfig::default()
    };
    let v = first_violation(0..100, &config).expect("no violation caught");
    assert!(matches!(v.kind, ViolationKind::NotServed { .. }), "{v}");
}

#[test]
fn without_faults_every_zone_is_served_and_nothing_is_refused() {
    let config = SimConfig {
        fault_window: Duration::ZERO,
        ..SimConfig::default()
    };
    for report in run_all(0..20, &config) {
        assert_eq!(report.takeovers, 0, "{report:?}");
        assert_eq!(report.stale_writes_refused, 0, "{report:?}");
        assert_eq!(report.lease_lapses, 0, "{report:?}");
        assert_eq!(report.first_claims, 8, "each zone claimed once: {report:?}");
        assert!(report.writes_accepted > 0);
    }
}
