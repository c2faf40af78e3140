//! Persistence in the host, end to end on a SQLite file: hibernation (Dormant
//! → saved → unloaded → restored by the next join), a save the code cannot
//! restore (kept, refused with the reason, reported by the admin API),
//! facts settling through slow storage, a host whose zone another host
//! claimed (fenced): it stops committing, unloads the zone and kicks; and a
//! returned move's state that a refused join reclaimed, given back for the
//! player's next join.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use zonekeep_core::Snapshot;
use zonekeep_protocol::messages::{KickCode, ServerMessage};
use zonekeep_server::examples::DOORS_TOPIC_COINS as TOPIC_COINS;
use zonekeep_store::{FactLedger, NewTransfer, SaveStore, SqliteStore, SQLITE_FILE_NAME};

use crate::common::*;
use crate::tally::*;

#[tokio::test]
async fn an_empty_zone_goes_dormant_is_saved_unloaded_and_restored_by_the_next_join() {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = persistent(dir.path(), None).await;
    let (mut ws, _, mut r) = join_tally(&server, "hib", "ann").await;
    assert_eq!(r.count, Some(0), "a new zone starts at 0");
    for n in 1..=3u32 {
        send_input(&mut ws, n, &u64::from(n).to_le_bytes()).await;
    }
    read_until(&mut ws, &mut r, |r| r.ack >= 3 && r.settled.len() >= 3).await;

    // The admin detail shows the zone's saves and facts.
    eventually("a periodic save", || async {
        let (_, d) = admin_get(&server, "/admin/zones/hib").await;
        d["persistence"]["save"]["last_saved_seq"]
            .as_u64()
            .is_some()
    })
    .await;
    let (status, d) = admin_get(&server, "/admin/zones/hib").await;
    assert_eq!(status, 200);
    assert_eq!(d["persistence"]["save_every_ms"], 100);
    assert_eq!(d["persistence"]["save"]["fenced"], false);

    // Leave: the zone empties, goes Idle then Dormant, is saved and unloaded.
    ws.close(None).await.unwrap();
    drop(ws);
    eventually(
        "the dormant zone to be unloaded and its save written",
        || async {
            let (_, list) = admin_get(&server, "/admin/zones").await;
            // The fleet directory still lists the zone, no longer running anywhere.
            list["zones"]
                .as_array()
                .is_some_and(|z| z.iter().all(|z| z["running"] == false))
                && p.storage().zone_count() == 0
        },
    )
    .await;
    let rec = p.store().saves.load("hib").await.unwrap().unwrap();
    let snap = Snapshot::decode(&rec.bytes).unwrap();
    assert_eq!(
        snap.zone,
        3u64.to_le_bytes().to_vec(),
        "the state was saved"
    );
    assert!(snap.facts.is_empty(), "every fact had settled");
    assert!(metric(&server, "zonekeep_saves_ok_total").await >= 1.0);
    assert_eq!(metric(&server, "zonekeep_facts_settled_total").await, 3.0);

    // The next join restores it, exactly where it stopped.
    let (ws, welcome, r) = join_tally(&server, "hib", "ann").await;
    assert_eq!(welcome.tick, snap.tick, "the tick continues from the save");
    assert_eq!(r.count, Some(3), "restored with its state");
    assert!(
        rec.epoch < p.storage().status("hib").unwrap().epoch,
        "a new owner epoch"
    );
    drop(ws);
    server.stop().await;
}

#[tokio::test]
async fn a_save_that_cannot_be_restored_is_kept_refused_with_the_reason_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = persistent(dir.path(), None).await;
    // A save written by an older build whose state format this code does not read.
    let claim = p.store().saves.claim("broken").await.unwrap();
    let bytes = Snapshot {
        tick: 5,
        boot_epoch: claim.epoch,
        fact_counter: 0,
        facts: vec![],
        zone: vec![1, 2, 3],
        next_player: 1,
        roster: vec![],
        state_version: 1,
        build: "zonekeep 0.0.1".into(),
        characters: Vec::new(),
        calls: Vec::new(),
    }
    .encode();
    p.store()
        .saves
        .write("broken", claim.epoch, 1, "tally", &bytes)
        .await
        .unwrap();

    let mut ws = connect(&server, "broken").await;
    send(&mut ws, hello_bytes(&ticket("ann", "broken"), &[])).await;
    let kick = match recv(&mut ws, &empty_schema()).await {
        Seen::Msg(ServerMessage::Kick(k)) => k,
        other => panic!("expected a Kick, got {other:?}"),
    };
    assert_eq!(kick.code, KickCode::ZONE_STOPPED);
    assert!(kick.reason.contains("cannot restore"), "{}", kick.reason);
    assert!(kick.reason.contains("8 bytes"), "{}", kick.reason);

    let (status, d) = admin_get(&server, "/admin/zones/broken").await;
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["running"], false);
    assert_eq!(d["kind"], "tally");
    assert_eq!(d["failed"]["at_start"], true, "{d}");
    let reason = d["start_failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("a tally save is 8 bytes"), "{reason}");
    assert_eq!(d["start_failure"]["save"], json!([claim.epoch, 1]));
    let (_, list) = admin_get(&server, "/admin/zones").await;
    assert_eq!(list["start_failures"][0]["zone_id"], "broken");

    let kept = p.store().saves.load("broken").await.unwrap().unwrap();
    assert_eq!(kept.bytes, bytes, "the save is kept as it was");
    server.stop().await;
}

#[tokio::test]
async fn facts_all_settle_through_a_store_that_takes_a_second_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _p) = persistent(dir.path(), Some(Duration::from_secs(1))).await;
    let (mut ws, _, mut r) = join_tally(&server, "slow", "ann").await;
    for n in 1..=5u32 {
        send_input(&mut ws, n, &u64::from(n).to_le_bytes()).await;
    }
    read_until(&mut ws, &mut r, |r| r.settled.len() >= 5).await;
    let mut keys = r.settled.clone();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 5, "five distinct facts settled");
    assert_eq!(metric(&server, "zonekeep_facts_settled_total").await, 5.0);
    assert_eq!(metric(&server, "zonekeep_facts_pending").await, 0.0);
    drop(ws);
    server.stop().await;
}

#[tokio::test]
async fn the_zone_detail_counts_facts_settled_and_refused_with_the_last_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = persistent(dir.path(), None).await;
    // Ann's score is one short of the largest total: her first point fits, her second would
    // overflow, which the ledger refuses for good (an exact ledger never wraps).
    p.store()
        .facts
        .record(&zonekeep_store::FactRecord {
            key: "earlier-game".into(),
            zone_id: "elsewhere".into(),
            kind: "tally".into(),
            principal: Some("ann".into()),
            payload: json!({"add": {"score": i64::MAX - 1}}),
            epoch: None,
        })
        .await
        .unwrap();
    let (mut ws, _, mut r) = join_tally(&server, "scores", "ann").await;
    for n in 1..=2u32 {
        send_input(&mut ws, n, &u64::from(n).to_le_bytes()).await;
    }
    read_until(&mut ws, &mut r, |r| r.settled.len() >= 2).await;
    let (status, d) = admin_get(&server, "/admin/zones/scores").await;
    assert_eq!(status, 200);
    let facts = &d["persistence"];
    assert_eq!(facts["facts_settled"], 1, "{d}");
    assert_eq!(facts["facts_refused"], 1, "{d}");
    assert_eq!(facts["facts_in_flight"], 0, "{d}");
    let why = facts["last_fact_refusal"].as_str().unwrap_or_default();
    assert!(why.contains("overflow"), "{why}");
    drop(ws);
    server.stop().await;
}

/// A second host on the same SQLite file claims `zone`, as a takeover does.
async fn claim_from_another_host(dir: &Path, zone: &str) -> (SqliteStore, u64) {
    let other = SqliteStore::open(dir.join(SQLITE_FILE_NAME)).await.unwrap();
    let epoch = other.claim(zone).await.unwrap().epoch;
    (other, epoch)
}

#[tokio::test]
async fn a_fenced_host_stops_committing_facts_unloads_the_zone_and_kicks_its_players() {
    let dir = tempfile::tempdir().unwrap();
    // No periodic save within the test: only the fact commit can find the fence.
    let (server, p) = persistent_every(dir.path(), None, Duration::from_secs(3600)).await;
    let (mut ws, welcome, mut r) = join_tally(&server, "fz", "ann").await;
    send_input(&mut ws, 1, &1u64.to_le_bytes()).await;
    read_until(&mut ws, &mut r, |r| !r.settled.is_empty()).await;

    let (other, _) = claim_from_another_host(dir.path(), "fz").await;
    // The next fact is refused in the store; the zone is unloaded at once
    // and its player told to reconnect.
    send_input(&mut ws, 2, &2u64.to_le_bytes()).await;
    assert_eq!(expect_kick(&mut ws).await, KickCode::HOST_FENCED);

    assert_eq!(other.count().await.unwrap(), 1, "only the owner's fact");
    assert_eq!(other.totals("ann").await.unwrap().get("score"), Some(&1));
    assert_eq!(
        other.load("fz").await.unwrap(),
        None,
        "no final save from the fenced host"
    );
    assert_eq!(
        metric(
            &server,
            "zonekeep_fenced_writes_refused_total{write=\"fact\"}"
        )
        .await,
        1.0
    );
    assert_eq!(metric(&server, "zonekeep_zones_fenced_total").await, 1.0);
    assert_eq!(p.facts().pending(), 0);
    let (_, list) = admin_get(&server, "/admin/zones").await;
    assert!(
        list["zones"]
            .as_array()
            .unwrap()
            .iter()
            .all(|z| z["running"] == false),
        "the zone is unloaded: {list}"
    );

    // Joins to it are refused with the code that makes clients reconnect,
    // and this host does not claim it back.
    let hello = hello_bytes(&ticket("bob", "fz"), &[]);
    assert_eq!(refused(&server, "fz", hello).await, KickCode::HOST_FENCED);
    let resume = hello_bytes(&ticket("ann", "fz"), &welcome.reconnect_token);
    assert_eq!(refused(&server, "fz", resume).await, KickCode::HOST_FENCED);
    let (status, _) = http(
        &server,
        "POST",
        "/admin/zones",
        Some(ADMIN),
        Some(json!({"id": "fz", "kind": "tally"})),
    )
    .await;
    assert_eq!(status, 503);
    let epoch_now = other.claim("fz").await.unwrap().epoch;
    assert_eq!(epoch_now, 3, "nobody claimed the zone after the takeover");
    server.stop().await;
}

#[tokio::test]
async fn a_refused_save_unloads_the_zone_without_waiting_for_a_fact() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _p) = persistent(dir.path(), None).await;
    let (mut ws, _, _) = join_tally(&server, "fs", "ann").await;
    let (other, _) = claim_from_another_host(dir.path(), "fs").await;
    let at_claim = other.load("fs").await.unwrap();
    // The next periodic save is refused as fenced.
    assert_eq!(expect_kick(&mut ws).await, KickCode::HOST_FENCED);
    assert_eq!(
        other.load("fs").await.unwrap(),
        at_claim,
        "nothing saved under the old epoch after the claim"
    );
    assert_eq!(
        metric(
            &server,
            "zonekeep_fenced_writes_refused_total{write=\"save\"}"
        )
        .await,
        1.0
    );
    server.stop().await;
}

/// Reads until a doors purse event, and answers its coins.
async fn purse(ws: &mut Ws) -> u32 {
    loop {
        match recv(ws, &empty_schema()).await {
            Seen::Msg(ServerMessage::Delta(d)) => {
                if let Some(e) = d
                    .events
                    .into_iter()
                    .flatten()
                    .find(|e| e.topic == TOPIC_COINS)
                {
                    return u32::from_le_bytes(e.payload[..4].try_into().unwrap());
                }
            }
            Seen::Msg(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Seen::Msg(_) => {}
            Seen::Closed => panic!("closed"),
        }
    }
}

#[tokio::test]
async fn a_join_refused_after_it_reclaimed_a_returned_move_gives_the_state_back_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = persistent(dir.path(), None).await;
    let epoch = create_zone(&server, "hall", "doors").await["epoch"]
        .as_u64()
        .unwrap();
    // The zone is full: its one place is bob's.
    let (bob, _) = join(&server, "hall", &ticket("bob", "hall")).await;
    // A move of ada's out of the hall that came back with 7 coins and was never handed back
    // (its host died before it could): her next join must get them.
    let ledger = &p.store().transfers;
    ledger
        .begin_transfer(&NewTransfer {
            id: "hall~ada~1".into(),
            principal: "ada".into(),
            player: 9,
            source_zone: "hall".into(),
            source_epoch: epoch,
            target_zone: "vault".into(),
            claims: "{}".into(),
            player_claims: "{}".into(),
            state: 7u32.to_le_bytes().to_vec(),
        })
        .await
        .unwrap();
    ledger
        .return_transfer("hall~ada~1", "hall", epoch, "the target did not answer")
        .await
        .unwrap();

    // Her join reclaims the state, then finds the zone full: refused, and the state is given
    // back for her next join rather than lost.
    let code = refused(&server, "hall", hello_bytes(&ticket("ada", "hall"), &[])).await;
    assert_eq!(code, KickCode::ZONE_FULL);
    let reclaimed = r#"zonekeep_transfers_total{outcome="reclaimed"}"#;
    let unclaimed = r#"zonekeep_transfers_total{outcome="unclaimed"}"#;
    assert_eq!(
        metric(&server, reclaimed).await,
        1.0,
        "the join reclaimed it"
    );
    eventually("the reclaimed state to be given back", || async {
        metric(&server, unclaimed).await == 1.0
    })
    .await;
    assert!(
        ledger
            .unclaimed_return("hall", "ada", 0)
            .await
            .unwrap()
            .is_some_and(|t| t.transfer.id == "hall~ada~1"),
        "the record is unclaimed again"
    );

    // Once there is room, she joins with her 7 coins, once.
    drop(bob);
    eventually("the hall to empty", || async {
        let (_, d) = admin_get(&server, "/admin/zones/hall").await;
        d["players"] == 0
    })
    .await;
    // Her purse rides in the BASELINE after the Welcome.
    let mut ada = connect(&server, "hall").await;
    send(&mut ada, hello_bytes(&ticket("ada", "hall"), &[])).await;
    assert_eq!(purse(&mut ada).await, 7, "the returned move's coins");
    assert_eq!(metric(&server, reclaimed).await, 2.0);
    assert!(
        ledger
            .unclaimed_return("hall", "ada", 0)
            .await
            .unwrap()
            .is_none(),
        "handed back once"
    );
    drop(ada);
    server.stop().await;
}
