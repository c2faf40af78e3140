//! `zonekeep bench boards` against a host on its SQLite store: the board is filled, updated and
//! read, it holds exactly what was submitted (0 bad, the right size), the figures come out as
//! JSON and text; bad flags and a wrong credential are answered clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{Server, StoreSpec, ADMIN_TOKEN, LOBBY_TOKEN};

const BIN: &str = env!("CARGO_BIN_EXE_zonekeep");

fn bench_cmd(url: &str, lobby: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["bench", "boards", "--url", url])
        .args(extra)
        .env("ZONEKEEP_LOBBY_TOKEN", lobby)
        .env("ZONEKEEP_ADMIN_TOKEN", ADMIN_TOKEN);
    cmd
}

fn bench(url: &str, lobby: &str, extra: &[&str]) -> Output {
    bench_cmd(url, lobby, extra).output().unwrap()
}

async fn bench_async(url: &str, lobby: &str, extra: &[&str]) -> Output {
    support::output_off_runtime(bench_cmd(url, lobby, extra)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boards_bench_fills_updates_reads_and_finds_the_board_exact() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let host = Server::start(
        &store,
        &[
            "--dev",
            "--admin-token",
            ADMIN_TOKEN,
            "--lobby-token",
            LOBBY_TOKEN,
            "--max-connections-per-ip",
            "256",
        ],
        &dir.path().join("host.log"),
    )
    .await;
    let url = format!("http://{}", host.addr);

    let out = bench_async(
        &url,
        LOBBY_TOKEN,
        &[
            "--entries",
            "300",
            "--updates",
            "300",
            "--queries",
            "100",
            "--store-queries",
            "150",
            "--store-concurrency",
            "1",
            "--concurrency",
            "16",
            "--keep-board",
            "--json",
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim().lines().count(),
        1,
        "one line of JSON: {stdout}"
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["bad"], 0, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    assert_eq!(report["size"], 300, "{report}");
    assert_eq!(report["store_size"], 300, "{report}");
    let check = &report["check"];
    assert_eq!(check["ranks_checked"], true, "{report}");
    assert_eq!(check["sampled"], 100, "{report}");
    assert_eq!(check["bad_store"], 0, "{report}");
    assert_eq!(check["bad_default"], 0, "{report}");
    assert_eq!(report["fill"]["ok"], 300, "{report}");
    assert_eq!(report["update"]["ok"], 300, "{report}");
    // Store reads are counted on their own; more of them than --queries draws more principals
    // to read around.
    for (phase, reads) in [
        ("top", 100),
        ("around", 100),
        ("top_store", 150),
        ("around_store", 150),
    ] {
        assert_eq!(report[phase]["ok"], reads, "{phase}: {report}");
        let l = &report[phase]["latency_ms"];
        assert!(l["p99"].as_f64().unwrap() >= l["p50"].as_f64().unwrap());
    }
    // Without Redis every read is the store's.
    assert_eq!(report["top"]["sources"]["store"], 100, "{report}");
    assert_eq!(report["around_store"]["sources"]["store"], 150, "{report}");
    assert_eq!(report["store_queries"], 150, "{report}");
    assert!(report["updates_per_second"].as_f64().unwrap() > 0.0);
    assert!(report["fill_per_second"].as_f64().unwrap() > 0.0);
    let p = &report["submit_latency_ms"];
    assert!(p["p99"].as_f64().unwrap() >= p["p50"].as_f64().unwrap());

    // The board was kept: it holds the 300 principals. A second run on it is refused (it is
    // not empty), before any score is submitted.
    let board = report["board"].as_str().unwrap().to_owned();
    let top = host.get(&format!("/boards/{board}?limit=1")).await;
    let top: Value = serde_json::from_str(&top).unwrap();
    assert_eq!(top["size"], 300, "{top}");
    let out = bench_async(&url, LOBBY_TOKEN, &["--entries", "3", "--board", &board]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds 300 score"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The text form, on a board of its own, deleted after the run.
    let out = bench_async(
        &url,
        LOBBY_TOKEN,
        &["--entries", "20", "--updates", "20", "--queries", "10"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 bad, 0 failed requests"), "{text}");
    assert!(text.contains("size 20 (store 20) of 20 expected"), "{text}");
    assert!(text.contains("board deleted"), "{text}");

    // A wrong back-end credential: every submission refused, said, and the board deleted.
    let out = bench_async(
        &url,
        "not-the-lobby-token-0123456789abcdef",
        &["--entries", "5", "--updates", "0", "--queries", "0"],
    )
    .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("submit 401"), "{err}");
    let boards: Value = serde_json::from_str(&host.get("/boards").await).unwrap();
    let benches: Vec<&str> = boards["boards"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["name"].as_str())
        .filter(|n| n.starts_with("bench-"))
        .collect();
    assert_eq!(benches, [board.as_str()], "only the kept board: {boards}");

    // Bad flags are refused before any request.
    let out = bench(&url, LOBBY_TOKEN, &["--entries", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));
    let out = bench("ws://nowhere", LOBBY_TOKEN, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("http://"));
    host.terminate().await;
}
