//! Persistence in the host, end to end on a SQLite file: hibernation (Dormant
//! → saved → unloaded → restored by the next join), a save the code cannot
//! restore (kept, refused with the reason, reported by the admin API),
//! facts settling through slow storage, a host whose zone another host
//! claimed (fenced): it stops committing, unloads the zone and kicks; lasting
//! worlds (never Dormant, stopped only when forced, refused by a host without
//! a store); and a returned move's state that a refused join reclaimed, given
//! back for the player's next join.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_core::{
    Ctx, EventTarget, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Settlement, Snapshot, Zone,
    ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::messages::{KickCode, ServerMessage, Welcome};
use zonekeep_server::examples::{Doors, DOORS_TOPIC_COINS as TOPIC_COINS};
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};
use zonekeep_store::{FactLedger, NewTransfer, SaveStore, SqliteStore, SQLITE_FILE_NAME};

use crate::common::*;

const TOPIC_COUNT: u16 = 1;
const TOPIC_SETTLED: u16 = 2;

/// Counts inputs (saved as 8 bytes), one fact per input; tells a joining
/// player the count and everyone each settled key.
struct Tally(u64);

impl Zone for Tally {
    type Input = u64;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Tally(0))
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        ctx.emit_event(
            EventTarget::Player(p.id),
            TOPIC_COUNT,
            self.0.to_le_bytes().to_vec(),
        );
        Ok(())
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "8 bytes"))?;
        Ok(u64::from_le_bytes(b))
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, n: u64) {
        self.0 += 1;
        let who = ctx.player(p).map(|i| i.principal.as_str().to_owned());
        ctx.emit_fact(
            "tally",
            json!({"add": {"score": 1}, "seq": n}),
            who.as_deref(),
            None,
        )
        .unwrap();
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, s: &Settlement) {
        ctx.emit_event(
            EventTarget::All,
            TOPIC_SETTLED,
            s.key.as_str().as_bytes().to_vec(),
        );
    }
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.0.to_le_bytes().to_vec())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| ZoneError::Restore("a tally save is 8 bytes".into()))?;
        Ok(Tally(u64::from_le_bytes(b)))
    }
}

async fn persistent(dir: &Path, delay: Option<Duration>) -> (TestServer, Arc<Persistence>) {
    persistent_every(dir, delay, Duration::from_millis(100)).await
}

async fn persistent_every(
    dir: &Path,
    delay: Option<Duration>,
    save_every: Duration,
) -> (TestServer, Arc<Persistence>) {
    let p = Persistence::open(PersistConfig {
        data_dir: dir.to_path_buf(),
        save_every,
        store_delay: delay,
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    // Tiny tier timeouts: an empty zone goes Dormant within half a second.
    let tally = ZoneConfig {
        idle_after: Duration::from_millis(100),
        dormant_after: Duration::from_millis(300),
        reconnect_grace: Duration::from_millis(50),
        ..ZoneConfig::default()
    };
    // The host's own files (its id, the data directory's lock) go beside the store, not into
    // the working directory.
    let host = Host::builder()
        .config(ServerConfig {
            data_dir: dir.to_path_buf(),
            ..base_config()
        })
        .zone_with::<Tally>("tally", tally.clone(), Value::Null)
        .zone_with::<Tally>(
            "world",
            ZoneConfig {
                lasting: true,
                ..tally
            },
            Value::Null,
        )
        // Room for one player, who leaves at once when its connection closes.
        .zone_with::<Doors>(
            "doors",
            ZoneConfig {
                max_players: 1,
                reconnect_grace: Duration::from_millis(50),
                ..ZoneConfig::default()
            },
            Value::Null,
        )
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    (TestServer::serve(host).await, p)
}

/// What a Tally client has read so far.
#[derive(Default)]
struct Read {
    count: Option<u64>,
    settled: Vec<String>,
    ack: u32,
}

/// Reads Deltas until `done` holds.
async fn read_until(ws: &mut Ws, r: &mut Read, done: impl Fn(&Read) -> bool) {
    let schema = empty_schema();
    while !done(r) {
        match recv(ws, &schema).await {
            Seen::Msg(ServerMessage::Delta(d)) => {
                r.ack = r.ack.max(d.ack);
                for e in d.events.into_iter().flatten() {
                    match e.topic {
                        TOPIC_COUNT => {
                            r.count = Some(u64::from_le_bytes(e.payload.try_into().unwrap()))
                        }
                        TOPIC_SETTLED => r.settled.push(String::from_utf8(e.payload).unwrap()),
                        _ => {}
                    }
                }
            }
            Seen::Msg(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Seen::Msg(_) => {}
            Seen::Closed => panic!("closed"),
        }
    }
}

/// Joins and reads until the zone's count arrived (it may ride in the BASELINE).
async fn join_tally(server: &TestServer, zone: &str, sub: &str) -> (Ws, Welcome, Read) {
    let mut ws = connect(server, zone).await;
    send(&mut ws, hello_bytes(&ticket(sub, zone), &[])).await;
    let welcome = match recv(&mut ws, &empty_schema()).await {
        Seen::Msg(ServerMessage::Welcome(w)) => w,
        other => panic!("expected Welcome, got {other:?}"),
    };
    let mut r = Read::default();
    read_until(&mut ws, &mut r, |r| r.count.is_some()).await;
    (ws, welcome, r)
}

/// Creates zone `id` of `kind` through the admin API; answers the created zone's body.
async fn create_zone(server: &TestServer, id: &str, kind: &str) -> Value {
    let (status, body) = http(
        server,
        "POST",
        "/admin/zones",
        Some(ADMIN),
        Some(json!({"id": id, "kind": kind})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    serde_json::from_str(&body).unwrap()
}

async fn admin_get(server: &TestServer, path: &str) -> (u16, Value) {
    let (status, body) = http(server, "GET", path, Some(ADMIN), None).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

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

#[tokio::test]
async fn a_lasting_world_left_empty_stays_loaded_and_is_stopped_only_when_forced() {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = persistent(dir.path(), None).await;
    // A lasting world and an ordinary zone with the same tier timeouts, emptied together.
    create_zone(&server, "w-1", "world").await;
    let (mut world, _, mut r) = join_tally(&server, "w-1", "ann").await;
    send_input(&mut world, 1, &1u64.to_le_bytes()).await;
    read_until(&mut world, &mut r, |r| r.ack >= 1).await;
    let (ordinary, _, _) = join_tally(&server, "t-1", "bob").await;
    drop((world, ordinary));
    // Once the ordinary zone went Dormant and was unloaded, the world is still running: Idle.
    eventually("the ordinary zone to be unloaded", || async {
        let (_, list) = admin_get(&server, "/admin/zones").await;
        list["zones"]
            .as_array()
            .is_some_and(|z| z.iter().any(|z| z["id"] == "t-1" && z["running"] == false))
    })
    .await;
    eventually("the world to go Idle", || async {
        let (_, d) = admin_get(&server, "/admin/zones/w-1").await;
        d["tier"] == "idle"
    })
    .await;
    let (status, d) = admin_get(&server, "/admin/zones/w-1").await;
    assert_eq!(status, 200);
    assert_eq!(d["lasting"], true);
    assert_eq!(d["running"], true, "{d}");

    // Stopping it is refused unless forced, and the refusal names the way.
    let (status, body) = http(&server, "POST", "/admin/zones/w-1/stop", Some(ADMIN), None).await;
    assert_eq!(status, 409, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["code"], "lasting");
    assert!(err["error"]["message"].as_str().unwrap().contains("force"));
    let (status, body) = http(
        &server,
        "POST",
        "/admin/zones/w-1/stop",
        Some(ADMIN),
        Some(json!({"force": "yes"})),
    )
    .await;
    assert_eq!(status, 400, "a body that is no stop request: {body}");
    let (status, _) = admin_get(&server, "/admin/zones/w-1").await;
    assert_eq!(status, 200, "still running after the refusals");

    // Forced: saved and unloaded like any stop; its state is kept.
    let (status, body) = http(
        &server,
        "POST",
        "/admin/zones/w-1/stop",
        Some(ADMIN),
        Some(json!({"force": true})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    eventually("the world's final save", || async {
        p.store()
            .saves
            .load("w-1")
            .await
            .ok()
            .flatten()
            .and_then(|rec| Snapshot::decode(&rec.bytes).ok())
            .is_some_and(|snap| snap.zone == 1u64.to_le_bytes().to_vec())
    })
    .await;
    let (ws, _, r) = join_tally(&server, "w-1", "ann").await;
    assert_eq!(r.count, Some(1), "the world comes back as it was");
    drop(ws);
    server.stop().await;
}

#[tokio::test]
async fn a_lasting_kind_needs_a_store() {
    let refused = Host::builder()
        .config(base_config())
        .zone_with::<Tally>(
            "world",
            ZoneConfig {
                lasting: true,
                ..ZoneConfig::default()
            },
            Value::Null,
        )
        .build()
        .err()
        .expect("a lasting kind without a store is refused");
    assert!(
        refused.to_string().contains("\"world\" is a lasting world"),
        "{refused}"
    );
    // A kind whose zones only turn out lasting as they are made (a module's settings decide)
    // is refused zone by zone.
    let host = Host::builder()
        .config(base_config())
        .zone_factory("world", ZoneConfig::default(), Value::Null, |kinds| {
            kinds.register_factory(
                "world",
                Arc::new(|init, config, clock, epoch| {
                    let lasting = ZoneConfig {
                        lasting: true,
                        ..config
                    };
                    let mut one = zonekeep_core::ZoneKinds::new();
                    one.register::<Tally>("world");
                    one.create_at(init, lasting, clock, epoch)
                }),
                None,
            );
        })
        .build()
        .unwrap();
    let server = TestServer::serve(host).await;
    let (status, body) = http(
        &server,
        "POST",
        "/admin/zones",
        Some(ADMIN),
        Some(json!({"id": "w-2", "kind": "world"})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("is a lasting world"), "{body}");
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
