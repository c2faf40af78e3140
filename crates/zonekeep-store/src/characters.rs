//! Characters: the bytes that travel with a player from zone to zone (inventory, level, gold), one
//! per principal, written only by the zone that holds the character's lease.
//!
//! A character's **lease** names at most one holder: a zone and that zone's owner epoch (the same
//! epoch its saves carry). Every write under the lease is checked in one transaction against both
//! the stored holder and the zone's fence in `zone_fences`, so once another host claims the zone,
//! the old owner's character writes are refused ([`StoreError::Fenced`]) — the zone's fence is the
//! lease's only clock. A lease whose holder zone has been claimed since is stale: the old owner can
//! never write again, so the next zone to ask takes it over with the last committed data.
//!
//! The decisions are pure functions ([`decide_acquire`], [`decide_write`]) that both backends call
//! inside their locked transactions, so the two backends cannot drift apart.

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::validate::{check_id, to_db};

/// Largest character a zone may commit, in bytes (256 KiB).
pub const MAX_CHARACTER_BYTES: usize = 256 * 1024;
/// Longest principal a character is kept under, in bytes.
pub const MAX_CHARACTER_PRINCIPAL: usize = 256;

/// A character as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCharacter {
    /// The player's verified principal.
    pub principal: String,
    /// The last committed bytes (empty for a character never committed).
    pub data: Vec<u8>,
    /// How many writes have committed data: 0 for a new character, one more per commit (and per
    /// release that carried data).
    pub version: u64,
    /// The lease's holder, a zone and its owner epoch; `None` while the character is free.
    pub holder: Option<(String, u64)>,
    /// When the row last changed (an acquisition, a commit or a release), in milliseconds since
    /// the Unix epoch, by the database's clock.
    pub updated_at_ms: u64,
}

/// The answer to [`CharacterStore::acquire_character`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CharacterAcquire {
    /// The asking zone holds the lease now.
    Granted {
        /// The character with its last committed data and version; its holder is the asking
        /// zone under the asking epoch.
        character: StoredCharacter,
        /// Whose stale lease was taken over: a zone and the epoch it held the lease under, which
        /// that zone's fence has since moved past. `None` when the character was new or free, or
        /// already held by the asking zone.
        from: Option<(String, u64)>,
    },
    /// Another zone holds a live lease: nothing changed. The player belongs there until that zone
    /// releases the character or is claimed by a new owner.
    Held {
        /// The holder zone.
        zone: String,
        /// The owner epoch it holds the lease under.
        epoch: u64,
    },
}

/// Characters, one per principal, each written only under the lease of the zone that holds it.
///
/// Every method is atomic with respect to other stores on the same database: acquisitions and
/// writes of one principal are serialized on its row, and each checks the zone's fence in the same
/// transaction. The rules:
/// - the `epoch` a zone passes must be its current fence (the epoch its owner was handed by the
///   last claim of the zone); otherwise the call is [`StoreError::Fenced`] and changes nothing. A
///   zone never claimed has no owner, so every call naming it is fenced;
/// - a write (commit or release) must come from the stored holder, exactly that zone under exactly
///   that epoch; a write by anyone else (another zone, an older lease of the same zone, a released
///   or never created character) is [`StoreError::CharacterLeaseLost`], naming the holder if any,
///   and changes nothing.
///
/// Principals are 1..=[`MAX_CHARACTER_PRINCIPAL`] bytes, zone ids are checked like every zone id,
/// and data is at most [`MAX_CHARACTER_BYTES`]; anything else is
/// [`StoreError::InvalidArgument`], refused before the database is touched.
#[async_trait]
pub trait CharacterStore: Send + Sync {
    /// `zone`, holding `epoch`, asks for `principal`'s character:
    /// - a character never seen is created empty (version 0) and granted;
    /// - a free character, one the same zone already holds (a reconnect, or the zone restarted
    ///   under a newer epoch), or one whose holder zone has been claimed since its lease was
    ///   taken (a stale lease: that owner can never write again) is granted with its last
    ///   committed data, and [`CharacterAcquire::Granted::from`] names a stale lease taken over;
    /// - a character another zone holds under its current epoch answers
    ///   [`CharacterAcquire::Held`] and changes nothing.
    ///
    /// Asking under an epoch lower than the one the same zone already holds the lease under is
    /// [`StoreError::Fenced`].
    async fn acquire_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
    ) -> Result<CharacterAcquire>;

    /// The holder (`zone` under `epoch`) stores `data` as the character's bytes; answers the new
    /// version (one more than before). Refused as the trait docs say, changing nothing.
    async fn commit_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: &[u8],
    ) -> Result<u64>;

    /// The holder (`zone` under `epoch`) gives the lease up, storing `data` first when given, in
    /// one transaction; answers the character's version after it (raised only when `data` is
    /// given). A release by a zone that no longer holds the lease is refused like a commit, so the
    /// caller learns it lost it, and never frees another holder's lease.
    async fn release_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: Option<&[u8]>,
    ) -> Result<u64>;

    /// The stored character, if any (admin tools and tests); takes no lease.
    async fn load_character(&self, principal: &str) -> Result<Option<StoredCharacter>>;
}

/// Refuses a principal that is empty or longer than [`MAX_CHARACTER_PRINCIPAL`].
pub(crate) fn check_principal(principal: &str) -> Result<()> {
    check_id("principal", principal)?;
    if principal.len() > MAX_CHARACTER_PRINCIPAL {
        return Err(StoreError::InvalidArgument(format!(
            "principal must be 1..={MAX_CHARACTER_PRINCIPAL} bytes, got {}",
            principal.len()
        )));
    }
    Ok(())
}

/// Refuses out-of-bounds arguments of a lease call: the principal, the zone id, an epoch the
/// database cannot hold, and data over [`MAX_CHARACTER_BYTES`].
pub(crate) fn check_args(
    principal: &str,
    zone: &str,
    epoch: u64,
    data: Option<&[u8]>,
) -> Result<()> {
    check_principal(principal)?;
    check_id("zone id", zone)?;
    to_db("epoch", epoch)?;
    if let Some(data) = data {
        if data.len() > MAX_CHARACTER_BYTES {
            return Err(StoreError::InvalidArgument(format!(
                "character is {} bytes, over the limit of {MAX_CHARACTER_BYTES}",
                data.len()
            )));
        }
    }
    Ok(())
}

/// Refuses a zone that does not run under `epoch`: the lease rule is stricter than a save's, as
/// only the owner the zone's last claim named (`fence == epoch`) may hold or write a lease, and a
/// zone never claimed (`fence == 0`) has no owner at all.
pub(crate) fn check_zone_owner(fence: u64, epoch: u64) -> Result<()> {
    if fence == 0 || epoch != fence {
        return Err(StoreError::Fenced {
            stored_epoch: fence,
            attempted: epoch,
        });
    }
    Ok(())
}

/// The stored lease holder, with its zone's current fence, as an acquisition needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder<'a> {
    /// The holder zone.
    pub zone: &'a str,
    /// The epoch it holds the lease under.
    pub epoch: u64,
    /// The holder zone's fence now.
    pub fence: u64,
}

/// What a backend must do with an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Make the asking zone the holder (creating the character if it has no row) and answer it
    /// granted, with `from` as [`CharacterAcquire::Granted::from`].
    Grant {
        /// The stale lease taken over, if any.
        from: Option<(String, u64)>,
    },
    /// Change nothing: another zone holds a live lease.
    Held {
        /// The holder zone.
        zone: String,
        /// Its lease epoch.
        epoch: u64,
    },
}

/// Decides an acquisition by `zone` holding `epoch` (against that zone's `fence`) of a character
/// whose stored lease is `holder` (`None` when free or new).
pub(crate) fn decide_acquire(
    zone: &str,
    epoch: u64,
    fence: u64,
    holder: Option<Holder<'_>>,
) -> Result<Acquire> {
    check_zone_owner(fence, epoch)?;
    let Some(holder) = holder else {
        return Ok(Acquire::Grant { from: None });
    };
    if holder.zone == zone {
        if epoch < holder.epoch {
            return Err(StoreError::Fenced {
                stored_epoch: holder.epoch,
                attempted: epoch,
            });
        }
        return Ok(Acquire::Grant { from: None });
    }
    if holder.fence > holder.epoch {
        // The holder zone was claimed after it took the lease: its old owner is fenced for good.
        return Ok(Acquire::Grant {
            from: Some((holder.zone.to_owned(), holder.epoch)),
        });
    }
    Ok(Acquire::Held {
        zone: holder.zone.to_owned(),
        epoch: holder.epoch,
    })
}

/// Decides whether `zone` holding `epoch` (against that zone's `fence`) may write `principal`'s
/// character, whose stored lease is `holder`. A fenced zone learns it is fenced before anything
/// about the lease.
pub(crate) fn decide_write(
    principal: &str,
    zone: &str,
    epoch: u64,
    fence: u64,
    holder: Option<(&str, u64)>,
) -> Result<()> {
    check_zone_owner(fence, epoch)?;
    match holder {
        Some((z, e)) if z == zone && e == epoch => Ok(()),
        other => Err(StoreError::CharacterLeaseLost {
            principal: principal.to_owned(),
            holder: other.map(|(z, e)| (z.to_owned(), e)),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn holder(zone: &str, epoch: u64, fence: u64) -> Option<Holder<'_>> {
        Some(Holder { zone, epoch, fence })
    }

    #[test]
    fn only_the_zones_current_owner_may_ask() {
        assert_eq!(
            decide_acquire("a", 2, 2, None),
            Ok(Acquire::Grant { from: None })
        );
        for (fence, epoch) in [(3, 2), (2, 3), (0, 0), (0, 1)] {
            assert_eq!(
                decide_acquire("a", epoch, fence, None),
                Err(StoreError::Fenced {
                    stored_epoch: fence,
                    attempted: epoch
                }),
                "fence {fence} epoch {epoch}"
            );
        }
    }

    #[test]
    fn the_same_zone_gets_its_lease_again_but_not_under_an_older_epoch() {
        assert_eq!(
            decide_acquire("a", 2, 2, holder("a", 2, 2)),
            Ok(Acquire::Grant { from: None })
        );
        assert_eq!(
            decide_acquire("a", 3, 3, holder("a", 2, 3)),
            Ok(Acquire::Grant { from: None })
        );
        assert_eq!(
            decide_acquire("a", 2, 2, holder("a", 3, 2)),
            Err(StoreError::Fenced {
                stored_epoch: 3,
                attempted: 2
            })
        );
    }

    #[test]
    fn a_live_lease_is_held_and_a_stale_one_is_taken() {
        assert_eq!(
            decide_acquire("b", 1, 1, holder("a", 4, 4)),
            Ok(Acquire::Held {
                zone: "a".into(),
                epoch: 4
            })
        );
        assert_eq!(
            decide_acquire("b", 1, 1, holder("a", 4, 5)),
            Ok(Acquire::Grant {
                from: Some(("a".into(), 4))
            })
        );
    }

    #[test]
    fn only_the_holder_under_the_current_epoch_writes() {
        assert_eq!(decide_write("p", "a", 2, 2, Some(("a", 2))), Ok(()));
        assert_eq!(
            decide_write("p", "a", 2, 3, Some(("a", 2))),
            Err(StoreError::Fenced {
                stored_epoch: 3,
                attempted: 2
            })
        );
        for stored in [None, Some(("b", 2)), Some(("a", 1))] {
            assert_eq!(
                decide_write("p", "a", 2, 2, stored),
                Err(StoreError::CharacterLeaseLost {
                    principal: "p".into(),
                    holder: stored.map(|(z, e)| (z.to_owned(), e)),
                }),
                "{stored:?}"
            );
        }
    }

    #[test]
    fn arguments_are_bounded() {
        assert!(check_args("p", "a", 1, Some(&[0; MAX_CHARACTER_BYTES])).is_ok());
        assert!(check_args("p", "a", 1, Some(&[0; MAX_CHARACTER_BYTES + 1])).is_err());
        assert!(check_args("", "a", 1, None).is_err());
        assert!(check_args(&"p".repeat(MAX_CHARACTER_PRINCIPAL), "a", 1, None).is_ok());
        assert!(check_args(&"p".repeat(MAX_CHARACTER_PRINCIPAL + 1), "a", 1, None).is_err());
        assert!(check_args("p", "", 1, None).is_err());
        assert!(check_args("p", "a", u64::MAX, None).is_err());
    }

    /// What a zone host does next, in the model world below.
    #[derive(Debug, Clone)]
    enum Op {
        /// A new owner claims zone `z` (its fence goes up by one).
        Claim(usize),
        /// The owner of zone `z` under the given epoch (its current one or an older one, as a
        /// delayed call would carry) acquires, commits or releases the one character.
        Acquire(usize, u8),
        Commit(usize, u8),
        Release(usize, u8, bool),
    }

    const ZONES: [&str; 3] = ["a", "b", "c"];

    fn op() -> impl Strategy<Value = Op> {
        let z = 0..ZONES.len();
        let back = 0u8..3;
        prop_oneof![
            1 => z.clone().prop_map(Op::Claim),
            3 => (z.clone(), back.clone()).prop_map(|(z, b)| Op::Acquire(z, b)),
            3 => (z.clone(), back.clone()).prop_map(|(z, b)| Op::Commit(z, b)),
            2 => (z, back, any::<bool>()).prop_map(|(z, b, d)| Op::Release(z, b, d)),
        ]
    }

    /// One character's row, as a backend would keep it by following the decisions.
    #[derive(Debug, Default)]
    struct Row {
        exists: bool,
        holder: Option<(String, u64)>,
        version: u64,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever claims and (possibly delayed) lease calls arrive, in any order: a write lands
        /// only from the holder under its zone's current epoch, a lease leaves a zone only when
        /// that zone released it or was claimed since, and a refused call changes nothing.
        #[test]
        fn the_lease_follows_the_fence(ops in proptest::collection::vec(op(), 1..80)) {
            let mut fences: BTreeMap<&str, u64> = BTreeMap::new();
            let mut row = Row::default();
            for (step, op) in ops.into_iter().enumerate() {
                let fence_of = |f: &BTreeMap<&str, u64>, z: &str| f.get(z).copied().unwrap_or(0);
                let asked = |z: usize, back: u8, f: &BTreeMap<&str, u64>| {
                    (ZONES[z], fence_of(f, ZONES[z]).saturating_sub(u64::from(back)))
                };
                match op {
                    Op::Claim(z) => *fences.entry(ZONES[z]).or_default() += 1,
                    Op::Acquire(z, back) => {
                        let (zone, epoch) = asked(z, back, &fences);
                        let fence = fence_of(&fences, zone);
                        let held = row.holder.as_ref().map(|(hz, he)| Holder {
                            zone: hz,
                            epoch: *he,
                            fence: fence_of(&fences, hz),
                        });
                        match decide_acquire(zone, epoch, fence, held) {
                            Ok(Acquire::Grant { from }) => {
                                prop_assert_eq!(epoch, fence, "step {}", step);
                                prop_assert!(fence > 0);
                                match (&row.holder, &from) {
                                    (None, None) => {}
                                    (Some((hz, _)), None) => prop_assert_eq!(hz.as_str(), zone),
                                    (Some((hz, he)), Some((fz, fe))) => {
                                        prop_assert_eq!((hz, he), (fz, fe));
                                        prop_assert_ne!(hz.as_str(), zone);
                                        prop_assert!(fence_of(&fences, hz) > *he);
                                    }
                                    (None, Some(_)) => prop_assert!(false, "taken from nobody"),
                                }
                                row.exists = true;
                                row.holder = Some((zone.to_owned(), epoch));
                            }
                            Ok(Acquire::Held { zone: hz, epoch: he }) => {
                                prop_assert_eq!(row.holder.clone(), Some((hz.clone(), he)));
                                prop_assert_ne!(hz.as_str(), zone);
                                prop_assert_eq!(fence_of(&fences, &hz), he, "a live lease");
                            }
                            Err(StoreError::Fenced { .. }) => {}
                            Err(e) => prop_assert!(false, "step {}: {}", step, e),
                        }
                    }
                    Op::Commit(z, back) | Op::Release(z, back, _) => {
                        let (zone, epoch) = asked(z, back, &fences);
                        let fence = fence_of(&fences, zone);
                        let stored = row.holder.as_ref().map(|(hz, he)| (hz.as_str(), *he));
                        match decide_write("p", zone, epoch, fence, stored) {
                            Ok(()) => {
                                prop_assert!(row.exists);
                                prop_assert_eq!(stored, Some((zone, epoch)));
                                prop_assert_eq!(epoch, fence, "only the current owner writes");
                                match op {
                                    Op::Commit(..) | Op::Release(_, _, true) => row.version += 1,
                                    _ => {}
                                }
                                if matches!(op, Op::Release(..)) {
                                    row.holder = None;
                                }
                            }
                            Err(StoreError::Fenced { stored_epoch, attempted }) => {
                                prop_assert_eq!((stored_epoch, attempted), (fence, epoch));
                                prop_assert!(fence == 0 || epoch != fence);
                            }
                            Err(StoreError::CharacterLeaseLost { holder, .. }) => {
                                prop_assert_eq!(&holder, &row.holder);
                                prop_assert_ne!(holder, Some((zone.to_owned(), epoch)));
                            }
                            Err(e) => prop_assert!(false, "step {}: {}", step, e),
                        }
                    }
                }
            }
        }
    }
}
