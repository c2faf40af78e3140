//! `zonekeep bench ab` with the debug build as both A and B: the runs go in pairs that alternate
//! which build goes first, each against a fresh host; the table shows both builds' medians and
//! the zones' work counters over the window; bad input is refused before any host starts.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_zonekeep");

/// `zonekeep bench ab ARGS` with its temporary directories (hosts' data and logs) under `tmp`.
fn ab(tmp: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["bench", "ab"])
        .args(args)
        .env("TMPDIR", tmp)
        .env_remove("ZONEKEEP_TICKET_SECRET")
        .output()
        .unwrap()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The A and B medians of the table row `key`.
fn medians(stdout: &str, key: &str) -> (f64, f64) {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no row {key}:\n{stdout}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| -> f64 {
        cells
            .get(i)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("row {key} cell {i}: {line}"))
    };
    (num(1), num(3))
}

#[test]
fn two_pairs_of_one_build_run_a_b_b_a_and_count_the_same_work() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("ab.json");
    let out = ab(
        tmp.path(),
        &[
            "--a",
            BIN,
            "--b",
            BIN,
            "--pairs",
            "2",
            "--workload",
            "arena",
            "--zone",
            "ab-arena",
            "--npcs",
            "50",
            "--bots",
            "2",
            "--duration",
            "2s",
            "--warmup",
            "1s",
            "--no-progress",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.lines().any(|l| l.starts_with("order: A B B A")),
        "{stdout}"
    );
    assert!(
        stdout.contains("A median") && stdout.contains("B median") && stdout.contains("B/A"),
        "{stdout}"
    );
    for key in ["ticks", "frames"] {
        let (a, b) = medians(&stdout, key);
        assert!(a > 0.0 && b > 0.0, "{key}: A {a}, B {b}\n{stdout}");
    }
    // The host's own figures are there too (their values move with the machine's load).
    let (a, b) = medians(&stdout, "server_cpu_cores");
    assert!(a >= 0.0 && b >= 0.0, "{stdout}");
    medians(&stdout, "tick_p99_ms");

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let builds: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["build"].as_str().unwrap())
        .collect();
    assert_eq!(builds, ["A", "B", "B", "A"]);
    assert_eq!(doc["order"], serde_json::json!(["A", "B", "B", "A"]));
    for side in ["A", "B"] {
        let ticks = &doc["medians"][side]["ticks"];
        assert_eq!(ticks["runs"], 2, "{ticks}");
        assert!(ticks["median"].as_f64().unwrap() > 0.0, "{ticks}");
    }
    assert!(doc["runs"][0]["report"]["server"]["cpu_s"].is_number());
    // Every host's directory went with its run.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("zonekeep-bench-ab")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let run = ["--workload", "arena", "--bots", "1", "--duration", "1s"];
    let refused = |args: &[&str], says: &str| {
        let mut all = args.to_vec();
        all.extend_from_slice(&run);
        let out = ab(tmp.path(), &all);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?} succeeded: {stdout}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    refused(
        &["--a", BIN, "--b", BIN, "--pairs", "0"],
        "--pairs must be at least 1",
    );
    let missing = tmp.path().join("no-such-zonekeep");
    refused(
        &["--a", missing.to_str().unwrap(), "--b", BIN],
        "no such file",
    );
    let plain = tmp.path().join("not-executable");
    std::fs::write(&plain, "not a program").unwrap();
    refused(
        &["--a", BIN, "--b", plain.to_str().unwrap()],
        "not executable",
    );
    refused(
        &["--a", BIN, "--b", BIN, "--url", "ws://127.0.0.1:9"],
        "leave --url out",
    );
    // A host that does not start: its log's tail says why.
    refused(
        &[
            "--a",
            BIN,
            "--b",
            BIN,
            "--pairs",
            "1",
            "--serve",
            "--no-such-serve-flag",
        ],
        "the host did not start",
    );
    let out = ab(
        tmp.path(),
        &[
            &["--a", BIN, "--b", BIN, "--serve", "--no-such-serve-flag"][..],
            &run[..],
        ]
        .concat(),
    );
    assert!(
        text(&out).1.contains("--no-such-serve-flag"),
        "{}",
        text(&out).1
    );
}
