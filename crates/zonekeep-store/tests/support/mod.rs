//! Shared test support: the database harness (SQLite temp file or a fresh PostgreSQL schema) and
//! a reference model of the fencing rules.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

mod service;
pub use service::service_url;

use zonekeep_store::{
    PostgresOptions, PostgresStore, SqliteStore, Store, StoreError, WriteOutcome,
};

/// Environment variable naming the PostgreSQL server for tests.
pub const PG_ENV: &str = "ZONEKEEP_TEST_POSTGRES";

/// One test database that can be opened several times (two stores on the same data).
pub enum Db {
    /// A SQLite file in a temp dir removed on drop.
    Sqlite {
        /// Keeps the directory alive.
        _dir: tempfile::TempDir,
        /// The database file.
        path: PathBuf,
    },
    /// A schema of its own in the test PostgreSQL database, dropped by [`Db::cleanup`].
    Postgres {
        /// Connection string from the environment.
        url: String,
        /// This test's schema.
        schema: String,
    },
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Db {
    /// A fresh SQLite database file.
    pub fn sqlite() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zonekeep.db");
        Db::Sqlite { _dir: dir, path }
    }

    /// A fresh PostgreSQL schema for `test`, or `None` (reported as skipped) when the server is not
    /// configured; under `CI=true` a missing server fails the test.
    pub fn postgres(test: &str) -> Option<Db> {
        let url = service_url(PG_ENV, test)?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let schema = format!(
            "zk_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        Some(Db::Postgres { url, schema })
    }

    /// Opens a new store on this database (a new connection, or a new pool).
    pub async fn open(&self) -> Store {
        match self {
            Db::Sqlite { path, .. } => {
                Store::from_backend(SqliteStore::open(path).await.unwrap(), "sqlite".into())
            }
            Db::Postgres { url, schema } => {
                let options = PostgresOptions {
                    schema: Some(schema.clone()),
                    max_connections: 4,
                    ..PostgresOptions::default()
                };
                let store = PostgresStore::connect_with(url, options).await.unwrap();
                Store::from_backend(store, "postgres".into())
            }
        }
    }

    /// Runs `sql` directly on the test database, outside any store (e.g. to backdate a heartbeat
    /// instead of waiting for it to age).
    pub async fn execute(&self, sql: &str) {
        match self {
            Db::Sqlite { path, .. } => {
                let (path, sql) = (path.clone(), sql.to_owned());
                tokio::task::spawn_blocking(move || raw_sqlite(&path).execute_batch(&sql).unwrap())
                    .await
                    .unwrap();
            }
            Db::Postgres { url, schema } => {
                let client = RawPg::connect(url, schema).await;
                client.client.batch_execute(sql).await.unwrap();
            }
        }
    }

    /// Runs a query answering one integer directly on the test database.
    pub async fn query_i64(&self, sql: &str) -> i64 {
        match self {
            Db::Sqlite { path, .. } => {
                let (path, sql) = (path.clone(), sql.to_owned());
                tokio::task::spawn_blocking(move || {
                    raw_sqlite(&path).query_row(&sql, [], |r| r.get(0)).unwrap()
                })
                .await
                .unwrap()
            }
            Db::Postgres { url, schema } => {
                let client = RawPg::connect(url, schema).await;
                client.client.query_one(sql, &[]).await.unwrap().get(0)
            }
        }
    }

    /// The database's clock in milliseconds since the Unix epoch, read with the expression the
    /// store stamps heartbeats with.
    pub async fn now_ms(&self) -> i64 {
        let sql = match self {
            Db::Sqlite { .. } => {
                "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
            }
            Db::Postgres { .. } => "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint",
        };
        self.query_i64(sql).await
    }

    /// Removes what the test created (the temp dir goes on drop; the schema is dropped here).
    pub async fn cleanup(self) {
        if let Db::Postgres { url, schema } = &self {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap();
            let driver = tokio::spawn(connection);
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await
                .unwrap();
            drop(client);
            let _ = driver.await;
        }
    }
}

/// A connection of the test's own to its SQLite file.
fn raw_sqlite(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn
}

/// A connection of the test's own to its PostgreSQL schema; the driver task ends with it.
struct RawPg {
    client: tokio_postgres::Client,
    driver: tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
}

impl RawPg {
    async fn connect(url: &str, schema: &str) -> RawPg {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path TO \"{schema}\""))
            .await
            .unwrap();
        RawPg { client, driver }
    }
}

impl Drop for RawPg {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A name unique to this test run (process, counter, time), for ids that must not meet another
/// run's rows on a shared database.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Small deterministic generator (xorshift64*), so the randomized contract test replays exactly.
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator (0 is remapped: xorshift must not start at 0).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// Next value in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// What a correct store holds for one zone, independent of any backend code.
#[derive(Debug, Default, Clone)]
pub struct Model {
    /// Highest epoch claimed or written.
    pub fence: u64,
    /// (epoch, seq, bytes) of the stored save.
    pub save: Option<(u64, u64, Vec<u8>)>,
}

/// The model's verdict on a write, compared against the store's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The write replaces the save.
    Written,
    /// The write repeats the save.
    AlreadyDone,
    /// Refused: epoch below the fence.
    Fenced,
    /// Refused: same epoch, lower seq.
    Stale,
    /// Refused: same (epoch, seq), different bytes.
    Conflict,
}

impl Verdict {
    /// Classifies a store answer.
    pub fn of(result: &Result<WriteOutcome, StoreError>) -> Verdict {
        match result {
            Ok(WriteOutcome::Written) => Verdict::Written,
            Ok(WriteOutcome::AlreadyDone) => Verdict::AlreadyDone,
            Err(StoreError::Fenced { .. }) => Verdict::Fenced,
            Err(StoreError::Stale { .. }) => Verdict::Stale,
            Err(StoreError::Conflict { .. }) => Verdict::Conflict,
            Err(other) => panic!("unexpected store error: {other}"),
        }
    }
}

impl Model {
    /// A claim: the next epoch.
    pub fn claim(&mut self) -> u64 {
        self.fence += 1;
        self.fence
    }

    /// A write, as the contract says it must be judged; applies it when accepted.
    pub fn write(&mut self, epoch: u64, seq: u64, bytes: &[u8]) -> Verdict {
        if epoch < self.fence {
            return Verdict::Fenced;
        }
        if let Some((e, s, b)) = &self.save {
            if *e == epoch && seq < *s {
                return Verdict::Stale;
            }
            if *e == epoch && seq == *s {
                return if b == bytes {
                    Verdict::AlreadyDone
                } else {
                    Verdict::Conflict
                };
            }
        }
        self.fence = epoch;
        self.save = Some((epoch, seq, bytes.to_vec()));
        Verdict::Written
    }
}
