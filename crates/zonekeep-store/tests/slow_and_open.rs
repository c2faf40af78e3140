//! `SlowStore` really delays writes (directory changes, modules, characters and calls included), and `open_store`
//! understands its specs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use zonekeep_store::{
    open_store, FactRecord, HostRegistration, SlowStore, SqliteStore, Store, StoreError,
    WriteOutcome, SQLITE_FILE_NAME,
};

// Paused tokio time: the delay is measured on the runtime's clock, deterministically, without
// waiting for it in wall-clock time.
#[tokio::test(start_paused = true)]
async fn slow_store_delays_every_write_and_still_stores_it() {
    let inner = SqliteStore::open(":memory:").await.unwrap();
    let delay = Duration::from_secs(1);
    let store = SlowStore::wrap(Store::from_backend(inner, "sqlite".into()), delay);
    assert!(store.description.contains("slowed"));

    let start = tokio::time::Instant::now();
    let epoch = store.saves.claim("z").await.unwrap().epoch;
    assert!(start.elapsed() >= delay);

    let start = tokio::time::Instant::now();
    assert_eq!(
        store.saves.write("z", epoch, 1, "k", b"s").await,
        Ok(WriteOutcome::Written)
    );
    assert!(start.elapsed() >= delay);

    let start = tokio::time::Instant::now();
    let fact = FactRecord {
        key: "k1".into(),
        zone_id: "z".into(),
        kind: "kill".into(),
        principal: Some("p".into()),
        payload: json!({"add": {"score": 50}}),
        epoch: None,
    };
    assert!(store.facts.record(&fact).await.unwrap().first);
    assert!(start.elapsed() >= delay);

    // Directory changes are writes too.
    let host = HostRegistration {
        host_id: "h".into(),
        incarnation: "h-1".into(),
        url: "ws://h:7400/ws".into(),
        capacity: 1,
        region: "local".into(),
    };
    let start = tokio::time::Instant::now();
    store
        .directory
        .register_host(&host, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    store
        .directory
        .heartbeat("h", "h-1", true, zonekeep_store::Timing::default())
        .await
        .unwrap();
    assert!(start.elapsed() >= delay);

    // So are storing and deploying a module; reading them back is not delayed.
    let start = tokio::time::Instant::now();
    let sha = store.modules.put_module(b"\0asm").await.unwrap();
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    assert_eq!(
        store
            .modules
            .deploy_module("tag", &sha, zonekeep_store::DeployCause::Push)
            .await
            .unwrap()
            .version,
        1
    );
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    assert_eq!(
        store.modules.get_module(&sha).await.unwrap().as_deref(),
        Some(&b"\0asm"[..])
    );
    assert_eq!(store.modules.module_kinds().await.unwrap().len(), 1);
    assert!(start.elapsed() < delay);

    // Acquiring, committing and releasing a character are writes; loading it is not.
    let start = tokio::time::Instant::now();
    store
        .characters
        .acquire_character("p", "z", epoch)
        .await
        .unwrap();
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    assert_eq!(
        store
            .characters
            .commit_character("p", "z", epoch, b"gold")
            .await,
        Ok(1)
    );
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    assert_eq!(
        store
            .characters
            .release_character("p", "z", epoch, None)
            .await,
        Ok(1)
    );
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    let character = store.characters.load_character("p").await.unwrap().unwrap();
    assert_eq!(
        (character.data.as_slice(), character.holder),
        (&b"gold"[..], None)
    );
    assert!(start.elapsed() < delay);

    // Beginning, finishing and sweeping calls are writes; reading and counting them are not.
    let call = zonekeep_store::CallRecord {
        zone_id: "z".into(),
        key: "pay-1".into(),
        epoch: Some(epoch),
        function: "pay".into(),
        args: "{}".into(),
    };
    let start = tokio::time::Instant::now();
    assert_eq!(
        store.calls.begin_call(&call).await,
        Ok(zonekeep_store::CallBegin::Started)
    );
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    let answer = zonekeep_store::CallAnswer::Ok("true".into());
    assert_eq!(
        store
            .calls
            .finish_call("z", "pay-1", Some(epoch), &answer)
            .await,
        Ok(zonekeep_store::CallFinish::Recorded)
    );
    assert!(start.elapsed() >= delay);
    let start = tokio::time::Instant::now();
    assert_eq!(
        store
            .calls
            .get_call("z", "pay-1")
            .await
            .unwrap()
            .unwrap()
            .answer,
        Some(answer)
    );
    assert_eq!(store.calls.count_calls().await, Ok(1));
    assert!(start.elapsed() < delay);
    let start = tokio::time::Instant::now();
    assert_eq!(
        store
            .calls
            .sweep_calls(zonekeep_store::DEFAULT_CALL_RETENTION)
            .await,
        Ok(0)
    );
    assert!(start.elapsed() >= delay);

    // The writes went through to the real store.
    let hosts = store.directory.hosts().await.unwrap();
    assert_eq!(
        hosts
            .iter()
            .map(|h| (h.host_id.as_str(), h.draining))
            .collect::<Vec<_>>(),
        [("h", true)]
    );
    assert_eq!(store.saves.load("z").await.unwrap().unwrap().bytes, b"s");
    assert_eq!(
        store.facts.totals("p").await.unwrap().get("score"),
        Some(&50)
    );
    assert_eq!(store.facts.count().await.unwrap(), 1);
}

#[tokio::test]
async fn open_store_sqlite_creates_the_data_dir_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("nested").join("data");
    let store = open_store("sqlite", &data_dir).await.unwrap();
    assert!(data_dir.join(SQLITE_FILE_NAME).exists());
    assert!(store.description.starts_with("sqlite:"));
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, 1);
    drop(store);

    // The empty spec is the default, and the file's data is still there.
    let again = open_store("", &data_dir).await.unwrap();
    assert_eq!(again.saves.claim("z").await.unwrap().epoch, 2);
}

#[tokio::test]
async fn open_store_refuses_unknown_specs_without_echoing_them() {
    let dir = tempfile::tempdir().unwrap();
    let err = open_store("mysql://root:hunter2@db/x", dir.path())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidSpec(_)));
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn open_store_postgres_url() {
    let Some(url) = support::service_url(support::PG_ENV, "open_store_postgres_url") else {
        return;
    };
    assert!(
        url.starts_with("postgres"),
        "{} must be a postgres:// URL",
        support::PG_ENV
    );
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&url, dir.path()).await.unwrap();
    assert!(store.description.starts_with("postgres://"));
    // Uses the public schema: touch only a key unique to this run, read-only otherwise.
    assert!(store
        .facts
        .get("zonekeep-open-store-probe-never-written")
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn postgres_errors_never_carry_the_password() {
    // Nothing listens on port 1, so connecting fails; the error must not echo the password.
    let err = zonekeep_store::PostgresStore::connect_with(
        "postgres://zk:sup3rsecret@127.0.0.1:1/none",
        zonekeep_store::PostgresOptions {
            connect_timeout: Duration::from_secs(2),
            wait_timeout: Duration::from_secs(2),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(!format!("{err} {err:?}").contains("sup3rsecret"), "{err}");
}
