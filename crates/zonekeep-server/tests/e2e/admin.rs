//! The admin API with and without its token, and dev-only routes.

use serde_json::{json, Value};
use zonekeep_protocol::messages::KickCode;

use crate::common::*;

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test]
async fn admin_requires_the_token() {
    let server = TestServer::start().await;
    let (status, body) = http(&server, "GET", "/admin/zones", None, None).await;
    assert_eq!(status, 401);
    assert_eq!(parse(&body)["error"]["code"], "unauthorized");
    let (status, _) = http(
        &server,
        "GET",
        "/admin/zones",
        Some("wrong-token-xxxxxxxx"),
        None,
    )
    .await;
    assert_eq!(status, 401);
    let (status, body) = http(&server, "GET", "/admin/zones", Some(ADMIN), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["zones"], json!([]));
    server.stop().await;
}

#[tokio::test]
async fn admin_create_list_detail_kick_stop() {
    let server = TestServer::start().await;
    let a = Some(ADMIN);
    let (s, b) = http(
        &server,
        "POST",
        "/admin/zones",
        a,
        Some(json!({"id": "made", "kind": "dots", "params": {"size": 5}})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = http(
        &server,
        "POST",
        "/admin/zones",
        a,
        Some(json!({"id": "made", "kind": "dots"})),
    )
    .await;
    assert_eq!(
        (s, parse(&b)["error"]["code"].clone()),
        (409, json!("exists"))
    );
    let (s, b) = http(
        &server,
        "POST",
        "/admin/zones",
        a,
        Some(json!({"id": "x", "kind": "nope"})),
    )
    .await;
    assert_eq!(
        (s, parse(&b)["error"]["code"].clone()),
        (400, json!("bad_request"))
    );
    let (s, _) = http(
        &server,
        "POST",
        "/admin/zones",
        a,
        Some(json!({"id": "y", "kind": "dots", "params": {"size": -3}})),
    )
    .await;
    assert_eq!(s, 400, "bad params are refused by the zone");
    let (s, _) = http(
        &server,
        "POST",
        "/admin/zones",
        a,
        Some(json!({"id": "bad id!", "kind": "dots"})),
    )
    .await;
    assert_eq!(s, 400);

    let (mut ws, w) = join(&server, "made", &ticket("pat", "made")).await;
    let (s, b) = http(&server, "GET", "/admin/zones", a, None).await;
    assert_eq!(s, 200);
    let zones = parse(&b)["zones"].clone();
    assert_eq!(zones.as_array().unwrap().len(), 1, "{zones}");
    assert_eq!(zones[0]["id"], "made");
    assert_eq!(zones[0]["kind"], "dots");
    assert_eq!(zones[0]["players"], 1);
    assert_eq!(zones[0]["tier"], "hot");
    let (s, b) = http(&server, "GET", "/admin/zones/made", a, None).await;
    assert_eq!(s, 200);
    let d = parse(&b);
    assert_eq!(d["participants"][0]["principal"], "pat");
    assert_eq!(d["participants"][0]["id"], w.player_id);
    let (s, _) = http(&server, "GET", "/admin/zones/none", a, None).await;
    assert_eq!(s, 404);

    let (s, b) = http(
        &server,
        "POST",
        "/admin/zones/made/kick",
        a,
        Some(json!({"player": 999})),
    )
    .await;
    assert_eq!(
        (s, parse(&b)["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    let (s, _) = http(
        &server,
        "POST",
        "/admin/zones/made/kick",
        a,
        Some(json!({"player": w.player_id, "reason": "bye"})),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(expect_kick(&mut ws).await, KickCode::KICKED);

    let (mut ws2, _) = join(&server, "made", &ticket("quinn", "made")).await;
    let (s, _) = http(&server, "POST", "/admin/zones/made/stop", a, None).await;
    assert_eq!(s, 200);
    assert_eq!(expect_kick(&mut ws2).await, KickCode::ZONE_STOPPED);
    let (_, b) = http(&server, "GET", "/admin/zones", a, None).await;
    assert_eq!(parse(&b)["zones"], json!([]));
    server.stop().await;
}

#[tokio::test]
async fn admin_off_without_token_and_dev_routes_off_without_dev() {
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        admin_token: None,
        dev: false,
        ..base_config()
    })
    .await;
    let (s, b) = http(&server, "GET", "/admin/zones", Some(ADMIN), None).await;
    assert_eq!(
        (s, parse(&b)["error"]["code"].clone()),
        (404, json!("admin_disabled"))
    );
    let (s, _) = http(&server, "GET", "/dev/ticket?zone=z&name=n", None, None).await;
    assert_eq!(s, 404);
    let (s, _) = http(&server, "POST", "/dev/netsim", None, Some(json!({}))).await;
    assert_eq!(s, 404);
    server.stop().await;
}

#[tokio::test]
async fn dev_ticket_mints_a_playable_guest_ticket() {
    let server = TestServer::start().await;
    let (s, b) = http(
        &server,
        "GET",
        "/dev/ticket?zone=guest-zone&name=ann",
        None,
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let v = parse(&b);
    assert!(v["sub"].as_str().unwrap().starts_with("guest:ann:"));
    let (_ws, w) = join(&server, "guest-zone", v["ticket"].as_str().unwrap()).await;
    assert_eq!(w.zone_id, "guest-zone");

    // A kind names what a new zone is created as; one the host does not serve is refused.
    let (s, b) = http(
        &server,
        "GET",
        "/dev/ticket?zone=kinded&kind=nope",
        None,
        None,
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("unknown zone kind"), "{b}");
    let (s, b) = http(
        &server,
        "GET",
        "/dev/ticket?zone=kinded&kind=blob",
        None,
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (_ws, _) = join(&server, "kinded", parse(&b)["ticket"].as_str().unwrap()).await;
    let (_, b) = http(&server, "GET", "/admin/zones/kinded", Some(ADMIN), None).await;
    assert_eq!(parse(&b)["kind"], json!("blob"), "{b}");
    server.stop().await;
}

#[tokio::test]
async fn admin_kick_takes_a_principal_or_name_and_unknown_kinds_are_listed() {
    let server = TestServer::start().await;
    let a = Some(ADMIN);
    let mut named = claims("guest:ana:01", "names");
    named["name"] = json!("ana");
    let (mut ana, _) = join(&server, "names", &sign(&named)).await;
    let (mut bo, _) = join(&server, "names", &ticket("bo", "names")).await;
    let mut twin = claims("guest:ana:02", "names");
    twin["name"] = json!("ana");
    let (_twin, _) = join(&server, "names", &sign(&twin)).await;

    let kick = |player: Value| {
        http(
            &server,
            "POST",
            "/admin/zones/names/kick",
            a,
            Some(json!({"player": player})),
        )
    };
    // Two participants are called "ana": the operator is told to use an id.
    let (s, b) = kick(json!("ana")).await;
    assert_eq!(
        (s, parse(&b)["error"]["code"].clone()),
        (409, json!("ambiguous")),
        "{b}"
    );
    let (s, b) = kick(json!("nobody")).await;
    assert_eq!(s, 404, "{b}");
    // A principal names exactly one.
    let (s, b) = kick(json!("bo")).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(expect_kick(&mut bo).await, KickCode::KICKED);
    let (s, b) = kick(json!("guest:ana:01")).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(expect_kick(&mut ana).await, KickCode::KICKED);
    // The remaining "ana" is now unique by name.
    let (s, b) = kick(json!("ana")).await;
    assert_eq!(s, 200, "{b}");

    let (s, b) = http(
        &server,
        "POST",
        "/admin/zones",
        a,
        Some(json!({"id": "k", "kind": "nope"})),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    let msg = parse(&b)["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains("\"nope\"") && msg.contains("blob, brief, dots, solo"),
        "{msg}"
    );
    server.stop().await;
}
