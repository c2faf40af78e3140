//! `zonekeep bench lobby` against a host on its SQLite store: every request is seated, rooms are
//! filled to their seats and no further, and the figures come out as JSON; bad flags and a wrong
//! credential are answered clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{Server, StoreSpec, ADMIN_TOKEN, LOBBY_TOKEN};

const BIN: &str = env!("CARGO_BIN_EXE_zonekeep");

fn bench(url: &str, token: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["bench", "lobby", "--url", url, "--kind", "arena"])
        .args(extra)
        .env("ZONEKEEP_LOBBY_TOKEN", token)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lobby_bench_seats_every_request_and_never_overfills_a_room() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let host = Server::start(
        &store,
        &["--admin-token", ADMIN_TOKEN, "--lobby-token", LOBBY_TOKEN],
        &dir.path().join("host.log"),
    )
    .await;
    let url = format!("http://{}", host.addr);
    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            bench(
                &url,
                LOBBY_TOKEN,
                &[
                    "--requests",
                    "120",
                    "--concurrency",
                    "8",
                    "--seats",
                    "4",
                    "--json",
                ],
            )
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["seated"], 120, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    assert_eq!(
        report["rooms"], 30,
        "rooms are filled before new ones: {report}"
    );
    assert_eq!(report["rooms_created"], 30, "{report}");
    assert_eq!(report["most_seats_in_a_room"], 4, "{report}");
    assert_eq!(report["overfull"], 0, "{report}");
    assert!(
        report["latency_ms"]["p99"].as_f64().unwrap()
            >= report["latency_ms"]["p50"].as_f64().unwrap()
    );

    // A wrong credential: every request refused, counted by status, and said.
    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            bench(
                &url,
                "not-the-lobby-token-at-all",
                &["--requests", "3", "--json"],
            )
        }
    })
    .await
    .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            report["seated"].as_u64(),
            report["failures"]["401"].as_u64()
        ),
        (Some(0), Some(3))
    );

    // Bad flags are refused before any request.
    let out = bench(&url, LOBBY_TOKEN, &["--seats", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));
    let out = bench("ws://nowhere", LOBBY_TOKEN, &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("http://"));
    host.terminate().await;
}
