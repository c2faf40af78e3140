//! Presence (docs/PRESENCE.md) on a fleet of three real `zonekeep serve` processes on one
//! PostgreSQL store: players of a zone on one host are seen online there by a back end asking
//! another host (`GET /presence`) and by a game client watching through a third
//! (`GET /presence/watch`, server-sent events). The zone's host is killed: its players resume on
//! the host that takes the zone over, and both the back end's answer and the watcher follow them
//! there with their `since` kept. A player whose tab closes is online until its zone's reconnect
//! grace ends, then offline, and the watcher is told. Hostile requests get the documented
//! refusals.
//!
//! The test runs in a PostgreSQL schema of its own (the database is shared).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::sdk::{self, Seen};
use support::{get_streamed, zone_entry, Server, StoreSpec, Streamed, ADMIN_TOKEN, LOBBY_TOKEN};
use tokio::sync::{oneshot, watch};
use zonekeep_client::{connect, ConnectOptions, Event};

/// `ledger-test`'s reconnect grace: the default `ZoneConfig`'s (it is registered with
/// `HostBuilder::zone`, no config of its own).
const GRACE: Duration = Duration::from_secs(15);
/// How long a poll waits for what it waits for: a takeover (10 s) and a grace (15 s) fit.
const WITHIN: Duration = Duration::from_secs(60);

/// `n` hosts on `store`, each with the admin API and the back end's credential.
async fn fleet(store: &StoreSpec, dir: &Path, n: usize) -> Vec<Server> {
    let mut hosts = Vec::new();
    for i in 1..=n {
        let args = [
            "--admin-token",
            ADMIN_TOKEN,
            "--lobby-token",
            LOBBY_TOKEN,
            "--save-every",
            "200ms",
        ];
        hosts.push(Server::start(store, &args, &dir.join(format!("h{i}.log"))).await);
    }
    hosts
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A single-use ticket for the `@presence` audience watching `watch` (no `params.watch` when
/// `None`).
fn watch_ticket(sub: &str, watch: Option<&[String]>) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut claims = json!({
        "sub": sub, "zone": "@presence", "exp": now_secs() + 120,
        "jti": format!("presence-{n}-{}", support::unique_run()),
    });
    if let Some(w) = watch {
        claims["params"] = json!({ "watch": w });
    }
    support::sign(&claims)
}

/// `GET /presence?principals=...` at `h` bearing `token`: the status and the answer as JSON.
async fn ask_as(h: &Server, principals: &[String], token: &str) -> (u16, Value) {
    let path = format!("/presence?principals={}", principals.join(","));
    let (status, bytes) = h.bearer_bytes("GET", &path, None, token).await;
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(
        status != 404 || !v.is_null(),
        "GET /presence answered 404 without JSON: the presence routes are not in this build"
    );
    (status, v)
}

/// The back end's view of `principals` (asked at `h`), by principal.
async fn ask(h: &Server, principals: &[String]) -> BTreeMap<String, Value> {
    let (status, v) = ask_as(h, principals, LOBBY_TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let list = v["presence"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(list.len(), principals.len(), "one entry per principal: {v}");
    list.iter()
        .map(|e| (e["principal"].as_str().unwrap().to_owned(), e.clone()))
        .collect()
}

/// Polls the back end's view at `h` until `f` holds (bounded), returning it.
async fn ask_until(
    h: &Server,
    principals: &[String],
    what: &str,
    f: impl Fn(&BTreeMap<String, Value>) -> bool,
) -> BTreeMap<String, Value> {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let v = ask(h, principals).await;
        if f(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// True when `entry` is online in exactly one zone, `zone`, on a host `host` accepts.
fn online_in(entry: &Value, zone: &str, host: impl Fn(&str) -> bool) -> bool {
    entry["online"] == true
        && entry["zones"].as_array().is_some_and(|z| {
            z.len() == 1
                && z[0]["zone"] == zone
                && z[0]["host"].as_str().is_some_and(&host)
                && z[0]["since_ms"].as_u64().is_some()
        })
}

fn offline(entry: &Value) -> bool {
    entry["online"] == false && entry["zones"].as_array().is_some_and(Vec::is_empty)
}

fn since(entry: &Value) -> u64 {
    entry["zones"][0]["since_ms"].as_u64().unwrap()
}

/// What a watcher has read from its stream.
#[derive(Debug, Clone, Default)]
struct Watched {
    /// The first event's entries (it must be a `snapshot`).
    snapshot: Option<Vec<Value>>,
    /// Every `presence` event after it, in order.
    events: Vec<Value>,
    /// Each principal's presence as the stream says it is now.
    now: BTreeMap<String, Value>,
    /// The stream ended.
    ended: bool,
}

/// Reads `stream` in the background into a [`Watched`].
fn follow(mut stream: Streamed) -> watch::Receiver<Watched> {
    let (tx, rx) = watch::channel(Watched::default());
    tokio::spawn(async move {
        let mut first = true;
        while let Some(e) = stream.next_event().await {
            let v: Value = serde_json::from_str(&e.data)
                .unwrap_or_else(|err| panic!("event data is not JSON ({err}): {e:?}"));
            let is_first = std::mem::replace(&mut first, false);
            tx.send_modify(|w| match e.event.as_str() {
                "snapshot" => {
                    assert!(is_first, "a snapshot after the first event: {e:?}");
                    let list = v["presence"].as_array().unwrap().clone();
                    for p in &list {
                        w.now
                            .insert(p["principal"].as_str().unwrap().to_owned(), p.clone());
                    }
                    w.snapshot = Some(list);
                }
                "presence" => {
                    assert!(!is_first, "the stream starts with a snapshot, not {e:?}");
                    w.now
                        .insert(v["principal"].as_str().unwrap().to_owned(), v.clone());
                    w.events.push(v);
                }
                other => panic!("unknown event {other:?}: {e:?}"),
            });
        }
        tx.send_modify(|w| w.ended = true);
    });
    rx
}

/// Waits (bounded) until `f` holds for what the watcher read.
async fn watched_until(
    rx: &mut watch::Receiver<Watched>,
    what: &str,
    f: impl Fn(&Watched) -> bool,
) -> Watched {
    let r = tokio::time::timeout(WITHIN, rx.wait_for(|w| f(w)))
        .await
        .map(|r| r.map(|w| w.clone()));
    match r {
        Ok(Ok(w)) => w,
        _ => panic!("timed out waiting for {what}: {:?}", *rx.borrow()),
    }
}

/// A player like [`sdk::player`] that can also leave for good, as a closed tab does: its
/// connection closes and does not come back (the zone keeps its session for the grace).
struct Leaver {
    seen: watch::Receiver<Seen>,
    leave: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

async fn leaver(entry: &str, zone: &str, principal: &str) -> Leaver {
    let url = format!("ws://{entry}/zones/{zone}");
    let (z, p) = (zone.to_owned(), principal.to_owned());
    let opts = ConnectOptions::new(support::ticket(principal, zone)).with_fresh_ticket(move || {
        let t = support::ticket(&p, &z);
        async move { Ok::<_, String>(t) }
    });
    let (mut conn, _) = connect(&url, opts).await.unwrap();
    let (tx, seen) = watch::channel(Seen::default());
    let (leave, mut left) = oneshot::channel();
    let done = tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_millis(25));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n = 0u64;
        let mut online = true;
        loop {
            tokio::select! {
                _ = &mut left => {
                    conn.close().await;
                    tx.send_modify(|s| s.closed = true);
                    return;
                }
                // Like `sdk::player`, no inputs while offline (no burst on resuming).
                _ = every.tick(), if online => {
                    n += 1;
                    let _ = conn.send_input(&n.to_le_bytes());
                    tx.send_modify(|s| s.sent = n);
                }
                e = conn.recv() => match e {
                    Some(Event::Delta(d)) => tx.send_modify(|s| s.acked = s.acked.max(d.ack)),
                    Some(Event::Welcome { resumed, .. }) => {
                        online = true;
                        tx.send_modify(|s| s.resumed += u32::from(resumed));
                    }
                    Some(Event::Disconnected { .. }) => {
                        online = false;
                        tx.send_modify(|s| s.disconnects += 1);
                    }
                    Some(Event::Kick(k)) => {
                        online = false;
                        tx.send_modify(|s| s.kicks.push(k.code.0));
                    }
                    Some(Event::Closed(_)) | None => {
                        tx.send_modify(|s| s.closed = true);
                        return;
                    }
                    Some(_) => {}
                },
            }
        }
    });
    Leaver { seen, leave, done }
}

/// A JSON refusal: `status` with `{"error": {"code": code, "message": ...}}`.
fn assert_refused(what: &str, got: (u16, &Value), status: u16, code: &str) {
    assert_eq!(got.0, status, "{what}: {}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{what}: {}", got.1);
    assert!(
        got.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: a message says why: {}",
        got.1
    );
}

/// `GET /presence/watch` at `h` with `ticket`, expecting a refusal: its status and JSON body.
async fn watch_refused(h: &Server, ticket: Option<&str>) -> (u16, Value) {
    let s = get_streamed(&h.addr, "/presence/watch", ticket).await;
    assert_ne!(s.status, 200, "a stream was opened");
    let status = s.status;
    (status, s.json().await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_follows_players_across_a_host_failure() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "presence_follows_players_across_a_host_failure",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let mut hosts = fleet(&store, dir.path(), 3).await;
    let zone = "failover-1";
    // The zone lives on the first host; players enter through the second; the back end asks and
    // the watcher watches through the third.
    let owner_id = hosts[0].host_id().await;
    let created = hosts[1]
        .post_admin(
            "/admin/zones",
            &json!({"id": zone, "kind": "ledger-test", "host": owner_id}),
        )
        .await;
    assert_eq!(created["host"], owner_id.as_str(), "{created}");
    let principals: Vec<String> = (0..3).map(|i| format!("f{i}-{run}")).collect();
    // Two players as the fleet test's; the third can also leave for good.
    let mut players = Vec::new();
    for p in &principals[..2] {
        players.push(sdk::player(hosts[1].addr.clone(), zone.to_owned(), p.clone()).await);
    }
    let third = leaver(&hosts[1].addr, zone, &principals[2]).await;
    players.push(third.seen.clone());
    for p in &mut players {
        sdk::until(p, "inputs acknowledged", |s| s.acked >= 20).await;
    }

    // The back end sees all three online in the zone, on its host, asking another host.
    let at = ask_until(
        &hosts[2],
        &principals,
        "all three online on the owner",
        |v| {
            principals
                .iter()
                .all(|p| online_in(&v[p], zone, |h| h == owner_id))
        },
    )
    .await;
    let since_of: BTreeMap<String, u64> = principals
        .iter()
        .map(|p| (p.clone(), since(&at[p])))
        .collect();
    println!("online on {owner_id}: {since_of:?}");

    // A watcher of the three and of someone who never plays.
    let nobody = format!("nobody-{run}");
    let mut watched: Vec<String> = principals.clone();
    watched.push(nobody.clone());
    let stream = get_streamed(
        &hosts[2].addr,
        "/presence/watch",
        Some(&watch_ticket("watcher", Some(&watched))),
    )
    .await;
    assert_eq!(stream.status, 200);
    let kind = stream.header("content-type");
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    // A page of any origin may read it (with `fetch`, the ticket in a header).
    assert_eq!(stream.header("access-control-allow-origin"), "*");
    let mut watcher = follow(stream);
    let w = watched_until(&mut watcher, "the snapshot", |w| w.snapshot.is_some()).await;
    let snapshot = w.snapshot.unwrap();
    assert_eq!(snapshot.len(), 4, "every watched principal: {snapshot:?}");
    for p in &principals {
        let e = &w.now[p];
        assert!(online_in(e, zone, |h| h == owner_id), "{p}: {e}");
        assert_eq!(since(e), since_of[p], "{p}: the back end's since: {e}");
    }
    assert!(offline(&w.now[&nobody]), "{}", w.now[&nobody]);

    // The owner dies; the zone is taken over and the players resume there by themselves.
    let before: Vec<u32> = players.iter().map(|p| p.borrow().acked).collect();
    // From here on `hosts[0]` is the players' entry host and `hosts[1]` the watcher's.
    let owner = hosts.remove(0);
    owner.kill().await;
    let killed_at = tokio::time::Instant::now();
    for (p, b) in players.iter_mut().zip(&before) {
        let b = *b;
        sdk::until(p, "play to go on after the takeover", |s| s.acked > b + 10).await;
    }
    let list = hosts[0].admin("/admin/zones").await;
    let new_owner = zone_entry(&list, zone).unwrap()["host"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_owner, owner_id);
    println!(
        "playing again on {new_owner} {:?} after the kill",
        killed_at.elapsed()
    );

    // The back end sees them on the new host, since kept.
    let after = ask_until(&hosts[1], &principals, "all three on the new host", |v| {
        principals
            .iter()
            .all(|p| online_in(&v[p], zone, |h| h != owner_id))
    })
    .await;
    println!(
        "presence after the failover {:?} after the kill",
        killed_at.elapsed()
    );
    for p in &principals {
        let e = &after[p];
        assert!(
            online_in(e, zone, |h| h == new_owner),
            "{p} on the zone's owner: {e}"
        );
        assert_eq!(
            since(e),
            since_of[p],
            "{p} kept its since across the failover: {e}"
        );
    }
    // The watcher was told: each player's last event has it on the new host, since kept.
    let w = watched_until(&mut watcher, "the watcher to follow them", |w| {
        principals
            .iter()
            .all(|p| online_in(&w.now[p], zone, |h| h == new_owner))
    })
    .await;
    assert!(!w.ended);
    for p in &principals {
        let mine: Vec<&Value> = w
            .events
            .iter()
            .filter(|e| e["principal"] == p.as_str())
            .collect();
        println!("{p}: {mine:?}");
        let last = mine
            .last()
            .unwrap_or_else(|| panic!("{p}: no presence event"));
        assert!(online_in(last, zone, |h| h == new_owner), "{p}: {last}");
        assert_eq!(since(last), since_of[p], "{p}: {last}");
        // In between it may have been offline (the dead host's rows stop counting before the
        // players resume), never anywhere else.
        for e in &mine {
            assert!(
                offline(e) || online_in(e, zone, |h| h == owner_id || h == new_owner),
                "{p}: {e}"
            );
        }
    }
    assert!(
        w.events.iter().all(|e| e["principal"] != nobody.as_str()),
        "no event for a principal whose presence did not change: {:?}",
        w.events
    );

    // The third player's tab closes: it stays online for its zone's grace, then goes offline.
    let seen = w.events.len();
    let left_at = tokio::time::Instant::now();
    third.leave.send(()).unwrap();
    third.done.await.unwrap();
    assert!(third.seen.borrow().closed);
    let gone = ask_until(&hosts[1], &principals, "the leaver offline", |v| {
        offline(&v[&principals[2]])
    })
    .await;
    let took = left_at.elapsed();
    println!("offline {took:?} after leaving");
    assert!(
        took + Duration::from_millis(500) >= GRACE,
        "present until the grace ends, not {took:?}"
    );
    for p in &principals[..2] {
        assert!(
            online_in(&gone[p], zone, |h| h == new_owner),
            "{p}: {}",
            gone[p]
        );
    }
    let w = watched_until(&mut watcher, "the watcher told of the leave", |w| {
        offline(&w.now[&principals[2]])
    })
    .await;
    let told: Vec<&Value> = w.events[seen..].iter().collect();
    assert!(
        told.iter()
            .any(|e| e["principal"] == principals[2].as_str() && offline(e)),
        "{told:?}"
    );
    assert!(
        told.iter()
            .all(|e| e["principal"] == principals[2].as_str()),
        "only the leaver changed: {told:?}"
    );

    hostile(&hosts[1], &principals, zone, &run).await;
    drop(watcher);
    for h in hosts {
        h.terminate().await;
    }
}

/// Requests a host must refuse, each with the documented status and code.
async fn hostile(h: &Server, principals: &[String], zone: &str, run: &str) {
    // The back end's route: no credential, a wrong one, another credential (401, and no presence
    // in the answer), too many principals, a principal too long (400).
    let path = format!("/presence?principals={}", principals.join(","));
    let none = get_streamed(&h.addr, &path, None).await;
    assert_eq!(none.status, 401, "no credential");
    let body = none.json().await;
    assert!(body.get("presence").is_none(), "{body}");
    for (what, token) in [
        ("a wrong credential", "not-the-lobby-token-0123"),
        ("the admin token", ADMIN_TOKEN),
    ] {
        let (status, body) = h.bearer_bytes("GET", &path, None, token).await;
        let body = String::from_utf8_lossy(&body);
        println!("{what}: {status} {body}");
        assert_eq!(status, 401, "{what}: {body}");
        assert!(!body.contains("presence"), "{what}: {body}");
    }
    let many: Vec<String> = (0..501).map(|i| format!("m{i}")).collect();
    let (status, v) = ask_as(h, &many, LOBBY_TOKEN).await;
    assert_refused("501 principals", (status, &v), 400, "bad_request");
    let (status, v) = ask_as(h, &many[..500], LOBBY_TOKEN).await;
    assert_eq!(status, 200, "500 principals are fine: {v}");
    assert_eq!(v["presence"].as_array().map(Vec::len), Some(500));
    let long = vec!["x".repeat(257)];
    let (status, v) = ask_as(h, &long, LOBBY_TOKEN).await;
    assert_refused("a principal of 257 bytes", (status, &v), 400, "bad_request");

    // The watch route.
    let (status, v) = watch_refused(h, None).await;
    assert_refused("no ticket", (status, &v), 401, "unauthorized");
    let zone_ticket = support::ticket(&format!("z-{run}"), zone);
    let (status, v) = watch_refused(h, Some(&zone_ticket)).await;
    assert_refused("a zone's ticket", (status, &v), 401, "unauthorized");
    let once = watch_ticket("once", Some(&principals[..1]));
    let first = get_streamed(&h.addr, "/presence/watch", Some(&once)).await;
    assert_eq!(first.status, 200, "the ticket's first use");
    drop(first);
    let (status, v) = watch_refused(h, Some(&once)).await;
    assert_refused("a replayed ticket", (status, &v), 401, "unauthorized");
    let (status, v) = watch_refused(h, Some(&watch_ticket("nolist", None))).await;
    assert_refused("no params.watch", (status, &v), 400, "bad_request");
    let too_many: Vec<String> = (0..201).map(|i| format!("w{i}")).collect();
    let dropped = "zonekeep_presence_dropped_total{reason=\"too_many_principals\"}";
    let counted = h.metric(dropped).await;
    let (status, v) = watch_refused(h, Some(&watch_ticket("many", Some(&too_many)))).await;
    assert_refused("201 principals", (status, &v), 400, "bad_request");
    assert_eq!(
        h.metric(dropped).await,
        counted + 1.0,
        "counted too_many_principals"
    );
    let edge = get_streamed(
        &h.addr,
        "/presence/watch",
        Some(&watch_ticket("edge", Some(&too_many[..200]))),
    )
    .await;
    assert_eq!(edge.status, 200, "200 principals are fine");
}

/// A host being drained (SIGTERM) ends its open watch streams at once: the drain waits for every
/// connection to close, so a stream that stayed open would hold every later phase of the drain
/// to its deadline ("shutdown deadline reached" in the log) and leave them no time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_watch_never_holds_up_a_drain() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let args = ["--admin-token", ADMIN_TOKEN, "--lobby-token", LOBBY_TOKEN];
    let host = Server::start(&store, &args, &dir.path().join("host.log")).await;
    let watch = ["ann".to_owned()];
    let mut stream = get_streamed(
        &host.addr,
        "/presence/watch",
        Some(&watch_ticket("cat", Some(&watch))),
    )
    .await;
    assert_eq!(stream.status, 200);
    let first = stream.next_event().await.expect("a snapshot");
    assert_eq!(first.event, "snapshot");
    host.sigterm();
    assert_eq!(
        stream.next_event().await,
        None,
        "the stream ends with the drain"
    );
    let (status, log) = host.wait().await;
    assert!(status.success(), "{log}");
    assert!(
        !log.contains("shutdown deadline reached"),
        "every phase of the drain finished in time:\n{log}"
    );
}
