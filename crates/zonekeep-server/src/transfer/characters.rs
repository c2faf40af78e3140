//! What a move does with the player's character, between zones of kinds that keep characters
//! (docs/ARCHITECTURE.md, "Character").
//!
//! The zone the player leaves hands the character back as the player moves out (the core writes
//! its release right after `transfer_out`). The target's host then takes the character's lease
//! for the target zone before admitting the player, through the same acquisition as a join
//! (`session::character`): a release not settled yet is waited for by a recall of the zone that
//! still holds the lease, on this host or over the bus. A target that cannot take it (the store
//! does not answer, the holder cannot be asked in time) does not admit the player, and the move
//! is returned. A returned move takes the character again, the same way, for the source zone,
//! which admits the player back with it; one that cannot be taken leaves the player nothing to
//! stay with, so the source lets it go with a retry hint (CHARACTER_ELSEWHERE).
//!
//! A kind without characters neither takes nor gives one: the character stays in the store,
//! free, with its last state, until the player enters a zone of a kind that keeps characters
//! again (by a join or a move), which takes it there.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Outbound, Retaken};
use crate::host::Shared;
use crate::session::{
    acquire_character, character_held_here, kind_keeps_characters, start_alone, zone_kind,
};
use crate::sim::{JoinFailure, ZoneCreate, ZoneEntry};

/// For a move into the zone of `entry` (of `kind` unless it runs already as another kind): takes
/// `principal`'s character's lease for the zone, starting it first when `create` says it does
/// not run yet (the lease is its owner epoch's). Answers the character (`None` for a kind without characters) and the start still to
/// make (handed back untouched for a kind without characters, used up otherwise). With `only_if_away`,
/// a character whose lease the running zone holds already is not taken again (`None`): a moved
/// player's connection arriving finds its player, and its character, there.
pub(super) async fn take_for_arrival(
    shared: &Arc<Shared>,
    entry: &Arc<ZoneEntry>,
    create: Option<ZoneCreate>,
    kind: &str,
    principal: &str,
    only_if_away: bool,
) -> Result<(Option<Vec<u8>>, Option<ZoneCreate>), JoinFailure> {
    let kind = zone_kind(entry, create.as_ref(), kind);
    if !kind_keeps_characters(shared, &kind) {
        return Ok((None, create));
    }
    if let Some(c) = create {
        start_alone(shared, entry, c, false).await?;
    }
    if only_if_away && character_held_here(shared, entry, principal).await? {
        return Ok((None, None));
    }
    let character = acquire_character(shared, entry, principal).await?;
    Ok((Some(character), None))
}

/// Takes the character of the player of returned move `o` again for the source zone, when that
/// zone runs here under the move's epoch and its kind keeps characters (`None` otherwise: there
/// is nothing to take, or nobody to give it to).
pub(super) async fn retake(shared: &Arc<Shared>, o: &Outbound) -> Option<Retaken> {
    let entry = shared
        .registry
        .get(&o.zone_id)
        .filter(|e| e.epoch.load(Ordering::Acquire) == o.epoch)?;
    let kind = entry
        .summary
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .kind
        .clone();
    if !kind_keeps_characters(shared, &kind) {
        return None;
    }
    let principal = o.request.principal.as_str().to_owned();
    let character = acquire_character(shared, &entry, &principal)
        .await
        .map_err(|e| e.to_string());
    if let Err(why) = &character {
        shared.metrics.transfer("character_not_retaken");
        tracing::warn!(zone = %o.zone_id, player = %o.request.player, reason = %why, "a returned move's character was not taken again: the player leaves the zone");
    }
    Some(Retaken {
        principal,
        character,
    })
}
