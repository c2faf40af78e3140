//! Deploying a module of a higher state version to a real `zonekeep serve`: the running zone's
//! state is carried into the new module through its migration, and the save records the new
//! version and module; a deploy whose migration fails is refused, saying why, and the zone runs
//! on, on the module and with the state it had. The modules are written in the text format
//! (`zonekeep-wasm/tests/support/versioned.rs`): their state is their create params.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
#[path = "../../zonekeep-wasm/tests/support/versioned.rs"]
mod versioned;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::push::push_module;
use support::{Server, StoreSpec, ADMIN_TOKEN};
use versioned::{versioned, Migration};
use zonekeep_core::Snapshot;

/// The zone's create params, as the module keeps them: its whole state at version 1.
const STATE_V1: &str = r#"{"gold":41}"#;

async fn push(server: &Server, module: &[u8]) -> (u16, Value) {
    push_module(&server.addr, "keep", "", module, None).await
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The last save of `zone` in the store of the SQLite host in `dir`: its (epoch, sequence
/// number), decoded.
async fn last_save(dir: &Path, zone: &str) -> Option<((u64, u64), Snapshot)> {
    let store = zonekeep_store::open_store("sqlite", dir).await.unwrap();
    let rec = store.saves.load(zone).await.unwrap()?;
    Some(((rec.epoch, rec.seq), Snapshot::decode(&rec.bytes).unwrap()))
}

/// Waits until the last save of `zone` satisfies `done`; that save. Only a guard against a hang
/// bounds the wait.
async fn save_where(
    dir: &Path,
    zone: &str,
    what: &str,
    done: impl Fn((u64, u64), &Snapshot) -> bool,
) -> ((u64, u64), Snapshot) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((at, snap)) = last_save(dir, zone).await {
            if done(at, &snap) {
                return (at, snap);
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no save of {zone} {what}: last {:?}",
            last_save(dir, zone).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_of_a_higher_state_version_migrates_the_zone_and_a_failing_migration_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().to_path_buf());
    let server = Server::start(
        &store,
        &[
            "--admin-token",
            ADMIN_TOKEN,
            "--module",
            "keep",
            "--save-every",
            "1h",
        ],
        &dir.path().join("host.log"),
    )
    .await;

    // v1: no state version declared (version 1).
    let v1 = versioned(None, Migration::Silent);
    let (status, out) = push(&server, &v1).await;
    assert_eq!(status, 200, "{out}");
    let created = server
        .post_admin(
            "/admin/zones",
            &json!({"id": "k-1", "kind": "keep", "params": {"gold": 41}}),
        )
        .await;
    assert_eq!(created["id"], "k-1", "{created}");

    // v2: state version 2, migrating version 1's saves. The deploy carries the zone over.
    let v2 = versioned(
        Some(2),
        Migration::Prefix {
            from: 1,
            prefix: "v2:",
        },
    );
    let (status, out) = push(&server, &v2).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["rolled_back"], false, "{out}");
    let zone = &out["upgrade"]["zones"][0];
    assert_eq!(zone["zone"], "k-1", "{out}");
    assert_eq!(zone["upgraded"], true, "{out}");

    // The upgrade point is saved at once: the migrated state, under version 2, by v2.
    let v2_build = format!("module sha256:{}", sha256_hex(&v2));
    let (upgraded_at, upgraded) = save_where(dir.path(), "k-1", "under version 2", |_, s| {
        s.state_version == 2
    })
    .await;
    assert_eq!(upgraded.build, v2_build);
    assert_eq!(
        String::from_utf8_lossy(&upgraded.zone),
        format!("v2:{STATE_V1}"),
        "the zone's state is the migrated one"
    );

    // v3: state version 3, whose migration from 2 fails. The deploy is refused, saying why, and
    // rolled back: the kind runs v2 again.
    let v3 = versioned(
        Some(3),
        Migration::Fail("v3 cannot read the gold of version 2"),
    );
    let (status, out) = push(&server, &v3).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["rolled_back"], true, "{out}");
    let zone = &out["upgrade"]["zones"][0];
    assert_eq!(zone["upgraded"], false, "{out}");
    let refused = zone["refused"].as_str().unwrap();
    assert!(
        refused.contains("migrating the save from state version 2 to 3 failed")
            && refused.contains("v3 cannot read the gold of version 2"),
        "the answer says why: {refused}"
    );
    let modules = server.admin("/admin/modules").await;
    assert_eq!(
        modules["kinds"][0]["sha256"],
        json!(sha256_hex(&v2)),
        "{modules}"
    );

    // The zone runs on, on v2 with its state: stopping it saves what it holds.
    let detail = server.admin("/admin/zones/k-1").await;
    assert_eq!(detail["running"], true, "{detail}");
    let stopped = server.post_admin("/admin/zones/k-1/stop", &json!({})).await;
    assert_eq!(stopped["stopped"], "k-1", "{stopped}");
    // Saves come only from the upgrade and the stop here (the periodic one is an hour away).
    let (_, last) = save_where(dir.path(), "k-1", "after the stop", |at, _| {
        at > upgraded_at
    })
    .await;
    assert_eq!(last.state_version, 2);
    assert_eq!(last.build, v2_build);
    assert_eq!(
        String::from_utf8_lossy(&last.zone),
        format!("v2:{STATE_V1}")
    );

    // Started again, v2 reads its own save as it is: no fresh start.
    let created = server
        .post_admin(
            "/admin/zones",
            &json!({"id": "k-1", "kind": "keep", "params": {"gold": 41}}),
        )
        .await;
    assert_eq!(created["id"], "k-1", "{created}");
    let detail = server.admin("/admin/zones/k-1").await;
    assert_eq!(detail["running"], true, "{detail}");
    assert!(detail["fresh_start"].is_null(), "{detail}");
    server.terminate().await;
}
