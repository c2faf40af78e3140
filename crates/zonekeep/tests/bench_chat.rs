//! `zonekeep bench chat` against a dev host on its SQLite store: every line said is kept and
//! heard once by every session of its zone (0 bad), the figures come out as JSON and text; bad
//! flags and a wrong ticket secret are answered clearly, with a non-zero exit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{Server, StoreSpec, SECRET};

const BIN: &str = env!("CARGO_BIN_EXE_zonekeep");

/// The tiny load: 2 zones of 3 listeners and 2 senders, 20 lines a second each for 2 s.
const TINY: [&str; 10] = [
    "--zones",
    "2",
    "--listeners",
    "3",
    "--senders",
    "2",
    "--rate",
    "20",
    "--seconds",
    "2",
];

fn bench_cmd(url: &str, secret: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["bench", "chat", "--url", url])
        .args(extra)
        .env("ZONEKEEP_TICKET_SECRET", secret)
        .env_remove("ZONEKEEP_TICKET_KID");
    cmd
}

async fn bench(url: &str, secret: &str, extra: &[&str]) -> Output {
    support::output_off_runtime(bench_cmd(url, secret, extra)).await
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_bench_keeps_every_line_and_hears_it_in_every_session_of_its_zone() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let host = Server::start(
        &store,
        &[
            "--dev",
            "--chat-rate",
            "1000",
            "--chat-burst",
            "1000",
            "--max-connections-per-ip",
            "256",
        ],
        &dir.path().join("host.log"),
    )
    .await;
    let url = format!("http://{}", host.addr);

    let mut args = TINY.to_vec();
    args.push("--json");
    let out = bench(&url, SECRET, &args).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert_eq!(
        stdout.trim().lines().count(),
        1,
        "one line of JSON: {stdout}"
    );
    let r: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(r["bad"], 0, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["joined"], 10, "{r}");
    assert_eq!(r["sessions_per_zone"], 5, "{r}");
    let sent = r["sent"].as_u64().unwrap();
    // 4 senders at 20 a second for 2 s: 160 lines, give or take a tick at the window's edges.
    assert!((150..=170).contains(&sent), "{r}");
    assert_eq!(r["kept"], sent, "{r}");
    assert_eq!(r["refused"], serde_json::json!({}), "{r}");
    assert_eq!(r["unanswered"], 0, "{r}");
    for k in [
        "lost",
        "missing_deliveries",
        "duplicates",
        "out_of_order",
        "misrouted",
    ] {
        assert_eq!(r[k], 0, "{k}: {r}");
    }
    // Every kept line reached the 5 sessions of its zone, its sender's included.
    assert_eq!(r["deliveries"], sent * 5, "{r}");
    assert_eq!(r["expected_deliveries"], sent * 5, "{r}");
    let l = &r["latency_ms"];
    assert_eq!(l["count"], sent * 5, "{r}");
    let (p50, p90, p99, max) = (
        l["p50"].as_f64().unwrap(),
        l["p90"].as_f64().unwrap(),
        l["p99"].as_f64().unwrap(),
        l["max"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= p90 && p90 <= p99 && p99 <= max, "{r}");
    assert!(r["kept_per_second"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["deliveries_per_second"].as_f64().unwrap() > 0.0, "{r}");

    // The text form.
    let out = bench(&url, SECRET, &TINY).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.contains("sessions: 10 of 10 joined"), "{stdout}");
    assert!(stdout.contains("0 kept lines lost"), "{stdout}");
    assert!(stdout.contains("fan-out latency p50"), "{stdout}");
    assert!(stdout.contains("0 bad, 0 failed sessions"), "{stdout}");

    // A wrong ticket secret: every session refused, said with the Kick's code, non-zero exit.
    let out = bench(&url, "not-the-host-secret-0123456789abcdef", &TINY).await;
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("no session joined"), "{stderr}");
    assert!(stderr.contains("BAD_TICKET"), "{stderr}");
    assert!(stdout.contains("0 of 10 joined"), "{stdout}");

    // Bad flags are refused before any session connects.
    for (flags, says) in [
        (&["--zones", "0"][..], "--zones"),
        (&["--rate", "0"][..], "--rate"),
        (&["--seconds", "0"][..], "--seconds"),
    ] {
        let out = bench(&url, SECRET, flags).await;
        assert!(!out.status.success(), "{flags:?}");
        let (_, stderr) = text(&out);
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    let out = bench("ws://nowhere", SECRET, &[]).await;
    assert!(!out.status.success());
    assert!(text(&out).1.contains("http://"));
    let out = bench(&url, "too-short", &[]).await;
    assert!(!out.status.success());
    assert!(text(&out).1.contains("--ticket-secret"));
    host.terminate().await;
}
