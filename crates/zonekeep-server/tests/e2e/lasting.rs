//! Lasting worlds end to end: never Dormant, stopped only when forced, refused by a host without
//! a store; and a world whose saves fail (its store held locked, on SQLite and on PostgreSQL)
//! halts, keeps its last committed save through the halt and the host's shutdown, and resumes
//! from it once the store answers; and saves whose state version the code no longer reads
//! (a lasting world refuses to start and keeps its save, another zone starts afresh, a
//! migration carries the state over).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_core::{
    Ctx, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Snapshot, Zone, ZoneConfig, ZoneError,
    ZoneInit,
};
use zonekeep_protocol::messages::{ClientMessage, Hello, KickCode, TRANSFER_PROTOCOL};
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::Host;
use zonekeep_store::SQLITE_FILE_NAME;

use crate::common::*;
use crate::tally::*;

#[path = "../../../zonekeep-store/tests/support/service.rs"]
pub mod service;

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

/// Where a test keeps its zones.
pub enum Backend {
    /// A SQLite file in the test's directory.
    Sqlite,
    /// A schema of its own in the test PostgreSQL database.
    Postgres {
        /// The server's URL.
        url: String,
        /// This test's schema.
        schema: String,
    },
}

impl Backend {
    /// A PostgreSQL schema for `test` (created here), or `None` when no server is configured
    /// (reported as skipped; a failure under `CI=true`).
    pub async fn postgres(test: &str) -> Option<Backend> {
        let url = service::service_url("ZONEKEEP_TEST_POSTGRES", test)?;
        // Unique per test: tests of one binary run at once, many within one second.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let schema = format!("zk_lasting_{}_{}_{n}", std::process::id(), now());
        let client = pg(&url).await;
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        Some(Backend::Postgres { url, schema })
    }

    /// The host's store setting.
    pub fn store(&self) -> String {
        match self {
            Backend::Sqlite => "sqlite".into(),
            Backend::Postgres { url, schema } => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}options=-csearch_path%3D{schema}")
            }
        }
    }

    /// Holds the store so that no save completes: on SQLite an exclusive transaction on the
    /// database file (every write waits, then fails with "database is locked"); on PostgreSQL the
    /// saves table locked (every save and every read of one waits).
    async fn block(&self, dir: &Path) -> Block {
        match self {
            Backend::Sqlite => {
                let conn = rusqlite::Connection::open(dir.join(SQLITE_FILE_NAME)).unwrap();
                conn.busy_timeout(Duration::from_secs(30)).unwrap();
                conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
                Block::Sqlite(conn)
            }
            Backend::Postgres { .. } => {
                let client = pg(&self.store()).await;
                client
                    .batch_execute("BEGIN; LOCK TABLE zone_saves IN ACCESS EXCLUSIVE MODE")
                    .await
                    .unwrap();
                Block::Postgres(client)
            }
        }
    }

    /// Drops the test's schema.
    pub async fn cleanup(self) {
        if let Backend::Postgres { url, schema } = self {
            let client = pg(&url).await;
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await;
        }
    }
}

/// A held store (see [`Backend::block`]).
enum Block {
    Sqlite(rusqlite::Connection),
    Postgres(tokio_postgres::Client),
}

impl Block {
    /// The store answers again.
    async fn release(self) {
        match self {
            Block::Sqlite(conn) => conn.execute_batch("ROLLBACK").unwrap(),
            Block::Postgres(client) => client.batch_execute("ROLLBACK").await.unwrap(),
        }
    }
}

/// A connection to the PostgreSQL at `url`.
pub async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Persistence for a halt test: saves every 100 ms, and a world halts once its state waited
/// 2 s unsaved.
fn halting(backend: &Backend, dir: &Path) -> PersistConfig {
    PersistConfig {
        store: backend.store(),
        data_dir: dir.to_path_buf(),
        save_every: Duration::from_millis(100),
        lasting_halt_after: Some(Duration::from_secs(2)),
        ..PersistConfig::default()
    }
}

/// The count in the world's save as the store holds it.
async fn saved_count(p: &Persistence, zone: &str) -> Option<u64> {
    let rec = p.store().saves.load(zone).await.ok()??;
    let snap = Snapshot::decode(&rec.bytes).ok()?;
    Some(u64::from_le_bytes(snap.zone.try_into().ok()?))
}

/// Sends input `seq` (the world counts one more) and reads until it is acknowledged.
async fn count_one_more(ws: &mut Ws, r: &mut Read, seq: u32) {
    send_input(ws, seq, &u64::from(seq).to_le_bytes()).await;
    read_until(ws, r, |r| r.ack >= seq).await;
}

/// Holds the store, waits until a save of the world is stuck in it, then has the world count one
/// more (in memory only) with input `seq`: the world must halt and kick its player.
async fn halt_with_unsaved_input(
    server: &TestServer,
    backend: &Backend,
    dir: &Path,
    ws: &mut Ws,
    r: &mut Read,
    seq: u32,
) -> Block {
    let block = backend.block(dir).await;
    eventually("a save of the world stuck in the held store", || async {
        let (_, d) = admin_get(server, "/admin/zones/w-1").await;
        d["persistence"]["save"]["unsaved_ms"].is_u64()
    })
    .await;
    // The save in the store's hands was taken before this input: only the world has it.
    count_one_more(ws, r, seq).await;
    assert_eq!(
        expect_kick(ws).await,
        KickCode::WORLD_HALTED,
        "the player is told the world halted"
    );
    block
}

/// A Hello offering only protocol version 8, which knows no WORLD_HALTED.
fn hello_v8(ticket: &str) -> Vec<u8> {
    ClientMessage::Hello(Hello {
        versions: vec![TRANSFER_PROTOCOL],
        ticket: ticket.into(),
        reconnect_token: Vec::new(),
        content_version: String::new(),
        resume_from: None,
    })
    .to_bytes()
    .unwrap()
}

async fn a_lasting_world_whose_saves_fail_halts_keeps_its_save_and_resumes(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = persistent_with(dir.path(), halting(&backend, dir.path())).await;
    create_zone(&server, "w-1", "world").await;
    let (mut ws, _, mut r) = join_tally(&server, "w-1", "ann").await;
    count_one_more(&mut ws, &mut r, 1).await;
    eventually("the count of 1 committed", || async {
        saved_count(&p, "w-1").await == Some(1)
    })
    .await;

    // The store stops taking saves while the world counts on: it halts instead of running on
    // state it cannot keep.
    let block = halt_with_unsaved_input(&server, &backend, dir.path(), &mut ws, &mut r, 2).await;
    let (status, d) = admin_get(&server, "/admin/zones/w-1").await;
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["running"], false, "{d}");
    assert_eq!(d["halted"]["kind"], "world", "{d}");
    assert!(d["halted"]["unsaved_ms"].as_u64().unwrap() >= 2000, "{d}");
    let (_, list) = admin_get(&server, "/admin/zones").await;
    assert_eq!(list["halted_worlds"][0]["id"], "w-1", "{list}");
    assert_eq!(metric(&server, "zonekeep_worlds_halted").await, 1.0);
    assert_eq!(
        metric(&server, "zonekeep_world_halts_total{outcome=\"halted\"}").await,
        1.0
    );
    // Joins are refused with the world's own code; a client of version 8 hears INTERNAL_ERROR,
    // which it retries just the same.
    let hello = hello_bytes(&ticket("bob", "w-1"), &[]);
    assert_eq!(refused(&server, "w-1", hello).await, KickCode::WORLD_HALTED);
    assert_eq!(
        refused(&server, "w-1", hello_v8(&ticket("cy", "w-1"))).await,
        KickCode::INTERNAL_ERROR
    );
    // Nor does an operator's create start it behind the halt's back.
    let (status, body) = http(
        &server,
        "POST",
        "/admin/zones",
        Some(ADMIN),
        Some(json!({"id": "w-1", "kind": "world"})),
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"halted\""), "{body}");

    // The store answers again: the world resumes by itself, from its last committed save.
    block.release().await;
    eventually("the world to resume", || async {
        let (_, d) = admin_get(&server, "/admin/zones/w-1").await;
        d["running"] == true
    })
    .await;
    assert_eq!(metric(&server, "zonekeep_worlds_halted").await, 0.0);
    assert_eq!(
        metric(&server, "zonekeep_world_halts_total{outcome=\"resumed\"}").await,
        1.0
    );
    let (mut ws, _, mut r) = join_tally(&server, "w-1", "ann").await;
    assert_eq!(
        r.count,
        Some(1),
        "resumed from its last committed save, not from the count it could not keep"
    );

    // It halts again, and the host is stopped while it is halted: nothing of the halted state
    // is written at shutdown, nor when the store answers after it.
    let block = halt_with_unsaved_input(&server, &backend, dir.path(), &mut ws, &mut r, 2).await;
    server.stop().await;
    block.release().await;
    assert_eq!(
        saved_count(&p, "w-1").await,
        Some(1),
        "the last committed save is intact"
    );
    drop(p);
    let (server, p) = persistent_with(dir.path(), halting(&backend, dir.path())).await;
    let (ws, _, r) = join_tally(&server, "w-1", "ann").await;
    assert_eq!(
        r.count,
        Some(1),
        "a restarted host resumes it from that save"
    );
    drop(ws);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

on_both_backends!(
    a_lasting_world_whose_saves_fail_halts_keeps_its_save_and_resumes:
    a_lasting_world_whose_saves_fail_halts_and_resumes_on_sqlite,
    a_lasting_world_whose_saves_fail_halts_and_resumes_on_postgres
);

/// Version 2 of the tally's state: the count and a marker byte `2`. With `MIGRATES` it migrates
/// version 1's saves (the count alone); without, it has no migration (a developer changed the
/// layout and forgot one).
struct TallyV2<const MIGRATES: bool>(u64);

impl<const MIGRATES: bool> Zone for TallyV2<MIGRATES> {
    type Input = u64;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(TallyV2(0))
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        tell_count(ctx, p, self.0);
        Ok(())
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        count_input(payload)
    }
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _n: u64) {
        self.0 += 1;
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        let mut out = self.0.to_le_bytes().to_vec();
        out.push(2);
        Some(out)
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        match bytes.split_last() {
            Some((2, count)) => {
                Ok(TallyV2(u64::from_le_bytes(count.try_into().map_err(
                    |_| ZoneError::Restore("a count of 8 bytes".into()),
                )?)))
            }
            _ => Err(ZoneError::Restore("not a version-2 tally".into())),
        }
    }
    fn migrate(from: u32, bytes: &[u8]) -> Result<Vec<u8>, ZoneError> {
        if !MIGRATES || from != 1 {
            return Err(ZoneError::NoMigration(from));
        }
        let mut out = bytes.to_vec();
        out.push(2);
        Ok(out)
    }
}

/// Which code a host runs the tally and the (lasting) world with.
#[derive(Clone, Copy)]
enum Code {
    /// State version 1.
    V1,
    /// State version 2, without a migration from 1.
    V2Unmigrated,
    /// State version 2, migrating 1.
    V2,
}

/// A host running `code` for kinds `tally` and `world` (lasting) on `backend`.
async fn host_running(backend: &Backend, dir: &Path, code: Code) -> (TestServer, Arc<Persistence>) {
    let config = PersistConfig {
        store: backend.store(),
        data_dir: dir.to_path_buf(),
        save_every: Duration::from_millis(100),
        ..PersistConfig::default()
    };
    persistent_kinds(dir, config, move |host, tally| {
        let world = ZoneConfig {
            lasting: true,
            ..tally.clone()
        };
        let v2 = |c: &ZoneConfig| ZoneConfig {
            state_version: 2,
            ..c.clone()
        };
        match code {
            Code::V1 => host
                .zone_with::<Tally>("tally", tally, Value::Null)
                .zone_with::<Tally>("world", world, Value::Null),
            Code::V2Unmigrated => host
                .zone_with::<TallyV2<false>>("tally", v2(&tally), Value::Null)
                .zone_with::<TallyV2<false>>("world", v2(&world), Value::Null),
            Code::V2 => host
                .zone_with::<TallyV2<true>>("tally", v2(&tally), Value::Null)
                .zone_with::<TallyV2<true>>("world", v2(&world), Value::Null),
        }
    })
    .await
}

/// The store's save of `zone`: its state version, build and zone bytes.
async fn saved(p: &Persistence, zone: &str) -> (u32, String, Vec<u8>) {
    let rec = p.store().saves.load(zone).await.unwrap().unwrap();
    let snap = Snapshot::decode(&rec.bytes).unwrap();
    (snap.state_version, snap.build, snap.zone)
}

async fn a_changed_state_version_is_checked_never_guessed(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    // Version 1 runs a world and an ordinary zone to a count of 2 each, and saves them.
    let (server, p) = host_running(&backend, dir.path(), Code::V1).await;
    create_zone(&server, "w-1", "world").await;
    for zone in ["w-1", "t-1"] {
        let (mut ws, _, mut r) = join_tally(&server, zone, "ann").await;
        count_one_more(&mut ws, &mut r, 1).await;
        count_one_more(&mut ws, &mut r, 2).await;
    }
    server.stop().await;
    let (version, build, world_bytes) = saved(&p, "w-1").await;
    assert_eq!(
        (version, world_bytes.as_slice()),
        (1, &2u64.to_le_bytes()[..])
    );
    assert!(
        build.starts_with("zonekeep "),
        "the build is recorded: {build}"
    );
    drop(p);

    // Version 2 without a migration: the world refuses to start and keeps its save; the
    // ordinary zone starts afresh and says why.
    let (server, p) = host_running(&backend, dir.path(), Code::V2Unmigrated).await;
    let hello = hello_bytes(&ticket("ann", "w-1"), &[]);
    assert_eq!(refused(&server, "w-1", hello).await, KickCode::ZONE_STOPPED);
    let (_, d) = admin_get(&server, "/admin/zones/w-1").await;
    assert_eq!(d["running"], false, "{d}");
    let reason = d["failed"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("state version 1") && reason.contains("deploy a migration"),
        "{d}"
    );
    assert_eq!(
        saved(&p, "w-1").await,
        (version, build.clone(), world_bytes.clone()),
        "the world's save is kept as it was"
    );
    let (ws, _, r) = join_tally(&server, "t-1", "ann").await;
    assert_eq!(r.count, Some(0), "the ordinary zone starts afresh");
    let (_, d) = admin_get(&server, "/admin/zones/t-1").await;
    assert_eq!(d["fresh_start"]["reason"], "state-changed", "{d}");
    assert_eq!(
        metric(&server, "zonekeep_zones_started_fresh_total").await,
        1.0
    );
    drop(ws);
    server.stop().await;
    drop(p);

    // Version 2 with its migration: the world comes back with its count, and saves under the
    // new version.
    let (server, p) = host_running(&backend, dir.path(), Code::V2).await;
    let (ws, _, r) = join_tally(&server, "w-1", "ann").await;
    assert_eq!(r.count, Some(2), "migrated, nothing lost");
    eventually("a save under state version 2", || async {
        saved(&p, "w-1").await.0 == 2
    })
    .await;
    let mut want = 2u64.to_le_bytes().to_vec();
    want.push(2);
    assert_eq!(saved(&p, "w-1").await.2, want);
    drop(ws);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

on_both_backends!(
    a_changed_state_version_is_checked_never_guessed:
    a_changed_state_version_is_checked_never_guessed_on_sqlite,
    a_changed_state_version_is_checked_never_guessed_on_postgres
);

/// Keeps a player's gold, a durable field: each input earns one, saved at once.
struct Gold(u64);

impl Zone for Gold {
    type Input = u64;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Gold(0))
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        tell_count(ctx, p, self.0);
        Ok(())
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        count_input(payload)
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, _n: u64) {
        self.0 += 1;
        ctx.save_now();
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.0.to_le_bytes().to_vec())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, b: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 8] = b
            .try_into()
            .map_err(|_| ZoneError::Restore("8 bytes".into()))?;
        Ok(Gold(u64::from_le_bytes(b)))
    }
}

#[tokio::test]
async fn a_durable_change_is_saved_at_once_not_at_the_save_interval() {
    let dir = tempfile::tempdir().unwrap();
    // Periodic saves once an hour: only the zone's own request can save it within the test.
    let config = PersistConfig {
        data_dir: dir.path().to_path_buf(),
        save_every: Duration::from_secs(3600),
        ..PersistConfig::default()
    };
    let (server, p) = persistent_kinds(dir.path(), config, |host, tally| {
        host.zone_with::<Gold>(
            "gold",
            ZoneConfig {
                lasting: true,
                ..tally
            },
            Value::Null,
        )
    })
    .await;
    create_zone(&server, "g-1", "gold").await;
    let (mut ws, _, mut r) = join_tally(&server, "g-1", "ann").await;
    for seq in 1..=3 {
        count_one_more(&mut ws, &mut r, seq).await;
        eventually("the earned gold committed", || async {
            saved_count(&p, "g-1").await == Some(u64::from(seq))
        })
        .await;
    }
    drop(ws);
    server.stop().await;
}
