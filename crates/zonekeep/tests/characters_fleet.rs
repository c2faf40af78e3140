//! Characters across two hosts of a fleet (PostgreSQL for the store and the directory, NATS for
//! the hosts' notes), in the stock binary's arena, whose players keep their score on their
//! character: a join on one host recalls the character from the zone of the other host that
//! holds it (that connection is told CHARACTER_MOVED); two joins racing from the two hosts end
//! with the character in exactly one zone; and a holder host that stops answering (SIGSTOP) makes
//! the join wait with CHARACTER_ELSEWHERE until the host is killed and its zone fails over, after
//! which the character is taken with its last committed state.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Server, StoreSpec, ADMIN_TOKEN};
use zonekeep_client::{connect, ClientError, ConnectOptions, Connection, Event};
use zonekeep_protocol::messages::KickCode;
use zonekeep_protocol::FieldValue;
use zonekeep_store::{CharacterStore, PostgresOptions, PostgresStore, SaveStore};

/// Longest wait for anything the fleet does; only a guard against a hang (a dead host's lease
/// is 10 s).
const WAIT: Duration = Duration::from_secs(60);

/// The arena player kind's score field (after name and hue).
const F_SCORE: usize = 2;

struct Fleet {
    hosts: Vec<Option<Server>>,
    store: PostgresStore,
    run: String,
    _dir: tempfile::TempDir,
}

impl Fleet {
    /// Two hosts, or `None` when a service is missing (reported as skipped).
    async fn start(test: &str) -> Option<Fleet> {
        let pg_url = support::service_url("ZONEKEEP_TEST_POSTGRES", test)?;
        let nats = support::service_url("ZONEKEEP_TEST_NATS", test)?;
        let run = support::unique_run();
        let spec = StoreSpec::postgres_isolated(&pg_url, &run).await;
        let dir = tempfile::tempdir().unwrap();
        let mut hosts = Vec::new();
        for i in 0..2 {
            let args = [
                "--admin-token",
                ADMIN_TOKEN,
                "--bus",
                &nats,
                "--save-every",
                "200ms",
            ];
            let log = dir.path().join(format!("h{}.log", i + 1));
            hosts.push(Some(Server::start(&spec, &args, &log).await));
        }
        let StoreSpec::Postgres(url) = &spec else {
            unreachable!()
        };
        let store = PostgresStore::connect_with(url, PostgresOptions::default())
            .await
            .unwrap();
        Some(Fleet {
            hosts,
            store,
            run,
            _dir: dir,
        })
    }

    fn host(&self, i: usize) -> &Server {
        self.hosts[i].as_ref().unwrap()
    }

    /// Creates arena zone `name` (suffixed with the run) on host `i`; its id.
    async fn arena_on(&self, i: usize, name: &str) -> String {
        self.zone_on(i, name, "arena").await
    }

    /// Creates zone `name` (suffixed with the run) of `kind` on host `i`; its id.
    async fn zone_on(&self, i: usize, name: &str, kind: &str) -> String {
        let zone = format!("{name}-{}", self.run);
        let id = self.host(i).host_id().await;
        let (status, body) = self
            .host(i)
            .admin_request(
                "POST",
                "/admin/zones",
                Some(&json!({"id": zone, "kind": kind, "host": id})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        zone
    }

    /// `principal`'s character starts with `score` points, committed as an earlier arena left it.
    async fn seed(&self, principal: &str, score: u32) {
        let zone = format!("earlier-{}", self.run);
        let claim = self.store.claim(&zone).await.unwrap();
        self.store
            .acquire_character(principal, &zone, claim.epoch)
            .await
            .unwrap();
        let data = zonekeep_arena::character_with_score(score);
        self.store
            .release_character(principal, &zone, claim.epoch, Some(&data))
            .await
            .unwrap();
    }

    /// The zone holding `principal`'s character.
    async fn holder(&self, principal: &str) -> Option<String> {
        let c = self.store.load_character(principal).await.unwrap()?;
        c.holder.map(|(zone, _)| zone)
    }
}

/// A ticket of `sub` for arena zone `zone`.
fn ticket(sub: &str, zone: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    support::sign(&json!({
        "sub": sub, "zone": zone, "kind": "arena", "exp": exp,
        "jti": format!("{zone}-{sub}-{}", support::unique_run()),
    }))
}

/// Joins `zone` at `host` as `sub`: the connection and the score its avatar shows, or the kick
/// that refused it.
async fn join(host: &Server, zone: &str, sub: &str) -> Result<(Connection, u32), KickCode> {
    let url = format!("ws://{}/zones/{zone}", host.addr);
    let (mut conn, _) = match connect(&url, ConnectOptions::new(ticket(sub, zone))).await {
        Ok(c) => c,
        Err(ClientError::Kicked(k)) => return Err(k.code),
        Err(e) => panic!("joining {zone}: {e}"),
    };
    let score = tokio::time::timeout(WAIT, async {
        let mut me = None;
        while let Some(ev) = conn.recv().await {
            let patch = match ev {
                Event::Delta(patch) => patch,
                // Taken by another zone before the first frame showed the avatar.
                Event::Kick(k) => return Err(k.code),
                _ => continue,
            };
            if let Some(control) = patch.control {
                me = control;
            }
            let Some(id) = me else { continue };
            if let Some(s) = patch.spawns.iter().find(|s| s.id == id) {
                match s.fields.get(F_SCORE) {
                    Some(FieldValue::U(n)) => return Ok(*n),
                    other => panic!("the score field: {other:?}"),
                }
            }
        }
        panic!("the connection ended before the avatar appeared");
    })
    .await
    .expect("the avatar appeared")?;
    Ok((conn, score))
}

/// Until `conn` is kicked; the code.
async fn kicked(conn: &mut Connection) -> KickCode {
    tokio::time::timeout(WAIT, async {
        while let Some(ev) = conn.recv().await {
            if let Event::Kick(k) = ev {
                return k.code;
            }
        }
        panic!("the connection ended without a Kick");
    })
    .await
    .expect("kicked")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_is_recalled_across_hosts_and_a_race_leaves_it_in_one_zone() {
    let test = "a_character_is_recalled_across_hosts_and_a_race_leaves_it_in_one_zone";
    let Some(fleet) = Fleet::start(test).await else {
        return;
    };
    let (a, b) = (fleet.arena_on(0, "a").await, fleet.arena_on(1, "b").await);
    let ann = format!("ann-{}", fleet.run);
    fleet.seed(&ann, 7).await;

    // In a on the first host; then in b on the second: the first host's zone gives it back.
    let (mut in_a, score) = join(fleet.host(0), &a, &ann).await.unwrap();
    assert_eq!(score, 7);
    let (in_b, score) = join(fleet.host(1), &b, &ann).await.unwrap();
    assert_eq!(score, 7, "the character came over with its score");
    assert_eq!(kicked(&mut in_a).await, KickCode::CHARACTER_MOVED);
    assert_eq!(fleet.holder(&ann).await.as_deref(), Some(b.as_str()));
    in_b.close().await;

    // Bob joins a and b at once, from both hosts: the character ends in exactly one zone, and
    // the other connection is told.
    let bob = format!("bob-{}", fleet.run);
    fleet.seed(&bob, 3).await;
    let (ra, rb) = tokio::join!(join(fleet.host(0), &a, &bob), join(fleet.host(1), &b, &bob));
    let holder = fleet.holder(&bob).await.expect("held by one zone");
    let outcomes = [(&a, ra), (&b, rb)];
    let mut admitted_live = 0;
    for (zone, r) in outcomes {
        match r {
            Ok((mut conn, score)) => {
                assert_eq!(score, 3);
                if *zone == holder {
                    admitted_live += 1;
                    conn.close().await;
                } else {
                    // Admitted first, then the other zone took the character.
                    assert_eq!(kicked(&mut conn).await, KickCode::CHARACTER_MOVED);
                }
            }
            Err(code) => {
                assert_ne!(*zone, holder, "the holder's join was not refused");
                assert!(
                    matches!(
                        code,
                        KickCode::CHARACTER_ELSEWHERE | KickCode::CHARACTER_MOVED
                    ),
                    "told to retry, or that the other zone took it: {code}"
                );
            }
        }
    }
    assert_eq!(admitted_live, 1, "exactly one zone holds bob's character");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_held_by_a_host_that_stops_answering_is_taken_once_that_host_is_gone() {
    let test = "a_character_held_by_a_host_that_stops_answering_is_taken_once_that_host_is_gone";
    let Some(mut fleet) = Fleet::start(test).await else {
        return;
    };
    let (a, b) = (fleet.arena_on(0, "a").await, fleet.arena_on(1, "b").await);
    let cy = format!("cy-{}", fleet.run);
    fleet.seed(&cy, 5).await;
    let (_in_a, _) = join(fleet.host(0), &a, &cy).await.unwrap();

    // The first host stops answering: the join on the second waits, then is told to retry.
    fleet.host(0).signal("-STOP");
    assert_eq!(
        join(fleet.host(1), &b, &cy).await.err(),
        Some(KickCode::CHARACTER_ELSEWHERE)
    );
    assert_eq!(
        fleet.holder(&cy).await.as_deref(),
        Some(a.as_str()),
        "nothing taken"
    );

    // Killed: once its lease runs out, its zone fails over, and the character is taken with the
    // state it last committed.
    fleet.hosts[0].take().unwrap().kill().await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let (conn, score) = loop {
        match join(fleet.host(1), &b, &cy).await {
            Ok(joined) => break joined,
            Err(code) => {
                assert_eq!(
                    code,
                    KickCode::CHARACTER_ELSEWHERE,
                    "retry until the failover"
                );
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "still refused after {WAIT:?}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    assert_eq!(score, 5, "the last committed state");
    assert_eq!(fleet.holder(&cy).await.as_deref(), Some(b.as_str()));
    conn.close().await;
}

/// Joins `zone` of the `character-test` kind through `host` as `sub`; answers once the zone
/// admitted the player with its character (the kind's first event to a joining player).
async fn admitted(host: &Server, zone: &str, sub: &str) -> Connection {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    static JOINS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = JOINS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ticket = support::sign(&json!({
        "sub": sub, "zone": zone, "kind": "character-test", "exp": exp,
        "jti": format!("bench-{}-{n}", support::unique_run()),
    }));
    let mut options = ConnectOptions::new(ticket);
    options.reconnect.enabled = false;
    let (mut conn, _) = connect(&format!("ws://{}/zones/{zone}", host.addr), options)
        .await
        .unwrap_or_else(|e| panic!("{sub} joining {zone}: {e:?}"));
    tokio::time::timeout(WAIT, async {
        while let Some(ev) = conn.recv().await {
            if let Event::Event { topic: 1, .. } = ev {
                return;
            }
        }
        panic!("the connection ended before the player was admitted");
    })
    .await
    .expect("admitted");
    conn
}

fn percentiles(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() - 1) as f64 * p) as usize];
    (at(0.5), at(0.99))
}

/// Character acquire and recall latency on a fleet of two hosts (PostgreSQL, NATS): the time from
/// a connection's start to the zone admitting the player with its character, when the
/// character is free (acquire), held by a zone of the same host (same-host recall), and held by
/// a zone of the other host (recall across hosts). Run with
/// `cargo test --release -p zonekeep --test characters_fleet -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run on a quiet machine with --release"]
async fn bench_character_acquire_and_recall_latency() {
    const ROUNDS: usize = 200;
    let Some(fleet) = Fleet::start("bench_character_acquire_and_recall_latency").await else {
        return;
    };
    let a1 = fleet.zone_on(0, "bench-a1", "character-test").await;
    let a2 = fleet.zone_on(0, "bench-a2", "character-test").await;
    // A connection that closes keeps its seat for the reconnect grace: the last join of each
    // round goes to one of four zones of host 1, room for every round's player.
    let mut bs = Vec::new();
    for i in 0..4 {
        bs.push(
            fleet
                .zone_on(1, &format!("bench-b{i}"), "character-test")
                .await,
        );
    }
    let (h0, h1) = (fleet.host(0), fleet.host(1));
    let mut acquire = Vec::new();
    let mut same_host = Vec::new();
    let mut across = Vec::new();
    for round in 0..ROUNDS {
        let sub = format!("p{round}");
        // A new principal: its character is free.
        let t = std::time::Instant::now();
        let c = admitted(h0, &a1, &sub).await;
        acquire.push(t.elapsed().as_secs_f64() * 1e3);
        // Held by a1 on the same host.
        let t = std::time::Instant::now();
        let c2 = admitted(h0, &a2, &sub).await;
        same_host.push(t.elapsed().as_secs_f64() * 1e3);
        // Held by a2 on host 0, joined on host 1.
        let t = std::time::Instant::now();
        let c3 = admitted(h1, &bs[round % bs.len()], &sub).await;
        across.push(t.elapsed().as_secs_f64() * 1e3);
        drop((c, c2, c3));
    }
    for (what, ms) in [
        ("acquire (free character)", acquire),
        ("recall, same host", same_host),
        ("recall, across hosts", across),
    ] {
        let (p50, p99) = percentiles(ms);
        println!("{what}: {ROUNDS} joins, p50 {p50:.1} ms, p99 {p99:.1} ms");
    }
}
