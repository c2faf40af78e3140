//! Graceful shutdown of the real `zonekeep` process on SIGTERM: connected
//! clients are told SHUTTING_DOWN, zones are disposed, the process exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::BufReader;
use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{DeltaContext, KickCode, ServerMessage};
use zonekeep_protocol::schema::Schema;

mod support;

use support::SECRET;

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn sigterm_kicks_clients_with_shutting_down_and_exits_cleanly() {
    let data = tempfile::tempdir().unwrap();
    let (mut child, stderr, addr) =
        support::serve_piped(data.path(), &["--shutdown-timeout-ms", "5000"]).await;

    let claims = json!({"sub": "sam", "zone": "bye", "exp": now() + 60, "jti": "shutdown-1"});
    let mut ws = support::hello(&addr, "bye", support::sign(&claims)).await;
    let mut schema = Schema {
        pos_step: 0.01,
        kinds: vec![],
    };
    let mut welcomed = false;
    // Read until the Welcome and the BASELINE arrived, then signal the process.
    while !welcomed {
        let Some(Ok(Message::Binary(b))) = ws.next().await else {
            panic!("closed before Welcome")
        };
        let msg = ServerMessage::decode(
            &b,
            Some(DeltaContext {
                schema: &schema,
                known: &[],
            }),
        );
        match msg {
            // The default kind replicates entities: Deltas decode with its schema.
            Ok(ServerMessage::Welcome(w)) => schema = w.schema,
            Ok(ServerMessage::Delta(d)) => welcomed = d.baseline,
            _ => {}
        }
    }

    let pid = child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());

    let code = loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap();
        match m {
            Some(Ok(Message::Binary(b))) => {
                if let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(
                    &b,
                    Some(DeltaContext {
                        schema: &schema,
                        known: &[],
                    }),
                ) {
                    break k.code;
                }
            }
            Some(Ok(_)) => {}
            other => panic!("closed without a Kick: {other:?}"),
        }
    };
    assert_eq!(code, KickCode::SHUTTING_DOWN);

    let status = tokio::task::spawn_blocking(move || child.0.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status}");
    let log = tokio::task::spawn_blocking(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s).unwrap();
        s
    })
    .await
    .unwrap();
    assert!(log.contains("SIGTERM received"), "{log}");
    assert!(log.contains("shutdown complete"), "{log}");
    assert!(!log.contains(SECRET), "the secret never reaches the logs");
}
