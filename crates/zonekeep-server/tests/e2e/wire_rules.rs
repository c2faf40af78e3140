//! Rules of the wire contract (PROTOCOL.md) a client written from the document relies on: which
//! Kick answers a message on the wrong transport, an unknown zone kind, and a Hello offering no
//! version the host speaks — with a reason that says why.

use serde_json::json;
use zonekeep_protocol::messages::{ClientMessage, Hello, Inputs, Kick, KickCode, ServerMessage};

use crate::common::*;

/// Reads until the Kick that ends the session.
async fn kick_of(ws: &mut Ws) -> Kick {
    let schema = empty_schema();
    loop {
        match recv(ws, &schema).await {
            Seen::Msg(ServerMessage::Kick(k)) => return k,
            Seen::Msg(_) => continue,
            Seen::Closed => panic!("closed without a Kick"),
        }
    }
}

#[tokio::test]
async fn an_inputs_datagram_sent_over_websocket_is_a_protocol_error() {
    let server = TestServer::start().await;
    let (mut ws, _) = join(&server, "dots", &ticket("ws-inputs", "dots")).await;
    let inputs = ClientMessage::Inputs(Inputs {
        state_ack: 0,
        inputs: vec![],
    });
    send(&mut ws, inputs.to_bytes().unwrap()).await;
    let kick = kick_of(&mut ws).await;
    assert_eq!(kick.code, KickCode::PROTOCOL_ERROR, "{}", kick.reason);
    assert!(kick.reason.contains("Inputs"), "{}", kick.reason);
    server.stop().await;
}

#[tokio::test]
async fn a_ticket_for_a_kind_the_host_does_not_serve_is_join_refused_naming_the_kinds() {
    let server = TestServer::start().await;
    let mut c = claims("kindless", "no-such-kind-zone");
    c["kind"] = json!("nope");
    let mut ws = connect(&server, "no-such-kind-zone").await;
    send(&mut ws, hello_bytes(&sign(&c), &[])).await;
    let kick = kick_of(&mut ws).await;
    assert_eq!(kick.code, KickCode::JOIN_REFUSED, "{}", kick.reason);
    assert!(
        kick.reason.contains("unknown zone kind \"nope\"") && kick.reason.contains("dots"),
        "the reason names the kind and the kinds served: {}",
        kick.reason
    );
    server.stop().await;
}

#[tokio::test]
async fn version_mismatch_names_every_version_the_host_speaks() {
    let server = TestServer::start().await;
    let mut ws = connect(&server, "dots").await;
    let hello = ClientMessage::Hello(Hello {
        versions: vec![1, 12],
        ticket: ticket("old", "dots"),
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    send(&mut ws, hello.to_bytes().unwrap()).await;
    let kick = kick_of(&mut ws).await;
    assert_eq!(kick.code, KickCode::VERSION_MISMATCH);
    assert!(
        kick.reason.contains("versions 2 to 11"),
        "the reason names the range, not only the newest: {}",
        kick.reason
    );
    server.stop().await;
}
