//! The matchmaker on one host with its SQLite store: two players ask for a duel, their round
//! trips are measured by the host, they are matched, placed and join with the tickets they were
//! handed (reported connected); cancels and lapses; the version floor; hostile requests answered
//! with clear refusals; and ticket key rotation (either key mid-rotation, a retired key refused,
//! a swapped key id refused, no key retired while a live match holds it).

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use zonekeep_core::ZoneConfig;
use zonekeep_server::config::{KeyConfig, Secret};
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

use crate::common::*;
use crate::tally::Tally;
use zonekeep_server::ticket::sign_parts;

/// A host with the tally kind, a duel queue of two, and its SQLite store in `dir`.
async fn build(dir: &Path, config: ServerConfig) -> Host {
    let p = Persistence::open(PersistConfig {
        data_dir: dir.to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    Host::builder()
        .config(ServerConfig {
            data_dir: dir.to_path_buf(),
            ..config
        })
        .zone_with::<Tally>(
            "tally",
            ZoneConfig {
                max_players: 4,
                ..ZoneConfig::default()
            },
            Value::Null,
        )
        .persistence(Arc::clone(&p))
        .build()
        .unwrap()
}

fn with_queue() -> ServerConfig {
    ServerConfig {
        match_queues: vec!["duel:size=2:kind=tally".into()],
        ..base_config()
    }
}

async fn matchmaker(dir: &Path, config: ServerConfig) -> TestServer {
    TestServer::serve(build(dir, config).await).await
}

fn match_ticket(sub: &str) -> String {
    sign(
        &json!({"sub": sub, "zone": "@match", "name": sub, "exp": now() + 60, "nbf": now() - 1, "jti": jti()}),
    )
}

/// A search created for `sub`: its id and token.
async fn create(server: &TestServer, sub: &str) -> (String, String, Value) {
    let (status, s) = call(
        server,
        "POST",
        "/match/searches",
        Some(&match_ticket(sub)),
        Some(json!({"queue": "duel", "protocol_version": zonekeep_protocol::limits::PROTOCOL_VERSION})),
    )
    .await;
    assert_eq!(status, 201, "{s}");
    assert_eq!(s["state"], "probing");
    (
        s["search"].as_str().unwrap().to_owned(),
        s["token"].as_str().unwrap().to_owned(),
        s,
    )
}

/// Answers every probe of `search` (its legs, as a client does): the round trips measured.
async fn probe(server: &TestServer, search: &Value) -> Vec<u64> {
    let mut out = Vec::new();
    for p in search["probes"].as_array().unwrap() {
        let c = p["challenge"].as_str().unwrap();
        let (status, mut a) = call(
            server,
            "POST",
            &format!("/match/probe?challenge={c}"),
            None,
            None,
        )
        .await;
        assert_eq!(status, 200, "{a}");
        while a.get("rtt_ms").is_none() {
            let echo = a["echo"].as_str().unwrap().to_owned();
            let (status, next) = call(
                server,
                "POST",
                &format!("/match/probe?challenge={c}&echo={echo}"),
                None,
                None,
            )
            .await;
            assert_eq!(status, 200, "{next}");
            a = next;
        }
        out.push(a["rtt_ms"].as_u64().unwrap());
    }
    out
}

/// Long-polls search `id` until it reaches `want` (failing on a final state that is not it).
async fn until(server: &TestServer, id: &str, token: &str, want: &str) -> Value {
    let mut state = String::new();
    loop {
        let path = if state.is_empty() {
            format!("/match/searches/{id}")
        } else {
            format!("/match/searches/{id}?wait_ms=10000&state={state}")
        };
        let (status, s) = call(server, "GET", &path, Some(token), None).await;
        assert_eq!(status, 200, "{s}");
        let now = s["state"].as_str().unwrap().to_owned();
        if now == want {
            return s;
        }
        assert!(
            !matches!(
                now.as_str(),
                "connected" | "cancelled" | "expired" | "failed"
            ),
            "search ended {now} ({}) waiting for {want}",
            s["reason"]
        );
        state = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_players_are_matched_by_measured_latency_placed_and_connect() {
    let dir = tempfile::tempdir().unwrap();
    let server = matchmaker(dir.path(), with_queue()).await;
    let mut searches = Vec::new();
    for who in ["ann", "bob"] {
        let (id, token, s) = create(&server, who).await;
        assert_eq!(
            s["probes"].as_array().unwrap().len(),
            1,
            "one region: local"
        );
        assert_eq!(s["probes"][0]["region"], "local");
        assert_eq!(probe(&server, &s).await.len(), 1);
        let (status, q) = call(
            &server,
            "POST",
            &format!("/match/searches/{id}/queue"),
            Some(&token),
            None,
        )
        .await;
        assert_eq!(status, 200, "{q}");
        assert_eq!(q["state"], "queued");
        assert!(
            q["rtt_ms"]["local"].is_u64(),
            "the host's measure is kept: {q}"
        );
        searches.push((id, token));
    }
    let mut assigned = Vec::new();
    for (id, token) in &searches {
        assigned.push(until(&server, id, token, "assigned").await);
    }
    let (a, b) = (&assigned[0]["assignment"], &assigned[1]["assignment"]);
    assert_eq!(a["match"], b["match"], "one match");
    assert_eq!(a["zone"], b["zone"]);
    assert_eq!(a["kind"], "tally");
    assert_eq!(a["region"], "local");
    let mut players: Vec<&str> = a["players"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    players.sort_unstable();
    assert_eq!(players, ["ann", "bob"]);
    assert_ne!(
        a["ticket"], b["ticket"],
        "each player has a ticket of their own"
    );
    // The assignment is recoverable by a plain read, unchanged.
    let (_, again) = call(
        &server,
        "GET",
        &format!("/match/searches/{}", searches[0].0),
        Some(&searches[0].1),
        None,
    )
    .await;
    assert_eq!(again["assignment"], *a);
    // A live match holds key k1 until its players arrive.
    let (_, keys) = call(&server, "GET", "/admin/match/keys", Some(ADMIN), None).await;
    let k1 = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == "k1")
        .unwrap();
    assert_eq!(k1["live_matches"], 1, "{keys}");
    assert_eq!(k1["retirable"], false);

    // Both join with their tickets at the URL they were given, and are reported connected.
    let zone = a["zone"].as_str().unwrap();
    assert_eq!(a["url"].as_str().unwrap(), server.url(zone));
    let (_ws_a, _) = join(&server, zone, a["ticket"].as_str().unwrap()).await;
    let (_ws_b, _) = join(&server, zone, b["ticket"].as_str().unwrap()).await;
    for (id, token) in &searches {
        let s = until(&server, id, token, "connected").await;
        assert_eq!(s["assignment"]["zone"], zone);
    }
    let (_, keys) = call(&server, "GET", "/admin/match/keys", Some(ADMIN), None).await;
    let k1 = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == "k1")
        .unwrap();
    assert_eq!(k1["live_matches"], 0, "{keys}");
    assert_eq!(k1["retirable"], true);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_search_leaves_no_match_and_a_silent_one_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let server = matchmaker(
        dir.path(),
        ServerConfig {
            match_heartbeat_secs: 1,
            ..with_queue()
        },
    )
    .await;
    let (id, token, s) = create(&server, "ann").await;
    probe(&server, &s).await;
    call(
        &server,
        "POST",
        &format!("/match/searches/{id}/queue"),
        Some(&token),
        None,
    )
    .await;
    let (status, hb) = call(
        &server,
        "POST",
        &format!("/match/searches/{id}/heartbeat"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!((status, hb["state"].as_str()), (200, Some("queued")));
    let (status, c) = call(
        &server,
        "DELETE",
        &format!("/match/searches/{id}"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!((status, c["state"].as_str()), (200, Some("cancelled")));
    // Cancelling again answers what it became.
    let (status, c) = call(
        &server,
        "DELETE",
        &format!("/match/searches/{id}"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!((status, c["state"].as_str()), (200, Some("cancelled")));

    // Bob queues, then falls silent: three missed heartbeats (3 s) and he expires.
    let (id, token, s) = create(&server, "bob").await;
    probe(&server, &s).await;
    call(
        &server,
        "POST",
        &format!("/match/searches/{id}/queue"),
        Some(&token),
        None,
    )
    .await;
    let (_, s) = call(
        &server,
        "GET",
        &format!("/match/searches/{id}?wait_ms=20000&state=queued"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(s["state"], "expired", "{s}");
    assert_eq!(s["reason"], "no_heartbeat");

    // A search never queued does not match, and queueing before any probe is refused.
    let (id, token, _) = create(&server, "cy").await;
    let (status, r) = call(
        &server,
        "POST",
        &format!("/match/searches/{id}/queue"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!((status, code(&r)), (409, "no_probe_result"), "{r}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outdated_clients_are_refused_at_queue_time_with_client_outdated() {
    let dir = tempfile::tempdir().unwrap();
    let v = zonekeep_protocol::limits::PROTOCOL_VERSION;
    let server = matchmaker(
        dir.path(),
        ServerConfig {
            min_protocol_version: v,
            min_content_version: Some("2.1".into()),
            content_version: "2.1".into(),
            ..with_queue()
        },
    )
    .await;
    for (body, says) in [
        (
            json!({"queue": "duel", "protocol_version": v - 1, "content_version": "2.1"}),
            "protocol version",
        ),
        (
            json!({"queue": "duel", "protocol_version": v, "content_version": "2.0.9"}),
            "content version",
        ),
        (
            json!({"queue": "duel", "protocol_version": v}),
            "content version",
        ),
    ] {
        let (status, r) = call(
            &server,
            "POST",
            "/match/searches",
            Some(&match_ticket("old")),
            Some(body),
        )
        .await;
        assert_eq!((status, code(&r)), (426, "client_outdated"), "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(says),
            "{r}"
        );
    }
    let (status, _) = call(
        &server,
        "POST",
        "/match/searches",
        Some(&match_ticket("new")),
        Some(json!({"queue": "duel", "protocol_version": v, "content_version": "2.1"})),
    )
    .await;
    assert_eq!(status, 201);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_matchmaker_requests_get_clear_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let server = matchmaker(dir.path(), with_queue()).await;
    let v = zonekeep_protocol::limits::PROTOCOL_VERSION;
    let good = json!({"queue": "duel", "protocol_version": v});
    let post = |bearer: Option<String>, body: Value| {
        let server = &server;
        async move {
            call(
                server,
                "POST",
                "/match/searches",
                bearer.as_deref(),
                Some(body),
            )
            .await
        }
    };
    // No ticket, a zone's ticket, a replayed ticket, a ticket for every zone.
    let (s, r) = post(None, good.clone()).await;
    assert_eq!((s, code(&r)), (401, "unauthorized"));
    let (s, r) = post(Some(ticket("ann", "arena-1")), good.clone()).await;
    assert_eq!((s, code(&r)), (401, "unauthorized"));
    let (s, r) = post(Some(ticket("ann", "*")), good.clone()).await;
    assert_eq!((s, code(&r)), (401, "unauthorized"), "{r}");
    let once = match_ticket("ann");
    assert_eq!(post(Some(once.clone()), good.clone()).await.0, 201);
    let (s, r) = post(Some(once), good.clone()).await;
    assert_eq!(
        (s, code(&r)),
        (401, "unauthorized"),
        "a ticket is spent once: {r}"
    );
    // Malformed bodies and unknown queues.
    for body in [
        json!({"queue": "duel"}),
        json!({"queue": "duel", "protocol_version": "ten"}),
        json!({"queue": "duel", "protocol_version": v, "extra": 1}),
        json!([1, 2]),
        json!({"queue": "duel", "protocol_version": v + 1}),
    ] {
        let (s, r) = post(Some(match_ticket("bob")), body.clone()).await;
        assert_eq!((s, code(&r)), (400, "bad_request"), "{body}: {r}");
    }
    let (s, r) = post(
        Some(match_ticket("bob")),
        json!({"queue": "nope", "protocol_version": v}),
    )
    .await;
    assert_eq!((s, code(&r)), (404, "unknown_queue"));
    // A search's routes need its own token.
    let (id, token, search) = create(&server, "cy").await;
    let (s, r) = call(
        &server,
        "GET",
        &format!("/match/searches/{id}"),
        Some("not-the-token"),
        None,
    )
    .await;
    assert_eq!((s, code(&r)), (401, "unauthorized"));
    let (s, r) = call(&server, "GET", &format!("/match/searches/{id}"), None, None).await;
    assert_eq!((s, code(&r)), (401, "unauthorized"));
    let (s, r) = call(
        &server,
        "GET",
        "/match/searches/s-nothing",
        Some(&token),
        None,
    )
    .await;
    assert_eq!((s, code(&r)), (404, "no_search"));
    let (s, r) = call(
        &server,
        "GET",
        &format!("/match/searches/{id}?state=dancing"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!((s, code(&r)), (400, "bad_request"));
    // Probes: an unknown challenge, a wrong echo, a spent one.
    let c = search["probes"][0]["challenge"].as_str().unwrap();
    let (s, r) = call(
        &server,
        "POST",
        &format!("/match/probe?challenge={id}.forged"),
        None,
        None,
    )
    .await;
    assert_eq!((s, code(&r)), (410, "challenge_spent"));
    let (s, r) = call(&server, "POST", "/match/probe?challenge=nodot", None, None).await;
    assert_eq!((s, code(&r)), (410, "challenge_spent"));
    let (s, _) = call(
        &server,
        "POST",
        &format!("/match/probe?challenge={c}"),
        None,
        None,
    )
    .await;
    assert_eq!(s, 200);
    let (s, r) = call(
        &server,
        "POST",
        &format!("/match/probe?challenge={c}&echo=guess"),
        None,
        None,
    )
    .await;
    assert_eq!((s, code(&r)), (410, "challenge_spent"), "a guessed echo");
    let fresh = create(&server, "dee").await;
    probe(&server, &fresh.2).await;
    let c2 = fresh.2["probes"][0]["challenge"].as_str().unwrap();
    let (s, r) = call(
        &server,
        "POST",
        &format!("/match/probe?challenge={c2}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        (s, code(&r)),
        (410, "challenge_spent"),
        "answered once: {r}"
    );
    // The host keeps serving.
    let (s, _) = call(
        &server,
        "GET",
        &format!("/match/searches/{id}"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(s, 200);
    // Browsers may call it from any origin.
    let (s, _) = call(&server, "OPTIONS", "/match/searches", None, None).await;
    assert_eq!(s, 204);
    server.stop().await;

    // A host without queues is no matchmaker.
    let dir = tempfile::tempdir().unwrap();
    let plain = matchmaker(dir.path(), base_config()).await;
    let (s, r) = post_to(&plain, &match_ticket("eve")).await;
    assert_eq!((s, code(&r)), (404, "match_off"));
    plain.stop().await;
}

async fn post_to(server: &TestServer, ticket: &str) -> (u16, Value) {
    let v = zonekeep_protocol::limits::PROTOCOL_VERSION;
    call(
        server,
        "POST",
        "/match/searches",
        Some(ticket),
        Some(json!({"queue": "duel", "protocol_version": v})),
    )
    .await
}

/// Keys `k1` (primary) and `k2` as the base config has them, retired as asked.
fn keys(primary: (&str, &str), other: (&str, &str, bool)) -> ServerConfig {
    ServerConfig {
        ticket_secret: Some(Secret::new(primary.1)),
        ticket_kid: primary.0.into(),
        ticket_keys: vec![KeyConfig {
            kid: other.0.into(),
            secret: Secret::new(other.1),
            retired: other.2,
        }],
        ..with_queue()
    }
}

/// Queues two players and waits for their match: both searches' assignments.
async fn duel(server: &TestServer, a: &str, b: &str) -> Vec<Value> {
    let mut searches = Vec::new();
    for who in [a, b] {
        let (id, token, s) = create(server, who).await;
        probe(server, &s).await;
        call(
            server,
            "POST",
            &format!("/match/searches/{id}/queue"),
            Some(&token),
            None,
        )
        .await;
        searches.push((id, token));
    }
    let mut out = Vec::new();
    for (id, token) in &searches {
        out.push(until(server, id, token, "assigned").await["assignment"].clone());
    }
    out
}

fn header_kid(ticket: &str) -> String {
    use base64::Engine as _;
    let head = ticket.split('.').next().unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head)
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["kid"].as_str().unwrap().to_owned()
}

/// `ticket` with its header's key id replaced, the signature left as it was.
fn with_kid(ticket: &str, kid: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = ticket.split('.');
    let (_, claims, sig) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let head = b64.encode(json!({"alg": "HS256", "kid": kid}).to_string());
    format!("{head}.{claims}.{sig}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_keys_rotate_without_refusing_a_live_match() {
    let dir = tempfile::tempdir().unwrap();
    // Before: k1 signs.
    let before = matchmaker(dir.path(), keys(("k1", SECRET), ("k2", SECRET2, false))).await;
    let old = duel(&before, "ann", "bob").await;
    assert_eq!(header_kid(old[0]["ticket"].as_str().unwrap()), "k1");
    before.stop().await;

    // Retiring k1 now would refuse Ann's and Bob's tickets: the host refuses to start.
    let host = build(dir.path(), keys(("k2", SECRET2), ("k1", SECRET, true))).await;
    let err = host
        .join_fleet("127.0.0.1:1".parse().unwrap())
        .await
        .expect_err("a retired key a live match holds");
    assert!(err.to_string().contains("k1"), "{err}");
    drop(host);

    // Mid-rotation: k2 signs, k1 is still accepted. The old match's players join.
    let mid = matchmaker(dir.path(), keys(("k2", SECRET2), ("k1", SECRET, false))).await;
    let zone = old[0]["zone"].as_str().unwrap();
    // A ticket whose key id was swapped is refused (the id is inside the signed bytes).
    let swapped = with_kid(old[0]["ticket"].as_str().unwrap(), "k2");
    let mut ws = connect(&mid, zone).await;
    send(&mut ws, hello_bytes(&swapped, &[])).await;
    let kicked = expect_kick(&mut ws).await;
    assert_eq!(kicked, zonekeep_protocol::messages::KickCode::BAD_TICKET);
    let (_a, _) = join(&mid, zone, old[0]["ticket"].as_str().unwrap()).await;
    let (_b, _) = join(&mid, zone, old[1]["ticket"].as_str().unwrap()).await;
    // A new match is signed with k2.
    let new = duel(&mid, "cy", "dee").await;
    assert_eq!(header_kid(new[0]["ticket"].as_str().unwrap()), "k2");
    let (_c, _) = join(
        &mid,
        new[0]["zone"].as_str().unwrap(),
        new[0]["ticket"].as_str().unwrap(),
    )
    .await;
    // The retired key k0 of the base configuration is not here; an unknown id is refused too.
    let stale = sign_parts(
        RETIRED.as_bytes(),
        &json!({"alg": "HS256", "kid": "k0"}),
        &claims("eve", zone),
    );
    let mut ws = connect(&mid, zone).await;
    send(&mut ws, hello_bytes(&stale, &[])).await;
    assert_eq!(
        expect_kick(&mut ws).await,
        zonekeep_protocol::messages::KickCode::TICKET_UNKNOWN_KEY
    );
    // Once Ann and Bob arrived, k1 holds no live match: it may be retired.
    eventually("k1 referenced by no live match", || async {
        let (_, keys) = call(&mid, "GET", "/admin/match/keys", Some(ADMIN), None).await;
        keys["keys"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|k| k["kid"] == "k1" && k["retirable"] == true)
    })
    .await;
    mid.stop().await;
    let after = build(dir.path(), keys(("k2", SECRET2), ("k1", SECRET, true))).await;
    let server = TestServer::serve(after).await;
    // After: k1 is retired, and its tickets are refused.
    let late = sign_parts(
        SECRET.as_bytes(),
        &json!({"alg": "HS256", "kid": "k1"}),
        &claims("fay", zone),
    );
    let mut ws = connect(&server, zone).await;
    send(&mut ws, hello_bytes(&late, &[])).await;
    assert_eq!(
        expect_kick(&mut ws).await,
        zonekeep_protocol::messages::KickCode::TICKET_RETIRED_KEY
    );
    server.stop().await;
}
