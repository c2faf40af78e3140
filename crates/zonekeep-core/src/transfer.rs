//! Transfers: moving a player from this zone to another, possibly on another host.
//!
//! The zone asks with [`Ctx::transfer`](crate::Ctx::transfer). After the hook returns, the host
//! calls [`Zone::transfer_out`](crate::Zone::transfer_out) (the zone removes the player's entity
//! and returns its state as bytes), discards the player's buffered inputs, marks it **moving**
//! and queues a [`TransferRequest`] for the server
//! ([`ZoneHost::drain_transfers`](crate::ZoneHost::drain_transfers)). A moving player stays in
//! the roster (its connection stays open), its inputs are refused with
//! [`InputOutcome::Moving`](crate::InputOutcome::Moving) and it is sent no frames: its client
//! keeps drawing the last world it was sent.
//!
//! The server then hands the request to the target zone's host
//! ([`ZoneHost::handle_transfer_in`](crate::ZoneHost::handle_transfer_in)), which admits the
//! player through [`Zone::transfer_in`](crate::Zone::transfer_in) as a dropped participant
//! whose connection arrives later. On success the source hears
//! [`ZoneHost::handle_transfer_done`](crate::ZoneHost::handle_transfer_done) and the player
//! leaves with [`LeaveReason::Transferred`](crate::LeaveReason::Transferred); on failure
//! [`ZoneHost::handle_transfer_back`](crate::ZoneHost::handle_transfer_back) gives the zone its
//! player back (with the state it handed out) and replication resumes where it stopped.
//!
//! A moving player is not part of a snapshot (the server's durable transfer record owns it
//! then); a zone image, and so a recording, keeps the moving set.
//!
//! In a kind that keeps characters ([`crate::character`]) the player hands its character back
//! as it moves out, right after `transfer_out` (a releasing
//! [`CharacterWrite`](crate::CharacterWrite)), and holds none while it moves. The target's host
//! takes the character's lease for the target zone and admits the player with it
//! ([`ZoneHost::handle_transfer_in_with_character`](crate::ZoneHost::handle_transfer_in_with_character));
//! a move that comes back gives the player its character again before `transfer_in` runs: the
//! release itself if the host has not drained it yet, else the character its host took again
//! ([`ZoneHost::handle_transfer_back_with_character`](crate::ZoneHost::handle_transfer_back_with_character)).

use std::collections::BTreeMap;

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use crate::message::MAX_ZONE_ID_LEN;
use crate::player::{Claims, PlayerId, Principal, Role};

/// Most transfers a zone may ask for in one tick.
pub const MAX_TRANSFERS_PER_TICK: usize = 64;
/// Largest claims object (as JSON text) a zone may hand the target, in bytes.
pub const MAX_TRANSFER_CLAIMS: usize = 16 * 1024;
/// Largest state [`Zone::transfer_out`](crate::Zone::transfer_out) may return, in bytes; a
/// bigger one refuses the transfer and the zone takes its player straight back.
pub const MAX_TRANSFER_STATE: usize = 256 * 1024;

/// A player leaving this zone for another, drained by the server after
/// [`advance`](crate::ZoneHost::advance) (or any call that ran hooks).
#[derive(Debug, Clone, PartialEq)]
pub struct TransferRequest {
    /// The player, in this zone.
    pub player: PlayerId,
    /// Its verified identity.
    pub principal: Principal,
    /// Always [`Role::Player`]: observers cannot be transferred.
    pub role: Role,
    /// The claims the player joined with.
    pub player_claims: Claims,
    /// Where it goes (1..=128 bytes).
    pub target_zone: String,
    /// The claims this zone hands the target (at most [`MAX_TRANSFER_CLAIMS`] bytes of JSON).
    pub claims: Claims,
    /// What [`Zone::transfer_out`](crate::Zone::transfer_out) returned (at most
    /// [`MAX_TRANSFER_STATE`] bytes).
    pub state: Vec<u8>,
    /// The tick the zone asked in.
    pub tick: u64,
}

/// How a player arrives through [`Zone::transfer_in`](crate::Zone::transfer_in).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival<'a> {
    /// The state the zone it comes from handed out.
    pub state: &'a [u8],
    /// The zone it comes from (for a return, the zone it failed to reach).
    pub from_zone: &'a str,
    /// The claims the zone it comes from handed over.
    pub claims: &'a Claims,
    /// The player is coming back after a transfer that failed: the zone must take it (a
    /// refusal is ignored and counted).
    pub returning: bool,
    /// A returning player is new to this run of the zone: its move was returned after the zone
    /// restarted and it joined again, so it has no entity here and `state` is all it carried.
    /// Always false when not `returning`.
    pub new_to_run: bool,
}

/// Why [`Ctx::transfer`](crate::Ctx::transfer) refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// No such participant.
    #[error("unknown player")]
    UnknownPlayer,
    /// Observers cannot be transferred.
    #[error("observers cannot be transferred")]
    Observer,
    /// The player is moving already (or asked for this tick).
    #[error("the player is already moving")]
    AlreadyMoving,
    /// The target is this zone.
    #[error("the target is this zone")]
    SameZone,
    /// The target id is empty or longer than 128 bytes.
    #[error("the target zone id must be 1..={MAX_ZONE_ID_LEN} bytes")]
    BadZoneId,
    /// The claims are larger than [`MAX_TRANSFER_CLAIMS`] as JSON.
    #[error("the claims are too large")]
    TooLarge,
    /// More than [`MAX_TRANSFERS_PER_TICK`] transfers this tick.
    #[error("too many transfers this tick")]
    TooMany,
}

/// A transfer the zone asked for, applied after the hook returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ask {
    pub(crate) player: PlayerId,
    pub(crate) target: String,
    pub(crate) claims: Claims,
    pub(crate) tick: u64,
}

/// A moving player: what a return needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Moving {
    pub(crate) target: String,
    pub(crate) claims: Claims,
    pub(crate) state: Vec<u8>,
}

/// The host's transfer state: asks not yet applied, the moving players and the requests not
/// yet drained. Bounded: a player is asked for or moving at most once, so every list is at most
/// the roster.
#[derive(Debug, Default)]
pub(crate) struct Transfers {
    pub(crate) asked: Vec<Ask>,
    /// The tick `asked_in_tick` counts for.
    asked_tick: u64,
    asked_in_tick: usize,
    pub(crate) moving: BTreeMap<PlayerId, Moving>,
    pub(crate) out: Vec<TransferRequest>,
    /// Transfers refused because the state was too large, since the last report.
    pub(crate) refused: u64,
    /// Returns the zone refused (and had to take anyway), since the last report.
    pub(crate) returns_refused: u64,
}

impl Transfers {
    /// Whether `player` is moving or about to.
    pub(crate) fn busy(&self, player: PlayerId) -> bool {
        self.moving.contains_key(&player) || self.asked.iter().any(|a| a.player == player)
    }

    /// Counts one ask in `tick`; false past the per-tick limit.
    pub(crate) fn count_ask(&mut self, tick: u64) -> bool {
        if self.asked_tick != tick {
            self.asked_tick = tick;
            self.asked_in_tick = 0;
        }
        if self.asked_in_tick >= MAX_TRANSFERS_PER_TICK {
            return false;
        }
        self.asked_in_tick += 1;
        true
    }

    /// Appends the moving set and the per-tick counter to a zone image: the tick, the count,
    /// then per moving player `id`, `blob target`, `blob claims` (JSON), `blob state`. Requests
    /// not yet drained are left out: an image is taken between two calls, after the driver
    /// drained them.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_varint(out, self.asked_tick);
        put_varint(out, self.asked_in_tick as u64);
        put_varint(out, self.moving.len() as u64);
        for (id, m) in &self.moving {
            put_varint(out, u64::from(id.0));
            put_blob(out, m.target.as_bytes());
            let claims = serde_json::to_string(&m.claims).unwrap_or_default();
            put_blob(out, claims.as_bytes());
            put_blob(out, &m.state);
        }
    }

    /// Reads what [`Transfers::put_image`] wrote.
    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<Transfers, DecodeError> {
        let mut t = Transfers {
            asked_tick: r.varint_u64()?,
            asked_in_tick: r.count("transfers this tick", MAX_TRANSFERS_PER_TICK)?,
            ..Transfers::default()
        };
        let n = r.count("moving players", r.remaining() / 4)?;
        for _ in 0..n {
            let id = PlayerId(r.varint_u32()?);
            let target = r.str_named("target zone", MAX_ZONE_ID_LEN)?.to_owned();
            let claims: Claims = serde_json::from_str(r.str(MAX_TRANSFER_CLAIMS)?)
                .map_err(|_| DecodeError::Invalid("transfer claims are not a JSON object"))?;
            let state = r
                .bytes_named("transfer state", MAX_TRANSFER_STATE)?
                .to_vec();
            t.moving.insert(
                id,
                Moving {
                    target,
                    claims,
                    state,
                },
            );
        }
        Ok(t)
    }
}

fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}
