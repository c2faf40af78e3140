//! The tally zone the persistence tests run (it counts inputs, saves the count, emits a fact per
//! input) and the host and client helpers around it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_core::{
    Ctx, EventTarget, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Settlement, Zone,
    ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::messages::{ServerMessage, Welcome};
use zonekeep_server::examples::Doors;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, HostBuilder, ServerConfig};

use crate::common::*;

pub const TOPIC_COUNT: u16 = 1;
pub const TOPIC_SETTLED: u16 = 2;

/// Tells a joining player the zone's `count` (what [`join_tally`] waits for).
pub fn tell_count(ctx: &mut Ctx<'_>, p: &PlayerInfo, count: u64) {
    ctx.emit_event(
        EventTarget::Player(p.id),
        TOPIC_COUNT,
        count.to_le_bytes().to_vec(),
    );
}

/// A tally input: 8 bytes (the client's own sequence number), anything else refused.
pub fn count_input(payload: &[u8]) -> Result<u64, InputRefusal> {
    let b: [u8; 8] = payload
        .try_into()
        .map_err(|_| InputRefusal::new(1, "8 bytes"))?;
    Ok(u64::from_le_bytes(b))
}

/// Counts inputs (saved as 8 bytes), one fact per input; tells a joining
/// player the count and everyone each settled key.
pub struct Tally(pub u64);

impl Zone for Tally {
    type Input = u64;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Tally(0))
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        tell_count(ctx, p, self.0);
        Ok(())
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        count_input(payload)
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

pub async fn persistent(dir: &Path, delay: Option<Duration>) -> (TestServer, Arc<Persistence>) {
    persistent_every(dir, delay, Duration::from_millis(100)).await
}

pub async fn persistent_every(
    dir: &Path,
    delay: Option<Duration>,
    save_every: Duration,
) -> (TestServer, Arc<Persistence>) {
    let config = PersistConfig {
        data_dir: dir.to_path_buf(),
        save_every,
        store_delay: delay,
        ..PersistConfig::default()
    };
    persistent_with(dir, config).await
}

/// A host with the tally, world (a lasting tally) and doors kinds on the store `config` names;
/// the host's own files go in `dir`.
pub async fn persistent_with(dir: &Path, config: PersistConfig) -> (TestServer, Arc<Persistence>) {
    persistent_kinds(dir, config, |host, tally| {
        host.zone_with::<Tally>("tally", tally.clone(), Value::Null)
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
    })
    .await
}

/// A host on the store `config` names with the kinds `kinds` registers, given the tally's
/// config (tiny tier timeouts: an empty zone goes Dormant within half a second); the host's own
/// files go in `dir`.
pub async fn persistent_kinds(
    dir: &Path,
    config: PersistConfig,
    kinds: impl FnOnce(HostBuilder, ZoneConfig) -> HostBuilder,
) -> (TestServer, Arc<Persistence>) {
    let p = Persistence::open(config).await.unwrap();
    let tally = ZoneConfig {
        idle_after: Duration::from_millis(100),
        dormant_after: Duration::from_millis(300),
        reconnect_grace: Duration::from_millis(50),
        ..ZoneConfig::default()
    };
    // The host's own files (its id, the data directory's lock) go beside the store, not into
    // the working directory.
    let host = Host::builder().config(ServerConfig {
        data_dir: dir.to_path_buf(),
        ..base_config()
    });
    let host = kinds(host, tally)
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    (TestServer::serve(host).await, p)
}

/// What a Tally client has read so far.
#[derive(Default)]
pub struct Read {
    pub count: Option<u64>,
    pub settled: Vec<String>,
    pub ack: u32,
}

/// Reads Deltas until `done` holds.
pub async fn read_until(ws: &mut Ws, r: &mut Read, done: impl Fn(&Read) -> bool) {
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
pub async fn join_tally(server: &TestServer, zone: &str, sub: &str) -> (Ws, Welcome, Read) {
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
pub async fn create_zone(server: &TestServer, id: &str, kind: &str) -> Value {
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

pub async fn admin_get(server: &TestServer, path: &str) -> (u16, Value) {
    let (status, body) = http(server, "GET", path, Some(ADMIN), None).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}
