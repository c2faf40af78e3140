//! Zones that fail to start, in a real `zonekeep serve`: a zone whose game code cannot create it
//! stays failed — listed by the admin API with its reason and time, its joins kicked with
//! ZONE_STOPPED naming the failure, never re-created by the fleet's reconcile — until an operator
//! stops it; a create refused for its params leaves nothing behind, so the id stays free.
//!
//! The single-host tests run on SQLite; the fleet test on PostgreSQL (two hosts).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use support::{hello, sign, ticket_for, unique_run, Server, StoreSpec, ADMIN_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{KickCode, ServerMessage};

/// A module whose CREATE call (op 1) traps: every zone of its kind fails to start.
fn failing_create() -> Vec<u8> {
    support::push::trapping_in(1)
}

/// `--module boom=FILE` with [`failing_create`] written in `dir`.
fn boom_module(dir: &Path) -> String {
    let path = dir.join("boom.wasm");
    std::fs::write(&path, failing_create()).unwrap();
    format!("boom={}", path.display())
}

/// How a join ended: welcomed, or kicked with a code and reason.
#[derive(Debug)]
enum Joined {
    Welcome,
    Kick(KickCode, String),
}

/// Joins `zone` at `addr` with `ticket` and reads until a Welcome or the host's Kick.
async fn join(addr: &str, zone: &str, ticket: String) -> Joined {
    let mut ws = hello(addr, zone, ticket).await;
    while let Some(Ok(m)) = ws.next().await {
        let Message::Binary(b) = m else { continue };
        match b.first() {
            Some(0x81) => return Joined::Welcome,
            Some(0x84) => {
                let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(&b, None) else {
                    panic!("undecodable Kick");
                };
                return Joined::Kick(k.code, k.reason);
            }
            _ => {}
        }
    }
    panic!("the connection to {zone} closed without a Welcome or a Kick");
}

/// A single-use ticket for an arena zone `zone` created with `params`.
fn arena_ticket_with(zone: &str, params: Value) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    sign(&json!({
        "sub": "ann", "zone": zone, "kind": "arena", "params": params, "exp": exp,
        "jti": format!("failed-{zone}-{}", unique_run()),
    }))
}

/// The directory queries `op` this host has made so far.
async fn queries(server: &Server, op: &str) -> f64 {
    server
        .metric(&format!(
            "zonekeep_fleet_directory_queries_total{{op=\"{op}\"}}"
        ))
        .await
}

/// Waits until each host has run `passes` more reconcile passes (each pass lists the directory's
/// zones once, then starts what it assigns to the host), bounded.
async fn reconcile_passes(hosts: &[&Server], passes: f64) {
    let mut marks = Vec::new();
    for h in hosts {
        marks.push(queries(h, "zones").await);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for (h, mark) in hosts.iter().zip(marks) {
        // One more than asked: the last counted pass has finished its starts once the next lists.
        while queries(h, "zones").await < mark + passes + 1.0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no reconcile passes on {}",
                h.addr
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// ERROR lines of a host's log that name `zone`.
fn errors_about(log: &Path, zone: &str) -> usize {
    let needle = format!("zone={zone}");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("ERROR") && l.split_whitespace().any(|w| w == needle))
        .count()
}

/// Whether the admin zone list mentions `zone` anywhere (running, in the directory, failed).
fn listed(list: &Value, zone: &str) -> bool {
    ["zones", "failed_zones"]
        .iter()
        .flat_map(|k| list[k].as_array().cloned().unwrap_or_default())
        .any(|z| z["id"] == zone)
        || list["start_failures"]
            .as_array()
            .is_some_and(|a| a.iter().any(|f| f["zone_id"] == zone))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_for_its_params_leaves_the_zone_id_free() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let log = dir.path().join("host.log");
    let args = ["--admin-token", ADMIN_TOKEN];
    let server = Server::start(&store, &args, &log).await;

    // An admin create and a ticket's join, each with a param the arena refuses.
    let (status, body) = server
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": "bad-admin", "kind": "arena", "params": {"drones": "x"}})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    let said = body["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("drones"),
        "the refusal names the param: {said}"
    );
    match join(
        &server.addr,
        "bad-join",
        arena_ticket_with("bad-join", json!({"drones": "x"})),
    )
    .await
    {
        Joined::Kick(code, said) => {
            assert_eq!(code, KickCode::JOIN_REFUSED, "{said}");
            assert!(said.contains("drones"), "the Kick names the param: {said}");
        }
        Joined::Welcome => panic!("a zone started with bad params"),
    }

    // Nothing is left behind: not retried, not listed, not one ERROR line per retry.
    reconcile_passes(&[&server], 3.0).await;
    let list = server.admin("/admin/zones").await;
    for zone in ["bad-admin", "bad-join"] {
        assert!(!listed(&list, zone), "{zone} left behind: {list}");
        assert!(errors_about(&log, zone) <= 1, "{zone} retried");
    }

    // The ids are free, across a restart too: plain joins create the zones.
    server.terminate().await;
    let server = Server::start(&store, &args, &log).await;
    for zone in ["bad-admin", "bad-join"] {
        let joined = join(&server.addr, zone, ticket_for("bob", zone, "arena")).await;
        assert!(matches!(joined, Joined::Welcome), "{zone}: {joined:?}");
        let detail = server.admin(&format!("/admin/zones/{zone}")).await;
        assert_eq!(detail["running"], true, "{detail}");
    }
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_whose_create_fails_stays_failed_until_an_operator_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::with_module(dir.path(), &boom_module(dir.path())).await;
    let zone = "boom-1";

    let first = join(&server.addr, zone, ticket_for("ann", zone, "boom")).await;
    let Joined::Kick(code, said) = first else {
        panic!("a zone whose create traps welcomed a player");
    };
    assert_eq!(code, KickCode::ZONE_STOPPED, "{said}");

    // Listed with its reason and when, in the detail and the list.
    let detail = server.admin(&format!("/admin/zones/{zone}")).await;
    assert_eq!(detail["running"], false, "{detail}");
    assert_eq!(detail["kind"], "boom", "{detail}");
    let reason = detail["failed"]["reason"].as_str().unwrap_or_default();
    assert!(!reason.is_empty(), "{detail}");
    assert!(
        detail["failed"]["at_ms"].as_u64().unwrap_or(0) > 0,
        "{detail}"
    );
    let list = server.admin("/admin/zones").await;
    let failed = list["failed_zones"].as_array().unwrap();
    assert!(failed.iter().any(|f| f["id"] == zone), "{list}");

    // Failed, it stays failed: no re-creation by the reconcile pass, no second ERROR line.
    let errors = errors_about(&server.log, zone);
    assert_eq!(errors, 1, "one ERROR line for the failure");
    reconcile_passes(&[&server], 3.0).await;
    assert_eq!(errors_about(&server.log, zone), errors, "re-created");
    assert_eq!(server.metric("zonekeep_zones_failed_total").await, 1.0);

    // A later join hears why, and does not start it again.
    match join(&server.addr, zone, ticket_for("bob", zone, "boom")).await {
        Joined::Kick(code, said) => {
            assert_eq!(code, KickCode::ZONE_STOPPED, "{said}");
            assert!(
                said.contains("failed"),
                "the Kick names the failure: {said}"
            );
        }
        Joined::Welcome => panic!("a failed zone welcomed a player"),
    }
    assert_eq!(errors_about(&server.log, zone), errors, "re-created");

    // Stopping it clears the failure: a later join starts it afresh (and it fails again).
    let (status, stopped) = server
        .admin_request("POST", &format!("/admin/zones/{zone}/stop"), None)
        .await;
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["removed_failure"], true, "{stopped}");
    let list = server.admin("/admin/zones").await;
    let failed = list["failed_zones"].as_array().unwrap();
    assert!(failed.iter().all(|f| f["id"] != zone), "{list}");
    let again = join(&server.addr, zone, ticket_for("cy", zone, "boom")).await;
    assert!(
        matches!(again, Joined::Kick(KickCode::ZONE_STOPPED, _)),
        "{again:?}"
    );
    assert_eq!(server.metric("zonekeep_zones_failed_total").await, 2.0);
    assert_eq!(errors_about(&server.log, zone), errors + 1);
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_host_of_a_fleet_re_creates_a_failed_zone() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "no_host_of_a_fleet_re_creates_a_failed_zone",
    ) else {
        return;
    };
    let run = unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let module = boom_module(dir.path());
    let args = ["--admin-token", ADMIN_TOKEN, "--module", &module];
    let h1 = Server::start(&store, &args, &dir.path().join("h1.log")).await;
    let h2 = Server::start(&store, &args, &dir.path().join("h2.log")).await;
    let h1_id = h1.host_id().await;

    // On h1: a zone whose create fails, and one refused for its params.
    let (status, body) = h1
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": "boom-f", "kind": "boom", "host": h1_id})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "failed", "{body}");
    let (status, body) = h1
        .admin_request(
            "POST",
            "/admin/zones",
            Some(
                &json!({"id": "bad-f", "kind": "arena", "host": h1_id, "params": {"drones": "x"}}),
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");

    reconcile_passes(&[&h1, &h2], 3.0).await;
    assert_eq!(errors_about(&h1.log, "boom-f"), 1, "h1 re-created it");
    assert_eq!(errors_about(&h2.log, "boom-f"), 0, "h2 created it");
    for h in [&h1, &h2] {
        assert!(errors_about(&h.log, "bad-f") <= 1, "retried");
        let list = h.admin("/admin/zones").await;
        assert!(!listed(&list, "bad-f"), "bad-f left behind: {list}");
    }
    let detail = h1.admin("/admin/zones/boom-f").await;
    assert!(detail["failed"]["reason"].is_string(), "{detail}");

    // A join at its owner hears of the failure; neither host starts it again.
    match join(&h1.addr, "boom-f", ticket_for("ann", "boom-f", "boom")).await {
        Joined::Kick(code, said) => assert_eq!(code, KickCode::ZONE_STOPPED, "{said}"),
        Joined::Welcome => panic!("a failed zone welcomed a player"),
    }
    reconcile_passes(&[&h1, &h2], 1.0).await;
    assert_eq!(errors_about(&h1.log, "boom-f"), 1, "h1 re-created it");
    assert_eq!(errors_about(&h2.log, "boom-f"), 0, "h2 created it");
    h2.terminate().await;
    h1.terminate().await;
}
