//! The fencing decisions for a zone save write and for any other owner write, as pure functions.
//!
//! Both backends read the zone's fence and stored save inside a locked transaction, ask [`decide`],
//! and then carry out the answer. Keeping the rule here, free of SQL, means the two backends cannot
//! drift apart and the rule itself can be property-tested without a database.

use crate::error::{Result, StoreError};

/// What the store currently holds for the zone, as far as the decision needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredSave {
    /// Epoch of the stored save.
    pub epoch: u64,
    /// Sequence number of the stored save.
    pub seq: u64,
    /// Whether the stored kind and bytes equal the attempted write's.
    pub same_content: bool,
}

/// What the backend must do with an accepted write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Replace the save and set the fence to `new_fence`.
    Write {
        /// The fence after the write (never lower than before).
        new_fence: u64,
    },
    /// The write repeats the stored save: change nothing.
    AlreadyDone,
}

/// Decides a write of (`epoch`, `seq`) against the zone's `fence` (0 when none) and its stored save.
///
/// The stored save's epoch also counts as a fence: backends keep `fence >= save epoch`, but taking
/// the maximum here means even a hand-edited database cannot let a lower epoch through.
pub(crate) fn decide(
    fence: u64,
    stored: Option<StoredSave>,
    epoch: u64,
    seq: u64,
) -> Result<Decision> {
    let effective = stored.map_or(fence, |s| fence.max(s.epoch));
    if epoch < effective {
        return Err(StoreError::Fenced {
            stored_epoch: effective,
            attempted: epoch,
        });
    }
    if let Some(s) = stored.filter(|s| s.epoch == epoch) {
        if seq < s.seq {
            return Err(StoreError::Stale {
                epoch,
                stored_seq: s.seq,
                attempted_seq: seq,
            });
        }
        if seq == s.seq {
            return if s.same_content {
                Ok(Decision::AlreadyDone)
            } else {
                Err(StoreError::Conflict { epoch, seq })
            };
        }
    }
    Ok(Decision::Write { new_fence: epoch })
}

/// Decides whether a write carrying the owner `epoch` may commit against the zone's `fence` (the
/// higher of its fence row and its stored save's epoch, 0 when none): every durable write other
/// than a save (fact commits) only needs this check, made in the same transaction as the write.
pub(crate) fn check_owner(fence: u64, epoch: u64) -> Result<()> {
    if epoch < fence {
        return Err(StoreError::Fenced {
            stored_epoch: fence,
            attempted: epoch,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(epoch: u64, seq: u64, same_content: bool) -> Option<StoredSave> {
        Some(StoredSave {
            epoch,
            seq,
            same_content,
        })
    }

    #[test]
    fn owner_check_refuses_only_older_epochs() {
        assert_eq!(check_owner(0, 0), Ok(()));
        assert_eq!(check_owner(3, 3), Ok(()));
        assert_eq!(check_owner(3, 4), Ok(()));
        assert_eq!(
            check_owner(3, 2),
            Err(StoreError::Fenced {
                stored_epoch: 3,
                attempted: 2
            })
        );
    }

    #[test]
    fn first_write_is_accepted() {
        assert_eq!(decide(0, None, 1, 0), Ok(Decision::Write { new_fence: 1 }));
    }

    #[test]
    fn claimed_fence_refuses_older_epoch_before_any_save() {
        assert_eq!(
            decide(3, None, 2, 9),
            Err(StoreError::Fenced {
                stored_epoch: 3,
                attempted: 2
            })
        );
    }

    #[test]
    fn lower_seq_in_same_epoch_is_stale() {
        assert_eq!(
            decide(2, saved(2, 5, false), 2, 4),
            Err(StoreError::Stale {
                epoch: 2,
                stored_seq: 5,
                attempted_seq: 4
            })
        );
    }

    #[test]
    fn repeat_is_already_done_only_with_same_content() {
        assert_eq!(
            decide(2, saved(2, 5, true), 2, 5),
            Ok(Decision::AlreadyDone)
        );
        assert_eq!(
            decide(2, saved(2, 5, false), 2, 5),
            Err(StoreError::Conflict { epoch: 2, seq: 5 })
        );
    }

    #[test]
    fn newer_epoch_may_restart_seq() {
        assert_eq!(
            decide(3, saved(2, 50, false), 3, 0),
            Ok(Decision::Write { new_fence: 3 })
        );
    }

    #[test]
    fn stored_epoch_fences_even_if_fence_row_lags() {
        assert_eq!(
            decide(0, saved(4, 1, false), 3, 7),
            Err(StoreError::Fenced {
                stored_epoch: 4,
                attempted: 3
            })
        );
    }
}
