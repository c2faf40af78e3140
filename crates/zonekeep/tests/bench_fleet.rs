//! `zonekeep bench` against a fleet of real hosts on PostgreSQL: the bots enter through one host
//! and are redirected to the zone's owner on another; the server's figures are read at that
//! owner, not at the entry host; and when the owner is killed, every bot comes back by itself
//! once a live host has taken the zone over.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use support::{Server, StoreSpec, ADMIN_TOKEN, SECRET};

const BOTS: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_bots_outlive_a_takeover_and_read_the_owner() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "bench_bots_outlive_a_takeover_and_read_the_owner",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"];
    let owner = Server::start(&store, &args, &dir.path().join("h1.log")).await;
    let entry = Server::start(&store, &args, &dir.path().join("h2.log")).await;
    let zone = "bench-fleet-1";
    let owner_id = owner.host_id().await;
    let created = entry
        .post_admin(
            "/admin/zones",
            &json!({"id": zone, "kind": "dots", "host": owner_id}),
        )
        .await;
    assert_eq!(created["host"], owner_id.as_str(), "{created}");

    let bench = tokio::process::Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .args([
            "bench",
            "--url",
            &format!("ws://{}", entry.addr),
            "--zone",
            zone,
            "--workload",
            "idle",
            "--bots",
            &BOTS.to_string(),
            "--warmup",
            "1s",
            "--duration",
            "25s",
            "--json",
        ])
        .env("ZONEKEEP_TICKET_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    // Every bot in the zone on its owner, then the owner dies.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let d = owner.admin(&format!("/admin/zones/{zone}")).await;
        if d["players"].as_u64() == Some(BOTS) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bots never joined: {d}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let owner_addr = owner.addr.clone();
    owner.kill().await;

    let out = bench.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let counts = &report["counts"];
    assert!(
        counts["reconnects"].as_u64().unwrap() >= BOTS,
        "every bot came back after the takeover: {counts}"
    );
    assert!(
        report["server"]["read_at"]
            .as_str()
            .is_some_and(|u| u.contains(&owner_addr)),
        "the figures were read at the zone's owner ({owner_addr}): {}",
        report["server"]
    );
    entry.terminate().await;
}
