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
