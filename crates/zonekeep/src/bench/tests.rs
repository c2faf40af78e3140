//! Tests of `zonekeep bench`'s flags: how they map onto the bench's config, the warnings a run's
//! settings or report draw, and the duration parser.
#![allow(clippy::unwrap_used)]
use super::*;

fn parse(argv: &[&str]) -> RunArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let mut full = vec!["bench"];
    full.extend_from_slice(argv);
    match Cmd::try_parse_from(full) {
        Ok(c) => c.run,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_bare_bench_names_what_is_missing_and_suggests_the_arena() {
    // The environment may hold a secret: the check is on the parsed value.
    let mut a = parse(&[]);
    a.ticket_secret = None;
    let e = config(&a).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains("ZONEKEEP_TICKET_SECRET") && e.contains("--workload arena"),
        "{e}"
    );
    a.ticket_secret = Some("0123456789abcdef0123456789abcdef".into());
    let e = config(&a).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains("--input") && e.contains("--workload arena"),
        "{e}"
    );
    let arena = parse(&[
        "--workload",
        "arena",
        "--ticket-secret",
        "0123456789abcdef0123456789abcdef",
    ]);
    assert!(config(&arena).is_ok());
}

#[test]
fn aimed_shots_over_the_bots_own_netsim_are_warned_about() {
    let secret = "0123456789abcdef0123456789abcdef";
    let aim = |extra: &[&str]| {
        let mut args = vec!["--aim", "target", "--ticket-secret", secret];
        args.extend_from_slice(extra);
        aim_over_client_netsim(&config(&parse(&args)).unwrap())
    };
    assert!(aim(&["--net-delay", "150"]).is_some_and(|w| w.contains("/dev/netsim")));
    assert!(aim(&["--net-jitter", "10"]).is_some());
    assert_eq!(aim(&[]), None, "no NetSim, nothing to warn about");
    let arena = config(&parse(&[
        "--workload",
        "arena",
        "--net-delay",
        "150",
        "--ticket-secret",
        secret,
    ]))
    .unwrap();
    assert_eq!(
        aim_over_client_netsim(&arena),
        None,
        "only aimed shots care"
    );
}

#[test]
fn state_acks_left_to_inputs_are_a_webtransport_choice() {
    let secret = "0123456789abcdef0123456789abcdef";
    let arena = |extra: &[&str]| {
        let mut args = vec!["--workload", "arena", "--ticket-secret", secret];
        args.extend_from_slice(extra);
        config(&parse(&args))
    };
    let wt = ["--transport", "webtransport", "--decode", "none"];
    assert_eq!(
        arena(&wt).unwrap().state_acks,
        zonekeep_bench::StateAcks::Held,
        "as the SDKs acknowledge"
    );
    let every = [&wt[..], &["--state-acks", "every-state"]].concat();
    assert_eq!(
        arena(&every).unwrap().state_acks,
        zonekeep_bench::StateAcks::EveryState
    );
    let with_inputs = [&wt[..], &["--state-acks", "with-inputs"]].concat();
    assert_eq!(
        arena(&with_inputs).unwrap().state_acks,
        zonekeep_bench::StateAcks::WithInputs
    );
    let e = arena(&["--state-acks", "with-inputs"])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("--transport webtransport"), "{e}");
}

#[test]
fn aim_shoots_at_the_gallery_with_every_bot_decoding() {
    let secret = "0123456789abcdef0123456789abcdef";
    let cfg = config(&parse(&["--aim", "target", "--ticket-secret", secret])).unwrap();
    assert!(matches!(&cfg.workload, Workload::Aim(AimTarget::Kind(k)) if k == "target"));
    assert_eq!(cfg.decode, DecodeMode::All);
    assert_eq!(cfg.zone_kind.as_deref(), Some("gallery"));
    let by_id = config(&parse(&[
        "--aim",
        "12",
        "--kind",
        "mine",
        "--ticket-secret",
        secret,
    ]));
    let by_id = by_id.unwrap();
    assert!(matches!(
        by_id.workload,
        Workload::Aim(AimTarget::Entity(12))
    ));
    assert_eq!(by_id.zone_kind.as_deref(), Some("mine"));
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let both = ["bench", "--aim", "target", "--input", "[1]"];
    assert!(Cmd::try_parse_from(both).is_err(), "--aim replaces --input");
}

#[test]
fn aimed_shots_without_verdicts_are_warned_about() {
    let mut r = Report {
        aim: Some(zonekeep_bench::AimCounts {
            shots: 10,
            ..Default::default()
        }),
        ..Report::default()
    };
    assert!(run_warnings(&r).iter().any(|w| w.contains("gallery")));
    r.aim = Some(zonekeep_bench::AimCounts {
        shots: 10,
        hits: 9,
        misses: 1,
        ..Default::default()
    });
    assert!(run_warnings(&r).is_empty());
}

#[test]
fn a_run_that_acks_nothing_is_warned_about() {
    let mut r = Report::default();
    assert!(run_warnings(&r).is_empty(), "nothing sent, nothing to say");
    r.counts.inputs_sent = 50;
    assert_eq!(run_warnings(&r).len(), 1);
    r.counts.inputs_acked = 1;
    assert!(run_warnings(&r).is_empty());
}

#[test]
fn durations_parse_with_units() {
    assert_eq!(duration("20s"), Ok(Duration::from_secs(20)));
    assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
    assert!(duration("x").is_err());
    assert!(duration("-1s").is_err());
}
