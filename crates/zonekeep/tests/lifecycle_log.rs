//! A zone's life in the host's log: structured `zonekeep::lifecycle` lines for its start, a
//! player joining and leaving, and its stop; `--lifecycle-log failures` keeps only failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use futures_util::StreamExt;
use serde_json::json;
use support::*;

async fn play_and_stop(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let mut args = vec!["--admin-token", ADMIN_TOKEN];
    args.extend_from_slice(extra);
    let log = dir.path().join("host.log");
    let server = Server::start(&store, &args, &log).await;
    let body = json!({"id": "life-1", "kind": "ledger-test"});
    let (status, answer) = server
        .admin_request("POST", "/admin/zones", Some(&body))
        .await;
    assert_eq!(status, 201, "{answer}");
    let mut ws = hello(
        &server.addr,
        "life-1",
        ticket_for("alice", "life-1", "ledger-test"),
    )
    .await;
    // Its first message is the Welcome: alice is in.
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
        .await
        .expect("a Welcome");
    assert!(first.is_some_and(|m| m.is_ok()));
    let (status, answer) = server
        .admin_request(
            "POST",
            "/admin/zones/life-1/kick",
            Some(&json!({"player": "alice", "reason": "bye"})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    // The leave is reported with the zone's next advance: wait for a tick after the kick.
    let ticks = |d: &serde_json::Value| d["work"]["ticks"].as_u64().unwrap_or(0);
    let after_kick = ticks(&server.admin("/admin/zones/life-1").await);
    let ticked = async {
        while ticks(&server.admin("/admin/zones/life-1").await) <= after_kick {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), ticked)
        .await
        .expect("the zone ticked");
    let (status, answer) = server
        .admin_request("POST", "/admin/zones/life-1/stop", Some(&json!({})))
        .await;
    assert_eq!(status, 200, "{answer}");
    drop(ws);
    server.terminate().await;
    std::fs::read_to_string(&log).unwrap()
}

fn lifecycle_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("zonekeep::lifecycle"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zones_life_is_written_as_structured_lines() {
    let log = play_and_stop(&[]).await;
    let lines = lifecycle_lines(&log);
    let has = |event: &str| {
        lines
            .iter()
            .any(|l| l.contains(&format!("event={event} ")) && l.contains("zone=life-1"))
    };
    for event in ["created", "joined", "left", "stopped"] {
        assert!(has(event), "no {event} line in:\n{}", lines.join("\n"));
    }
    let joined = lines.iter().find(|l| l.contains("event=joined ")).unwrap();
    assert!(
        joined.contains("principal=alice") && joined.contains("role=player"),
        "{joined}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_only_leaves_out_everything_that_is_not_a_failure() {
    let log = play_and_stop(&["--lifecycle-log", "failures"]).await;
    let lines = lifecycle_lines(&log);
    assert!(lines.is_empty(), "{}", lines.join("\n"));
    // The rest of the host's log is as before.
    assert!(log.contains("final saves written"));
}
