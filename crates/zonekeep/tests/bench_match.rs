//! `zonekeep bench match` against a matchmaker host on its SQLite store: every bot is matched,
//! every match has exactly its size of players, and the figures come out as JSON; a wrong ticket
//! secret, an unknown queue and bad flags are answered clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{Server, StoreSpec, SECRET};

const BIN: &str = env!("CARGO_BIN_EXE_zonekeep");

fn bench_cmd(url: &str, secret: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["bench", "match", "--url", url])
        .args(extra)
        .env("ZONEKEEP_TICKET_SECRET", secret)
        .env_remove("ZONEKEEP_TICKET_KID");
    cmd
}

fn bench(url: &str, secret: &str, extra: &[&str]) -> Output {
    bench_cmd(url, secret, extra).output().unwrap()
}

async fn bench_async(url: &str, secret: &str, extra: &[&str]) -> Output {
    support::output_off_runtime(bench_cmd(url, secret, extra)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_match_bench_matches_every_bot_in_matches_of_the_queue_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    // The host's ticket secret is support::SECRET (key id "default"). Every waiting bot holds a
    // long poll, so one address needs more connections than the default 32.
    let host = Server::start(
        &store,
        &[
            "--match-queue",
            "duel:size=2:kind=arena",
            "--max-connections-per-ip",
            "256",
        ],
        &dir.path().join("host.log"),
    )
    .await;
    let url = format!("http://{}", host.addr);

    let out = bench_async(
        &url,
        SECRET,
        &["--bots", "40", "--concurrency", "8", "--json"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["bots"], 40, "{report}");
    assert_eq!(report["assigned"], 40, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    assert_eq!(report["ended"], 0, "{report}");
    assert_eq!(report["matches"], 20, "{report}");
    assert_eq!(report["malformed"], 0, "{report}");
    assert_eq!(report["overfull"], 0, "{report}");
    assert_eq!(report["underfull"], 0, "{report}");
    assert_eq!(report["inconsistent"], 0, "{report}");
    assert_eq!(report["principals_in_two_matches"], 0, "{report}");
    assert_eq!(report["matches_partly_seen"], 0, "{report}");
    let ttm = &report["time_to_match_ms"];
    assert!(ttm["p50"].as_f64().unwrap() > 0.0, "{report}");
    assert!(ttm["max"].as_f64().unwrap() >= ttm["p99"].as_f64().unwrap());
    assert!(ttm["p99"].as_f64().unwrap() >= ttm["p50"].as_f64().unwrap());
    assert!(report["matches_per_second"].as_f64().unwrap() > 0.0);

    // The text form says the same.
    let out = bench_async(&url, SECRET, &["--bots", "4", "--concurrency", "4"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 assigned"), "{text}");
    assert!(text.contains("overfull/underfull matches: 0"), "{text}");

    // A bot left without a partner gives up after --max-wait, cancelling its search.
    let out = bench_async(&url, SECRET, &["--bots", "1", "--max-wait", "1", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["assigned"], 0, "{report}");
    assert_eq!(report["endings"]["unmatched/cancelled"], 1, "{report}");

    // A secret the host does not verify with: every bot refused at creation, counted by code.
    let out = bench_async(
        &url,
        "not-the-host-secret-0123456789abcdef",
        &["--bots", "3", "--json"],
    )
    .await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["assigned"], 0, "{report}");
    assert_eq!(report["failures"]["create 401 unauthorized"], 3, "{report}");

    // A queue the host does not serve.
    let out = bench_async(&url, SECRET, &["--bots", "2", "--queue", "nope", "--json"]).await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["failures"]["create 404 unknown_queue"], 2,
        "{report}"
    );

    // Bad flags are refused before any request.
    let out = bench(&url, SECRET, &["--bots", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));
    let out = bench("ws://nowhere", SECRET, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("http://"));
    let out = bench(&url, "short", &["--bots", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ticket-secret"));
    host.terminate().await;
}
