//! Moving players between zones (PROTOCOL.md §5.3.2) on a real host, with a client that speaks
//! the protocol by hand: a move that is accepted (Transfer frame, credential, the player's state
//! in the target), refused (the player stays, still connected, and is told why), one to a zone
//! that cannot start, one a client too old to follow, and the Transfer sent again to a
//! connection that comes back, and a refused move then an accepted one of the same player.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;

use support::doors::{doors_ticket, Conn, Seen, WAIT};
use support::{Server, StoreSpec};

async fn host(dir: &std::path::Path) -> Server {
    let store = StoreSpec::Sqlite(dir.to_path_buf());
    Server::start(&store, &[], &dir.join("host.log")).await
}

fn url(server: &Server, zone: &str) -> String {
    format!("ws://{}/zones/{zone}", server.addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_walks_to_another_zone_with_its_purse_and_comes_back_to_be_sent_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let mut ada = Conn::hello(
        &url(&server, "hall-a"),
        doors_ticket("ada", "hall-a", json!({"coins": 5})),
        vec![],
        vec![8],
    )
    .await;
    let welcome = ada.welcome().await;
    assert_eq!(welcome.version, 8);
    ada.purse(5, "hall-a").await;
    ada.input(vec![1]).await;
    ada.purse(6, "hall-a").await;

    ada.walk("hall-b", json!({})).await;
    let transfer = ada
        .until("the Transfer", |s| match s {
            Seen::Transfer(t) => Some(t.clone()),
            Seen::Returned(why) => panic!("the move was returned: {why}"),
            _ => None,
        })
        .await;
    assert_eq!(transfer.zone_id, "hall-b");
    assert_eq!(transfer.url, url(&server, "hall-b"));

    // The credential admits ada to hall-b, once, with the purse it carried.
    let mut there = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    let arrived = there.welcome().await;
    assert_eq!(arrived.zone_id, "hall-b");
    there.purse(6, "hall-b").await;
    there.input(vec![1]).await;
    there.purse(7, "hall-b").await;
    let mut again = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    let kick = again
        .until("a Kick", |s| match s {
            Seen::Kick(code, _) => Some(*code),
            _ => None,
        })
        .await;
    assert_eq!(
        kick, 8,
        "a transfer credential is single use (TICKET_REPLAYED)"
    );

    // A connection of ada's that comes back to hall-a is sent to hall-b again.
    drop(ada);
    let mut back = Conn::hello(
        &url(&server, "hall-a"),
        doors_ticket("ada", "hall-a", json!({})),
        welcome.reconnect_token.clone(),
        vec![8],
    )
    .await;
    let resent = back
        .until("the Transfer sent again", |s| match s {
            Seen::Transfer(t) => Some(t.clone()),
            Seen::Welcome(_) => panic!("resumed in the zone the player left"),
            _ => None,
        })
        .await;
    assert_eq!(resent, transfer);

    // The store holds one move, accepted, whose player arrived.
    let store = zonekeep_store::open_store("sqlite", dir.path())
        .await
        .unwrap();
    let moved = store
        .transfers
        .latest_transfer_from("hall-a", "ada", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.status, zonekeep_store::TransferStatus::Accepted);
    assert_eq!(moved.transfer.state, 6u32.to_le_bytes());
    let deadline = tokio::time::Instant::now() + WAIT;
    while !store
        .transfers
        .transfer(&moved.transfer.id)
        .await
        .unwrap()
        .unwrap()
        .arrived
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the arrival was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_move_returns_the_player_still_connected_and_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    // bob opens a vault whose door is locked.
    let mut bob = Conn::hello(
        &url(&server, "vault"),
        doors_ticket("bob", "vault", json!({"locked": true})),
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
    ada.walk("vault", json!({})).await;
    let why = ada
        .until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            Seen::Transfer(_) => panic!("moved into a locked zone"),
            _ => None,
        })
        .await;
    assert!(why.contains("locked"), "{why}");
    // Still here, still playing, with the purse it handed out.
    ada.purse(2, "yard").await;
    ada.input(vec![1]).await;
    ada.purse(3, "yard").await;

    // A move to a zone that cannot start comes back too, saying why.
    ada.walk("nowhere", json!({"kind": "no-such-kind"})).await;
    let why = ada
        .until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            Seen::Transfer(_) => panic!("moved into a zone of an unknown kind"),
            _ => None,
        })
        .await;
    assert!(why.contains("no-such-kind"), "{why}");
    ada.purse(3, "yard").await;
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_too_old_to_follow_a_move_is_not_moved() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let mut old = Conn::hello(
        &url(&server, "porch"),
        doors_ticket("ada", "porch", json!({"coins": 1})),
        vec![],
        vec![7],
    )
    .await;
    assert_eq!(old.welcome().await.version, 7);
    old.purse(1, "porch").await;
    old.walk("garden", json!({})).await;
    let why = old
        .until("the notice of the returned move", |s| match s {
            Seen::Returned(why) => Some(why.clone()),
            _ => None,
        })
        .await;
    assert!(why.contains("version 8"), "{why}");
    old.purse(1, "porch").await;
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_move_then_an_accepted_one_each_have_their_own_single_use_key() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let mut bob = Conn::hello(
        &url(&server, "cellar"),
        doors_ticket("bob", "cellar", json!({"locked": true})),
        vec![],
        vec![8],
    )
    .await;
    bob.welcome().await;
    let mut ada = Conn::hello(
        &url(&server, "stairs"),
        doors_ticket("ada", "stairs", json!({"coins": 3})),
        vec![],
        vec![8],
    )
    .await;
    ada.welcome().await;
    ada.purse(3, "stairs").await;

    // Refused: the player stays, with its purse.
    ada.walk("cellar", json!({})).await;
    let why = ada.returned().await;
    assert!(why.contains("locked"), "{why}");
    ada.purse(3, "stairs").await;

    // The same player, the same source, another move: accepted under its own transfer.
    ada.walk("attic", json!({})).await;
    let transfer = ada.transfer().await;
    assert_eq!(transfer.zone_id, "attic");
    let mut there = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    there.welcome().await;
    there.purse(3, "attic").await;

    // Its credential admits once: a replay is refused, and leaves the arrived player alone.
    let mut replay = Conn::hello(&transfer.url, transfer.ticket.clone(), vec![], vec![8]).await;
    let code = replay
        .until("a Kick", |s| match s {
            Seen::Kick(code, _) => Some(*code),
            Seen::Welcome(_) => panic!("a replayed transfer credential was admitted"),
            _ => None,
        })
        .await;
    assert_eq!(code, 8, "TICKET_REPLAYED");
    there.input(vec![1]).await;
    there.purse(4, "attic").await;

    // Two records, one returned and one accepted, under distinct ids.
    let store = zonekeep_store::open_store("sqlite", dir.path())
        .await
        .unwrap();
    let moved = store
        .transfers
        .latest_transfer_from("stairs", "ada", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.status, zonekeep_store::TransferStatus::Accepted);
    let db = rusqlite::Connection::open(dir.path().join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
    let mut q = db
        .prepare("SELECT id, status FROM zone_transfers WHERE principal = 'ada' ORDER BY created_at_ms, id")
        .unwrap();
    let rows: Vec<(String, String)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_ne!(rows[0].0, rows[1].0);
    let statuses: Vec<&str> = rows.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(statuses, ["returned", "accepted"], "{rows:?}");
    drop((bob, ada, there, replay));
    server.terminate().await;
}
