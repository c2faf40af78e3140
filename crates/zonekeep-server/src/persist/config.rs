//! Persistence settings (`--store`, `--data-dir`, `--save-every`,
//! `--fact-sink`, `--call-webhook`, `--store-delay`) and opening the store and sinks they name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_store::{open_store, SlowStore, Store, StoreError};

use super::call_sinks::CallSinks;
use super::calls::CallWorkerConfig;
use super::facts::FactWorkerConfig;
use super::ledger::LedgerSink;
use super::metrics::PersistMetrics;
use super::sink::FactSink;
use super::storage::StorageConfig;
use super::webhook::{WebhookError, WebhookSink};

/// Why persistence could not be configured or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A duration that does not parse (expected e.g. `5s`, `500ms`, `2m`).
    #[error("invalid duration {0:?} (expected e.g. 5s, 500ms, 2m)")]
    InvalidDuration(String),
    /// A `--fact-sink` that is neither `ledger` nor `webhook:<url>`.
    #[error("invalid fact sink {0:?} (expected \"ledger\" or \"webhook:http://...\")")]
    InvalidSink(String),
    /// The webhook URL was refused.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The store could not be opened.
    #[error("opening the store: {0}")]
    Store(#[from] StoreError),
}

/// Where facts are committed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FactSinkSpec {
    /// The store's built-in ledger (default).
    #[default]
    Ledger,
    /// POST to this `http://` URL.
    Webhook(String),
}

impl FromStr for FactSinkSpec {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("ledger") {
            return Ok(FactSinkSpec::Ledger);
        }
        match s.strip_prefix("webhook:") {
            Some(url) if !url.is_empty() => Ok(FactSinkSpec::Webhook(url.to_owned())),
            _ => Err(ConfigError::InvalidSink(s.chars().take(64).collect())),
        }
    }
}

/// Parses `5s`, `500ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    let t = s.trim();
    let bad = || ConfigError::InvalidDuration(t.chars().take(32).collect());
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let ms_per = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    n.checked_mul(ms_per)
        .map(Duration::from_millis)
        .ok_or_else(bad)
}

/// Everything persistence is configured with. See each field for its default.
#[derive(Debug, Clone, PartialEq)]
pub struct PersistConfig {
    /// `sqlite` or a `postgres://` URL. Default `sqlite`.
    pub store: String,
    /// Where the SQLite file lives. Default `./data`.
    pub data_dir: PathBuf,
    /// Periodic save interval. Default 5 s.
    pub save_every: Duration,
    /// Per-kind overrides of `save_every`.
    pub save_every_by_kind: BTreeMap<String, Duration>,
    /// How long a lasting world's newest state may wait unsaved (its saves failing or hung)
    /// before the world halts. Default `None`: three of the kind's save intervals.
    pub lasting_halt_after: Option<Duration>,
    /// Where facts go. Default the ledger.
    pub fact_sink: FactSinkSpec,
    /// Dev/bench: delay every store write by this much (wraps the store in [`SlowStore`]).
    pub store_delay: Option<Duration>,
    /// Per-attempt timeout of the webhook sink. Default 5 s.
    pub webhook_timeout: Duration,
    /// Storage worker settings.
    pub storage: StorageConfig,
    /// Fact worker settings.
    pub facts: FactWorkerConfig,
    /// Where durable calls no in-process handler takes are POSTed (an `http://` URL). Default
    /// none: such calls are answered [`NO_HANDLER`](super::NO_HANDLER).
    pub call_webhook: Option<String>,
    /// Call worker settings (among them how long answered calls are kept: 7 days).
    pub calls: CallWorkerConfig,
}

impl Default for PersistConfig {
    fn default() -> Self {
        PersistConfig {
            store: "sqlite".into(),
            data_dir: PathBuf::from("./data"),
            save_every: Duration::from_secs(5),
            save_every_by_kind: BTreeMap::new(),
            lasting_halt_after: None,
            fact_sink: FactSinkSpec::Ledger,
            store_delay: None,
            webhook_timeout: Duration::from_secs(5),
            storage: StorageConfig::default(),
            facts: FactWorkerConfig::default(),
            call_webhook: None,
            calls: CallWorkerConfig::default(),
        }
    }
}

impl PersistConfig {
    /// The periodic save interval for zones of `kind`.
    pub fn save_every_for(&self, kind: &str) -> Duration {
        self.save_every_by_kind
            .get(kind)
            .copied()
            .unwrap_or(self.save_every)
    }

    /// How long a lasting world of `kind` may go unsaved before it halts: the configured bound,
    /// or three of the kind's save intervals (one failed save is retried and is no reason to
    /// stop the world; three in a row are).
    pub fn lasting_halt_after_for(&self, kind: &str) -> Duration {
        self.lasting_halt_after
            .unwrap_or_else(|| self.save_every_for(kind).saturating_mul(3))
    }
}

/// Opens the configured store (slowed if `store_delay` is set; migrations
/// applied) and builds the configured fact sink and call sinks.
pub async fn open(
    config: &PersistConfig,
    metrics: &PersistMetrics,
) -> Result<(Store, Arc<dyn FactSink>, CallSinks), ConfigError> {
    // Validate the sinks first: a bad URL should not leave a half-opened store behind.
    let webhook = match &config.fact_sink {
        FactSinkSpec::Webhook(url) => Some(WebhookSink::new(url, config.webhook_timeout)?),
        FactSinkSpec::Ledger => None,
    };
    let call_webhook = config
        .call_webhook
        .as_deref()
        .map(|url| WebhookSink::new(url, config.webhook_timeout))
        .transpose()?;
    let mut store = open_store(&config.store, &config.data_dir).await?;
    if let Some(delay) = config.store_delay.filter(|d| !d.is_zero()) {
        store = SlowStore::wrap(store, delay);
    }
    let sink: Arc<dyn FactSink> = match webhook {
        Some(w) => Arc::new(w),
        None => Arc::new(LedgerSink::new(Arc::clone(&store.facts), metrics.clone())),
    };
    Ok((store, sink, CallSinks::new(call_webhook)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        for bad in ["", "s", "5x", "-1s", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sinks_parse() {
        assert_eq!(
            "ledger".parse::<FactSinkSpec>().unwrap(),
            FactSinkSpec::Ledger
        );
        assert_eq!(
            "webhook:http://127.0.0.1:9/f"
                .parse::<FactSinkSpec>()
                .unwrap(),
            FactSinkSpec::Webhook("http://127.0.0.1:9/f".into())
        );
        assert!("webhook:".parse::<FactSinkSpec>().is_err());
        assert!("kafka".parse::<FactSinkSpec>().is_err());
    }

    #[test]
    fn per_kind_save_interval() {
        let mut c = PersistConfig::default();
        c.save_every_by_kind
            .insert("arena".into(), Duration::from_secs(1));
        assert_eq!(c.save_every_for("arena"), Duration::from_secs(1));
        assert_eq!(c.save_every_for("other"), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn opens_sqlite_slowed_with_a_ledger_sink() {
        let dir = tempfile::tempdir().unwrap();
        let config = PersistConfig {
            data_dir: dir.path().to_path_buf(),
            store_delay: Some(Duration::from_millis(1)),
            ..PersistConfig::default()
        };
        let (store, sink, _calls) = open(&config, &PersistMetrics::new()).await.unwrap();
        assert!(
            store.description.contains("slowed"),
            "{}",
            store.description
        );
        assert_eq!(sink.describe(), "ledger");
        assert!(dir.path().join(zonekeep_store::SQLITE_FILE_NAME).exists());

        let bad = PersistConfig {
            fact_sink: FactSinkSpec::Webhook("https://example.invalid/x".into()),
            ..config
        };
        assert!(matches!(
            open(&bad, &PersistMetrics::new()).await.err(),
            Some(ConfigError::Webhook(WebhookError::UnsupportedScheme(_)))
        ));
    }
}
