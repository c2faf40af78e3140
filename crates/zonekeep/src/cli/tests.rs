//! Tests of `zonekeep serve`'s configuration: flags over the environment over the config file
//! over the defaults, and bad values named by their flag or key.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::serve::serve_config;
use super::*;

#[test]
fn flags_beat_env_beat_file_beat_defaults() {
    let path = std::env::temp_dir().join(format!("zonekeep-cli-test-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "idle_timeout_ms = 111\noutbox_frames = 5\nmax_zones = 9\n",
    )
    .unwrap();
    // This is the only test in this binary that touches the environment.
    std::env::set_var("ZONEKEEP_OUTBOX_FRAMES", "7");
    std::env::set_var("ZONEKEEP_MAX_ZONES", "8");
    let cli = Cli::try_parse_from([
        "zonekeep",
        "serve",
        "--config",
        path.to_str().unwrap(),
        "--max-zones",
        "3",
    ])
    .unwrap();
    let Command::Serve(args) = cli.command else {
        panic!("serve expected")
    };
    let cfg = serve_config(&args).unwrap();
    assert_eq!(cfg.idle_timeout_ms, 111, "file over default");
    assert_eq!(cfg.outbox_frames, 7, "env over file");
    assert_eq!(cfg.max_zones, 3, "flag over env");
    assert_eq!(cfg.handshake_timeout_ms, 5_000, "default");
    std::fs::write(&path, "idle_timeout_ms = 111\nno_such_key = 1\n").unwrap();
    let cli =
        Cli::try_parse_from(["zonekeep", "serve", "--config", path.to_str().unwrap()]).unwrap();
    let Command::Serve(args) = cli.command else {
        panic!("serve expected")
    };
    let err = format!("{:#}", serve_config(&args).unwrap_err());
    assert!(err.contains("no_such_key"), "{err}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn zone_limit_flags_set_the_hosts_per_zone_ceilings() {
    let cli = Cli::try_parse_from([
        "zonekeep",
        "serve",
        "--zone-max-entities",
        "1000",
        "--zone-max-fact-bytes",
        "512",
        "--zone-max-facts-per-second",
        "20",
    ])
    .unwrap();
    let Command::Serve(args) = cli.command else {
        panic!("serve expected")
    };
    let cfg = serve_config(&args).unwrap();
    let zone = cfg.zone_limits(zonekeep_core::ZoneConfig::default());
    assert_eq!(
        (
            zone.max_entities,
            zone.max_fact_bytes,
            zone.max_facts_per_second
        ),
        (1000, 512, 20)
    );
}

#[test]
fn content_version_flags_layer_over_the_file_and_bad_values_name_the_flag() {
    let path =
        std::env::temp_dir().join(format!("zonekeep-cli-content-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "content_version = \"1.4.0\"\nmin_content_version = \"1.2\"\n",
    )
    .unwrap();
    let parse = |extra: &[&str]| {
        let mut argv = vec!["zonekeep", "serve", "--config", path.to_str().unwrap()];
        argv.extend_from_slice(extra);
        let Command::Serve(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("serve expected")
        };
        serve_config(&args)
    };
    let cfg = parse(&[]).unwrap();
    assert_eq!(cfg.content_version, "1.4.0", "file over default");
    assert_eq!(cfg.min_content_version.as_deref(), Some("1.2"));
    let cfg = parse(&["--content-version", "2.0", "--min-content-version", "1.9"]).unwrap();
    assert_eq!(cfg.content_version, "2.0", "flag over file");
    assert_eq!(cfg.min_content_version.as_deref(), Some("1.9"));
    for (flags, flag) in [
        (["--min-content-version", "1.x"], "--min-content-version"),
        (["--content-version", "latest"], "--content-version"),
    ] {
        let err = format!("{:#}", parse(&flags).unwrap_err());
        assert!(err.contains(flag) && err.contains("dotted"), "{err}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn persistence_flags_layer_over_the_file_and_bad_values_are_named() {
    let path =
        std::env::temp_dir().join(format!("zonekeep-cli-persist-{}.toml", std::process::id()));
    std::fs::write(&path, "save_every = \"2s\"\ndata_dir = \"/from/file\"\n").unwrap();
    let parse = |extra: &[&str]| {
        let mut argv = vec!["zonekeep", "serve", "--config", path.to_str().unwrap()];
        argv.extend_from_slice(extra);
        let Command::Serve(args) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("serve expected")
        };
        serve_config(&args)
    };
    let cfg = parse(&[
        "--data-dir",
        "/from/flag",
        "--fact-sink",
        "webhook:http://127.0.0.1:9/facts",
        "--store-delay",
        "1000",
        "--call-webhook",
        "http://127.0.0.1:9/calls",
        "--call-results-keep",
        "48h",
    ])
    .unwrap();
    let p = cfg.persist_config().unwrap();
    assert_eq!(p.call_webhook.as_deref(), Some("http://127.0.0.1:9/calls"));
    assert_eq!(p.calls.keep, std::time::Duration::from_secs(48 * 3600));
    assert_eq!(p.data_dir, PathBuf::from("/from/flag"), "flag over file");
    assert_eq!(
        p.save_every,
        std::time::Duration::from_secs(2),
        "file over default"
    );
    assert_eq!(p.store, "sqlite", "default");
    assert_eq!(p.store_delay, Some(std::time::Duration::from_secs(1)));
    for (flags, key) in [
        (["--save-every", "soon"], "save_every"),
        (["--fact-sink", "kafka:x"], "fact_sink"),
        (["--store", "redis://x"], "store"),
        (["--call-webhook", "https://x"], "call_webhook"),
        (["--call-results-keep", "1s"], "call_results_keep"),
    ] {
        let err = format!("{:#}", parse(&flags).unwrap_err());
        assert!(err.contains(key), "{err}");
    }
    let _ = std::fs::remove_file(&path);
}
