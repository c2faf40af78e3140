//! The demo arena as a WebAssembly module, served by the stock binary: `zonekeep serve --module
//! arena=FILE` replaces the built-in arena kind with the module, and a client plays it as it
//! plays the native one: the same kinds and fields, its ticket's name, the zone settings the
//! module asks for, and the shared movement rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;
mod support;

use std::time::Duration;

use serde_json::json;
use support::{sign, unique_run, Server};
use zonekeep_client::{connect, ConnectOptions, Event};
use zonekeep_protocol::FieldValue;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stock_binary_serves_the_arena_as_a_module() {
    let dir = tempfile::tempdir().unwrap();
    let module = format!("arena={}", guest_build::arena_module().display());
    let server = Server::with_module(dir.path(), &module).await;

    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let ticket = sign(&json!({
        "sub": "alice", "zone": "arena-m", "kind": "arena", "exp": exp,
        "jti": format!("arena-m-{}", unique_run()), "name": "Ada",
    }));
    let (mut conn, welcome) = connect(
        &format!("ws://{}/zones/arena-m", server.addr),
        ConnectOptions::new(ticket),
    )
    .await
    .unwrap();
    // The module's settings, and the native arena's kinds.
    assert_eq!(welcome.tick_hz, 30);
    let kinds: Vec<&str> = welcome
        .schema
        .kinds
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(kinds, ["player", "drone", "pickup", "pillar"]);

    // Find the avatar (under its ticket's name), then walk right until the host moves it.
    let (name, x0, x1) = tokio::time::timeout(WAIT, async {
        let mut me = None;
        let mut start = None;
        while let Some(ev) = conn.recv().await {
            let Event::Delta(patch) = ev else { continue };
            if let Some(control) = patch.control {
                me = control;
            }
            let Some(id) = me else { continue };
            if let Some(s) = patch.spawns.iter().find(|s| s.id == id) {
                let name = match s.fields.first() {
                    Some(FieldValue::Str(n)) => n.clone(),
                    other => panic!("the name field: {other:?}"),
                };
                start = Some((name, s.x));
                conn.send_input(&[8]).unwrap();
            }
            let moved = patch
                .updates
                .iter()
                .filter(|u| u.id == id)
                .find_map(|u| u.pos);
            if let (Some((x, _)), Some((name, x0))) = (moved, &start) {
                return (name.clone(), *x0, x);
            }
        }
        panic!("the connection ended before the avatar moved");
    })
    .await
    .expect("the avatar moved");
    assert_eq!(name, "Ada");
    assert!(x1 > x0, "walked right: {x0} -> {x1}");

    // The host lists it as a zone of the module kind.
    let modules = server.admin("/admin/modules").await;
    assert_eq!(modules["kinds"][0]["kind"], "arena", "{modules}");
    conn.close().await;
}
