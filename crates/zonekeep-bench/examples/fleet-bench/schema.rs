//! A PostgreSQL schema of the run's own: created before the hosts start, dropped at the end, so
//! the run's hosts, zones and saves meet nothing else in a shared database. Hosts reach it through
//! the connection option `search_path`.

use std::collections::BTreeMap;

use tokio_postgres::NoTls;

/// PostgreSQL's access counters for one table (`pg_stat_user_tables`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TableReads {
    /// Sequential scans.
    pub seq_scans: i64,
    /// Rows those scans read.
    pub seq_rows: i64,
    /// Index scans.
    pub idx_scans: i64,
    /// Rows index scans fetched.
    pub idx_rows: i64,
    /// Rows updated.
    pub updated: i64,
}

/// The run's schema in the database at `url`.
#[derive(Debug)]
pub struct Schema {
    url: String,
    name: String,
}

impl Schema {
    /// Creates schema `name` (lower-case letters, digits and `_` only) in the database at `url`.
    pub async fn create(url: &str, name: &str) -> Result<Schema, String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!("bad schema name {name:?}"));
        }
        let s = Schema {
            url: url.to_owned(),
            name: name.to_owned(),
        };
        s.execute(&format!("CREATE SCHEMA {name}")).await?;
        Ok(s)
    }

    /// The store URL hosts get: the database with this schema as their search path.
    pub fn store_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.url, self.name)
    }

    /// Drops the schema and everything in it.
    pub async fn drop_all(self) -> Result<(), String> {
        self.execute(&format!("DROP SCHEMA {} CASCADE", self.name))
            .await
    }

    /// Access counters of every table in the schema. PostgreSQL publishes a backend's counts
    /// lazily (about once a second while it is busy, within seconds once it idles), so over a
    /// window of tens of seconds they are close, not exact.
    pub async fn table_reads(&self) -> Result<BTreeMap<String, TableReads>, String> {
        let sql = "SELECT relname::text, seq_scan, seq_tup_read, COALESCE(idx_scan, 0), \
                   COALESCE(idx_tup_fetch, 0), n_tup_upd \
                   FROM pg_stat_user_tables WHERE schemaname = $1";
        self.with_client(|c| async move {
            let rows = c.query(sql, &[&self.name]).await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let t = TableReads {
                        seq_scans: r.get(1),
                        seq_rows: r.get(2),
                        idx_scans: r.get(3),
                        idx_rows: r.get(4),
                        updated: r.get(5),
                    };
                    (r.get::<_, String>(0), t)
                })
                .collect())
        })
        .await
    }

    async fn execute(&self, sql: &str) -> Result<(), String> {
        self.with_client(|c| async move { c.batch_execute(sql).await })
            .await
            .map_err(|e| format!("{sql}: {e}"))
    }

    /// Runs `f` on a connection of its own.
    async fn with_client<T, F, Fut>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce(tokio_postgres::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let (client, conn) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .map_err(|e| format!("PostgreSQL at the --store URL: {e}"))?;
        let driver = tokio::spawn(conn);
        let r = f(client).await.map_err(|e| e.to_string());
        // The connection task ends once the client is gone; its own error adds nothing here.
        let _ = driver.await;
        r
    }
}
