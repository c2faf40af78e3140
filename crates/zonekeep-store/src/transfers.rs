//! Durable transfer records: the store's side of moving a player from one zone to another.
//!
//! A transfer is one row that both zones write, each fenced by its own owner epoch. Its status moves
//! once, from `pending` to either `accepted` (the target took the player) or `returned` (the source
//! keeps it), by a compare-and-set in the store's own transaction. Whichever side's write lands
//! first decides; the other learns the outcome from the stored row. So however the source host, the
//! target host or both crash, and whoever retries, the player ends in exactly one zone.
//!
//! The decisions are pure functions ([`decide_accept`] and friends) that both backends call inside
//! their locked transactions, so the two backends cannot drift apart.

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::fence;
use crate::validate::check_id;

/// Largest player state a transfer carries, in bytes (256 KiB, the runtime's own limit).
pub const MAX_TRANSFER_STATE: usize = 256 * 1024;
/// Largest claims text (JSON) a transfer carries, in bytes (16 KiB).
pub const MAX_TRANSFER_CLAIMS: usize = 16 * 1024;
/// Longest transfer id, in bytes.
pub const MAX_TRANSFER_ID: usize = 128;
/// Longest return reason kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_TRANSFER_REASON: usize = 256;

/// Where a transfer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferStatus {
    /// Written by the source; neither zone has decided yet. The player belongs to the source.
    Pending,
    /// The target took the player: it belongs to the target from now on.
    Accepted,
    /// The move failed (refused, the target could not run, no answer in time, or the source's
    /// owner changed): the player belongs to the source.
    Returned,
}

impl TransferStatus {
    /// The text stored in the database and shown in the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Accepted => "accepted",
            Self::Returned => "returned",
        }
    }

    /// Parses a stored status; anything else is corruption.
    pub(crate) fn parse(text: &str) -> Result<Self> {
        match text {
            "pending" => Ok(Self::Pending),
            "accepted" => Ok(Self::Accepted),
            "returned" => Ok(Self::Returned),
            other => Err(StoreError::Corrupt(format!(
                "transfer status {other:?} is not pending, accepted or returned"
            ))),
        }
    }
}

/// A transfer as the source writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTransfer {
    /// Unique id (1..=128 bytes), chosen by the source host.
    pub id: String,
    /// The player's verified principal.
    pub principal: String,
    /// The player's id in the source zone.
    pub player: u32,
    /// The zone the player leaves.
    pub source_zone: String,
    /// The source zone's owner epoch: the write is refused when the source was claimed since.
    pub source_epoch: u64,
    /// The zone the player goes to.
    pub target_zone: String,
    /// The claims the source zone hands the target, as JSON object text.
    pub claims: String,
    /// The claims the player joined the source with, as JSON object text.
    pub player_claims: String,
    /// The player's state as the source zone's `transfer_out` produced it.
    pub state: Vec<u8>,
}

/// A stored transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTransfer {
    /// What the source wrote.
    pub transfer: NewTransfer,
    /// Where it stands.
    pub status: TransferStatus,
    /// The target's owner epoch that accepted it (set once accepted).
    pub target_epoch: Option<u64>,
    /// Why it was returned (set once returned).
    pub reason: Option<String>,
    /// Whether the player reached the zone the record leaves it in: for an accepted transfer,
    /// its connection arrived at the target (set by the target); for a returned one, the state
    /// went back to the source zone ([`TransferLedger::reclaim_transfer`]). One column serves
    /// both because a record is only ever one of the two.
    pub arrived: bool,
    /// When the source wrote it, milliseconds since the Unix epoch (the writing host's clock).
    pub created_at_ms: u64,
    /// When it was accepted or returned.
    pub resolved_at_ms: Option<u64>,
}

/// The transfer records, fenced by both zones' epochs.
///
/// Every write checks the writer's epoch against its zone's fence (the fence saves and facts use)
/// in the same transaction, and the status changes at most once, from pending: see the module docs.
#[async_trait]
pub trait TransferLedger: Send + Sync {
    /// Writes a pending transfer, fenced by the source's epoch. Writing the same transfer again
    /// answers the stored one (so a retry is safe); a different transfer under the same id is
    /// [`StoreError::InvalidArgument`].
    async fn begin_transfer(&self, transfer: &NewTransfer) -> Result<StoredTransfer>;

    /// The target, holding `target_epoch`, takes the player: pending becomes accepted. Answers the
    /// stored transfer, whose status says who won: accepted (by this call or an earlier one) means
    /// the target owns the player; returned means the source kept it and the target must not
    /// admit it. An unknown id is [`StoreError::UnknownTransfer`].
    async fn accept_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer>;

    /// `zone_id` (the source or the target), holding `epoch`, ends the move without it: pending
    /// becomes returned with `reason`. Answers the stored transfer, whose status says who won
    /// (accepted means the target already has the player).
    async fn return_transfer(
        &self,
        id: &str,
        zone_id: &str,
        epoch: u64,
        reason: &str,
    ) -> Result<StoredTransfer>;

    /// The target, holding `target_epoch`, records that the player's connection arrived. Only an
    /// accepted transfer can arrive.
    async fn arrive_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer>;

    /// The transfer with this id, if any.
    async fn transfer(&self, id: &str) -> Result<Option<StoredTransfer>>;

    /// The transfers a zone's new owner must finish, oldest first: pending ones from or to
    /// `zone_id`, and accepted ones into it whose player has not arrived.
    async fn open_transfers(&self, zone_id: &str) -> Result<Vec<StoredTransfer>>;

    /// The newest accepted transfer of `principal` out of `source_zone` written at or after
    /// `since_ms`: a connection that comes back to the source is sent it again.
    async fn latest_transfer_from(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>>;

    /// The source, holding `source_epoch`, hands a returned transfer's state back to its zone:
    /// marks it reclaimed, once. The answer says whether this call is the one that reclaimed it
    /// ([`Reclaim::by_this_call`]); a second reclaim answers the stored row unchanged and its
    /// caller must not hand the state back again. Only a returned transfer can be reclaimed
    /// ([`StoreError::InvalidArgument`] otherwise); an unknown id is
    /// [`StoreError::UnknownTransfer`].
    async fn reclaim_transfer(&self, id: &str, source_epoch: u64) -> Result<Reclaim>;

    /// The source, holding `source_epoch`, gives a reclaimed state up again: the join that
    /// reclaimed it was not admitted (the zone was full, or stopped first), so the state never
    /// went back and the player's next join must find it ([`TransferLedger::unclaimed_return`]).
    /// Answers the stored transfer, unclaimed; giving up one already unclaimed changes nothing.
    /// Only a returned transfer ([`StoreError::InvalidArgument`] otherwise); an unknown id is
    /// [`StoreError::UnknownTransfer`].
    async fn release_reclaim(&self, id: &str, source_epoch: u64) -> Result<StoredTransfer>;

    /// The newest returned, not yet reclaimed transfer of `principal` out of `source_zone`
    /// written at or after `since_ms`: a move whose source crashed before the state went back
    /// (a live return is reclaimed at once by the source that takes the player back).
    async fn unclaimed_return(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>>;

    /// Deletes resolved transfers written before `before_ms`; answers how many.
    async fn prune_transfers(&self, before_ms: u64) -> Result<u64>;
}

/// The answer to [`TransferLedger::reclaim_transfer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reclaim {
    /// The stored transfer, reclaimed.
    pub transfer: StoredTransfer,
    /// Whether this call reclaimed it (false: an earlier one did, and the state went back then).
    pub by_this_call: bool,
}

/// Refuses a transfer whose fields are out of bounds.
pub(crate) fn check_new(t: &NewTransfer) -> Result<()> {
    check_transfer_id(&t.id)?;
    check_id("principal", &t.principal)?;
    check_id("source zone", &t.source_zone)?;
    check_id("target zone", &t.target_zone)?;
    if t.source_zone == t.target_zone {
        return Err(StoreError::InvalidArgument(
            "a transfer's source and target zones must differ".into(),
        ));
    }
    for (what, text) in [("claims", &t.claims), ("player claims", &t.player_claims)] {
        if text.len() > MAX_TRANSFER_CLAIMS {
            return Err(StoreError::InvalidArgument(format!(
                "transfer {what} are {} bytes, over the limit of {MAX_TRANSFER_CLAIMS}",
                text.len()
            )));
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(_)) => {}
            _ => {
                return Err(StoreError::InvalidArgument(format!(
                    "transfer {what} must be a JSON object"
                )))
            }
        }
    }
    if t.state.len() > MAX_TRANSFER_STATE {
        return Err(StoreError::InvalidArgument(format!(
            "transfer state is {} bytes, over the limit of {MAX_TRANSFER_STATE}",
            t.state.len()
        )));
    }
    Ok(())
}

/// Refuses an empty or over-long transfer id.
pub(crate) fn check_transfer_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_TRANSFER_ID {
        return Err(StoreError::InvalidArgument(format!(
            "transfer id must be 1..={MAX_TRANSFER_ID} bytes, got {}",
            id.len()
        )));
    }
    Ok(())
}

/// Cuts a reason to [`MAX_TRANSFER_REASON`] bytes at a character boundary.
pub(crate) fn clip_reason(reason: &str) -> String {
    let mut end = reason.len().min(MAX_TRANSFER_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_owned()
}

/// What a backend must do with a begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begin {
    /// Insert the row.
    Insert,
    /// The same transfer is stored: answer it.
    Stored,
}

/// Decides a begin against the source's `fence` and the row stored under the id, if any.
pub(crate) fn decide_begin(
    fence: u64,
    new: &NewTransfer,
    stored: Option<&StoredTransfer>,
) -> Result<Begin> {
    fence::check_owner(fence, new.source_epoch)?;
    match stored {
        None => Ok(Begin::Insert),
        Some(s) if &s.transfer == new => Ok(Begin::Stored),
        Some(_) => Err(StoreError::InvalidArgument(format!(
            "transfer id {:?} is already used by another transfer",
            new.id
        ))),
    }
}

/// What a backend must do with a status change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Write the new status (with the epoch or reason that goes with it).
    Write,
    /// Nothing to write: answer the stored row, whose status says who won.
    Stored,
}

/// Decides an accept by the target holding `epoch` against the target's `fence`.
pub(crate) fn decide_accept(fence: u64, epoch: u64, stored: &StoredTransfer) -> Result<Change> {
    fence::check_owner(fence, epoch)?;
    Ok(match stored.status {
        TransferStatus::Pending => Change::Write,
        TransferStatus::Accepted | TransferStatus::Returned => Change::Stored,
    })
}

/// Decides a return by `zone_id` holding `epoch` against that zone's `fence`.
pub(crate) fn decide_return(
    fence: u64,
    zone_id: &str,
    epoch: u64,
    stored: &StoredTransfer,
) -> Result<Change> {
    if zone_id != stored.transfer.source_zone && zone_id != stored.transfer.target_zone {
        return Err(StoreError::InvalidArgument(format!(
            "zone {zone_id:?} is neither the source nor the target of transfer {:?}",
            stored.transfer.id
        )));
    }
    fence::check_owner(fence, epoch)?;
    Ok(match stored.status {
        TransferStatus::Pending => Change::Write,
        TransferStatus::Accepted | TransferStatus::Returned => Change::Stored,
    })
}

/// Decides an arrival by the target holding `epoch` against the target's `fence`.
pub(crate) fn decide_arrive(fence: u64, epoch: u64, stored: &StoredTransfer) -> Result<Change> {
    fence::check_owner(fence, epoch)?;
    match stored.status {
        TransferStatus::Accepted if stored.arrived => Ok(Change::Stored),
        TransferStatus::Accepted => Ok(Change::Write),
        other => Err(StoreError::InvalidArgument(format!(
            "transfer {:?} is {}, so its player cannot arrive",
            stored.transfer.id,
            other.as_str()
        ))),
    }
}

/// Decides a reclaim by the source holding `epoch` against the source's `fence`.
/// Whether the source, holding `epoch`, may give up the reclaim of `stored`, and whether
/// anything is left to write.
pub(crate) fn decide_release(fence: u64, epoch: u64, stored: &StoredTransfer) -> Result<Change> {
    fence::check_owner(fence, epoch)?;
    match stored.status {
        TransferStatus::Returned if stored.arrived => Ok(Change::Write),
        TransferStatus::Returned => Ok(Change::Stored),
        other => Err(StoreError::InvalidArgument(format!(
            "transfer {:?} is {}, so it holds no reclaimed state",
            stored.transfer.id,
            other.as_str()
        ))),
    }
}

pub(crate) fn decide_reclaim(fence: u64, epoch: u64, stored: &StoredTransfer) -> Result<Change> {
    fence::check_owner(fence, epoch)?;
    match stored.status {
        TransferStatus::Returned if stored.arrived => Ok(Change::Stored),
        TransferStatus::Returned => Ok(Change::Write),
        other => Err(StoreError::InvalidArgument(format!(
            "transfer {:?} is {}, so its state cannot be reclaimed",
            stored.transfer.id,
            other.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new() -> NewTransfer {
        NewTransfer {
            id: "t-1".into(),
            principal: "ada".into(),
            player: 3,
            source_zone: "a".into(),
            source_epoch: 2,
            target_zone: "b".into(),
            claims: "{}".into(),
            player_claims: r#"{"name":"ada"}"#.into(),
            state: vec![1, 2, 3],
        }
    }

    fn stored(status: TransferStatus) -> StoredTransfer {
        StoredTransfer {
            transfer: new(),
            status,
            target_epoch: None,
            reason: None,
            arrived: false,
            created_at_ms: 1,
            resolved_at_ms: None,
        }
    }

    #[test]
    fn a_begin_is_fenced_by_the_source_and_idempotent() {
        assert_eq!(decide_begin(2, &new(), None), Ok(Begin::Insert));
        assert!(matches!(
            decide_begin(3, &new(), None),
            Err(StoreError::Fenced { .. })
        ));
        let s = stored(TransferStatus::Pending);
        assert_eq!(decide_begin(2, &new(), Some(&s)), Ok(Begin::Stored));
        let mut other = new();
        other.state = vec![9];
        assert!(matches!(
            decide_begin(2, &other, Some(&s)),
            Err(StoreError::InvalidArgument(_))
        ));
    }

    #[test]
    fn only_a_pending_transfer_changes_and_only_once() {
        for decided in [TransferStatus::Accepted, TransferStatus::Returned] {
            assert_eq!(decide_accept(1, 1, &stored(decided)), Ok(Change::Stored));
            assert_eq!(
                decide_return(1, "a", 1, &stored(decided)),
                Ok(Change::Stored)
            );
        }
        assert_eq!(
            decide_accept(1, 1, &stored(TransferStatus::Pending)),
            Ok(Change::Write)
        );
        assert_eq!(
            decide_return(1, "b", 1, &stored(TransferStatus::Pending)),
            Ok(Change::Write)
        );
    }

    #[test]
    fn stale_owners_and_strangers_are_refused() {
        let s = stored(TransferStatus::Pending);
        assert!(matches!(
            decide_accept(5, 4, &s),
            Err(StoreError::Fenced { .. })
        ));
        assert!(matches!(
            decide_return(5, "a", 4, &s),
            Err(StoreError::Fenced { .. })
        ));
        assert!(matches!(
            decide_return(1, "c", 1, &s),
            Err(StoreError::InvalidArgument(_))
        ));
    }

    #[test]
    fn only_an_accepted_player_arrives() {
        assert!(decide_arrive(1, 1, &stored(TransferStatus::Pending)).is_err());
        assert!(decide_arrive(1, 1, &stored(TransferStatus::Returned)).is_err());
        assert_eq!(
            decide_arrive(1, 1, &stored(TransferStatus::Accepted)),
            Ok(Change::Write)
        );
        let mut arrived = stored(TransferStatus::Accepted);
        arrived.arrived = true;
        assert_eq!(decide_arrive(1, 1, &arrived), Ok(Change::Stored));
    }

    #[test]
    fn only_a_returned_transfer_is_reclaimed_and_only_once() {
        assert!(decide_reclaim(1, 1, &stored(TransferStatus::Pending)).is_err());
        assert!(decide_reclaim(1, 1, &stored(TransferStatus::Accepted)).is_err());
        let returned = stored(TransferStatus::Returned);
        assert_eq!(decide_reclaim(1, 1, &returned), Ok(Change::Write));
        assert!(matches!(
            decide_reclaim(2, 1, &returned),
            Err(StoreError::Fenced { .. })
        ));
        let mut reclaimed = returned;
        reclaimed.arrived = true;
        assert_eq!(decide_reclaim(1, 1, &reclaimed), Ok(Change::Stored));
    }

    #[test]
    fn bounds_are_checked() {
        let mut t = new();
        assert!(check_new(&t).is_ok());
        t.target_zone = "a".into();
        assert!(check_new(&t).is_err());
        let mut t = new();
        t.claims = "[1]".into();
        assert!(check_new(&t).is_err());
        let mut t = new();
        t.state = vec![0; MAX_TRANSFER_STATE + 1];
        assert!(check_new(&t).is_err());
        let mut t = new();
        t.id = "x".repeat(MAX_TRANSFER_ID + 1);
        assert!(check_new(&t).is_err());
        assert_eq!(clip_reason(&"é".repeat(200)).len(), 256);
    }
}
