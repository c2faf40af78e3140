//! The one trait every fact sink implements.

use async_trait::async_trait;
use zonekeep_core::{Fact, FactOutcome};

/// A fact on its way to a sink: the zone's [`Fact`] and the zone it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboundFact {
    /// The emitting zone.
    pub zone_id: String,
    /// The fact, with its idempotency key.
    pub fact: Fact,
    /// The emitting zone's owner epoch on this host, when the zone was
    /// claimed from a store: a sink that can fence (the ledger) refuses the
    /// fact once a newer owner holds the zone.
    pub epoch: Option<u64>,
}

/// Why a commit did not settle the fact. (A definitive "no" to the fact
/// itself is not an error but [`FactOutcome::Refused`].)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// A failure that may pass: the fact worker retries it with backoff.
    #[error("fact sink unavailable: {0}")]
    Unavailable(String),
    /// The fact's owner epoch is stale: another host claimed the zone. Not
    /// retried; the zone is unloaded here and its new owner re-sends the
    /// fact from the save it restored.
    #[error("fact refused, the zone has a newer owner: {0}")]
    Fenced(String),
}

/// Where facts are committed. Implementations must be idempotent by
/// `fact.key`: the worker delivers at least once (retries, re-sends after a
/// restore), and a repeated key must not apply again.
#[async_trait]
pub trait FactSink: Send + Sync {
    /// Commits one fact: `Ok(FactOutcome::Ok(result))` when it took effect
    /// (now or on an earlier delivery), `Ok(FactOutcome::Refused(why))` when it
    /// never will, `Err` when the attempt failed and should be retried.
    async fn commit(&self, fact: &OutboundFact) -> Result<FactOutcome, SinkError>;

    /// A printable description for logs (no secrets).
    fn describe(&self) -> String;
}
