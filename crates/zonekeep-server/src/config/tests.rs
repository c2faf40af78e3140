//! The configuration's tests: the defaults validate, the TOML form refuses unknown keys and
//! redacts secrets, a bad value's error names its key, and the content and persistence keys map
//! onto their settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::*;

#[test]
fn defaults_validate() {
    ServerConfig::default().validate().unwrap();
}

#[test]
fn webtransport_needs_a_certificate_outside_dev_mode() {
    let on = ServerConfig {
        webtransport: Some("127.0.0.1:4433".parse().unwrap()),
        ticket_secret: Some(Secret::new("s".repeat(32))),
        ..ServerConfig::default()
    };
    let e = on.validate().unwrap_err();
    assert!(e.to_string().contains("webtransport"), "{e}");
    let half = ServerConfig {
        webtransport_cert: Some("cert.pem".into()),
        ..on.clone()
    };
    let e = half.validate().unwrap_err();
    assert!(e.to_string().contains("webtransport_key"), "{e}");
    let dev = ServerConfig {
        dev: true,
        ..on.clone()
    };
    dev.validate().unwrap();
    let configured = ServerConfig {
        webtransport_cert: Some("cert.pem".into()),
        webtransport_key: Some("key.pem".into()),
        ..on
    };
    configured.validate().unwrap();
}

#[test]
fn unknown_keys_are_an_error() {
    let e = ServerConfig::from_toml_str("listen = \"127.0.0.1:1\"\nbogus = 3\n").unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
}

#[test]
fn toml_with_keys_parses_and_secrets_are_redacted() {
    let c = ServerConfig::from_toml_str(
        r#"
        idle_timeout_ms = 100
        [[ticket_keys]]
        kid = "a"
        secret = "0123456789abcdef0123456789abcdef"
        [[ticket_keys]]
        kid = "old"
        secret = "0123456789abcdef0123456789abcdeX"
        retired = true
        "#,
    )
    .unwrap();
    c.validate().unwrap();
    assert_eq!(c.idle_timeout_ms, 100);
    assert_eq!(c.key_ring().unwrap().unwrap().keys().len(), 2);
    assert!(!format!("{c:?}").contains("0123456789"));
}

#[test]
fn bad_values_name_their_key() {
    let c = ServerConfig {
        outbox_frames: 0,
        ..ServerConfig::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("outbox_frames"));
    let c = ServerConfig {
        ticket_secret: Some(Secret::new("short")),
        ..ServerConfig::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("at least 32"));
    let c = ServerConfig {
        max_message_bytes: 100_000,
        ..ServerConfig::default()
    };
    assert!(c.validate().is_err());
}

#[test]
fn content_versions_are_dotted_numbers_named_by_key_and_flag() {
    let c =
        ServerConfig::from_toml_str("content_version = \"1.5.0\"\nmin_content_version = \"1.4\"\n")
            .unwrap();
    c.validate().unwrap();
    let p = c.content_policy().unwrap();
    assert_eq!(p.current().map(|v| v.as_str()), Some("1.5.0"));
    assert_eq!(p.min().map(|v| v.as_str()), Some("1.4"));
    let d = ServerConfig::default().content_policy().unwrap();
    assert_eq!((d.current(), d.min()), (None, None));

    for (c, key, flag) in [
        (
            ServerConfig {
                min_content_version: Some("1.4-beta".into()),
                ..ServerConfig::default()
            },
            "min_content_version",
            "--min-content-version",
        ),
        (
            ServerConfig {
                min_content_version: Some(String::new()),
                ..ServerConfig::default()
            },
            "min_content_version",
            "--min-content-version",
        ),
        (
            ServerConfig {
                content_version: "v2".into(),
                ..ServerConfig::default()
            },
            "content_version",
            "--content-version",
        ),
        (
            ServerConfig {
                content_version: "1".repeat(65),
                ..ServerConfig::default()
            },
            "content_version",
            "--content-version",
        ),
    ] {
        let e = c.validate().unwrap_err();
        assert!(
            matches!(e, ConfigError::ContentVersion { key: k, .. } if k == key),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains(key) && text.contains(flag), "{text}");
    }
    let behind = ServerConfig {
        content_version: "1.3".into(),
        min_content_version: Some("1.4".into()),
        ..ServerConfig::default()
    };
    let e = behind.validate().unwrap_err().to_string();
    assert!(e.contains("content_version") && e.contains("older"), "{e}");
}

#[test]
fn persistence_keys_map_onto_persist_config() {
    let c = ServerConfig::from_toml_str(
        r#"
        store = "postgres://u:hunter2@db/zk"
        data_dir = "/var/lib/zonekeep"
        save_every = "250ms"
        lasting_halt_after = "2s"
        fact_sink = "webhook:http://127.0.0.1:9/facts"
        call_webhook = "http://127.0.0.1:9/calls"
        call_results_keep = "24h"
        store_delay_ms = 1000
        "#,
    )
    .unwrap();
    c.validate().unwrap();
    assert!(
        !format!("{c:?}").contains("hunter2"),
        "the store URL is redacted"
    );
    let p = c.persist_config().unwrap();
    assert_eq!(p.store, "postgres://u:hunter2@db/zk");
    assert_eq!(p.data_dir, PathBuf::from("/var/lib/zonekeep"));
    assert_eq!(p.save_every, Duration::from_millis(250));
    assert_eq!(p.lasting_halt_after_for("any"), Duration::from_secs(2));
    assert_eq!(
        p.fact_sink,
        crate::persist::FactSinkSpec::Webhook("http://127.0.0.1:9/facts".into())
    );
    assert_eq!(p.store_delay, Some(Duration::from_secs(1)));
    assert_eq!(p.call_webhook.as_deref(), Some("http://127.0.0.1:9/calls"));
    assert_eq!(p.calls.keep, Duration::from_secs(24 * 3600));
    let d = ServerConfig::default().persist_config().unwrap();
    assert_eq!(d.call_webhook, None);
    assert_eq!(d.calls.keep, Duration::from_secs(7 * 24 * 3600), "7 days");
    assert_eq!(d.store, "sqlite");
    assert_eq!(d.save_every, Duration::from_secs(5));
    assert_eq!(
        d.lasting_halt_after_for("any"),
        Duration::from_secs(15),
        "three save intervals"
    );
    assert_eq!(d.store_delay, None);

    for (c, key, hint) in [
        (
            ServerConfig {
                store: Secret::new("mysql://root:pw@x"),
                ..ServerConfig::default()
            },
            "store",
            "mysql",
        ),
        (
            ServerConfig {
                save_every: "5 parsecs".into(),
                ..ServerConfig::default()
            },
            "save_every",
            "5s",
        ),
        (
            ServerConfig {
                lasting_halt_after: Some("soon".into()),
                ..ServerConfig::default()
            },
            "lasting_halt_after",
            "5s",
        ),
        (
            ServerConfig {
                lasting_halt_after: Some("0ms".into()),
                ..ServerConfig::default()
            },
            "lasting_halt_after",
            "greater than 0",
        ),
        (
            ServerConfig {
                save_every: "0s".into(),
                ..ServerConfig::default()
            },
            "save_every",
            "greater than 0",
        ),
        (
            ServerConfig {
                fact_sink: "kafka".into(),
                ..ServerConfig::default()
            },
            "fact_sink",
            "ledger",
        ),
        (
            ServerConfig {
                fact_sink: "webhook:https://x".into(),
                ..ServerConfig::default()
            },
            "fact_sink",
            "http://",
        ),
        (
            ServerConfig {
                call_webhook: Some("ftp://x".into()),
                ..ServerConfig::default()
            },
            "call_webhook",
            "http://",
        ),
        (
            ServerConfig {
                call_results_keep: "10s".into(),
                ..ServerConfig::default()
            },
            "call_results_keep",
            "at least 1m",
        ),
        (
            ServerConfig {
                call_results_keep: "a week".into(),
                ..ServerConfig::default()
            },
            "call_results_keep",
            "invalid duration",
        ),
    ] {
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(hint), "{e}");
        assert!(!e.contains("pw@"), "no credentials in errors: {e}");
    }
}
