//! Transfers between two hosts of a fleet (PostgreSQL for the records and the directory, NATS
//! for the hosts' notes): a move accepted and one refused across hosts, the Transfer sent again
//! to a connection that comes back, and `kill -9` of the source host or of the target host at
//! each step of a move. Whatever dies, once the fleet took over and the client retried as the
//! SDKs do, the player is in exactly one zone — one transfer record, accepted xor returned, and
//! one zone's participants naming it — with its purse once (a move returned after the source's
//! crash hands the purse back to the player's next join there, and to no later one).
//!
//! A step is reached with the transfer worker's test knob (`ZONEKEEP_CHAOS_TRANSFER_PAUSE`,
//! docs/ARCHITECTURE.md): the host logs that it paused there, and the test kills a host.
//! Each test runs in a PostgreSQL schema of its own; zone ids carry the run's suffix (NATS is
//! shared).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_protocol::messages::{KickCode, Transfer, Welcome};

use support::doors::{doors_ticket, enter, hello, with_zone, Conn, Landed, Seen};
use support::{Server, StoreSpec, ADMIN_TOKEN};

/// How long a client keeps retrying: past a dead host's lease (10 s) and the takeover.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// Coins a player joining the source zone starts with, and what it carries after one pick.
const START: u32 = 5;
const CARRIED: u32 = 6;

/// Two hosts, the source zone `a` on the first and the target zone `b` on the second, and one
/// player in `a` holding [`CARRIED`] coins.
struct Pair {
    pg: String,
    hosts: [Option<Server>; 2],
    a: String,
    b: String,
    who: String,
    release: PathBuf,
    /// The client's entry host (the first).
    entry: String,
    player: Option<Conn>,
    welcome: Welcome,
    ticket: String,
    _dir: tempfile::TempDir,
}

/// The chaos knob for one host: pause at `step`, until the release file exists when `release`.
fn knob(step: &str, release: bool, file: &std::path::Path) -> Vec<(String, String)> {
    let mut env = vec![("ZONEKEEP_CHAOS_TRANSFER_PAUSE".to_owned(), step.to_owned())];
    if release {
        env.push((
            "ZONEKEEP_CHAOS_TRANSFER_RELEASE".to_owned(),
            file.display().to_string(),
        ));
    }
    env
}

fn zone_url(server: &Server, zone: &str) -> String {
    format!("ws://{}/zones/{zone}", server.addr)
}

impl Pair {
    /// Starts the pair (`None`: a service is missing and the test is skipped); `env` holds each
    /// host's knob, made from the release file's path.
    async fn start(
        test: &str,
        env: impl Fn(&std::path::Path) -> [Vec<(String, String)>; 2],
    ) -> Option<Pair> {
        let pg_url = support::service_url("ZONEKEEP_TEST_POSTGRES", test)?;
        let nats = support::service_url("ZONEKEEP_TEST_NATS", test)?;
        let run = support::unique_run();
        let store = StoreSpec::postgres_isolated(&pg_url, &run).await;
        let StoreSpec::Postgres(pg) = &store else {
            unreachable!()
        };
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        let envs = env(&release);
        let mut hosts = Vec::new();
        for (i, env) in envs.iter().enumerate() {
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let args = [
                "--admin-token",
                ADMIN_TOKEN,
                "--bus",
                &nats,
                "--save-every",
                "200ms",
            ];
            let log = dir.path().join(format!("h{}.log", i + 1));
            hosts.push(Server::start_env(&store, &args, &log, &env).await);
        }
        let (a, b) = (format!("a-{run}"), format!("b-{run}"));
        for (server, zone) in hosts.iter().zip([&a, &b]) {
            let id = server.host_id().await;
            let (status, body) = server
                .admin_request(
                    "POST",
                    "/admin/zones",
                    Some(&json!({"id": zone, "kind": "doors", "params": {"coins": START}, "host": id})),
                )
                .await;
            assert_eq!(status, 201, "{body}");
        }
        let who = format!("ada-{run}");
        let ticket = doors_ticket(&who, &a, json!({}));
        let mut player =
            Conn::hello(&zone_url(&hosts[0], &a), ticket.clone(), vec![], vec![8]).await;
        let welcome = player.welcome().await;
        // A settled fleet: the client knows both hosts as entries (a Welcome or a later Entries).
        if player.entries.len() < 2 {
            player
                .until("both hosts listed as entries", |s| match s {
                    Seen::Entries(e) if e.len() >= 2 => Some(()),
                    _ => None,
                })
                .await;
        }
        player.purse(START, &a).await;
        player.input(vec![1]).await;
        player.purse(CARRIED, &a).await;
        let mut it = hosts.into_iter();
        let hosts = [it.next(), it.next()];
        let entry = hosts[0].as_ref().unwrap().addr.clone();
        Some(Pair {
            pg: pg.clone(),
            hosts,
            a,
            b,
            who,
            release,
            entry,
            player: Some(player),
            welcome,
            ticket,
            _dir: dir,
        })
    }

    /// The player's connection to the source.
    fn player(&mut self) -> &mut Conn {
        self.player.as_mut().unwrap()
    }

    fn host(&self, i: usize) -> &Server {
        self.hosts[i].as_ref().unwrap()
    }

    /// Waits for host `i`'s log to say a move paused at the knob's step.
    async fn paused(&self, i: usize) {
        let log = self.host(i).log.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("transfer paused at chaos step")
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "host {} never paused the move",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `kill -9` of host `i`.
    async fn kill(&mut self, i: usize) {
        self.hosts[i].take().unwrap().kill().await;
    }

    /// Lets a paused move go on.
    fn release(&self) {
        std::fs::write(&self.release, b"go").unwrap();
    }

    /// The URLs a client tries for `zone`: its entry (the first host), then the entries the
    /// source's Welcome listed, each naming `zone`.
    fn urls(&self, zone: &str) -> Vec<String> {
        // The entry is the first host's, dead or alive (the client cannot know).
        let entry = format!("ws://{}/zones/{zone}", self.entry);
        let mut urls = vec![entry];
        let listed = self
            .player
            .as_ref()
            .map_or(&self.welcome.entries, |c| &c.entries);
        for e in listed {
            let u = with_zone(e, zone);
            if !urls.contains(&u) {
                urls.push(u);
            }
        }
        urls
    }

    /// Follows a Transfer as the SDKs do: its URL, then the entries naming its zone.
    async fn follow(&self, t: &Transfer) -> (Conn, Welcome) {
        let mut urls = vec![t.url.clone()];
        urls.extend(self.urls(&t.zone_id));
        match enter(&urls, &hello(t.ticket.clone(), vec![]), RETRY_FOR).await {
            Landed::Welcome(conn, w) => (*conn, *w),
            other => panic!("the move to {} did not land: {other:?}", t.zone_id),
        }
    }

    /// The client lost its source connection: it resumes with its token through its entries,
    /// follows a Transfer if one comes, and joins afresh (a new ticket) if the resume is refused.
    async fn come_back(&mut self) -> (Conn, Welcome) {
        self.player().drain().await;
        let urls = self.urls(&self.a);
        let resume = hello(self.ticket.clone(), self.welcome.reconnect_token.clone());
        match enter(&urls, &resume, RETRY_FOR).await {
            Landed::Welcome(conn, w) => (*conn, *w),
            Landed::Transfer(t) => self.follow(&t).await,
            Landed::Kick(code, _) if code == KickCode::RECONNECT_REFUSED.0 => {
                let fresh = hello(doors_ticket(&self.who, &self.a, json!({})), vec![]);
                match enter(&urls, &fresh, RETRY_FOR).await {
                    Landed::Welcome(conn, w) => (*conn, *w),
                    other => panic!("a fresh join did not land: {other:?}"),
                }
            }
            Landed::Kick(code, why) => panic!("the resume was refused ({code}): {why}"),
        }
    }

    /// The player's transfer records: (id, status), once none is pending.
    async fn records(&self) -> Vec<(String, String)> {
        let (client, conn) = tokio_postgres::connect(&self.pg, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        loop {
            let rows: Vec<(String, String)> = client
                .query(
                    "SELECT id, status FROM zone_transfers WHERE principal = $1",
                    &[&self.who],
                )
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            if rows.iter().all(|(_, s)| s != "pending") {
                return rows;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "a move stays pending: {rows:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The zones whose participants name the player, as the surviving host `i` tells.
    async fn zones_holding(&self, i: usize) -> Vec<String> {
        let mut holding = Vec::new();
        for zone in [&self.a, &self.b] {
            let detail: Value = self.host(i).admin(&format!("/admin/zones/{zone}")).await;
            let here = detail["participants"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["principal"] == self.who.as_str()));
            if here {
                holding.push(zone.clone());
            }
        }
        holding
    }

    /// The end of every crash case: one record, accepted xor returned; the client welcomed in
    /// the zone the record names, with its purse; that zone alone holding the player.
    async fn exactly_one(&self, survivor: usize, mut conn: Conn, welcome: &Welcome, purse: u32) {
        let records = self.records().await;
        assert_eq!(records.len(), 1, "one move, one record: {records:?}");
        let status = records[0].1.as_str();
        let zone = match status {
            "accepted" => &self.b,
            "returned" => &self.a,
            other => panic!("the move ended {other}"),
        };
        assert_eq!(
            &welcome.zone_id, zone,
            "the client is where the record says"
        );
        conn.purse(purse, zone).await;
        // Still playing there.
        conn.input(vec![1]).await;
        conn.purse(purse + 1, zone).await;
        assert_eq!(
            self.zones_holding(survivor).await,
            std::slice::from_ref(zone),
            "the player is in exactly one zone (record {status})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_hosts_a_move_is_accepted_or_refused_and_a_returning_connection_is_sent_on() {
    let test = "across_hosts_a_move_is_accepted_or_refused_and_a_returning_connection_is_sent_on";
    let Some(mut p) = Pair::start(test, |_| [vec![], vec![]]).await else {
        return;
    };
    // Refused across hosts: a locked vault on the second host; the player stays, told why.
    let vault = format!("vault-{}", p.a);
    let h2 = p.host(1).host_id().await;
    let (status, body) = p
        .host(1)
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": vault, "kind": "doors", "params": {"locked": true}, "host": h2})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    p.player().walk(&vault, json!({})).await;
    let why = p.player().returned().await;
    assert!(why.contains("locked"), "{why}");
    let a = p.a.clone();
    p.player().purse(CARRIED, &a).await;

    // Accepted across hosts: the Transfer names the second host; the credential admits once.
    let b = p.b.clone();
    p.player().walk(&b, json!({})).await;
    let t = p.player().transfer().await;
    assert_eq!(t.zone_id, p.b);
    assert_eq!(t.url, zone_url(p.host(1), &p.b));
    let mut there = Conn::hello(&t.url, t.ticket.clone(), vec![], vec![8]).await;
    there.welcome().await;
    there.purse(CARRIED, &p.b).await;
    // A replay through the first host is redirected to the owner and refused there.
    let replay = enter(
        &[zone_url(p.host(0), &p.b)],
        &hello(t.ticket.clone(), vec![]),
        RETRY_FOR,
    )
    .await;
    assert!(
        matches!(replay, Landed::Kick(code, _) if code == KickCode::TICKET_REPLAYED.0),
        "{replay:?}"
    );

    // A connection that comes back to the source, through the second host, is sent on again.
    let resume = hello(p.ticket.clone(), p.welcome.reconnect_token.clone());
    let back = enter(&[zone_url(p.host(1), &p.a)], &resume, RETRY_FOR).await;
    match back {
        Landed::Transfer(again) => assert_eq!(again, t),
        other => panic!("the returning connection was not sent on: {other:?}"),
    }
    let records = p.records().await;
    let mut statuses: Vec<&str> = records.iter().map(|(_, s)| s.as_str()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["accepted", "returned"], "{records:?}");
    assert_eq!(p.zones_holding(1).await, std::slice::from_ref(&p.b));
    drop((there, p.player.take()));
    for h in p.hosts.iter_mut() {
        h.take().unwrap().terminate().await;
    }
}

/// A step a host is killed at.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Pending,
    Admitted,
    Accepted,
    Sent,
}

/// Kills the source host (`victim` 0) or the target host (1) at `step` of a move.
async fn kill_at(test: &str, victim: usize, step: Step) {
    // Which host pauses, and whether the pause ends (when the paused host is the survivor).
    let (paused, knob_step) = match step {
        Step::Pending => (Some(0), "pending"),
        Step::Admitted => (Some(1), "admitted"),
        Step::Accepted => (Some(victim), "accepted"),
        Step::Sent => (None, ""),
    };
    let released = paused.is_some_and(|h| h != victim);
    let env = |file: &std::path::Path| {
        let mut env = [vec![], vec![]];
        if let Some(h) = paused {
            env[h] = knob(knob_step, released, file);
        }
        env
    };
    let Some(mut p) = Pair::start(test, env).await else {
        return;
    };
    let survivor = 1 - victim;
    let b = p.b.clone();
    p.player().walk(&b, json!({})).await;
    let transfer = match paused {
        Some(h) => {
            p.paused(h).await;
            None
        }
        None => Some(p.player().transfer().await),
    };
    p.kill(victim).await;
    if released {
        p.release();
    }
    let (conn, welcome) = if victim == 0 {
        // The source is gone: follow the Transfer if it came, else come back as the SDK does.
        match transfer {
            Some(t) => p.follow(&t).await,
            None => p.come_back().await,
        }
    } else {
        // The source lives: the player is moved on, or taken back still connected.
        let t = match transfer {
            Some(t) => Some(t),
            None => {
                let end = p
                    .player()
                    .until("the move's end", |s| match s {
                        Seen::Transfer(t) => Some(Ok(t.clone())),
                        Seen::Returned(why) => Some(Err(why.clone())),
                        _ => None,
                    })
                    .await;
                if step == Step::Admitted {
                    // A target that admitted and died never accepted: the source returns the
                    // move at its decision timeout, still connected, not at the takeover.
                    let why = end.as_ref().expect_err("a dead target accepted");
                    assert!(why.contains("did not answer in time"), "{why}");
                }
                end.ok()
            }
        };
        match t {
            Some(t) => p.follow(&t).await,
            None => (p.player.take().unwrap(), p.welcome.clone()),
        }
    };
    // Wherever the player ends, it carries the purse it had: a player that came back after the
    // source died joined the restarted source afresh (doors keeps no saves), and its join
    // reclaimed the returned move's state.
    p.exactly_one(survivor, conn, &welcome, CARRIED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_undone_by_the_source_crash_gives_the_purse_back_once() {
    let test = "a_move_undone_by_the_source_crash_gives_the_purse_back_once";
    let env = |file: &std::path::Path| [knob("pending", false, file), vec![]];
    let Some(mut p) = Pair::start(test, env).await else {
        return;
    };
    let b = p.b.clone();
    p.player().walk(&b, json!({})).await;
    p.paused(0).await;
    p.kill(0).await;
    // The SDK's path: the resume is refused by the zone's new run, the fresh join reclaims.
    let (conn, welcome) = p.come_back().await;
    assert_eq!(
        welcome.zone_id, p.a,
        "a move pending at the crash is returned"
    );
    p.exactly_one(1, conn, &welcome, CARRIED).await;
    let reclaimed: bool = {
        let (client, c) = tokio_postgres::connect(&p.pg, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(c);
        client
            .query_one(
                "SELECT arrived FROM zone_transfers WHERE principal = $1",
                &[&p.who],
            )
            .await
            .unwrap()
            .get(0)
    };
    assert!(reclaimed, "the returned move is marked handed back");
    // Another join of the same player is a join afresh: the state went back once.
    let urls = p.urls(&p.a);
    let again = hello(doors_ticket(&p.who, &p.a, json!({})), vec![]);
    let mut second = match enter(&urls, &again, RETRY_FOR).await {
        Landed::Welcome(conn, w) => {
            assert_eq!(w.zone_id, p.a);
            *conn
        }
        other => panic!("a second join did not land: {other:?}"),
    };
    second.purse(START, &p.a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_host_killed_after_the_pending_record() {
    kill_at(
        "source_host_killed_after_the_pending_record",
        0,
        Step::Pending,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_host_killed_after_the_target_admitted() {
    kill_at(
        "source_host_killed_after_the_target_admitted",
        0,
        Step::Admitted,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_host_killed_after_the_acceptance() {
    kill_at("source_host_killed_after_the_acceptance", 0, Step::Accepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_host_killed_after_the_transfer_was_sent() {
    kill_at(
        "source_host_killed_after_the_transfer_was_sent",
        0,
        Step::Sent,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_host_killed_after_the_pending_record() {
    kill_at(
        "target_host_killed_after_the_pending_record",
        1,
        Step::Pending,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_host_killed_after_it_admitted_returns_the_player_within_the_decision_timeout() {
    kill_at(
        "target_host_killed_after_it_admitted_returns_the_player_within_the_decision_timeout",
        1,
        Step::Admitted,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_host_killed_after_the_acceptance() {
    kill_at("target_host_killed_after_the_acceptance", 1, Step::Accepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_host_killed_after_the_transfer_was_sent() {
    kill_at(
        "target_host_killed_after_the_transfer_was_sent",
        1,
        Step::Sent,
    )
    .await;
}

/// Players moving back and forth at once in the transfer benchmark, and moves each.
const BENCH_PLAYERS: usize = 8;
const BENCH_MOVES: usize = 25;

/// The transfer benchmark (BENCHMARKS.md, "Transfers"): [`BENCH_PLAYERS`] players each walk
/// [`BENCH_MOVES`] times between two zones — on one host, then on two — and each move's
/// latency is timed at the client from the walk input leaving to the target's first purse event
/// (carried by its first Delta after the Welcome). Prints p50, p99 and moves per second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --ignored --nocapture"]
async fn bench_transfer_latency_same_host_and_across_hosts() {
    let test = "bench_transfer_latency_same_host_and_across_hosts";
    let Some(p) = Pair::start(test, |_| [vec![], vec![]]).await else {
        return;
    };
    let h1 = p.host(0).host_id().await;
    for (label, host) in [("same host", 0usize), ("across hosts", 1)] {
        let before = [
            latency_histogram(p.host(0)).await,
            latency_histogram(p.host(1)).await,
        ];
        // Zone pairs per player: the source on the first host, the target on `host`.
        let mut tasks = Vec::new();
        let started = std::time::Instant::now();
        for i in 0..BENCH_PLAYERS {
            let (x, y) = (
                format!("{}-x{i}-{host}", p.a),
                format!("{}-y{i}-{host}", p.a),
            );
            let target_host = p.host(host).host_id().await;
            for (zone, on) in [(&x, &h1), (&y, &target_host)] {
                let (status, body) = p
                    .host(0)
                    .admin_request(
                        "POST",
                        "/admin/zones",
                        Some(&json!({"id": zone, "kind": "doors", "params": {"coins": 1}, "host": on})),
                    )
                    .await;
                assert_eq!(status, 201, "{body}");
            }
            let who = format!("{}-{i}-{host}", p.who);
            let url = zone_url(p.host(0), &x);
            tasks.push(tokio::spawn(async move {
                let mut conn =
                    Conn::hello(&url, doors_ticket(&who, &x, json!({})), vec![], vec![8]).await;
                conn.welcome().await;
                conn.purse(1, &x).await;
                let mut times = Vec::with_capacity(BENCH_MOVES);
                let (mut here, mut there) = (x, y);
                for _ in 0..BENCH_MOVES {
                    let t0 = std::time::Instant::now();
                    conn.walk(&there, json!({})).await;
                    let t = conn.transfer().await;
                    let mut next = Conn::hello(&t.url, t.ticket, vec![], vec![8]).await;
                    next.welcome().await;
                    next.purse(1, &there).await;
                    times.push(t0.elapsed());
                    conn = next;
                    std::mem::swap(&mut here, &mut there);
                }
                times
            }));
        }
        // Each player's first move goes into a zone that was just created (and starts it there):
        // reported apart from the moves after it.
        let mut times = Vec::new();
        let mut warm = Vec::new();
        for t in tasks {
            let mut player = t.await.unwrap();
            times.extend(player.iter().copied());
            player.remove(0);
            warm.extend(player);
        }
        let wall = started.elapsed();
        let quantiles = |mut v: Vec<std::time::Duration>| {
            v.sort_unstable();
            let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
            (ms(at(0.50)), ms(at(0.99)), ms(*v.last().unwrap()))
        };
        let (p50, p99, max) = quantiles(times.clone());
        let (w50, w99, wmax) = quantiles(warm);
        println!(
            "transfers {label}: {} moves by {BENCH_PLAYERS} players in {:.2} s = {:.1} moves/s; latency p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms; after each player's first move: p50 {w50:.1} ms, p99 {w99:.1} ms, max {wmax:.1} ms",
            times.len(),
            wall.as_secs_f64(),
            times.len() as f64 / wall.as_secs_f64(),
        );
        // The hosts' own measure: from the source recording the move to the moved player's first
        // frame leaving the target (both hosts share this machine's clock).
        let after = [
            latency_histogram(p.host(0)).await,
            latency_histogram(p.host(1)).await,
        ];
        let delta: Vec<(f64, u64)> = after[0]
            .iter()
            .zip(&after[1])
            .zip(before[0].iter().zip(&before[1]))
            .map(|((a0, a1), (b0, b1))| (a0.0, a0.1 + a1.1 - b0.1 - b1.1))
            .collect();
        let total = delta.last().map_or(0, |b| b.1);
        let bound = |q: f64| {
            let want = (total as f64 * q).ceil() as u64;
            delta
                .iter()
                .find(|b| b.1 >= want)
                .map_or(f64::INFINITY, |b| b.0 * 1000.0)
        };
        println!(
            "transfers {label}, host-measured from the move's record to the first frame ({total} moves): p50 under {} ms, p99 under {} ms",
            bound(0.50),
            bound(0.99),
        );
    }
}

/// `host`'s `zonekeep_transfer_latency_seconds` buckets: `(upper bound in seconds, cumulative
/// count)`, in order.
async fn latency_histogram(host: &Server) -> Vec<(f64, u64)> {
    let text = host.get("/metrics").await;
    text.lines()
        .filter_map(|l| l.strip_prefix("zonekeep_transfer_latency_seconds_bucket{le=\""))
        .filter_map(|rest| {
            let (le, n) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, n.trim().parse::<f64>().ok()? as u64))
        })
        .collect()
}
