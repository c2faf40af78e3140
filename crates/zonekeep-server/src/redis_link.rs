//! One connection to a Redis server used as an index (the matchmaker's candidates, the
//! leaderboards' rankings): reconnecting by itself, every call bounded in time, and left alone
//! for [`BACK_OFF`] after a failure so a dead server costs nothing per request.
//!
//! Redis is never the truth here: each index is rebuilt from the store, and its owner falls back
//! to the store while a call fails. So a failure is an answer (`Err`) to act on, never a wait.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::RedisResult;
use tokio::time::Instant;

/// How long Redis is left alone after a failed call.
pub const BACK_OFF: Duration = Duration::from_secs(1);
/// The longest a Redis call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// A lazily connected, reconnecting Redis connection with a back-off after failures.
pub(crate) struct RedisLink {
    conn: ConnectionManager,
    down_until: Mutex<Option<Instant>>,
}

impl RedisLink {
    /// A link to `url` (`redis://host:port`), connected on first use.
    pub fn new(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("redis url: {e}"))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("redis: {e}"))?;
        Ok(Self {
            conn,
            down_until: Mutex::new(None),
        })
    }

    /// A handle on the connection for one call (cheap: the manager is shared).
    pub fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// False while backing off after a failure.
    pub fn usable(&self) -> bool {
        let down = self.down_until.lock().unwrap_or_else(|p| p.into_inner());
        down.is_none_or(|t| Instant::now() >= t)
    }

    /// Runs one call within [`CALL_TIMEOUT`]; a failure or a timeout starts the back-off. While
    /// backing off, answers an error at once without calling.
    pub async fn run<T>(
        &self,
        f: impl std::future::Future<Output = RedisResult<T>>,
    ) -> RedisResult<T> {
        if !self.usable() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "backing off after a failure",
            )));
        }
        let out = match tokio::time::timeout(CALL_TIMEOUT, f).await {
            Ok(r) => r,
            Err(_) => Err(redis::RedisError::from((redis::ErrorKind::Io, "timed out"))),
        };
        if out.is_err() {
            *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Instant::now() + BACK_OFF);
        }
        out
    }
}
