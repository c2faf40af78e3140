//! Plain data passed across the store traits.
//!
//! Zone ids are `String` and state is `Vec<u8>` on purpose: the store knows nothing of zone kinds or
//! the simulation runtime, so it stays usable by the host, the CLI and admin tools alike.

use serde::{Deserialize, Serialize};

/// What a new owner gets from [`SaveStore::claim`](crate::SaveStore::claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The epoch this owner must write with. Strictly greater than every epoch claimed or written
    /// before for the zone, so every earlier owner is fenced from now on.
    pub epoch: u64,
    /// The latest save of the zone, if it has one, to restore from.
    pub last: Option<SaveRecord>,
}

/// One stored zone save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveRecord {
    /// The zone the state belongs to.
    pub zone_id: String,
    /// The zone kind that wrote it (which game code can restore it).
    pub kind: String,
    /// The owner epoch it was written with.
    pub epoch: u64,
    /// The owner's sequence number within that epoch.
    pub seq: u64,
    /// The zone's own state bytes, opaque to the store.
    pub bytes: Vec<u8>,
    /// When the store accepted the write, in milliseconds since the Unix epoch (store host clock).
    pub saved_at_ms: u64,
}

/// A save's description without its bytes, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveMeta {
    /// The zone id.
    pub zone_id: String,
    /// The zone kind that wrote the save.
    pub kind: String,
    /// The epoch the save was written with.
    pub epoch: u64,
    /// The highest epoch claimed or written for the zone (its fence); greater than `epoch` when an
    /// owner has claimed the zone but not saved yet.
    pub fence_epoch: u64,
    /// The save's sequence number.
    pub seq: u64,
    /// Length of the state bytes.
    pub size: u64,
    /// When the save was written, in milliseconds since the Unix epoch.
    pub saved_at_ms: u64,
}

/// The successful outcomes of [`SaveStore::write`](crate::SaveStore::write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The save was stored and is now the zone's latest.
    Written,
    /// This exact (epoch, seq, kind, bytes) was already the stored save: nothing changed. Lets a
    /// storage worker retry a write whose acknowledgement it lost.
    AlreadyDone,
}

/// A fact to record in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactRecord {
    /// Idempotency key. Recording the same key again never applies the effect again.
    pub key: String,
    /// The zone that emitted the fact.
    pub zone_id: String,
    /// What happened, e.g. `"mob_killed"`.
    pub kind: String,
    /// The principal the effect applies to, if any (required for the built-in `add` effect).
    pub principal: Option<String>,
    /// Free-form payload. `{"add": {"score": 50}}` adds to the principal's totals (see
    /// [`FactLedger`](crate::FactLedger)); other fields are stored and otherwise ignored.
    pub payload: serde_json::Value,
    /// The epoch of the zone owner that emitted the fact (from its
    /// [`claim`](crate::SaveStore::claim)). When set, the ledger checks it against the zone's
    /// fence in the recording transaction and refuses a stale owner's fact with
    /// [`StoreError::Fenced`](crate::StoreError::Fenced), so a host whose zone was taken over
    /// cannot commit facts any more. `None` records without the check, for tools that record
    /// facts outside any zone owner.
    #[serde(default)]
    pub epoch: Option<u64>,
}

/// The answer of [`FactLedger::record`](crate::FactLedger::record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactResult {
    /// `true` for the call that recorded the fact and applied its effect; `false` for every repeat.
    pub first: bool,
    /// The result stored by the first recording (for an `add` effect, the principal's totals after
    /// it; `null` for a fact with no built-in effect). Repeats return exactly this value.
    pub result: serde_json::Value,
}

/// A fact as stored in the ledger, returned by [`FactLedger::get`](crate::FactLedger::get).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFact {
    /// Idempotency key.
    pub key: String,
    /// The emitting zone.
    pub zone_id: String,
    /// The fact's kind.
    pub kind: String,
    /// The principal, if any.
    pub principal: Option<String>,
    /// The payload of the first recording.
    pub payload: serde_json::Value,
    /// The result of the first recording.
    pub result: serde_json::Value,
    /// When it was first recorded, in milliseconds since the Unix epoch.
    pub recorded_at_ms: u64,
}

/// Why a kind's module changed: the cause an operator sees in the kind's deploy history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeployCause {
    /// A module pushed as the kind's new code.
    Push,
    /// An operator took the kind back to a module it ran before.
    Rollback,
}

impl DeployCause {
    /// The cause as stored (`push` or `rollback`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Rollback => "rollback",
        }
    }

    /// The cause stored as `s`; anything else is corruption.
    pub(crate) fn from_db(s: &str) -> crate::error::Result<Self> {
        match s {
            "push" => Ok(Self::Push),
            "rollback" => Ok(Self::Rollback),
            other => Err(crate::error::StoreError::Corrupt(format!(
                "unknown deploy cause {other:?}"
            ))),
        }
    }
}

/// One deploy of a module kind: what [`ModuleStore::deploy_module`](crate::ModuleStore::deploy_module)
/// recorded, each kind's current one from [`ModuleStore::module_kinds`](crate::ModuleStore::module_kinds),
/// and the kind's past ones from [`ModuleStore::module_history`](crate::ModuleStore::module_history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleDeploy {
    /// The module kind (the zone kind whose game code the module is).
    pub kind: String,
    /// The module's content address: the SHA-256 of its bytes, 64 lowercase hex digits.
    pub sha256: String,
    /// How many deploys the kind has had, this one included: 1 for its first deploy, one more for
    /// every deploy after it (a redeploy of the same module too).
    pub version: u64,
    /// Length of the module's bytes.
    pub size: u64,
    /// When this version was deployed, in milliseconds since the Unix epoch, by the database's
    /// clock (the one clock every host of a fleet shares).
    pub deployed_at_ms: u64,
    /// Why it was deployed (deploys recorded before causes were kept count as pushes).
    pub cause: DeployCause,
}
