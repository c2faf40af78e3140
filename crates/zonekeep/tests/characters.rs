//! The arena demo keeps a player's score on its character: the stock binary admits a player to
//! arena-1 with the score its character carries, arena-2 has it once the player moves there, and
//! so does arena-1 after the host restarts. A module kind keeps characters the same way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;

use std::time::Duration;

use serde_json::json;
use support::*;
use zonekeep_client::{connect, ConnectOptions, Event};
use zonekeep_protocol::FieldValue;
use zonekeep_store::{CharacterAcquire, CharacterStore, SaveStore, SqliteStore, SQLITE_FILE_NAME};

/// Longest wait for the host to answer; only a guard against a hang.
const WAIT: Duration = Duration::from_secs(60);

/// The arena player kind's score field (after name and hue).
const F_SCORE: usize = 2;

/// Joins `zone` as `sub` and answers the score its avatar shows.
async fn score_in(addr: &str, zone: &str, sub: &str) -> (zonekeep_client::Connection, u32) {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let ticket = sign(&json!({
        "sub": sub, "zone": zone, "exp": exp,
        "jti": format!("{zone}-{sub}-{}", unique_run()),
    }));
    let (mut conn, _) = connect(
        &format!("ws://{addr}/zones/{zone}"),
        ConnectOptions::new(ticket),
    )
    .await
    .unwrap();
    let score = tokio::time::timeout(WAIT, async {
        let mut me = None;
        while let Some(ev) = conn.recv().await {
            let Event::Delta(patch) = ev else { continue };
            if let Some(control) = patch.control {
                me = control;
            }
            let Some(id) = me else { continue };
            if let Some(s) = patch.spawns.iter().find(|s| s.id == id) {
                match s.fields.get(F_SCORE) {
                    Some(FieldValue::U(n)) => return *n,
                    other => panic!("the score field: {other:?}"),
                }
            }
        }
        panic!("the connection ended before the avatar appeared");
    })
    .await
    .expect("the avatar appeared");
    (conn, score)
}

/// Until the store says `principal`'s character is free (its zone handed it back).
async fn released(store: &SqliteStore, principal: &str) {
    tokio::time::timeout(WAIT, async {
        loop {
            let c = store.load_character(principal).await.unwrap();
            if c.is_some_and(|c| c.holder.is_none()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the character was handed back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arena_score_follows_the_player_between_arenas_and_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store_spec = StoreSpec::Sqlite(dir.path().to_path_buf());
    let log = dir.path().join("host.log");
    let server = Server::start(&store_spec, &[], &log).await;

    // Ann's character carries 7 points from an arena played before, as that arena left it: its
    // lease taken, the score committed, the lease given back.
    let store = SqliteStore::open(&dir.path().join(SQLITE_FILE_NAME))
        .await
        .unwrap();
    let earlier = store.claim("arena-earlier").await.unwrap();
    let granted = store
        .acquire_character("ann", "arena-earlier", earlier.epoch)
        .await
        .unwrap();
    assert!(matches!(granted, CharacterAcquire::Granted { .. }));
    store
        .release_character(
            "ann",
            "arena-earlier",
            earlier.epoch,
            Some(&zonekeep_arena::character_with_score(7)),
        )
        .await
        .unwrap();

    let (conn, score) = score_in(&server.addr, "arena-1", "ann").await;
    assert_eq!(score, 7, "arena-1 shows the character's score");
    conn.close().await;
    released(&store, "ann").await;

    let (conn, score) = score_in(&server.addr, "arena-2", "ann").await;
    assert_eq!(score, 7, "it followed her to arena-2");
    conn.close().await;
    released(&store, "ann").await;

    server.terminate().await;
    let server = Server::start(&store_spec, &[], &log).await;
    let (conn, score) = score_in(&server.addr, "arena-1", "ann").await;
    assert_eq!(score, 7, "and across the host's restart");
    let character = store.load_character("ann").await.unwrap().unwrap();
    assert_eq!(
        character.holder.map(|(zone, _)| zone).as_deref(),
        Some("arena-1"),
        "held by the arena she is in"
    );
    conn.close().await;
    server.terminate().await;
}

/// Joins module zone `zone` of kind `mine` as `sub`; answers the gold its miner shows and
/// whether it has a character.
async fn miner_in(addr: &str, zone: &str, sub: &str) -> (zonekeep_client::Connection, u32, bool) {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let ticket = sign(&json!({
        "sub": sub, "zone": zone, "kind": "mine", "exp": exp,
        "jti": format!("{zone}-{sub}-{}", unique_run()),
    }));
    let (mut conn, _) = connect(
        &format!("ws://{addr}/zones/{zone}"),
        ConnectOptions::new(ticket),
    )
    .await
    .unwrap();
    let (gold, keeps) = tokio::time::timeout(WAIT, async {
        while let Some(ev) = conn.recv().await {
            let Event::Delta(patch) = ev else { continue };
            if let Some(s) = patch.spawns.first() {
                match (s.fields.first(), s.fields.get(1)) {
                    (Some(FieldValue::U(g)), Some(FieldValue::Bool(k))) => return (*g, *k),
                    other => panic!("the miner's fields: {other:?}"),
                }
            }
        }
        panic!("the connection ended before the miner appeared");
    })
    .await
    .expect("the miner appeared");
    (conn, gold, keeps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_kind_keeps_characters_through_the_stock_binary() {
    let dir = tempfile::tempdir().unwrap();
    let module = format!("mine={}", guest_build::characters_module().display());
    let server = Server::with_module(dir.path(), &module).await;
    let store = SqliteStore::open(&dir.path().join("zonekeep.db").join(SQLITE_FILE_NAME))
        .await
        .unwrap();
    // Ann has 5 gold from earlier play.
    let earlier = store.claim("mine-earlier").await.unwrap();
    store
        .acquire_character("ann", "mine-earlier", earlier.epoch)
        .await
        .unwrap();
    store
        .release_character(
            "ann",
            "mine-earlier",
            earlier.epoch,
            Some(&5u64.to_le_bytes()),
        )
        .await
        .unwrap();

    let (conn, gold, keeps) = miner_in(&server.addr, "mine-1", "ann").await;
    assert_eq!((gold, keeps), (5, true), "the module sees her character");
    // Mine a coin and bank it: the module commits the character at once.
    conn.send_input(&[1]).unwrap();
    conn.send_input(&[2]).unwrap();
    tokio::time::timeout(WAIT, async {
        loop {
            let c = store.load_character("ann").await.unwrap().unwrap();
            if c.data == 6u64.to_le_bytes() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the module committed 6 gold");
    // Another zone of the kind recalls it from the first.
    let (conn2, gold, _) = miner_in(&server.addr, "mine-2", "ann").await;
    assert_eq!(gold, 6, "the character followed her to mine-2");
    let held = store.load_character("ann").await.unwrap().unwrap();
    assert_eq!(held.holder.map(|(z, _)| z).as_deref(), Some("mine-2"));
    drop(conn);
    conn2.close().await;
    server.terminate().await;
}
