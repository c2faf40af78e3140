//! `POST /admin/zones/{id}/messages`: the operator's input to a zone, delivered as a message
//! from `MessageFrom::Admin`. Any host of a fleet takes it: over NATS the message goes to
//! whichever host runs the zone.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use zonekeep_bus::{BusError, Origin, OutMessage, Target, MAX_MESSAGE_PAYLOAD};

use crate::host::{json_error, valid_zone_id, Shared};

/// The most bytes the request body may have: a full payload in base64 and the JSON around it.
pub(crate) const MAX_BODY: usize = MAX_MESSAGE_PAYLOAD * 4 / 3 + 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    topic: u16,
    payload_b64: String,
}

pub(crate) async fn post_message(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if body.len() > MAX_BODY {
        return json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the body is over {MAX_BODY} bytes"),
        );
    }
    if !valid_zone_id(&id) {
        return json_error(StatusCode::BAD_REQUEST, "bad_request", "invalid zone id");
    }
    let b: MessageBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    };
    if b.topic == zonekeep_core::TIER_TOPIC {
        return json_error(
            StatusCode::BAD_REQUEST,
            "reserved_topic",
            "topic 65535 is reserved for tier changes",
        );
    }
    let payload = match base64::engine::general_purpose::STANDARD.decode(b.payload_b64.as_bytes()) {
        Ok(p) => p,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("payload_b64: {e}"),
            )
        }
    };
    if payload.len() > MAX_MESSAGE_PAYLOAD {
        return json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the payload is over {MAX_MESSAGE_PAYLOAD} bytes"),
        );
    }
    let Some(bus) = shared.sim.bus.get() else {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the host's bus is not running yet",
        );
    };
    // A zone that does not run here must be one the fleet knows: a message to a dormant zone
    // wakes it, but one to a zone never made would only wait.
    if shared.registry.get(&id).is_none() {
        if let Some(fleet) = shared.fleet() {
            let located = crate::fleet::query(
                &fleet.metrics,
                "locate",
                fleet.directory.locate(&id, fleet.timing),
            )
            .await;
            match located {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return json_error(
                        StatusCode::NOT_FOUND,
                        "not_found",
                        format!("no zone {id} in the fleet"),
                    )
                }
                Err(e) => {
                    return json_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "unavailable",
                        format!("fleet directory: {e}"),
                    )
                }
            }
        }
    }
    let id_ = bus.next_id("admin");
    let seq = id_.seq;
    let msg = OutMessage {
        id: id_,
        origin: Origin::Admin,
        from: bus.host().to_string(),
        to: Target::Zone(id.clone()),
        topic: b.topic,
        payload,
        via_parent: false,
    };
    match bus.send_now(msg).await {
        Ok(()) => (StatusCode::ACCEPTED, Json(json!({"zone": id, "seq": seq}))).into_response(),
        Err(e) => {
            let (status, code) = match &e {
                BusError::UnknownZone(_) => (StatusCode::NOT_FOUND, "not_found"),
                BusError::Invalid(_) => (StatusCode::BAD_REQUEST, "bad_request"),
                BusError::NoBus => (StatusCode::SERVICE_UNAVAILABLE, "no_bus"),
                BusError::ReceiverFull(_) | BusError::QueueFull => {
                    (StatusCode::SERVICE_UNAVAILABLE, "busy")
                }
                _ => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            };
            json_error(status, code, e.to_string())
        }
    }
}
