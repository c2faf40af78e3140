//! Opening the fleet backend: the options a deployment tunes, the per-session settings every
//! pooled connection starts with (lock and idle-transaction timeouts, the schema), the pool, and
//! the migrations applied before the store is handed out. The connection string may hold a
//! password, so nothing here prints or returns it: parse errors are withheld and the store names
//! its database by a password-free description.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::{Config, NoTls};

use super::{migrations, PgErr, PostgresStore};
use crate::error::{Result, StoreError};

/// Settings for [`PostgresStore::connect_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Most connections the pool opens. Storage workers are few; the default (8) leaves room.
    pub max_connections: usize,
    /// Keep every table in this schema (created if missing) by setting each connection's
    /// `search_path`. Lets several deployments or test runs share one database. Must be a plain
    /// lower-case identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes).
    pub schema: Option<String>,
    /// How long opening one connection may take.
    pub connect_timeout: Duration,
    /// How long an operation waits for a free pooled connection before failing (retryably), so a
    /// database outage surfaces as errors instead of hanging storage workers forever.
    pub wait_timeout: Duration,
    /// The database ends a session that sits this long inside a transaction without sending
    /// anything (`idle_in_transaction_session_timeout`), releasing its row locks: a host that was
    /// paused, or cut off, mid-transaction must not hold a zone's fence row and stall every other
    /// host's claim of that zone. Far above what any of our transactions take between statements.
    pub idle_in_transaction_timeout: Duration,
    /// Longest a statement waits for a row lock (`lock_timeout`) before failing retryably.
    pub lock_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 8,
            schema: None,
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Duration::from_secs(30),
            idle_in_transaction_timeout: Duration::from_secs(3),
            lock_timeout: Duration::from_secs(3),
        }
    }
}

/// Accepts only identifiers that need no escaping beyond double quotes.
fn valid_schema_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 63
}

impl PostgresStore {
    /// Connects to `url` (a `postgres://` URL or a `key=value` connection string) with default
    /// [`PostgresOptions`], and applies pending migrations.
    pub async fn connect(url: &str) -> Result<PostgresStore> {
        PostgresStore::connect_with(url, PostgresOptions::default()).await
    }

    /// Like [`PostgresStore::connect`] with explicit options.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<PostgresStore> {
        // The driver's parse errors can quote the offending text, which may hold the password.
        let mut config: Config = url.parse().map_err(|_| {
            StoreError::InvalidSpec("unparsable PostgreSQL connection string (withheld)".into())
        })?;
        let err = PgErr {
            password: config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        };
        let mut settings = format!(
            "-c idle_in_transaction_session_timeout={} -c lock_timeout={}",
            options.idle_in_transaction_timeout.as_millis(),
            options.lock_timeout.as_millis()
        );
        if let Some(schema) = &options.schema {
            if !valid_schema_name(schema) {
                return Err(StoreError::InvalidArgument(format!(
                    "schema name {schema:?} must match [a-z_][a-z0-9_]* (at most 63 bytes)"
                )));
            }
            settings.push_str(&format!(" -c search_path={schema}"));
        }
        let combined = match config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} {settings}"),
            _ => settings,
        };
        config.options(&combined);
        config.connect_timeout(options.connect_timeout);
        let description = describe(&config, options.schema.as_deref());

        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Backend(format!("postgres pool setup: {e}")))?;
        let store = PostgresStore {
            pool,
            err,
            description,
        };
        let mut client = store.client().await?;
        migrations::migrate(&mut client, options.schema.as_deref(), &store.err).await?;
        Ok(store)
    }

    /// A printable, password-free name of the database, e.g. `postgres://postgres@127.0.0.1:5432/test`.
    pub fn description(&self) -> &str {
        &self.description
    }
}

fn describe(config: &Config, schema: Option<&str>) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or("");
    let mut out = format!("postgres://{user}@{host}:{port}/{db}");
    if let Some(schema) = schema {
        out.push_str(&format!(" (schema {schema})"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(valid_schema_name("zk_test_1"));
        assert!(valid_schema_name("_x"));
        assert!(!valid_schema_name(""));
        assert!(!valid_schema_name("1abc"));
        assert!(!valid_schema_name("a\"; DROP TABLE x; --"));
        assert!(!valid_schema_name("Upper"));
        assert!(!valid_schema_name(&"a".repeat(64)));
    }

    #[test]
    fn description_has_no_password() {
        let config: Config = "postgres://alice:s3cret@db.example:6543/game"
            .parse()
            .unwrap_or_else(|_| Config::new());
        let d = describe(&config, Some("zk"));
        assert_eq!(d, "postgres://alice@db.example:6543/game (schema zk)");
        assert!(!d.contains("s3cret"));
    }

    #[tokio::test]
    async fn unparsable_url_error_withholds_the_text() {
        let err = PostgresStore::connect("postgres://u:hunter2@h:notaport/db")
            .await
            .err();
        let text = format!("{err:?}");
        assert!(matches!(err, Some(StoreError::InvalidSpec(_))), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
