//! The store contracts of saves, facts and zone modules, which every backend implements (the
//! directory's, [`Directory`](crate::Directory), has a module of its own).
//!
//! Every trait is object safe (via `async_trait`) so the host holds them as `Arc<dyn ...>` and can
//! stack decorators such as [`SlowStore`](crate::SlowStore) without knowing the backend.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{
    Claim, DeployCause, FactRecord, FactResult, ModuleDeploy, SaveMeta, SaveRecord, StoredFact,
    WriteOutcome,
};

/// Largest zone module [`ModuleStore::put_module`] accepts, in bytes (32 MiB).
pub const MAX_MODULE_BYTES: usize = 32 << 20;

/// The deploys of one module kind its history keeps; older ones are forgotten as new ones come
/// (the modules themselves stay stored).
pub const MAX_DEPLOY_HISTORY: usize = 64;

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

/// Zone modules kept by content address, and the module each module kind runs.
///
/// A module (WebAssembly game code of a zone kind) is stored once under the SHA-256 of its bytes,
/// so every host of a fleet loads exactly the bytes it asks for. Each module kind points at the
/// module it runs, with a version raised by every deploy: a host that sees a kind's version or
/// digest change loads the new module. Modules are never deleted, so a kind can always be pointed
/// back at a module it ran before.
///
/// Every method is atomic with respect to other stores on the same database: concurrent deploys of
/// one kind, from any hosts, each get a version of their own.
#[async_trait]
pub trait ModuleStore: Send + Sync {
    /// Keeps `bytes` under their SHA-256 (lowercase hex, computed here) and returns it.
    /// Idempotent: storing the same bytes again changes nothing. Refuses an empty module or
    /// one over [`MAX_MODULE_BYTES`] (32 MiB) with
    /// [`StoreError::InvalidModule`](crate::StoreError::InvalidModule).
    async fn put_module(&self, bytes: &[u8]) -> Result<String>;

    /// The module stored under `sha256`, if any (a malformed digest is simply not found). The
    /// bytes are checked against their address on the way out: a module whose stored bytes no
    /// longer hash to it is [`StoreError::Corrupt`](crate::StoreError::Corrupt).
    async fn get_module(&self, sha256: &str) -> Result<Option<Vec<u8>>>;

    /// Makes the stored module `sha256` the one `kind` runs, raising the kind's version by one
    /// (the first deploy of a kind is version 1). Refuses a digest that is not stored
    /// ([`StoreError::InvalidModule`](crate::StoreError::InvalidModule)) and a kind name that is
    /// empty or longer than 64 bytes
    /// ([`StoreError::InvalidArgument`](crate::StoreError::InvalidArgument)); a refused deploy
    /// changes nothing. Deploying the digest the kind already runs still raises the version (a
    /// redeploy). The deploy joins the kind's history under `cause` in the same transaction;
    /// the history keeps the newest [`MAX_DEPLOY_HISTORY`] deploys of each kind.
    async fn deploy_module(
        &self,
        kind: &str,
        sha256: &str,
        cause: DeployCause,
    ) -> Result<ModuleDeploy>;

    /// Every kind's current module, sorted by kind (by bytes, on every backend).
    async fn module_kinds(&self) -> Result<Vec<ModuleDeploy>>;

    /// `kind`'s deploys, newest first: at most `limit` of them (and at most
    /// [`MAX_DEPLOY_HISTORY`]). An unknown kind has none; a kind name out of bounds is
    /// [`StoreError::InvalidArgument`](crate::StoreError::InvalidArgument).
    async fn module_history(&self, kind: &str, limit: usize) -> Result<Vec<ModuleDeploy>>;
}
