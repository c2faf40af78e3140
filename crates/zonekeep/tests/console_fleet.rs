//! The admin API the operator console drives across a fleet of real `zonekeep serve` processes:
//! the fleet proxy reaches another host's admin routes (and nothing else), a zone moved by an
//! operator is saved, handed over and resumed on its new host from that save, and
//! `POST /admin/drain` shuts a host down as SIGTERM does, its zones handed to the other host.
//!
//! Each test runs on a SQLite file two hosts share and on PostgreSQL (in a schema of its own;
//! reported as skipped without `ZONEKEEP_TEST_POSTGRES`, a failure under `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::{LedgerClient, Server, StoreSpec, ADMIN_TOKEN};
use zonekeep_protocol::messages::KickCode;

/// Inputs per client per second (under the host's default 60/s limit).
const INPUT_EVERY: Duration = Duration::from_millis(25);

/// Two hosts `h1`, `h2` on `store`, with the admin API; only a zone's final save writes it
/// (a one-hour save period), so a zone restored elsewhere holds what that save holds.
async fn two_hosts(store: &StoreSpec, dir: &Path) -> (Server, Server) {
    let args = ["--admin-token", ADMIN_TOKEN, "--save-every", "1h"];
    let h1 = Server::start(store, &args, &dir.join("h1.log")).await;
    let h2 = Server::start(store, &args, &dir.join("h2.log")).await;
    (h1, h2)
}

/// The PostgreSQL store of `test`, in a schema of its own, or `None` (reported as skipped).
async fn postgres(test: &str, run: &str) -> Option<StoreSpec> {
    let url = support::service_url("ZONEKEEP_TEST_POSTGRES", test)?;
    Some(StoreSpec::postgres_isolated(&url, run).await)
}

/// The `error.code` of an answer.
fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

async fn the_proxy_reaches_another_hosts_admin_routes_and_nothing_else(store: StoreSpec) {
    let dir = tempfile::tempdir().unwrap();
    let (h1, h2) = two_hosts(&store, dir.path()).await;
    let (id1, id2) = (h1.host_id().await, h2.host_id().await);

    let (s, v) = h1
        .admin_request("GET", &format!("/admin/hosts/{id2}/api/admin/hosts"), None)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["self"], id2.as_str(), "the other host answered: {v}");
    assert_eq!(v["fleet"], true, "{v}");
    assert!(v["version"].is_string() && v["build"].is_string(), "{v}");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 2, "{v}");
    let (s, v) = h1
        .admin_request("GET", &format!("/admin/hosts/{id1}/api/admin/hosts"), None)
        .await;
    assert_eq!(
        (s, &v["self"]),
        (200, &json!(id1)),
        "its own id is served here: {v}"
    );

    // A POST with its body: a zone created on the other host, by the other host.
    let (s, v) = h1
        .admin_request(
            "POST",
            &format!("/admin/hosts/{id2}/api/admin/zones"),
            Some(&json!({"id": "proxied", "kind": "ledger-test", "host": id2})),
        )
        .await;
    assert_eq!((s, &v["host"]), (201, &json!(id2)), "{v}");
    let d = h2.admin("/admin/zones/proxied").await;
    assert_eq!(d["running"], true, "{d}");
    // The other host's answers come back as they are, refusals too.
    for path in ["admin/zones/proxied/recording", "admin/zones/nowhere"] {
        let proxied = h1
            .admin_request("GET", &format!("/admin/hosts/{id2}/api/{path}"), None)
            .await;
        let direct = h2.admin_request("GET", &format!("/{path}"), None).await;
        assert_eq!(proxied, direct, "{path}");
        assert!(proxied.0 >= 400, "{path}: {proxied:?}");
    }

    for path in ["metrics", "healthz", "zones/proxied", "admin/../metrics"] {
        let (s, v) = h1
            .admin_request("GET", &format!("/admin/hosts/{id2}/api/{path}"), None)
            .await;
        assert_eq!((s, code(&v)), (400, "bad_request"), "{path}: {v}");
    }
    let (s, v) = h1
        .admin_request("GET", "/admin/hosts/no-such-host/api/admin/hosts", None)
        .await;
    assert_eq!((s, code(&v)), (404, "not_found"), "{v}");

    // A host the directory lists but that does not answer.
    h2.kill().await;
    let (s, v) = h1
        .admin_request("GET", &format!("/admin/hosts/{id2}/api/admin/hosts"), None)
        .await;
    assert_eq!((s, code(&v)), (502, "unreachable"), "{v}");
    h1.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_reaches_another_hosts_admin_routes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    the_proxy_reaches_another_hosts_admin_routes_and_nothing_else(StoreSpec::Sqlite(
        dir.path().join("data"),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_reaches_another_hosts_admin_routes_on_postgres() {
    let run = support::unique_run();
    let test = "the_proxy_reaches_another_hosts_admin_routes_on_postgres";
    if let Some(store) = postgres(test, &run).await {
        the_proxy_reaches_another_hosts_admin_routes_and_nothing_else(store).await;
    }
}

async fn a_moved_zone_resumes_on_its_new_host_from_its_final_save(store: StoreSpec, run: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (h1, h2) = two_hosts(&store, dir.path()).await;
    let (id1, id2) = (h1.host_id().await, h2.host_id().await);
    let zone = format!("moving-{run}");
    let created = h1
        .post_admin(
            "/admin/zones",
            &json!({"id": zone, "kind": "ledger-test", "host": id1}),
        )
        .await;
    assert_eq!(created["host"], id1.as_str(), "{created}");
    let mut player = LedgerClient::start(
        &h1.addr,
        &zone,
        &format!("mover-{run}"),
        1,
        u64::MAX / 2,
        INPUT_EVERY,
    )
    .await;
    let acked = player
        .until("inputs acknowledged", |l| l.acked >= 10)
        .await
        .acked;

    // Refused moves leave the zone running where it is.
    let path = format!("/admin/zones/{zone}/move");
    let (s, v) = h2
        .admin_request("POST", &path, Some(&json!({"host": id1})))
        .await;
    assert_eq!((s, code(&v)), (404, "not_found"), "not run by h2: {v}");
    for to in ["no-such-host", id1.as_str()] {
        let (s, v) = h1
            .admin_request("POST", &path, Some(&json!({"host": to})))
            .await;
        assert_eq!((s, code(&v)), (409, "not_moved"), "to {to}: {v}");
    }
    player
        .until("play to go on after the refused moves", |l| {
            l.acked >= acked + 10
        })
        .await;

    // The move, asked of the owner through the other host's proxy (as the console does).
    let (s, v) = h2
        .admin_request(
            "POST",
            &format!("/admin/hosts/{id1}/api{path}"),
            Some(&json!({"host": id2})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["moved"], zone.as_str());
    assert_eq!(v["to"], id2.as_str());
    let epoch = v["epoch"].as_u64().unwrap();
    // Only the move wrote the zone's save (one-hour period): the state its players saw.
    let (snap, state) = store.last_save(&zone).await.expect("the move's final save");
    let l = player.until("the Kick", |l| l.closed).await;
    assert_eq!(
        l.kicked.as_ref().map(|k| k.0),
        Some(KickCode::ZONE_MOVED.0),
        "{l:?}"
    );
    assert!(
        state["inputs"].as_u64().unwrap() >= u64::from(l.acked),
        "the save holds every acknowledged input: {state}, {l:?}"
    );
    assert!(snap.tick > 0);

    // A player coming back through its old host is sent to the new one, and finds the state.
    let mut back = LedgerClient::start(
        &h1.addr,
        &zone,
        &format!("mover-{run}"),
        1_000_000,
        0,
        INPUT_EVERY,
    )
    .await;
    let b = back
        .until("the restored state", |l| l.state.is_some())
        .await;
    assert!(
        b.landed.as_deref().unwrap().contains(&h2.addr),
        "landed at {:?}, the new host is {}",
        b.landed,
        h2.addr
    );
    assert!(b.state.as_ref().unwrap()["inputs"].as_u64().unwrap() >= u64::from(l.acked));
    let d = h2.admin(&format!("/admin/zones/{zone}")).await;
    assert_eq!(
        (&d["running"], &d["host"]),
        (&json!(true), &json!(id2)),
        "{d}"
    );
    assert!(d["epoch"].as_u64().unwrap() >= epoch, "{d}");
    // Its tick goes on from the save's: the ticks run here start at it, not at 0.
    let started_at = d["tick"].as_u64().unwrap() - d["ticks_run"].as_u64().unwrap();
    assert!(
        started_at >= snap.tick,
        "started at tick {started_at}, saved at {}: {d}",
        snap.tick
    );
    let old = h1.admin(&format!("/admin/zones/{zone}")).await;
    assert_eq!(
        (&old["running"], &old["host"]),
        (&json!(false), &json!(id2)),
        "{old}"
    );
    back.stop();
    h1.terminate().await;
    h2.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_zone_resumes_on_its_new_host_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    a_moved_zone_resumes_on_its_new_host_from_its_final_save(store, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_zone_resumes_on_its_new_host_on_postgres() {
    let run = support::unique_run();
    let test = "a_moved_zone_resumes_on_its_new_host_on_postgres";
    if let Some(store) = postgres(test, &run).await {
        a_moved_zone_resumes_on_its_new_host_from_its_final_save(store, &run).await;
    }
}

async fn post_admin_drain_hands_the_zones_over_and_exits_cleanly(store: StoreSpec, run: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (h1, h2) = two_hosts(&store, dir.path()).await;
    let id1 = h1.host_id().await;
    let zone = format!("drained-{run}");
    h1.post_admin(
        "/admin/zones",
        &json!({"id": zone, "kind": "ledger-test", "host": id1}),
    )
    .await;
    let mut player = LedgerClient::start(
        &h1.addr,
        &zone,
        &format!("stayer-{run}"),
        1,
        u64::MAX / 2,
        INPUT_EVERY,
    )
    .await;
    player.until("inputs acknowledged", |l| l.acked >= 10).await;

    // Asked through the other host's proxy, as the console's drain button does.
    let (s, v) = h2
        .admin_request("POST", &format!("/admin/hosts/{id1}/api/admin/drain"), None)
        .await;
    assert_eq!((s, v), (202, json!({"draining": id1})));
    let l = player.until("the Kick", |l| l.closed).await;
    let (status, log) = h1.wait().await;
    assert_eq!(
        l.kicked.as_ref().map(|k| k.0),
        Some(KickCode::ZONE_MOVED.0),
        "{l:?}\n{log}"
    );
    assert!(status.success(), "exit status {status}\n{log}");
    let zone_field = format!("zone={zone}");
    for said in ["drain requested", "final save written", "zone handed over"] {
        assert!(
            log.lines().any(|line| line.contains(said)
                && (said == "drain requested" || line.contains(&zone_field))),
            "no {said:?} in the log:\n{log}"
        );
    }
    assert!(!log.contains(" ERROR "), "{log}");

    let mut back = LedgerClient::start(
        &h2.addr,
        &zone,
        &format!("stayer-{run}"),
        1_000_000,
        0,
        INPUT_EVERY,
    )
    .await;
    let b = back
        .until("the restored state", |l| l.state.is_some())
        .await;
    assert!(b.state.as_ref().unwrap()["inputs"].as_u64().unwrap() >= u64::from(l.acked));
    let hosts = h2.admin("/admin/hosts").await;
    let gone = hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id1.as_str())
        .unwrap_or_else(|| panic!("{hosts}"));
    assert_eq!(
        gone["left"], true,
        "the drained host left the fleet: {hosts}"
    );
    back.stop();
    h2.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_admin_drain_hands_the_zones_over_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    post_admin_drain_hands_the_zones_over_and_exits_cleanly(store, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_admin_drain_hands_the_zones_over_on_postgres() {
    let run = support::unique_run();
    let test = "post_admin_drain_hands_the_zones_over_on_postgres";
    if let Some(store) = postgres(test, &run).await {
        post_admin_drain_hands_the_zones_over_and_exits_cleanly(store, &run).await;
    }
}
