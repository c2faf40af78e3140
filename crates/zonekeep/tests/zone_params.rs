//! Zone params over the 64 KiB limit are the caller's mistake: refused with a 4xx naming the
//! limit, never a 503 that asks to retry, and nothing of the refused create is left behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_create_with_params_over_the_limit_is_a_client_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let server = Server::start(
        &store,
        &["--admin-token", ADMIN_TOKEN],
        &dir.path().join("host.log"),
    )
    .await;

    let pad = "x".repeat(zonekeep_store::MAX_PARAMS_LEN);
    let body = json!({"id": "big-params", "kind": "ledger-test", "params": {"pad": pad}});
    let (status, answer) = server
        .admin_request("POST", "/admin/zones", Some(&body))
        .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "bad_request", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&zonekeep_store::MAX_PARAMS_LEN.to_string()),
        "the refusal names the limit: {message}"
    );

    // The id is free: the same create with small params runs the zone.
    let body = json!({"id": "big-params", "kind": "ledger-test", "params": {"pad": "x"}});
    let (status, answer) = server
        .admin_request("POST", "/admin/zones", Some(&body))
        .await;
    assert_eq!(status, 201, "{answer}");
    server.terminate().await;
}
