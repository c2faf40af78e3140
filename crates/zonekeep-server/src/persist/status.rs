//! Per-zone save status, for the admin zone detail and for tests.

use serde::Serialize;

/// How a zone's saves are going. A snapshot of the storage worker's view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SaveStatus {
    /// The zone id.
    pub zone_id: String,
    /// The zone kind (written with each save).
    pub kind: String,
    /// The owner epoch this host writes with.
    pub epoch: u64,
    /// Sequence number of the last save the store accepted in this epoch.
    pub last_saved_seq: Option<u64>,
    /// When it was accepted, in milliseconds since the Unix epoch (this host's clock).
    pub last_saved_at_ms: Option<u64>,
    /// Sequence number of the newest submitted snapshot.
    pub last_submitted_seq: Option<u64>,
    /// Whether a snapshot is waiting or being written.
    pub pending: bool,
    /// Failed write attempts since the last success.
    pub consecutive_failures: u32,
    /// The last write error, if any (cleared by a success).
    pub last_error: Option<String>,
    /// Unwritten snapshots replaced by a newer one (latest wins).
    pub replaced: u64,
    /// A newer owner took the zone: this host may no longer save it.
    pub fenced: bool,
    /// How long the oldest snapshot submitted since the last committed write has waited, in
    /// milliseconds (`None` when everything submitted is written). A lasting world halts when
    /// it passes the world's bound.
    pub unsaved_ms: Option<u64>,
    /// The zone is a lasting world that halted because its saves failed: nothing more is
    /// written for this registration.
    pub halted: bool,
    /// Saves the store committed for this registration.
    pub writes: u64,
    /// How long the last committed write took, in microseconds.
    pub last_write_us: Option<u64>,
}
