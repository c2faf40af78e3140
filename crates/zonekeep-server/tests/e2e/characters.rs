//! Characters end to end, on SQLite and PostgreSQL: a player's character follows it from zone to
//! zone; joining a second zone recalls it from the first (whose connection is told
//! CHARACTER_MOVED); a character held by a zone this host cannot ask refuses the join with
//! CHARACTER_ELSEWHERE until that zone is claimed by a new owner, which frees it with its last
//! committed state.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zonekeep_core::{
    Ctx, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Zone, ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::messages::KickCode;
use zonekeep_server::persist::{PersistConfig, Persistence};

use crate::common::*;
use crate::lasting::Backend;
use crate::tally::*;

/// A mine: each input earns the player one gold, kept in its character (8 bytes); a joining
/// player is told its gold.
struct Mine;

fn gold(c: Option<&[u8]>) -> u64 {
    c.and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl Zone for Mine {
    type Input = u64;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Mine)
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let g = gold(ctx.character(p.id));
        tell_count(ctx, p, g);
        Ok(())
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        count_input(payload)
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, _n: u64) {
        let g = gold(ctx.character(p)) + 1;
        let _ = ctx.set_character(p, g.to_le_bytes().to_vec());
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(Vec::new())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, _b: &[u8]) -> Result<Self, ZoneError> {
        Ok(Mine)
    }
}

/// A host with the kind `mine` (characters) on `backend`.
async fn mines(backend: &Backend, dir: &Path) -> (TestServer, Arc<Persistence>) {
    let config = PersistConfig {
        store: backend.store(),
        data_dir: dir.to_path_buf(),
        save_every: Duration::from_millis(100),
        ..PersistConfig::default()
    };
    persistent_kinds(dir, config, |host, tally| {
        host.zone_with::<Mine>(
            "mine",
            ZoneConfig {
                characters: true,
                ..tally
            },
            Value::Null,
        )
    })
    .await
}

/// The gold in `principal`'s character as the store holds it, and the zone holding its lease.
async fn stored(p: &Persistence, principal: &str) -> (u64, Option<String>) {
    let c = p
        .store()
        .characters
        .load_character(principal)
        .await
        .unwrap()
        .expect("a stored character");
    (gold(Some(&c.data)), c.holder.map(|(zone, _)| zone))
}

async fn joins_mine(server: &TestServer, zone: &str, sub: &str) -> (Ws, Read) {
    let mut ws = connect(server, zone).await;
    send(&mut ws, hello_bytes(&ticket(sub, zone), &[])).await;
    let mut r = Read::default();
    read_until(&mut ws, &mut r, |r| r.count.is_some()).await;
    (ws, r)
}

async fn a_character_follows_its_player_and_is_in_one_zone_at_a_time(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = mines(&backend, dir.path()).await;

    // Ann earns 3 gold in mine-1 and leaves: the character is written back and given up.
    let (mut ws, mut r) = joins_mine(&server, "mine-1", "ann").await;
    assert_eq!(r.count, Some(0), "a new character");
    for seq in 1..=3 {
        send_input(&mut ws, seq, &u64::from(seq).to_le_bytes()).await;
    }
    read_until(&mut ws, &mut r, |r| r.ack >= 3).await;
    drop(ws);
    eventually("the character handed back as ann left", || async {
        stored(&p, "ann").await == (3, None)
    })
    .await;

    // In mine-2 she has her 3 gold, and earns a fourth.
    let (mut ws2, mut r2) = joins_mine(&server, "mine-2", "ann").await;
    assert_eq!(r2.count, Some(3), "the character followed her");
    send_input(&mut ws2, 1, &1u64.to_le_bytes()).await;
    read_until(&mut ws2, &mut r2, |r| r.ack >= 1).await;

    // Joining mine-1 again while mine-2 holds it: mine-2 gives it back (its connection is told
    // CHARACTER_MOVED) with the gold it had, unsaved, and mine-1 admits her with it.
    let (ws1, r1) = joins_mine(&server, "mine-1", "ann").await;
    assert_eq!(
        expect_kick(&mut ws2).await,
        KickCode::CHARACTER_MOVED,
        "the other device is told"
    );
    assert_eq!(r1.count, Some(4), "nothing lost in the move");
    assert_eq!(stored(&p, "ann").await, (4, Some("mine-1".into())));

    // A second connection to the same zone takes the character from the first.
    let mut ws1 = ws1;
    let (_ws1b, r1b) = joins_mine(&server, "mine-1", "ann").await;
    assert_eq!(expect_kick(&mut ws1).await, KickCode::CHARACTER_MOVED);
    assert_eq!(r1b.count, Some(4));
    assert_eq!(
        metric(
            &server,
            "zonekeep_character_acquires_total{outcome=\"recalled\"}"
        )
        .await,
        1.0
    );
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

async fn a_character_held_out_of_reach_waits_for_its_zone_to_be_claimed(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = mines(&backend, dir.path()).await;
    // Another host's zone holds bob's character with 5 gold committed.
    let far = p.store().saves.claim("far-1").await.unwrap();
    let chars = &p.store().characters;
    chars
        .acquire_character("bob", "far-1", far.epoch)
        .await
        .unwrap();
    chars
        .commit_character("bob", "far-1", far.epoch, &5u64.to_le_bytes())
        .await
        .unwrap();

    let hello = hello_bytes(&ticket("bob", "mine-1"), &[]);
    assert_eq!(
        refused(&server, "mine-1", hello).await,
        KickCode::CHARACTER_ELSEWHERE,
        "told to retry"
    );
    assert_eq!(
        stored(&p, "bob").await,
        (5, Some("far-1".into())),
        "nothing taken"
    );

    // far-1 gets a new owner: its old owner can never write again, so bob's character is free
    // to take with what it last committed.
    p.store().saves.claim("far-1").await.unwrap();
    let (_ws, r) = joins_mine(&server, "mine-1", "bob").await;
    assert_eq!(r.count, Some(5));
    assert_eq!(stored(&p, "bob").await, (5, Some("mine-1".into())));
    // The old owner's late write is refused and changes nothing.
    assert!(chars
        .commit_character("bob", "far-1", far.epoch, &9u64.to_le_bytes())
        .await
        .is_err());
    assert_eq!(stored(&p, "bob").await.0, 5);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

on_both_backends!(
    a_character_follows_its_player_and_is_in_one_zone_at_a_time:
    a_character_follows_its_player_and_is_in_one_zone_at_a_time_on_sqlite,
    a_character_follows_its_player_and_is_in_one_zone_at_a_time_on_postgres
);

on_both_backends!(
    a_character_held_out_of_reach_waits_for_its_zone_to_be_claimed:
    a_character_held_out_of_reach_waits_for_its_zone_to_be_claimed_on_sqlite,
    a_character_held_out_of_reach_waits_for_its_zone_to_be_claimed_on_postgres
);

/// The `p`-th percentile of `v` (sorted here), in milliseconds.
fn percentile(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// A benchmark, not a check: join latency of a kind with characters on one host, from the
/// Hello to the first frame that carries the character, for a free character (an acquisition)
/// and for one another zone of the host holds (a recall, then the acquisition). Run it on a quiet
/// machine with `cargo test --release -p zonekeep-server --test e2e -- --ignored
/// bench_character_acquire_and_recall_on_one_host --nocapture` (SQLite;
/// `ZONEKEEP_BENCH_POSTGRES=1` with `ZONEKEEP_TEST_POSTGRES` set runs it on PostgreSQL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --ignored --nocapture"]
async fn bench_character_acquire_and_recall_on_one_host() {
    let backend = match std::env::var("ZONEKEEP_BENCH_POSTGRES").as_deref() {
        Ok("1") => Backend::postgres("bench_character_acquire_and_recall_on_one_host")
            .await
            .expect("ZONEKEEP_TEST_POSTGRES"),
        _ => Backend::Sqlite,
    };
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = mines(&backend, dir.path()).await;
    const N: usize = 200;
    // Warm both zones up, so a start is not measured.
    let _w1 = joins_mine(&server, "mine-1", "warm-1").await;
    let _w2 = joins_mine(&server, "mine-2", "warm-2").await;
    let mut acquire = Vec::with_capacity(N);
    for i in 0..N {
        let t = std::time::Instant::now();
        let (ws, _) = joins_mine(&server, "mine-1", &format!("free-{i}")).await;
        acquire.push(t.elapsed());
        drop(ws);
    }
    let mut recall = Vec::with_capacity(N);
    let (mut held, _) = joins_mine(&server, "mine-1", "ann").await;
    for i in 0..N {
        let zone = if i % 2 == 0 { "mine-2" } else { "mine-1" };
        let t = std::time::Instant::now();
        let (ws, _) = joins_mine(&server, zone, "ann").await;
        recall.push(t.elapsed());
        assert_eq!(expect_kick(&mut held).await, KickCode::CHARACTER_MOVED);
        held = ws;
    }
    println!(
        "character join on one host ({}), {N} each: acquire p50 {:.2} ms p99 {:.2} ms; recall + acquire p50 {:.2} ms p99 {:.2} ms",
        p.store().description,
        percentile(&mut acquire, 0.5),
        percentile(&mut acquire, 0.99),
        percentile(&mut recall, 0.5),
        percentile(&mut recall, 0.99),
    );
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}
