//! Zone messages on one host with the embedded SQLite store and the in-process bus (no NATS):
//! a message to a zone that was stopped (saved and released, as a dormant zone is) wakes it
//! from its save and arrives in order after what it had; a message to a zone no one ever made
//! comes back to its sender as `unknown zone`; the operator's message to such a zone is a 404.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::courier::{command, post_message, runs, TOPIC_NUMBERED};
use support::{Server, StoreSpec, ADMIN_TOKEN};

/// The longest wait for a courier's saved report to show what the test waits for.
const WAIT: Duration = Duration::from_secs(60);

/// Polls courier `zone`'s saved report until `f` holds.
async fn report_until(
    store: &StoreSpec,
    host: &Server,
    zone: &str,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let r = match store.last_save(zone).await {
            Some((_, state)) => state["report"].clone(),
            None => Value::Null,
        };
        if f(&r) {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {zone}'s report; it is {r}\n{}",
            std::fs::read_to_string(&host.log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_host_a_message_wakes_a_stopped_zone_and_one_to_no_zone_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let host = Server::start(
        &store,
        &["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"],
        &dir.path().join("host.log"),
    )
    .await;
    for zone in ["rx", "tx"] {
        let (status, body) = host
            .admin_request(
                "POST",
                "/admin/zones",
                Some(&json!({"id": zone, "kind": "courier"})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    command(&host, "tx", json!({"send": 5, "zone": "rx"})).await;
    report_until(&store, &host, "rx", |r| {
        runs(r, "zone:tx", TOPIC_NUMBERED) == vec![(1, 5)]
    })
    .await;

    let (status, body) = host
        .admin_request("POST", "/admin/zones/rx/stop", None)
        .await;
    assert_eq!(status, 200, "{body}");
    let detail = host.admin("/admin/zones/rx").await;
    assert_ne!(detail["running"], true, "{detail}");

    command(&host, "tx", json!({"send": 15, "from": 6, "zone": "rx"})).await;
    let r = report_until(&store, &host, "rx", |r| {
        runs(r, "zone:tx", TOPIC_NUMBERED)
            .last()
            .is_some_and(|run| run.1 >= 20)
    })
    .await;
    assert_eq!(
        runs(&r, "zone:tx", TOPIC_NUMBERED),
        vec![(1, 20)],
        "in order, once: {r}"
    );

    command(&host, "tx", json!({"send": 3, "zone": "nobody"})).await;
    let sent = report_until(&store, &host, "tx", |r| {
        r["undeliverable"]
            .as_object()
            .is_some_and(|m| m.values().filter_map(Value::as_u64).sum::<u64>() >= 3)
    })
    .await;
    let reasons = sent["undeliverable"].as_object().unwrap();
    assert_eq!(reasons.len(), 1, "{sent}");
    let (reason, n) = reasons.iter().next().unwrap();
    assert!(reason.contains("unknown zone nobody"), "{sent}");
    assert_eq!(n, 3, "{sent}");

    let (status, body) = post_message(&host, "nobody", TOPIC_NUMBERED, b"x").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
}
