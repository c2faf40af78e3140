//! The lobby on one host with its SQLite store: an application back end's credential, rooms made
//! and filled by join_or_create with tickets the players join with, the owner's reports turning
//! seats into presence, private rooms by code, per-address caps, and hostile requests answered
//! with clear refusals.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_core::{Ctx, InputRefusal, PlayerId, Zone, ZoneConfig, ZoneError, ZoneInit};
use zonekeep_server::config::Secret;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

use crate::common::*;
use crate::tally::{count_input, Tally};

const LOBBY: &str = "lobby-token-of-the-game-backend";

/// A match that starts on its first input: it closes itself to the lobby and names its round.
struct Match;

impl Zone for Match {
    type Input = u64;
    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        ctx.publish_listing(true, json!({"round": 0, "map": "dunes"}))
            .unwrap();
        Ok(Match)
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        count_input(payload)
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, n: u64) {
        ctx.publish_listing(false, json!({"round": n, "map": "dunes"}))
            .unwrap();
        // Metadata that is not an object is refused, and nothing changes.
        assert!(ctx.publish_listing(true, json!("open")).is_err());
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

/// A host with the tally kind (4 players, 1 observer a zone) and the lobby on.
async fn lobby_host(dir: &Path, config: ServerConfig) -> TestServer {
    let p = Persistence::open(PersistConfig {
        data_dir: dir.to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    let host = Host::builder()
        .config(ServerConfig {
            data_dir: dir.to_path_buf(),
            ..config
        })
        .zone_with::<Tally>(
            "tally",
            ZoneConfig {
                max_players: 4,
                max_observers: 1,
                // A player who drops is gone at once (the test waits for a leave).
                reconnect_grace: Duration::from_millis(50),
                ..ZoneConfig::default()
            },
            Value::Null,
        )
        .zone_with::<Match>("match", ZoneConfig::default(), Value::Null)
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    TestServer::serve(host).await
}

fn with_lobby() -> ServerConfig {
    ServerConfig {
        lobby_token: Some(Secret::new(LOBBY)),
        ..base_config()
    }
}

/// POSTs `body` to `path` with the lobby credential: status and answer.
async fn lobby_post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let (status, text) = http(server, "POST", path, Some(LOBBY), Some(body)).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn lobby_get(server: &TestServer, path: &str) -> (u16, Value) {
    let (status, text) = http(server, "GET", path, Some(LOBBY), None).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Joins the zone a seat names with its ticket, at the URL it names.
async fn take_up(server: &TestServer, seat: &Value) -> Ws {
    let zone = seat["zone"].as_str().unwrap();
    assert_eq!(seat["url"], json!(server.url(zone)), "{seat}");
    join(server, zone, seat["ticket"].as_str().unwrap()).await.0
}

#[tokio::test]
async fn join_or_create_fills_rooms_and_the_players_take_their_seats() {
    let dir = tempfile::tempdir().unwrap();
    let server = lobby_host(dir.path(), with_lobby()).await;
    let join_or_create = |who: &str| json!({"kind": "tally", "principal": who, "name": who, "metadata": {"map": "dunes"}, "max_players": 2});
    let (status, ann) = lobby_post(&server, "/lobby/join_or_create", join_or_create("ann")).await;
    assert_eq!(status, 201, "{ann}");
    assert_eq!(ann["created"], true);
    let (status, bob) = lobby_post(&server, "/lobby/join_or_create", join_or_create("bob")).await;
    assert_eq!(status, 200, "{bob}");
    assert_eq!(
        bob["zone"], ann["zone"],
        "the second player fills the first room"
    );
    assert_eq!(bob["room"]["free_players"], 0);
    let (_, cy) = lobby_post(&server, "/lobby/join_or_create", join_or_create("cy")).await;
    assert_eq!(cy["created"], true, "a full room makes a new one: {cy}");
    assert_ne!(cy["zone"], ann["zone"]);
    // A different map is a different room.
    let (_, dee) = lobby_post(
        &server,
        "/lobby/join_or_create",
        json!({"kind": "tally", "principal": "dee", "metadata": {"map": "ice"}}),
    )
    .await;
    assert_ne!(dee["zone"], cy["zone"]);

    // The listing: rooms with a free seat on the dunes map, fullest first.
    let (status, list) = lobby_get(&server, "/lobby/rooms?kind=tally&meta.map=dunes").await;
    assert_eq!(status, 200, "{list}");
    let zones: Vec<&Value> = list["rooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["zone_id"])
        .collect();
    assert_eq!(zones, [&cy["zone"]], "the full room is not offered: {list}");

    // The players join with the tickets the lobby minted; the host reports them present.
    let ann_ws = take_up(&server, &ann).await;
    let bob_ws = take_up(&server, &bob).await;
    let zone = ann["zone"].as_str().unwrap().to_owned();
    let room_path = format!("/lobby/rooms/{zone}");
    let room_is = |players: u64, reserved: u64| {
        let (server, path) = (&server, room_path.clone());
        move || {
            let path = path.clone();
            async move {
                let (_, room) = lobby_get(server, &path).await;
                room["players"] == players && room["reserved_players"] == reserved
            }
        }
    };
    eventually("both players reported present", room_is(2, 0)).await;
    let (status, full) = lobby_post(
        &server,
        &format!("/lobby/rooms/{zone}/join"),
        json!({"principal": "eve"}),
    )
    .await;
    assert_eq!((status, &full["error"]["code"]), (409, &json!("room_full")));
    // Ann asking again keeps her seat (she is present): the same room, no new seat.
    let (status, again) = lobby_post(&server, "/lobby/join_or_create", join_or_create("ann")).await;
    assert_eq!((status, &again["zone"]), (200, &ann["zone"]), "{again}");
    assert_eq!(
        metric(&server, "zonekeep_lobby_seats_total{how=\"created\"}").await,
        3.0
    );
    // Bob leaves: his seat is free again, and Eve takes it.
    drop(bob_ws);
    eventually("Bob's leave reported", room_is(1, 0)).await;
    let (status, eve) = lobby_post(
        &server,
        &format!("/lobby/rooms/{zone}/join"),
        json!({"principal": "eve"}),
    )
    .await;
    assert_eq!(status, 200, "{eve}");
    assert_eq!(eve["room"]["reserved_players"], 1);
    let (status, _) = lobby_get(&server, "/lobby/rooms/no-such-room").await;
    assert_eq!(status, 404);
    drop(ann_ws);
    server.stop().await;
}

#[tokio::test]
async fn private_rooms_are_joined_by_code_and_never_listed() {
    let dir = tempfile::tempdir().unwrap();
    let server = lobby_host(dir.path(), with_lobby()).await;
    let (status, made) = lobby_post(
        &server,
        "/lobby/rooms",
        json!({"kind": "tally", "principal": "host-player", "private": true, "metadata": {"mode": "duel"}}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let code = made["code"].as_str().unwrap().to_owned();
    assert_eq!(code.len(), 8);
    let (_, list) = lobby_get(&server, "/lobby/rooms?kind=tally").await;
    assert_eq!(list["rooms"], json!([]), "a private room is never listed");

    // A friend joins by code (any case), and takes the seat.
    let (status, friend) = lobby_post(
        &server,
        "/lobby/join_by_code",
        json!({"code": code.to_lowercase(), "principal": "friend"}),
    )
    .await;
    assert_eq!(status, 200, "{friend}");
    assert_eq!(friend["zone"], made["zone"]);
    let ws = take_up(&server, &friend).await;
    let (status, wrong) = lobby_post(
        &server,
        "/lobby/join_by_code",
        json!({"code": "NOSUCHXX", "principal": "stranger"}),
    )
    .await;
    assert_eq!((status, &wrong["error"]["code"]), (404, &json!("no_room")));
    // An observer seat, then no more (the kind seats one).
    let watch = json!({"principal": "w1", "role": "observer"});
    let (status, _) = lobby_post(
        &server,
        &format!("/lobby/rooms/{}/join", made["zone"].as_str().unwrap()),
        watch,
    )
    .await;
    assert_eq!(status, 200);
    let (status, full) = lobby_post(
        &server,
        &format!("/lobby/rooms/{}/join", made["zone"].as_str().unwrap()),
        json!({"principal": "w2", "role": "observer"}),
    )
    .await;
    assert_eq!((status, &full["error"]["code"]), (409, &json!("room_full")));
    // A room made by the back end alone: placed, listed, nobody seated, no ticket.
    let (status, empty) = lobby_post(
        &server,
        "/lobby/rooms",
        json!({"kind": "tally", "metadata": {"mode": "open-house"}}),
    )
    .await;
    assert_eq!(status, 201, "{empty}");
    assert!(empty["ticket"].is_null(), "{empty}");
    assert_eq!(
        empty["url"],
        json!(server.url(empty["zone"].as_str().unwrap()))
    );
    let (_, list) = lobby_get(&server, "/lobby/rooms?kind=tally&meta.mode=open-house").await;
    assert_eq!(list["rooms"][0]["zone_id"], empty["zone"]);
    assert_eq!(list["rooms"][0]["free_players"], 4);
    drop(ws);
    server.stop().await;
}

#[tokio::test]
async fn an_address_holds_at_most_its_seats_and_hostile_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = lobby_host(
        dir.path(),
        ServerConfig {
            lobby_players_per_address: 1,
            ..with_lobby()
        },
    )
    .await;
    let (_, first) = lobby_post(
        &server,
        "/lobby/join_or_create",
        json!({"kind": "tally", "principal": "a", "address": "203.0.113.7"}),
    )
    .await;
    let zone = first["zone"].as_str().unwrap().to_owned();
    let (status, capped) = lobby_post(
        &server,
        &format!("/lobby/rooms/{zone}/join"),
        json!({"principal": "b", "address": "203.0.113.7"}),
    )
    .await;
    assert_eq!(
        (status, &capped["error"]["code"]),
        (409, &json!("address_full"))
    );
    let (status, _) = lobby_post(
        &server,
        &format!("/lobby/rooms/{zone}/join"),
        json!({"principal": "b", "address": "203.0.113.8"}),
    )
    .await;
    assert_eq!(status, 200);

    // The credential: none, the admin's, or a wrong one are refused and counted.
    for bearer in [None, Some(ADMIN), Some("not-the-lobby-token-at-all")] {
        let (status, _) = http(&server, "GET", "/lobby/rooms?kind=tally", bearer, None).await;
        assert_eq!(status, 401, "{bearer:?}");
    }
    assert_eq!(
        metric(&server, "zonekeep_lobby_refused_total{reason=\"missing\"}").await,
        1.0
    );
    assert_eq!(
        metric(&server, "zonekeep_lobby_refused_total{reason=\"wrong\"}").await,
        2.0
    );

    // Hostile bodies: clear refusals, nothing seated.
    for (body, code) in [
        (json!({"kind": "nope", "principal": "x"}), "bad_request"),
        (json!({"kind": "tally", "principal": ""}), "bad_request"),
        (
            json!({"kind": "tally", "principal": "x", "role": "admin"}),
            "bad_request",
        ),
        (
            json!({"kind": "tally", "principal": "x", "claims": {"sub": "someone-else"}}),
            "bad_request",
        ),
        (
            json!({"kind": "tally", "principal": "x", "claims": {"pad": "y".repeat(4096)}}),
            "bad_request",
        ),
        (
            json!({"kind": "tally", "principal": "x", "metadata": {"blob": "z".repeat(5000)}}),
            "bad_request",
        ),
        (
            json!({"kind": "tally", "principal": "x", "metadata": {"nested": {"a": 1}}}),
            "bad_request",
        ),
        (
            json!({"kind": "tally", "principal": "x", "name": "a\u{7}b"}),
            "bad_request",
        ),
        (json!("not an object"), "bad_request"),
    ] {
        let (status, answer) = lobby_post(&server, "/lobby/join_or_create", body.clone()).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (400, &json!(code)),
            "{body}"
        );
    }
    let (status, _) = lobby_get(&server, "/lobby/rooms").await;
    assert_eq!(status, 400, "kind is required");
    let (status, _) = lobby_get(&server, "/lobby/rooms?kind=tally&limit=lots").await;
    assert_eq!(status, 400);
    assert_eq!(
        metric(&server, "zonekeep_lobby_seats_total{how=\"created\"}").await,
        1.0
    );
    server.stop().await;
}

#[tokio::test]
async fn a_match_closes_itself_to_the_lobby_and_publishes_its_round() {
    let dir = tempfile::tempdir().unwrap();
    let server = lobby_host(dir.path(), with_lobby()).await;
    let (_, seat) = lobby_post(
        &server,
        "/lobby/join_or_create",
        json!({"kind": "match", "principal": "ann", "metadata": {"map": "dunes"}}),
    )
    .await;
    let zone = seat["zone"].as_str().unwrap().to_owned();
    let (mut ws, _) = join(&server, &zone, seat["ticket"].as_str().unwrap()).await;
    let room_path = format!("/lobby/rooms/{zone}");
    let room = |open: bool, round: u64| {
        let (server, path) = (&server, room_path.clone());
        move || {
            let path = path.clone();
            async move {
                let (_, room) = lobby_get(server, &path).await;
                room["open"] == open && room["metadata"]["round"] == round
            }
        }
    };
    // What the zone published when it was created, then its first round: closed.
    eventually("the zone's own listing reported", room(true, 0)).await;
    send_input(&mut ws, 1, &7u64.to_le_bytes()).await;
    eventually("the match closed itself", room(false, 7)).await;
    let (_, list) = lobby_get(&server, "/lobby/rooms?kind=match").await;
    assert_eq!(list["rooms"], json!([]), "a closed room is not offered");
    let (status, closed) = lobby_post(
        &server,
        &format!("/lobby/rooms/{zone}/join"),
        json!({"principal": "late"}),
    )
    .await;
    assert_eq!(
        (status, &closed["error"]["code"]),
        (409, &json!("room_closed"))
    );
    drop(ws);
    server.stop().await;
}

#[tokio::test]
async fn a_host_without_a_lobby_token_says_the_lobby_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = lobby_host(dir.path(), base_config()).await;
    let (status, body) = http(
        &server,
        "POST",
        "/lobby/join_or_create",
        Some(LOBBY),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 404);
    assert!(body.contains("lobby_off"), "{body}");
    server.stop().await;
}

#[test]
fn the_lobby_token_must_be_long_and_not_the_admin_token() {
    for token in ["short", ADMIN] {
        let config = ServerConfig {
            lobby_token: Some(Secret::new(token)),
            ..base_config()
        };
        assert!(config.validate().is_err(), "{token}");
    }
}
