//! The one error enum of the store layer.
//!
//! Callers (the host's storage and fact workers) mostly need one decision from an error: retry later
//! or give up. [`StoreError::is_retryable`] answers it, so that decision lives here, next to the
//! variants, rather than being re-derived in every worker.

use thiserror::Error;

/// Everything that can go wrong in a store operation.
///
/// Messages never contain connection strings or passwords: backend errors are rendered by this crate
/// and scrubbed of the configured password before they are wrapped (see [`StoreError::Backend`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// The write (a save, or a fact carrying an owner epoch) carried an epoch lower than the zone's
    /// fence: a newer owner has claimed the zone (or written with a newer epoch), so this writer is
    /// stale and must stop writing. A character lease call is held to its zone's fence exactly: an
    /// epoch other than the fence (or any epoch, for a zone never claimed) is refused this way too.
    #[error("zone write fenced: stored epoch {stored_epoch}, attempted epoch {attempted}")]
    Fenced {
        /// The highest epoch the store has seen for the zone (claimed or written).
        stored_epoch: u64,
        /// The epoch the refused write carried.
        attempted: u64,
    },

    /// The write carried the current epoch but a sequence number lower than the stored save's: an
    /// older snapshot arriving after a newer one (e.g. a retried write overtaken by a later one).
    #[error(
        "zone save stale: epoch {epoch}, stored seq {stored_seq}, attempted seq {attempted_seq}"
    )]
    Stale {
        /// The epoch shared by the stored save and the refused write.
        epoch: u64,
        /// The sequence number of the stored save.
        stored_seq: u64,
        /// The sequence number the refused write carried.
        attempted_seq: u64,
    },

    /// The same (epoch, seq) was written before with different bytes or a different kind. An owner
    /// must never reuse a sequence number for different state, so this is a bug in the writer.
    #[error("zone save conflict: epoch {epoch} seq {seq} already stored with different content")]
    Conflict {
        /// The epoch of the conflicting write.
        epoch: u64,
        /// The sequence number of the conflicting write.
        seq: u64,
    },

    /// A fact that cannot be applied: a malformed built-in effect payload, an effect without a
    /// principal, or a total that would overflow. Retrying cannot help; the fact should be refused.
    #[error("invalid fact {key:?}: {reason}")]
    InvalidFact {
        /// The fact's idempotency key.
        key: String,
        /// Why it was refused.
        reason: String,
    },

    /// [`Directory::register_host`](crate::Directory::register_host) found another incarnation of
    /// the same host id that has not left and heartbeated within the silence bound: two processes
    /// must never run under one host id. Registering succeeds once that process has left or stayed
    /// silent for the bound, so this is reported (a second process started by mistake), not retried.
    #[error(
        "host id {host_id:?} is in use by another running process (last heartbeat {heartbeat_age_ms} ms ago)"
    )]
    HostIdInUse {
        /// The contested host id.
        host_id: String,
        /// How long ago (database clock) the other incarnation last heartbeated.
        heartbeat_age_ms: u64,
    },

    /// The host's lease does not hold: its directory row is missing, it left, another incarnation
    /// replaced it, or (for a claim) its last heartbeat is older than the fence bound. The host must
    /// stop acting on its zones.
    #[error(
        "host {host_id:?} lost its lease (replaced, left or silent too long); it must stop acting"
    )]
    LeaseLost {
        /// The host whose lease does not hold.
        host_id: String,
    },

    /// The host a zone was to be given to cannot take it: it is not registered, left, is silent
    /// past the takeover bound, or is draining. The caller chooses another host.
    #[error("host {host_id:?} cannot take zones (unknown, gone, dead or draining)")]
    HostUnavailable {
        /// The unusable host.
        host_id: String,
    },

    /// A directory change only the zone's current owner may make was asked by a host that does not
    /// own it under the epoch it gave (another host owns it, nobody does, or the epoch was never
    /// handed out).
    #[error("host {host_id:?} does not own zone {zone_id:?} under epoch {epoch}")]
    NotOwner {
        /// The zone.
        zone_id: String,
        /// The host that asked.
        host_id: String,
        /// The epoch it asked with.
        epoch: u64,
    },

    /// A zone module the store refuses: empty, over
    /// [`MAX_MODULE_BYTES`](crate::MAX_MODULE_BYTES), or (for a deploy) a digest under which no
    /// module is stored. Retrying the same call cannot help.
    #[error("invalid zone module: {0}")]
    InvalidModule(String),

    /// A board is declared with other settings (or the store holds its most boards already).
    #[error("board conflict: {0}")]
    BoardConflict(String),

    /// A room of the lobby already has that zone id, or a private room that code.
    #[error("room exists: {0}")]
    RoomExists(String),

    /// An argument the store cannot represent (empty id, too long, or a number beyond the backend's
    /// signed 64-bit integers).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A character write (a commit or a release) came from a zone that does not hold the
    /// character's lease under the epoch it gave: another zone holds it, the same zone holds it
    /// under another epoch, or nobody does (it was released, or never acquired). Nothing was
    /// written; the writer has lost the player's character and must not write it again without
    /// acquiring it anew. (A writer whose zone was claimed since is [`StoreError::Fenced`]
    /// instead.)
    #[error("zone does not hold the lease of {principal:?}'s character (holder: {})", holder_text(.holder))]
    CharacterLeaseLost {
        /// The character's principal.
        principal: String,
        /// The stored holder, a zone and its lease epoch; `None` when the character is free or
        /// has never been acquired.
        holder: Option<(String, u64)>,
    },

    /// No transfer is stored under this id (it never was, or it was pruned).
    #[error("no transfer {0:?} is stored")]
    UnknownTransfer(String),

    /// [`CallStore::finish_call`](crate::CallStore::finish_call) named a call the journal does
    /// not hold: it was never begun, or it was swept. Nothing was stored; the answer has no call
    /// to settle.
    #[error("no call {key:?} of zone {zone_id:?} is journaled")]
    CallUnknown {
        /// The zone the answer was for.
        zone_id: String,
        /// The call key the answer was for.
        key: String,
    },

    /// [`ChatStore::file_report`](crate::ChatStore::file_report) named lines its channel does
    /// not keep: pruned (the channel keeps only its newest lines) or never written. Nothing was
    /// filed; the store cannot vouch for lines it does not hold.
    #[error("chat channel {channel:?} does not keep lines {seqs:?}")]
    ChatLinesMissing {
        /// The reported channel.
        channel: String,
        /// The named seqs it does not keep, in order.
        seqs: Vec<u64>,
    },

    /// The store spec given to [`open_store`](crate::open_store) is not one this crate understands.
    #[error("unsupported store spec (expected \"sqlite\" or a postgres:// URL): {0}")]
    InvalidSpec(String),

    /// The database holds data this code cannot read: a negative epoch, unparsable JSON, a row that
    /// violates the schema's own rules. The data is left in place for an operator to inspect.
    #[error("store data corrupt: {0}")]
    Corrupt(String),

    /// The database schema is newer than this build knows (a newer build migrated it). Refusing is
    /// safer than writing rows an older schema understanding might get wrong.
    #[error("database schema version {found} is newer than this build supports ({supported})")]
    SchemaTooNew {
        /// The version recorded in the database.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },

    /// The backend failed (I/O, connection, lock timeout, pool exhausted, task panicked). Usually
    /// transient. The message never contains connection URLs or passwords.
    #[error("storage backend error: {0}")]
    Backend(String),
}

impl StoreError {
    /// Whether the same call may succeed if retried later.
    ///
    /// Only [`StoreError::Backend`] is transient. Fencing, staleness, conflicts, invalid input,
    /// the directory's refusals (a host id in use, a lost lease, an unusable host, not the owner),
    /// a lost character lease, an unknown call and missing chat lines are verdicts: the caller
    /// must act on them, not repeat the call.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Backend(_))
    }
}

/// A character lease holder as error text.
fn holder_text(holder: &Option<(String, u64)>) -> String {
    match holder {
        Some((zone, epoch)) => format!("zone {zone:?} under epoch {epoch}"),
        None => "none".to_owned(),
    }
}

/// Shorthand for results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Removes every occurrence of `secret` from `message`, so backend errors can be surfaced to logs
/// and the admin API without leaking credentials even if a driver echoes its connection string.
// Only the PostgreSQL backend has credentials to hide; the function is tested either way.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn redact(message: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if !s.is_empty() => message.replace(s, "***"),
        _ => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_backend_errors_are_retryable() {
        assert!(StoreError::Backend("io".into()).is_retryable());
        assert!(!StoreError::Fenced {
            stored_epoch: 2,
            attempted: 1
        }
        .is_retryable());
        assert!(!StoreError::Stale {
            epoch: 1,
            stored_seq: 2,
            attempted_seq: 1
        }
        .is_retryable());
        assert!(!StoreError::Corrupt("x".into()).is_retryable());
        assert!(!StoreError::InvalidModule("empty".into()).is_retryable());
        assert!(!StoreError::LeaseLost {
            host_id: "h".into()
        }
        .is_retryable());
        let lost = StoreError::CharacterLeaseLost {
            principal: "ada".into(),
            holder: Some(("cell-1".into(), 4)),
        };
        assert!(!lost.is_retryable());
        assert!(
            lost.to_string().contains("\"cell-1\" under epoch 4"),
            "{lost}"
        );
        let unknown = StoreError::CallUnknown {
            zone_id: "arena-1".into(),
            key: "pay-1".into(),
        };
        assert!(!unknown.is_retryable());
        assert!(unknown.to_string().contains("\"pay-1\""), "{unknown}");
        let missing = StoreError::ChatLinesMissing {
            channel: "zone:arena-1".into(),
            seqs: vec![3, 9],
        };
        assert!(!missing.is_retryable());
        assert!(missing.to_string().contains("[3, 9]"), "{missing}");
    }

    #[test]
    fn redact_hides_the_secret() {
        assert_eq!(
            redact("password=hunter2 failed", Some("hunter2")),
            "password=*** failed"
        );
        assert_eq!(redact("no secret", None), "no secret");
        assert_eq!(redact("empty", Some("")), "empty");
    }
}
