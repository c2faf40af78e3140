//! The store behind a host (a SQLite file or a PostgreSQL schema of a test's own): the flags
//! selecting it, and what a test reads back from it: saves, ledger rows and totals, the facts
//! in flight in a save, and the checks a ledger must pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;
use zonekeep_core::Snapshot;

/// Which store the server runs on.
#[derive(Debug, Clone)]
pub enum StoreSpec {
    Sqlite(PathBuf),
    Postgres(String),
}

impl StoreSpec {
    /// A PostgreSQL store in a schema of its own (created here), so this test's hosts, zones and
    /// facts meet no other run's in the shared database.
    pub async fn postgres_isolated(url: &str, run: &str) -> StoreSpec {
        let schema: String = format!("t_{run}")
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(63)
            .collect();
        let client = pg(url).await;
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await
            .unwrap();
        let sep = if url.contains('?') { '&' } else { '?' };
        StoreSpec::Postgres(format!("{url}{sep}options=-csearch_path%3D{schema}"))
    }

    /// The `serve` flags selecting this store.
    pub fn args(&self) -> Vec<String> {
        match self {
            StoreSpec::Sqlite(dir) => vec![
                "--store".into(),
                "sqlite".into(),
                "--data-dir".into(),
                dir.display().to_string(),
            ],
            StoreSpec::Postgres(url) => vec!["--store".into(), url.clone()],
        }
    }

    fn spec_and_dir(&self) -> (String, PathBuf) {
        match self {
            StoreSpec::Sqlite(dir) => ("sqlite".into(), dir.clone()),
            StoreSpec::Postgres(url) => (url.clone(), std::env::temp_dir()),
        }
    }

    /// The zone's last save, decoded: (envelope, ledger-test state JSON).
    pub async fn last_save(&self, zone: &str) -> Option<(Snapshot, Value)> {
        let (spec, dir) = self.spec_and_dir();
        let store = zonekeep_store::open_store(&spec, &dir).await.unwrap();
        let rec = store.saves.load(zone).await.unwrap()?;
        let snap = Snapshot::decode(&rec.bytes).unwrap();
        let state: Value = serde_json::from_slice(&snap.zone).unwrap();
        Some((snap, state))
    }

    /// Every ledger row of `zone`: (key, principal, payload).
    pub async fn facts(&self, zone: &str) -> Vec<(String, String, Value)> {
        match self {
            StoreSpec::Sqlite(dir) => {
                let db =
                    rusqlite::Connection::open(dir.join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
                let mut q = db
                    .prepare("SELECT key, principal, payload FROM facts WHERE zone_id = ?1")
                    .unwrap();
                let rows = q
                    .query_map([zone], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    })
                    .unwrap()
                    .map(|r| {
                        let (k, p, v) = r.unwrap();
                        (k, p, serde_json::from_str(&v).unwrap())
                    })
                    .collect();
                rows
            }
            StoreSpec::Postgres(url) => {
                let client = pg(url).await;
                client
                    .query(
                        "SELECT key, principal, payload::text FROM facts WHERE zone_id = $1",
                        &[&zone],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let v: String = r.get(2);
                        (r.get(0), r.get(1), serde_json::from_str(&v).unwrap())
                    })
                    .collect()
            }
        }
    }

    /// The ledger's running total `name` of `principal`.
    pub async fn total(&self, principal: &str, name: &str) -> i64 {
        let (spec, dir) = self.spec_and_dir();
        let store = zonekeep_store::open_store(&spec, &dir).await.unwrap();
        store
            .facts
            .totals(principal)
            .await
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// `PRAGMA integrity_check` for SQLite (PostgreSQL has no equivalent to check here).
    pub fn integrity(&self) -> Option<String> {
        let StoreSpec::Sqlite(dir) = self else {
            return None;
        };
        let db = rusqlite::Connection::open(dir.join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
        Some(
            db.query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap(),
        )
    }
}

async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Keys and numbers of the facts in flight in a save.
pub fn in_flight(snap: &Snapshot) -> BTreeMap<String, (String, u64)> {
    snap.facts
        .iter()
        .map(|f| {
            (
                f.key.as_str().to_owned(),
                (
                    f.principal.clone().unwrap_or_default(),
                    f.payload["seq"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Checks the ledger for `zone`: every `must` key present, no number of a
/// principal recorded twice, every number one that was sent, and each
/// principal's `score` total equal to its rows. Returns rows per principal.
pub async fn check_ledger(
    store: &StoreSpec,
    zone: &str,
    must: &BTreeSet<String>,
    sent: &BTreeMap<String, BTreeSet<u64>>,
) -> BTreeMap<String, usize> {
    let rows = store.facts(zone).await;
    let keys: BTreeSet<&str> = rows.iter().map(|(k, _, _)| k.as_str()).collect();
    for k in must {
        assert!(
            keys.contains(k.as_str()),
            "fact {k} is missing from the ledger"
        );
    }
    let mut seen: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for (key, principal, payload) in &rows {
        let n = payload["seq"].as_u64().unwrap();
        assert!(
            seen.entry(principal.clone()).or_default().insert(n),
            "input {n} of {principal} recorded twice (second key {key})"
        );
        assert!(
            sent.get(principal).is_some_and(|s| s.contains(&n)),
            "ledger holds input {n} of {principal} that was never sent"
        );
    }
    let mut out = BTreeMap::new();
    for (principal, ns) in &seen {
        let total = store.total(principal, "score").await;
        assert_eq!(
            total,
            i64::try_from(ns.len()).unwrap(),
            "{principal}: score total equals its facts (none applied twice)"
        );
        out.insert(principal.clone(), ns.len());
    }
    out
}
