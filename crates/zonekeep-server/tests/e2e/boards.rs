//! Leaderboards on one host with its SQLite store: a zone's facts feed a board that follows
//! their total, each fact counted once; a back end submits scores under its own keys (a
//! repeated key counts nothing); top, around-me and periods read over HTTP; a zone reads a
//! board through the `board.top` call; operators declare, reset and delete boards; and every
//! route answers hostile input with a clear refusal while the host keeps serving.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use zonekeep_core::{
    CallKey, CallResult, Ctx, EventTarget, InputRefusal, PlayerId, Zone, ZoneConfig, ZoneError,
    ZoneInit,
};
use zonekeep_server::config::Secret;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

use crate::common::*;
use crate::tally::{create_zone, join_tally, read_until, Read, Tally};

const BACKEND: &str = "backend-token-0123456789";
const TOPIC_RANKS: u16 = 7;

/// Asks `board.top` of board `score` for its n-th input (key `top-{n}`) and tells everyone the
/// ranking each answer brings.
#[derive(Debug, Default)]
struct Ranks(u64);

impl Zone for Ranks {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Ranks(0))
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, _i: ()) {
        self.0 += 1;
        let args = if self.0 == 1 {
            json!({"board": "score", "limit": 3})
        } else {
            json!({"board": "nope"})
        };
        ctx.call(&format!("top-{}", self.0), "board.top", args)
            .unwrap();
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, _key: &CallKey, result: &CallResult) {
        let v = match result {
            CallResult::Ok(v) => v.clone(),
            CallResult::Err { code, .. } => json!({ "error": code }),
        };
        ctx.emit_event(EventTarget::All, TOPIC_RANKS, v.to_string().into_bytes());
    }
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.0.to_le_bytes().to_vec())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| ZoneError::Restore("8 bytes".into()))?;
        Ok(Ranks(u64::from_le_bytes(b)))
    }
}

/// A host with the tally and ranks kinds, boards `score` (following the facts' `score` total)
/// and `laps` (best lap, lower is better, daily), and the back-end credential.
async fn host(dir: &Path) -> TestServer {
    let p = Persistence::open(PersistConfig {
        data_dir: dir.to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    let zone = ZoneConfig {
        max_players: 8,
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(ServerConfig {
            data_dir: dir.to_path_buf(),
            boards: vec![
                "score:total=score".into(),
                "laps:op=best:order=asc:period=daily:keep=2".into(),
            ],
            lobby_token: Some(Secret::new(BACKEND.to_owned())),
            ..base_config()
        })
        .zone_with::<Tally>("tally", zone.clone(), Value::Null)
        .zone_with::<Ranks>("ranks", zone, Value::Null)
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    TestServer::serve(host).await
}

fn ranking(v: &Value) -> Vec<(u64, String, i64)> {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["rank"].as_u64().unwrap(),
                e["principal"].as_str().unwrap().to_owned(),
                e["score"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn submit(
    server: &TestServer,
    board: &str,
    principal: &str,
    value: i64,
    key: &str,
) -> (u16, Value) {
    call(
        server,
        "POST",
        &format!("/boards/{board}/scores"),
        Some(BACKEND),
        Some(json!({"principal": principal, "value": value, "key": key})),
    )
    .await
}

/// Plays `n` inputs into tally zone `zone` as `sub` and waits until each one's fact settled.
async fn play(server: &TestServer, zone: &str, sub: &str, n: u64) {
    let (mut ws, _w, mut r) = join_tally(server, zone, sub).await;
    for i in 0..n {
        send_input(&mut ws, u32::try_from(i + 1).unwrap(), &i.to_le_bytes()).await;
    }
    read_until(&mut ws, &mut r, |r: &Read| r.settled.len() as u64 >= n).await;
}

#[tokio::test]
async fn facts_feed_a_following_board_once_and_back_ends_submit_under_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;

    let (status, list) = call(&server, "GET", "/boards", None, None).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["boards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["laps", "score"]);

    // A zone's facts: each input is a fact adding 1 to its player's `score` total.
    play(&server, "t-1", "ann", 3).await;
    play(&server, "t-1", "bob", 5).await;
    play(&server, "t-2", "cat", 3).await;
    let (status, top) = call(&server, "GET", "/boards/score", None, None).await;
    assert_eq!(status, 200, "{top}");
    assert_eq!(top["source"], "store", "no index configured");
    assert_eq!(top["size"], 3);
    // Ties (ann and cat, 3 each) by principal.
    assert_eq!(
        ranking(&top),
        [
            (1, "bob".to_owned(), 5),
            (2, "ann".to_owned(), 3),
            (3, "cat".to_owned(), 3)
        ]
    );

    // A back end's score: counted once under its key, however often it is sent.
    let (status, first) = submit(&server, "score", "cat", 10, "order-1").await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["recorded"], true);
    assert_eq!(first["me"]["rank"], 1);
    assert_eq!(first["me"]["score"], 13);
    for _ in 0..3 {
        let (status, again) = submit(&server, "score", "cat", 10, "order-1").await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["recorded"], false);
        assert_eq!(again["me"]["score"], 13);
    }

    // Around me.
    let (status, around) = call(
        &server,
        "GET",
        "/boards/score/around/ann?radius=1",
        None,
        None,
    )
    .await;
    assert_eq!(status, 200, "{around}");
    assert_eq!(around["me"]["rank"], 3);
    assert_eq!(
        ranking(&around),
        [(2, "bob".to_owned(), 5), (3, "ann".to_owned(), 3)]
    );
    let (_, nobody) = call(&server, "GET", "/boards/score/around/zed", None, None).await;
    assert_eq!(nobody["me"], Value::Null);
    assert!(ranking(&nobody).is_empty());

    // A best-lap board: lower is better, a slower lap changes nothing.
    for (p, v, k) in [
        ("ann", 9000, "l1"),
        ("ann", 9500, "l2"),
        ("bob", 8700, "l3"),
        ("ann", 8800, "l4"),
    ] {
        let (status, r) = submit(&server, "laps", p, v, k).await;
        assert_eq!(status, 201, "{r}");
    }
    let (_, laps) = call(&server, "GET", "/boards/laps?period=current", None, None).await;
    assert_eq!(laps["order"], "asc");
    assert_eq!(
        ranking(&laps),
        [(1, "bob".to_owned(), 8700), (2, "ann".to_owned(), 8800)]
    );
    // Yesterday's period is empty; the day before the kept ones is refused as not a period start.
    let (status, previous) = call(&server, "GET", "/boards/laps?period=previous", None, None).await;
    assert_eq!(status, 200, "{previous}");
    assert_eq!(previous["size"], 0);
    let current = laps["period"].as_u64().unwrap();
    let (status, r) = call(
        &server,
        "GET",
        &format!("/boards/laps?period={}", current + 1),
        None,
        None,
    )
    .await;
    assert_eq!((status, code(&r)), (400, "bad_request"), "{r}");

    // Counted in the metrics.
    assert_eq!(
        metric(
            &server,
            "zonekeep_board_submits_total{outcome=\"recorded\"}"
        )
        .await,
        5.0
    );
    assert_eq!(
        metric(
            &server,
            "zonekeep_board_submits_total{outcome=\"repeated\"}"
        )
        .await,
        3.0
    );

    // Operators: reset the current period of `laps`, declare a board, delete one.
    let (status, r) = call(
        &server,
        "POST",
        "/admin/boards/laps/reset",
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["deleted"], 2);
    let (_, laps) = call(&server, "GET", "/boards/laps", None, None).await;
    assert_eq!(laps["size"], 0);
    let body = json!({"order": "desc", "op": "set", "period": "weekly", "keep_periods": 4});
    let (status, r) = call(
        &server,
        "PUT",
        "/admin/boards/level",
        Some(ADMIN),
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, 201, "{r}");
    let (status, _) = call(
        &server,
        "PUT",
        "/admin/boards/level",
        Some(ADMIN),
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "the same settings again change nothing");
    let (status, r) = call(
        &server,
        "PUT",
        "/admin/boards/level",
        Some(ADMIN),
        Some(json!({"op": "best"})),
    )
    .await;
    assert_eq!((status, code(&r)), (409, "board_conflict"), "{r}");
    let (status, _) = call(&server, "DELETE", "/admin/boards/level", Some(ADMIN), None).await;
    assert_eq!(status, 200);
    let (status, r) = call(&server, "GET", "/boards/level", None, None).await;
    assert_eq!((status, code(&r)), (404, "no_board"), "{r}");

    server.stop().await;
}

#[tokio::test]
async fn a_zone_reads_a_board_through_the_board_top_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    for (p, v) in [("ann", 30), ("bob", 50), ("cat", 40), ("dan", 10)] {
        let (status, r) = submit(&server, "score", p, v, &format!("k-{p}")).await;
        assert_eq!(status, 201, "{r}");
    }
    create_zone(&server, "r-1", "ranks").await;
    let (mut ws, _) = join(&server, "r-1", &ticket("ann", "r-1")).await;
    send_input(&mut ws, 1, &[]).await;
    send_input(&mut ws, 2, &[]).await;
    let mut answers: Vec<Value> = Vec::new();
    let schema = empty_schema();
    while answers.len() < 2 {
        match recv(&mut ws, &schema).await {
            Seen::Msg(zonekeep_protocol::messages::ServerMessage::Delta(d)) => {
                for e in d.events.into_iter().flatten() {
                    if e.topic == TOPIC_RANKS {
                        answers.push(serde_json::from_slice(&e.payload).unwrap());
                    }
                }
            }
            Seen::Msg(_) => {}
            Seen::Closed => panic!("closed"),
        }
    }
    assert_eq!(answers[0]["board"], "score", "{}", answers[0]);
    assert_eq!(answers[0]["size"], 4);
    assert_eq!(
        ranking(&answers[0]),
        [
            (1, "bob".to_owned(), 50),
            (2, "cat".to_owned(), 40),
            (3, "ann".to_owned(), 30)
        ]
    );
    assert_eq!(answers[1], json!({"error": "NO_BOARD"}));
    server.stop().await;
}

#[tokio::test]
async fn board_routes_refuse_hostile_input_and_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;
    let (status, _) = submit(&server, "score", "ann", 7, "a").await;
    assert_eq!(status, 201);

    // Reads: bad names, bounds, periods, sources.
    for (path, status_want, code_want) in [
        ("/boards/no%20such", 400, "bad_request"),
        ("/boards/missing", 404, "no_board"),
        (&*format!("/boards/{}", "x".repeat(65)), 400, "bad_request"),
        ("/boards/score?limit=0", 400, "bad_request"),
        ("/boards/score?limit=1001", 400, "bad_request"),
        ("/boards/score?limit=-1", 400, "bad_request"),
        ("/boards/score?offset=x", 400, "bad_request"),
        ("/boards/score?period=yesterday", 400, "bad_request"),
        ("/boards/score?period=previous", 400, "bad_request"),
        ("/boards/score?from=redis", 400, "bad_request"),
        ("/boards/score/around/ann?radius=501", 400, "bad_request"),
        (
            &*format!("/boards/score/around/{}", "p".repeat(257)),
            400,
            "bad_request",
        ),
    ] {
        let (status, r) = call(&server, "GET", path, None, None).await;
        assert_eq!((status, code(&r)), (status_want, code_want), "{path}: {r}");
    }

    // Submissions: credentials, bodies, values, keys, boards.
    let ok = json!({"principal": "ann", "value": 1, "key": "k"});
    let (status, _) = call(
        &server,
        "POST",
        "/boards/score/scores",
        None,
        Some(ok.clone()),
    )
    .await;
    assert_eq!(status, 401, "no credential");
    let (status, _) = call(
        &server,
        "POST",
        "/boards/score/scores",
        Some("wrong"),
        Some(ok.clone()),
    )
    .await;
    assert_eq!(status, 401, "a wrong credential");
    let (status, _) = call(
        &server,
        "POST",
        "/boards/score/scores",
        Some(ADMIN),
        Some(ok),
    )
    .await;
    assert_eq!(status, 401, "the admin token is not the back end's");
    let big = "v".repeat(5000);
    for (board, body, status_want, code_want) in [
        (
            "score",
            json!({"principal": "ann", "value": 1}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": 1.5, "key": "k"}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": "1", "key": "k"}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": 1, "key": ""}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": 1, "key": "x".repeat(201)}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "", "value": 1, "key": "k"}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": 1, "key": "k", "sender": "bob"}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": 1, "key": big}),
            400,
            "bad_request",
        ),
        (
            "score",
            json!({"principal": "ann", "value": 9_007_199_254_740_992_i64, "key": "k2"}),
            422,
            "score_refused",
        ),
        (
            "missing",
            json!({"principal": "ann", "value": 1, "key": "k3"}),
            404,
            "no_board",
        ),
    ] {
        let (status, r) = call(
            &server,
            "POST",
            &format!("/boards/{board}/scores"),
            Some(BACKEND),
            Some(body.clone()),
        )
        .await;
        assert_eq!((status, code(&r)), (status_want, code_want), "{body}: {r}");
    }
    // Adding past the bound refuses the score and keeps the one before.
    let (status, _) = submit(&server, "score", "bob", 9_007_199_254_740_991, "max").await;
    assert_eq!(status, 201);
    let (status, r) = submit(&server, "score", "bob", 1, "over").await;
    assert_eq!((status, code(&r)), (422, "score_refused"), "{r}");
    let (_, bob) = call(
        &server,
        "GET",
        "/boards/score/around/bob?radius=0",
        None,
        None,
    )
    .await;
    assert_eq!(bob["me"]["score"], 9_007_199_254_740_991_i64);
    assert!(metric(&server, "zonekeep_board_submits_total{outcome=\"refused\"}").await >= 2.0);

    // Admin: credential, bodies, settings.
    let (status, _) = call(&server, "PUT", "/admin/boards/b", None, Some(json!({}))).await;
    assert_eq!(status, 401);
    for body in [
        json!({"op": "max"}),
        json!({"order": "up"}),
        json!({"period": "hourly"}),
        json!({"op": "best", "total": "score"}),
        json!({"keep_periods": 1000}),
        json!({"colour": "red"}),
        json!([1, 2]),
    ] {
        let (status, r) = call(
            &server,
            "PUT",
            "/admin/boards/b",
            Some(ADMIN),
            Some(body.clone()),
        )
        .await;
        assert_eq!((status, code(&r)), (400, "bad_request"), "{body}: {r}");
    }
    let (status, r) = call(
        &server,
        "PUT",
        "/admin/boards/bad%20name",
        Some(ADMIN),
        Some(json!({})),
    )
    .await;
    assert_eq!((status, code(&r)), (400, "bad_request"), "{r}");
    let (status, r) = call(
        &server,
        "DELETE",
        "/admin/boards/missing",
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!((status, code(&r)), (404, "no_board"), "{r}");

    // Still serving, and nothing stored was changed by any of it.
    let (status, top) = call(&server, "GET", "/boards/score", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        ranking(&top),
        [
            (1, "bob".to_owned(), 9_007_199_254_740_991),
            (2, "ann".to_owned(), 7)
        ]
    );
    server.stop().await;
}
