//! What a newcomer sees running the real `zonekeep` binary: the help, the listen line, the log
//! written to a file, the errors for a short secret and an unknown zone kind, and a production
//! host that offers no dev zone kinds.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Read;
use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{KickCode, ServerMessage};

mod support;

fn zonekeep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zonekeep"))
}

#[test]
fn the_top_level_help_names_every_subcommand_in_its_summary() {
    let out = zonekeep().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let summary = help.lines().next().unwrap_or_default();
    for sub in ["serve", "ticket", "bench"] {
        assert!(summary.contains(sub), "{sub} missing from {summary:?}");
    }
}

#[test]
fn the_readme_architecture_names_every_crate_and_subcommand() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let arch = readme
        .split("## Architecture")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("an Architecture section with a crate list");
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            arch.contains(&name),
            "{name} missing from the README's architecture"
        );
    }
    let out = zonekeep().arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let binary_line = arch
        .lines()
        .find(|l| l.trim_start().starts_with("zonekeep "))
        .expect("the binary's line");
    let commands = help.split("Commands:").nth(1).unwrap();
    for line in commands.lines().take_while(|l| !l.trim().is_empty()) {
        let sub = line.split_whitespace().next().unwrap();
        if sub != "help" {
            assert!(
                binary_line.contains(sub),
                "{sub} missing from {binary_line:?}"
            );
        }
    }
}

#[test]
fn the_bench_help_shows_an_input_template() {
    let out = zonekeep().args(["bench", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains("--input '[\"$int:-1:1\",\"$int:-1:1\"]' --input-format bytes"),
        "an example --input: {help}"
    );
}

#[test]
fn a_short_secret_is_reported_once() {
    let data = tempfile::tempdir().unwrap();
    let out = zonekeep()
        .args(["serve", "--data-dir", data.path().to_str().unwrap()])
        .env("ZONEKEEP_TICKET_SECRET", "short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.matches("at least 32").count(), 1, "{err}");
}

#[test]
fn a_bare_bench_says_which_flag_is_missing() {
    let out = zonekeep()
        .arg("bench")
        .env_remove("ZONEKEEP_TICKET_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("ZONEKEEP_TICKET_SECRET") && err.contains("--workload arena"),
        "{err}"
    );
}

#[tokio::test]
async fn a_production_host_prints_its_url_logs_plain_text_and_serves_no_dev_kinds() {
    let data = tempfile::tempdir().unwrap();
    let (mut child, mut stderr, addr) = support::serve_piped(data.path(), &[]).await;

    let claims = json!({"sub": "newbie", "zone": "d-1", "exp": std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 60,
        "jti": "first-run-1", "kind": "dots"});
    let mut ws = support::hello(&addr, "d-1", support::sign(&claims)).await;
    let kick = loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap();
        match m {
            Some(Ok(Message::Binary(b))) => match ServerMessage::decode(&b, None) {
                Ok(ServerMessage::Kick(k)) => break k,
                other => panic!("a dev kind was served: {other:?}"),
            },
            Some(Ok(_)) => {}
            other => panic!("closed without a Kick: {other:?}"),
        }
    };
    assert_eq!(kick.code, KickCode::JOIN_REFUSED);
    assert!(
        kick.reason.contains("\"dots\"") && kick.reason.contains("serves: arena"),
        "the refusal names the kinds: {:?}",
        kick.reason
    );
    let _ = ws.close(None).await;

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let mut log = String::new();
    stderr.read_to_string(&mut log).unwrap();
    assert!(log.contains("zone kinds"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "no ANSI colours in a log that is not a terminal: {log:?}"
    );
}
