//! Driving `courier` zones (the dev kind that sends numbered zone messages when told to and
//! keeps, in its save, what it received) through the admin API, and reading their reports.

use base64::Engine as _;
use serde_json::{json, Value};

use super::Server;

/// Topic of an operator's command to a courier (a JSON command).
pub const TOPIC_COMMAND: u16 = 1;
/// Topic of a courier's numbered messages.
pub const TOPIC_NUMBERED: u16 = 2;

/// Posts an operator message to `zone` through `host`: the status and the answer.
pub async fn post_message(host: &Server, zone: &str, topic: u16, payload: &[u8]) -> (u16, Value) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(payload);
    host.admin_request(
        "POST",
        &format!("/admin/zones/{zone}/messages"),
        Some(&json!({"topic": topic, "payload_b64": b64})),
    )
    .await
}

/// Tells courier `zone` (through `host`) to run `command`.
pub async fn command(host: &Server, zone: &str, command: Value) {
    let (status, body) =
        post_message(host, zone, TOPIC_COMMAND, command.to_string().as_bytes()).await;
    assert_eq!(status, 202, "command to {zone}: {body}");
}

/// The runs of numbers `report` holds from `source` on `topic`: `[(first, last), ...]`.
pub fn runs(report: &Value, source: &str, topic: u16) -> Vec<(u64, u64)> {
    report["received"][format!("{source}/{topic}")]["runs"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}
