//! The matchmaker on a fleet: two `zonekeep serve` processes on PostgreSQL, each in a region of
//! its own (`eu`, `us`) and each a matchmaker replica, sharing a Redis candidate index (a private
//! `redis-server` the test can flush and stop). NetSim sets each region's distance, and the round
//! trips the hosts measure decide where matches play: a player asks one replica, the other
//! answers the long poll, the match's zone is placed on the nearer region's host, and the players
//! join it with the tickets they were handed. Redis flushed: the index is rebuilt and matches go
//! on. Redis stopped: matches are formed from the store, slower but still correct. PostgreSQL
//! unreachable: clear 503s, and the searches it held are there when it is back.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use support::proxy::{FreezableProxy, PgUrl};
use support::redis::Redis;
use support::{hello_at, unique_run, Server, StoreSpec, ADMIN_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::ServerMessage;

/// A ticket for the matchmaker, single use.
fn match_ticket(sub: &str) -> String {
    support::sign(&json!({
        "sub": sub, "zone": "@match", "name": sub, "exp": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 120,
        "jti": format!("match-{sub}-{}", unique_run()),
    }))
}

/// A request to the host at `base` (`http://ADDR`), bearing `token`: the status and the answer.
async fn call(
    base: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let addr = base.trim_start_matches("http://");
    let (status, bytes) = support::bearer_request(addr, method, path, body, token).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn base(h: &Server) -> String {
    format!("http://{}", h.addr)
}

/// A player's search: where it was asked, its id and token.
struct Search {
    id: String,
    token: String,
}

/// Creates a search at `at`, answers its probes at the regions' hosts, and queues it at `at`:
/// the round trips measured.
async fn ask(at: &Server, sub: &str) -> (Search, Value) {
    let v = zonekeep_protocol::limits::PROTOCOL_VERSION;
    let (status, s) = call(
        &base(at),
        "POST",
        "/match/searches",
        &match_ticket(sub),
        Some(&json!({"queue": "duel", "protocol_version": v})),
    )
    .await;
    assert_eq!(status, 201, "{s}");
    let search = Search {
        id: s["search"].as_str().unwrap().to_owned(),
        token: s["token"].as_str().unwrap().to_owned(),
    };
    for p in s["probes"].as_array().unwrap() {
        let (url, c) = (p["url"].as_str().unwrap(), p["challenge"].as_str().unwrap());
        let (status, mut a) = call(
            url,
            "POST",
            &format!("/match/probe?challenge={c}"),
            "-",
            None,
        )
        .await;
        assert_eq!(status, 200, "{a}");
        while a.get("rtt_ms").is_none() {
            let echo = a["echo"].as_str().unwrap().to_owned();
            let (status, next) = call(
                url,
                "POST",
                &format!("/match/probe?challenge={c}&echo={echo}"),
                "-",
                None,
            )
            .await;
            assert_eq!(status, 200, "{next}");
            a = next;
        }
    }
    let (status, q) = call(
        &base(at),
        "POST",
        &format!("/match/searches/{}/queue", search.id),
        &search.token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{q}");
    (search, q["rtt_ms"].clone())
}

/// Long-polls `s` at `at` until it reaches `want`, heartbeating while it is queued as the SDKs
/// do (a long poll alone does not keep a search alive).
async fn until(at: &Server, s: &Search, want: &str) -> Value {
    let mut state = String::from("queued");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if state == "queued" {
            let path = format!("/match/searches/{}/heartbeat", s.id);
            let (status, v) = call(&base(at), "POST", &path, &s.token, None).await;
            assert_eq!(status, 200, "{v}");
        }
        let (status, v) = call(
            &base(at),
            "GET",
            &format!("/match/searches/{}?wait_ms=10000&state={state}", s.id),
            &s.token,
            None,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let now = v["state"].as_str().unwrap().to_owned();
        if now == want {
            return v;
        }
        assert!(
            !matches!(
                now.as_str(),
                "connected" | "cancelled" | "expired" | "failed"
            ),
            "ended {now} ({}) waiting for {want}",
            v["reason"]
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "still {now}, waiting for {want}"
        );
        state = now;
    }
}

/// Two players asking through the two replicas (each long-polled through the other): their
/// assignments, after checking they are one match.
async fn duel(asks: &Server, polls: &Server, a: &str, b: &str) -> (Vec<Value>, Vec<Value>) {
    let (sa, rtt_a) = ask(asks, a).await;
    let (sb, rtt_b) = ask(polls, b).await;
    let x = until(polls, &sa, "assigned").await["assignment"].clone();
    let y = until(asks, &sb, "assigned").await["assignment"].clone();
    assert_eq!(x["match"], y["match"], "one match: {x} {y}");
    assert_eq!(x["zone"], y["zone"]);
    (vec![x, y], vec![rtt_a, rtt_b])
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn welcomed(url: &str, ticket: &str) -> Ws {
    let mut ws = hello_at(url, ticket.to_owned()).await;
    while let Some(msg) = ws.next().await {
        let Message::Binary(bytes) = msg.unwrap() else {
            continue;
        };
        match ServerMessage::decode(&bytes, None) {
            Ok(ServerMessage::Welcome(_)) => return ws,
            Ok(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Ok(ServerMessage::Redirect(r)) => panic!("redirected, not at the owner: {r:?}"),
            _ => continue,
        }
    }
    panic!("closed before a Welcome");
}

async fn set_latency(h: &Server, ms: u32) {
    let (status, v) = h
        .admin_request("POST", "/admin/netsim", Some(&json!({"latency_ms": ms})))
        .await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_play_where_the_measured_round_trip_is_shortest_across_replicas_and_redis_loss() {
    let test =
        "matches_play_where_the_measured_round_trip_is_shortest_across_replicas_and_redis_loss";
    let Some(pg) = support::service_url("ZONEKEEP_TEST_POSTGRES", test) else {
        return;
    };
    let Some(redis_bin) = support::service_url("ZONEKEEP_REDIS_SERVER", test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(&redis_bin, dir.path()).await;
    let store = StoreSpec::postgres_isolated(&pg, &unique_run()).await;
    let url = redis.url();
    // `--dev` for NetSim, which sets each region's distance.
    let common = [
        "--dev",
        "--admin-token",
        ADMIN_TOKEN,
        "--match-queue",
        "duel:size=2:kind=arena",
        "--match-redis",
        url.as_str(),
    ];
    let start = |region: &'static str| {
        let mut args: Vec<&str> = common.to_vec();
        args.extend(["--region", region]);
        let log = dir.path().join(format!("{region}.log"));
        let store = store.clone();
        async move { Server::start(&store, &args, &log).await }
    };
    let eu = start("eu").await;
    let us = start("us").await;
    let (eu_id, us_id) = (eu.host_id().await, us.host_id().await);

    // The us region is 2 × 40 ms further: a duel plays in eu.
    set_latency(&us, 40).await;
    let (a, rtts) = duel(&eu, &us, "ann", "bob").await;
    for r in &rtts {
        assert!(
            r["us"].as_u64().unwrap() >= 80,
            "the host measured NetSim's delay: {r}"
        );
        assert!(r["eu"].as_u64().unwrap() < r["us"].as_u64().unwrap(), "{r}");
    }
    assert_eq!(a[0]["region"], "eu");
    assert_eq!(a[0]["host"].as_str(), Some(eu_id.as_str()));
    assert!(a[0]["url"]
        .as_str()
        .unwrap()
        .starts_with(&format!("ws://{}/", eu.addr)));
    // Both join at the zone's owner with their tickets, and are reported connected.
    let _ann = welcomed(
        a[0]["url"].as_str().unwrap(),
        a[0]["ticket"].as_str().unwrap(),
    )
    .await;
    let _bob = welcomed(
        a[1]["url"].as_str().unwrap(),
        a[1]["ticket"].as_str().unwrap(),
    )
    .await;

    // Now eu is the far one: the next duel plays in us.
    set_latency(&us, 0).await;
    set_latency(&eu, 60).await;
    let (b, _) = duel(&us, &eu, "cy", "dee").await;
    assert_eq!(b[0]["region"], "us");
    assert_eq!(b[0]["host"].as_str(), Some(us_id.as_str()));
    let _cy = welcomed(
        b[0]["url"].as_str().unwrap(),
        b[0]["ticket"].as_str().unwrap(),
    )
    .await;
    set_latency(&eu, 0).await;

    // Redis flushed: the index is rebuilt from the store and matches go on.
    let rebuilt = eu
        .metric("zonekeep_match_index_total{source=\"rebuilt\"}")
        .await
        + us.metric("zonekeep_match_index_total{source=\"rebuilt\"}")
            .await;
    assert_eq!(redis.command(&["FLUSHALL"]).await.as_deref(), Some("+OK"));
    duel(&eu, &us, "eve", "fay").await;
    let after = eu
        .metric("zonekeep_match_index_total{source=\"rebuilt\"}")
        .await
        + us.metric("zonekeep_match_index_total{source=\"rebuilt\"}")
            .await;
    assert!(
        after > rebuilt,
        "the flushed index was rebuilt ({rebuilt} → {after})"
    );

    // Redis stopped: matches are formed from the store.
    redis.stop();
    let from_store = eu
        .metric("zonekeep_match_index_total{source=\"store\"}")
        .await;
    duel(&eu, &us, "gil", "hal").await;
    duel(&us, &eu, "ida", "jon").await;
    assert!(
        eu.metric("zonekeep_match_index_total{source=\"failed\"}")
            .await
            + us.metric("zonekeep_match_index_total{source=\"failed\"}")
                .await
            > 0.0
    );
    assert!(
        eu.metric("zonekeep_match_index_total{source=\"store\"}")
            .await
            > from_store
    );

    // Connected players are reported so on every replica.
    let (sa, _) = ask(&eu, "kim").await;
    let (sb, _) = ask(&us, "lou").await;
    let x = until(&us, &sa, "assigned").await["assignment"].clone();
    let y = until(&eu, &sb, "assigned").await["assignment"].clone();
    let _kim = welcomed(x["url"].as_str().unwrap(), x["ticket"].as_str().unwrap()).await;
    let _lou = welcomed(y["url"].as_str().unwrap(), y["ticket"].as_str().unwrap()).await;
    until(&us, &sa, "connected").await;
    until(&eu, &sb, "connected").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_stops_answering_gets_clear_503s_and_loses_no_search() {
    let test = "a_database_that_stops_answering_gets_clear_503s_and_loses_no_search";
    let Some(pg) = support::service_url("ZONEKEEP_TEST_POSTGRES", test) else {
        return;
    };
    let StoreSpec::Postgres(url) = StoreSpec::postgres_isolated(&pg, &unique_run()).await else {
        unreachable!()
    };
    let pg_url = PgUrl::parse(&url);
    let proxy = FreezableProxy::start(pg_url.upstream()).await;
    let store = StoreSpec::Postgres(pg_url.at(proxy.addr));
    let dir = tempfile::tempdir().unwrap();
    let host = Server::start(
        &store,
        &["--match-queue", "duel:size=2:kind=arena"],
        &dir.path().join("h.log"),
    )
    .await;
    let (ann, _) = ask(&host, "ann").await;

    // The database stops answering: requests are answered 503 within the store's bound, not
    // left hanging.
    proxy.set_frozen(true);
    let v = zonekeep_protocol::limits::PROTOCOL_VERSION;
    let ticket = match_ticket("bob");
    let at = base(&host);
    let body = json!({"queue": "duel", "protocol_version": v});
    let path = format!("/match/searches/{}", ann.id);
    let (created, read) = tokio::join!(
        call(&at, "POST", "/match/searches", &ticket, Some(&body),),
        call(&at, "GET", &path, &ann.token, None,),
    );
    proxy.set_frozen(false);
    for (status, v) in [&created, &read] {
        assert_eq!(*status, 503, "{v}");
        assert!(
            v["error"]["code"] == "unavailable" || v["error"]["code"] == "probe_unavailable",
            "{v}"
        );
    }

    // Back: Ann's search is still queued, and she is matched with the next player.
    let (bob, _) = ask(&host, "bob-again").await;
    let a = until(&host, &ann, "assigned").await;
    let b = until(&host, &bob, "assigned").await;
    assert_eq!(a["assignment"]["match"], b["assignment"]["match"]);
}
