//! Every refusal gets its own Kick code, the connection closes, and the host keeps serving.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::json;
use zonekeep_protocol::messages::{ClientMessage, Hello, KickCode};
use zonekeep_server::ticket::sign_parts;

use crate::common::*;

fn with_key(kid: &str, secret: &str, claims: &serde_json::Value) -> String {
    sign_parts(
        secret.as_bytes(),
        &json!({"alg": "HS256", "kid": kid}),
        claims,
    )
}

#[tokio::test]
async fn each_ticket_refusal_has_its_code_and_others_keep_playing() {
    let server = TestServer::start().await;
    // A player already in the zone keeps receiving frames throughout.
    let (mut bystander, _) = join(&server, "gate", &ticket("bystander", "gate")).await;

    let t = now();
    let mut expired = claims("u", "gate");
    expired["exp"] = json!(t - 60);
    let mut early = claims("u", "gate");
    early["nbf"] = json!(t + 60);
    let good = claims("u", "gate");
    let tampered = {
        let s = sign(&good);
        let mut parts: Vec<&str> = s.split('.').collect();
        let mut forged = good.clone();
        forged["sub"] = json!("admin");
        let body = URL_SAFE_NO_PAD.encode(forged.to_string());
        parts[1] = &body;
        parts.join(".")
    };
    let alg_none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"k1"}"#),
        URL_SAFE_NO_PAD.encode(claims("u", "gate").to_string())
    );
    let replay = ticket("once", "gate");
    let (_first, _) = join(&server, "gate", &replay).await;

    let cases: Vec<(&str, String, KickCode)> = vec![
        ("expired", sign(&expired), KickCode::TICKET_EXPIRED),
        (
            "not yet valid",
            sign(&early),
            KickCode::TICKET_NOT_YET_VALID,
        ),
        ("tampered", tampered, KickCode::BAD_TICKET),
        (
            "garbage ticket",
            "not-a-ticket".into(),
            KickCode::BAD_TICKET,
        ),
        (
            "unknown kid",
            with_key("nope", SECRET, &claims("u", "gate")),
            KickCode::TICKET_UNKNOWN_KEY,
        ),
        (
            "retired kid",
            with_key("k0", RETIRED, &claims("u", "gate")),
            KickCode::TICKET_RETIRED_KEY,
        ),
        ("alg none", alg_none, KickCode::TICKET_BAD_ALGORITHM),
        (
            "wrong zone",
            ticket("u", "elsewhere"),
            KickCode::TICKET_WRONG_ZONE,
        ),
        ("replayed jti", replay.clone(), KickCode::TICKET_REPLAYED),
    ];
    for (what, t, code) in cases {
        assert_eq!(
            refused(&server, "gate", hello_bytes(&t, &[])).await,
            code,
            "{what}"
        );
    }
    // A second active key (rotation) is accepted.
    let (_rotated, _) = join(
        &server,
        "gate",
        &with_key("k2", SECRET2, &claims("v", "gate")),
    )
    .await;
    // A prefix pattern admits matching zones.
    let (_pattern, _) = join(&server, "gate", &ticket("w", "ga*")).await;

    // The bystander still gets frames.
    send_input(&mut bystander, 1, &[1, 0]).await;
    loop {
        if let Seen::Msg(zonekeep_protocol::messages::ServerMessage::Delta(d)) =
            recv(&mut bystander, &empty_schema()).await
        {
            if d.ack == 1 {
                break;
            }
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn protocol_refusals_have_their_codes() {
    let server = TestServer::start().await;
    let (mut bystander, _) = join(&server, "proto", &ticket("bystander", "proto")).await;

    // Version mismatch is decided before the ticket is looked at: a version-1 client (or one
    // offering only versions this host does not speak) gets VERSION_MISMATCH.
    let v2 = ClientMessage::Hello(Hello {
        versions: vec![1, 12],
        ticket: "garbage".into(),
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    })
    .to_bytes()
    .unwrap();
    assert_eq!(
        refused(&server, "proto", v2).await,
        KickCode::VERSION_MISMATCH
    );

    // Text frame.
    let mut ws = connect(&server, "proto").await;
    futures_util::SinkExt::send(
        &mut ws,
        tokio_tungstenite::tungstenite::Message::Text("hi".into()),
    )
    .await
    .unwrap();
    assert_eq!(expect_kick(&mut ws).await, KickCode::PROTOCOL_ERROR);

    // Oversized message (limit 1024 in the test config), before and after joining.
    assert_eq!(
        refused(&server, "proto", vec![1u8; 1500]).await,
        KickCode::MESSAGE_TOO_LARGE
    );
    assert_eq!(
        refused(&server, "proto", vec![1u8; 64 * 1024]).await,
        KickCode::MESSAGE_TOO_LARGE
    );
    let (mut ws, _) = join(&server, "proto", &ticket("big", "proto")).await;
    send(&mut ws, vec![2u8; 4000]).await;
    assert_eq!(expect_kick(&mut ws).await, KickCode::MESSAGE_TOO_LARGE);

    // Garbage bytes (unknown tag, truncated Hello).
    assert_eq!(
        refused(&server, "proto", vec![0x7e, 1, 2, 3]).await,
        KickCode::PROTOCOL_ERROR
    );
    assert_eq!(
        refused(&server, "proto", vec![0x01, 0x05]).await,
        KickCode::PROTOCOL_ERROR
    );
    // Input before Hello, and a second Hello.
    let input_first = ClientMessage::Input(zonekeep_protocol::messages::Input {
        seq: 1,
        view_tick: 0,
        payload: vec![],
    })
    .to_bytes()
    .unwrap();
    assert_eq!(
        refused(&server, "proto", input_first).await,
        KickCode::PROTOCOL_ERROR
    );
    let (mut ws, _) = join(&server, "proto", &ticket("twice", "proto")).await;
    send(&mut ws, hello_bytes(&ticket("twice", "proto"), &[])).await;
    assert_eq!(expect_kick(&mut ws).await, KickCode::PROTOCOL_ERROR);

    // No Hello before the (300 ms) handshake timeout: the Kick itself is the signal.
    let mut silent = connect(&server, "proto").await;
    assert_eq!(expect_kick(&mut silent).await, KickCode::HANDSHAKE_TIMEOUT);

    // Zone full: "solo" admits one player.
    let mut c = claims("first", "solo-1");
    c["kind"] = json!("solo");
    let (_first, _) = join(&server, "solo-1", &sign(&c)).await;
    let mut c2 = claims("second", "solo-1");
    c2["kind"] = json!("solo");
    assert_eq!(
        refused(&server, "solo-1", hello_bytes(&sign(&c2), &[])).await,
        KickCode::ZONE_FULL
    );

    // The bystander is unaffected.
    send_input(&mut bystander, 1, &[0, 1]).await;
    loop {
        if let Seen::Msg(zonekeep_protocol::messages::ServerMessage::Delta(d)) =
            recv(&mut bystander, &empty_schema()).await
        {
            if d.ack == 1 {
                break;
            }
        }
    }
    server.stop().await;
}
