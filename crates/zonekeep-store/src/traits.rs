//! The two store contracts every backend implements.
//!
//! Both traits are object safe (via `async_trait`) so the host holds them as `Arc<dyn ...>` and can
//! stack decorators such as [`SlowStore`](crate::SlowStore) without knowing the backend.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{Claim, FactRecord, FactResult, SaveMeta, SaveRecord, StoredFact, WriteOutcome};

/// Zone saves fenced by owner epochs.
///
/// Each zone has a **fence**: the highest epoch ever claimed or written for it. The rules:
/// - [`claim`](SaveStore::claim) raises the fence by one and hands that epoch to the new owner;
/// - a [`write`](SaveStore::write) below the fence is refused
///   ([`StoreError::Fenced`](crate::StoreError::Fenced)), so a stale owner can never overwrite its
///   successor, even before the successor has saved anything;
/// - a write at or above the fence is accepted (raising the fence to it) unless it is older than the
///   stored save within the same epoch ([`StoreError::Stale`](crate::StoreError::Stale));
/// - repeating the stored (epoch, seq) with the same content answers
///   [`WriteOutcome::AlreadyDone`].
///
/// Every method is atomic with respect to other stores on the same database.
#[async_trait]
pub trait SaveStore: Send + Sync {
    /// Takes the next epoch for `zone_id` (fence + 1, or 1 for a zone never seen) and returns it with
    /// the zone's latest save. Called by a host when it becomes the zone's owner, before restoring.
    async fn claim(&self, zone_id: &str) -> Result<Claim>;

    /// Stores `bytes` as the zone's latest save, written by the owner holding `epoch`, as its
    /// `seq`-th save of that epoch. See the trait docs for the fencing rules.
    async fn write(
        &self,
        zone_id: &str,
        epoch: u64,
        seq: u64,
        kind: &str,
        bytes: &[u8],
    ) -> Result<WriteOutcome>;

    /// The zone's latest save, if any. Does not claim (used by admin tools and tests).
    async fn load(&self, zone_id: &str) -> Result<Option<SaveRecord>>;

    /// Every stored save, without bytes, ordered by zone id.
    async fn list(&self) -> Result<Vec<SaveMeta>>;

    /// Deletes the zone's save (admin only). The fence is kept, so an owner that was fenced stays
    /// fenced; returns whether a save existed.
    async fn delete(&self, zone_id: &str) -> Result<bool>;
}

/// The exactly-once fact ledger.
///
/// [`record`](FactLedger::record) inserts a fact by idempotency key and, in the same transaction,
/// applies its built-in effect and stores the effect's result. A repeated key applies nothing and
/// returns the stored result, so at-least-once delivery by a fact worker yields exactly-once effects.
///
/// A fact with an owner [`epoch`](crate::FactRecord::epoch) is first checked against its zone's
/// fence (the same fence [`SaveStore`] keeps) in that transaction: below it, the fact is refused
/// with [`StoreError::Fenced`](crate::StoreError::Fenced) and nothing is recorded, even for a key
/// that is already committed (a fenced owner learns it was fenced rather than a stored result).
///
/// The built-in effect: a payload `{"add": {"score": 50, "kills": 1}}` adds each amount to the
/// fact's principal's totals (table `fact_totals(principal, name, total)`); the result is the
/// principal's totals after the fact, as a JSON object. A payload without `add` has no effect and a
/// `null` result. An `add` that is malformed, lacks a principal, or would overflow a total is refused
/// with [`StoreError::InvalidFact`](crate::StoreError::InvalidFact) and nothing is recorded.
#[async_trait]
pub trait FactLedger: Send + Sync {
    /// Records `fact` once; see the trait docs.
    async fn record(&self, fact: &FactRecord) -> Result<FactResult>;

    /// The stored fact with this key, if any.
    async fn get(&self, key: &str) -> Result<Option<StoredFact>>;

    /// The principal's totals by name (empty when it has none).
    async fn totals(&self, principal: &str) -> Result<BTreeMap<String, i64>>;

    /// How many facts the ledger holds.
    async fn count(&self) -> Result<u64>;
}
