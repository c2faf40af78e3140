//! The built-in sink: the store's exactly-once fact ledger.

use std::sync::Arc;

use async_trait::async_trait;
use zonekeep_core::FactOutcome;
use zonekeep_store::{FactLedger, FactRecord, StoreError};

use super::metrics::PersistMetrics;
use super::sink::{FactSink, OutboundFact, SinkError};

/// Records facts in the [`FactLedger`] (SQLite or PostgreSQL tables a game
/// can read, e.g. per-principal totals). A repeated key returns the first
/// recording's result, so re-sends settle with the same outcome.
pub struct LedgerSink {
    ledger: Arc<dyn FactLedger>,
    metrics: PersistMetrics,
}

impl std::fmt::Debug for LedgerSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LedgerSink")
    }
}

impl LedgerSink {
    /// A sink writing to `ledger`; store errors are counted in `metrics`.
    pub fn new(ledger: Arc<dyn FactLedger>, metrics: PersistMetrics) -> Self {
        LedgerSink { ledger, metrics }
    }
}

#[async_trait]
impl FactSink for LedgerSink {
    async fn commit(&self, out: &OutboundFact) -> Result<FactOutcome, SinkError> {
        let record = FactRecord {
            key: out.fact.key.as_str().to_owned(),
            zone_id: out.zone_id.clone(),
            kind: out.fact.kind.clone(),
            principal: out.fact.principal.clone(),
            payload: out.fact.payload.clone(),
            epoch: out.epoch,
        };
        match self.ledger.record(&record).await {
            Ok(r) => Ok(FactOutcome::Ok(r.result)),
            // Verdicts on the fact itself: retrying the same fact cannot help.
            Err(e @ (StoreError::InvalidFact { .. } | StoreError::InvalidArgument(_))) => {
                Ok(FactOutcome::Refused(e.to_string()))
            }
            // A verdict on the owner, not the fact: the zone must stop here.
            Err(e @ StoreError::Fenced { .. }) => Err(SinkError::Fenced(e.to_string())),
            // Backend trouble (and corruption or a too-new schema, which an
            // operator can fix): keep the fact and retry.
            Err(e) => {
                self.metrics.store_errors.inc();
                Err(SinkError::Unavailable(e.to_string()))
            }
        }
    }

    fn describe(&self) -> String {
        "ledger".into()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;
    use zonekeep_core::{Fact, FactKey};
    use zonekeep_store::SqliteStore;

    fn fact(key: &str, principal: Option<&str>, payload: serde_json::Value) -> OutboundFact {
        OutboundFact {
            zone_id: "z".into(),
            fact: Fact {
                key: FactKey(key.into()),
                kind: "kill".into(),
                payload,
                principal: principal.map(str::to_owned),
                tick: 1,
            },
            epoch: None,
        }
    }

    #[tokio::test]
    async fn records_once_and_refuses_invalid_facts() {
        let store = Arc::new(SqliteStore::open(":memory:").await.unwrap());
        let sink = LedgerSink::new(store.clone(), PersistMetrics::new());
        let f = fact("k1", Some("alice"), json!({"add": {"score": 50}}));
        let first = sink.commit(&f).await.unwrap();
        assert_eq!(first, FactOutcome::Ok(json!({"score": 50})));
        assert_eq!(
            sink.commit(&f).await.unwrap(),
            first,
            "a re-send settles the same"
        );
        assert_eq!(store.totals("alice").await.unwrap().get("score"), Some(&50));

        let bad = fact("k2", None, json!({"add": {"score": 1}}));
        assert!(matches!(
            sink.commit(&bad).await.unwrap(),
            FactOutcome::Refused(_)
        ));
        let empty_key = fact("", Some("a"), json!(null));
        assert!(matches!(
            sink.commit(&empty_key).await.unwrap(),
            FactOutcome::Refused(_)
        ));
    }
}
