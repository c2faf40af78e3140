//! Moving players between a module zone and a native one on a real host (PROTOCOL.md §5.3.2):
//! the doors kind built as a module (`examples/doors-module`) beside the native `doors` kind,
//! each reading the purse the other hands out. A player walks from a module zone to a native
//! one and back to a module zone, carrying its purse; a locked module zone turns a native
//! zone's player away (and a locked native zone a module zone's player), and it comes back
//! still connected with its purse.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;
mod support;

use serde_json::json;

use support::doors::{doors_ticket, doors_ticket_of, Conn};
use support::{Server, StoreSpec};

/// The kind name the doors module is served under.
const MODULE_KIND: &str = "doors-wasm";

/// A host on SQLite in `dir` serving the doors module as [`MODULE_KIND`] beside the native kinds.
async fn host(dir: &std::path::Path) -> Server {
    let module = guest_build::doors_module().display().to_string();
    let spec = format!("{MODULE_KIND}={module}");
    let store = StoreSpec::Sqlite(dir.to_path_buf());
    Server::start(&store, &["--module", &spec], &dir.join("host.log")).await
}

fn url(server: &Server, zone: &str) -> String {
    format!("ws://{}/zones/{zone}", server.addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_carries_its_purse_from_a_module_zone_to_a_native_one_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let mut ada = Conn::hello(
        &url(&server, "mod-a"),
        doors_ticket_of(MODULE_KIND, "ada", "mod-a", json!({"coins": 2})),
        vec![],
        vec![8],
    )
    .await;
    ada.welcome().await;
    ada.purse(2, "mod-a").await;
    ada.input(vec![1]).await;
    ada.purse(3, "mod-a").await;
    ada.input(vec![1]).await;
    ada.purse(4, "mod-a").await;

    // Out of the module zone into a native one, created on the way as the claims say.
    ada.walk("native-b", json!({"kind": "doors"})).await;
    let transfer = ada.transfer().await;
    assert_eq!(transfer.zone_id, "native-b");
    assert_eq!(transfer.url, url(&server, "native-b"));
    let mut there = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    assert_eq!(there.welcome().await.zone_id, "native-b");
    there.purse(4, "native-b").await;
    there.input(vec![1]).await;
    there.purse(5, "native-b").await;

    // Back into a module zone (a new one, of the module's kind): the purse plus the coin.
    there
        .walk("mod-c", json!({"kind": MODULE_KIND, "params": {}}))
        .await;
    let back = there.transfer().await;
    assert_eq!(back.zone_id, "mod-c");
    let mut home = Conn::hello(&back.url, back.ticket.clone(), vec![], vec![8]).await;
    assert_eq!(home.welcome().await.zone_id, "mod-c");
    home.purse(5, "mod-c").await;
    home.input(vec![1]).await;
    home.purse(6, "mod-c").await;

    // The store holds both moves, each with the purse as it left.
    let store = zonekeep_store::open_store("sqlite", dir.path())
        .await
        .unwrap();
    for (from, coins) in [("mod-a", 4u32), ("native-b", 5)] {
        let moved = store
            .transfers
            .latest_transfer_from(from, "ada", 0)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(moved.status, zonekeep_store::TransferStatus::Accepted);
        assert_eq!(moved.transfer.state, coins.to_le_bytes(), "from {from}");
    }
    drop((ada, there, home));
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_zone_returns_the_player_with_its_purse_across_module_and_native() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    // bob opens a module vault whose door is locked.
    let mut bob = Conn::hello(
        &url(&server, "mod-vault"),
        doors_ticket_of(MODULE_KIND, "bob", "mod-vault", json!({"locked": true})),
        vec![],
        vec![8],
    )
    .await;
    bob.welcome().await;

    let mut ada = Conn::hello(
        &url(&server, "yard"),
        doors_ticket("ada", "yard", json!({"coins": 2})),
        vec![],
        vec![8],
    )
    .await;
    ada.welcome().await;
    ada.purse(2, "yard").await;
    ada.input(vec![1]).await;
    ada.purse(3, "yard").await;
    ada.walk("mod-vault", json!({})).await;
    let why = ada.returned().await;
    assert!(why.contains("locked"), "{why}");
    // Still here, still playing, with the purse it handed out.
    ada.purse(3, "yard").await;
    ada.input(vec![1]).await;
    ada.purse(4, "yard").await;

    // The other way: a module zone's player turned away by a locked native zone comes back to
    // the module zone (TRANSFER_IN, returning) with the purse it handed out.
    let mut cat = Conn::hello(
        &url(&server, "cellar"),
        doors_ticket("cat", "cellar", json!({"locked": true})),
        vec![],
        vec![8],
    )
    .await;
    cat.welcome().await;
    let mut dan = Conn::hello(
        &url(&server, "mod-porch"),
        doors_ticket_of(MODULE_KIND, "dan", "mod-porch", json!({"coins": 7})),
        vec![],
        vec![8],
    )
    .await;
    dan.welcome().await;
    dan.purse(7, "mod-porch").await;
    dan.walk("cellar", json!({})).await;
    let why = dan.returned().await;
    assert!(why.contains("locked"), "{why}");
    dan.input(vec![1]).await;
    dan.purse(8, "mod-porch").await;
    drop((bob, ada, cat, dan));
    server.terminate().await;
}
