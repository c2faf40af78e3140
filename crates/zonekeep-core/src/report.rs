//! What one `advance` call reports.

use std::time::Duration;

use crate::ctx::Kick;
use crate::player::PlayerId;
use crate::tier::TierTransition;
use crate::zone::LeaveReason;

/// Counters of inputs pushed (and consumed) since the previous `advance`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputCounters {
    /// Buffered (including those that pushed out an older one).
    pub accepted: u64,
    /// Refused as duplicates.
    pub duplicate: u64,
    /// Refused as older than the newest received.
    pub stale: u64,
    /// Older inputs dropped from a full buffer to make room.
    pub overflowed: u64,
    /// Refused by the zone's `sanitize`.
    pub refused: u64,
    /// Buffered inputs discarded unapplied by the `Latest` policy.
    pub superseded: u64,
    /// Pushed for an unknown, observer, dropped participant or a disposed host.
    pub unroutable: u64,
}

/// The outcome of one [`ZoneHost::advance`](crate::ZoneHost::advance).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdvanceReport {
    /// The host's tick after this advance.
    pub tick: u64,
    /// Ticks simulated.
    pub ticks_run: u64,
    /// Due ticks beyond `max_catch_up`, dropped by moving the schedule forward.
    pub ticks_dropped: u64,
    /// Due ticks deliberately not run because the zone is Idle or Dormant.
    pub ticks_skipped: u64,
    /// Duration of each tick run, measured with the host's clock.
    pub tick_durations: Vec<Duration>,
    /// Input counters since the previous advance.
    pub inputs: InputCounters,
    /// Tier changes since the previous advance, in order.
    pub tier_transitions: Vec<TierTransition>,
    /// Ticks run in this advance that are patch ticks: take the patch with
    /// [`ZoneHost::drain_frames`](crate::ZoneHost::drain_frames).
    pub patch_ticks: Vec<u64>,
    /// Participants who left since the previous advance, in order.
    pub left: Vec<(PlayerId, LeaveReason)>,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// Kicks applied since the previous advance (the host must tell those clients).
    pub kicks: Vec<Kick>,
    /// Facts refused since the previous advance because the in-flight set was full.
    pub facts_overflowed: u64,
    /// Fact settlements delivered to the zone in this advance.
    pub facts_settled: u64,
    /// Settlements dropped since the previous advance because their key was not in flight.
    pub settlements_unknown: u64,
    /// Facts refused since the previous advance by the size and rate limits.
    pub facts_refused: FactRefusals,
    /// Calls refused since the previous advance because the in-flight set was full.
    pub calls_overflowed: u64,
    /// Call results delivered to the zone in this advance.
    pub calls_answered: u64,
    /// Call results dropped since the previous advance because their key was not in flight.
    pub call_results_unknown: u64,
    /// Spawns refused since the previous advance by the entity cap.
    pub spawns_refused: u64,
    /// Zone messages refused since the previous advance ([`Ctx::send`](crate::Ctx::send) and
    /// [`Ctx::to_parent`](crate::Ctx::to_parent) errors).
    pub messages_refused: u64,
    /// Inbound messages refused with [`Delivery::Full`](crate::Delivery::Full) (and
    /// undeliverable notices dropped) since the previous advance.
    pub messages_full: u64,
    /// Tier messages to the parent dropped because the outbox was full.
    pub tier_messages_dropped: u64,
    /// Transfers refused since the previous advance because the state
    /// [`Zone::transfer_out`](crate::Zone::transfer_out) returned was too large (the player was
    /// handed back at once).
    pub transfers_refused: u64,
    /// Returning players the zone refused in [`Zone::transfer_in`](crate::Zone::transfer_in)
    /// (and kept anyway: a zone must take its player back).
    pub transfer_returns_refused: u64,
}

/// Facts refused by a limit, by the limit (a full in-flight set is
/// [`AdvanceReport::facts_overflowed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FactRefusals {
    /// Over [`ZoneConfig::max_fact_bytes`](crate::ZoneConfig::max_fact_bytes).
    pub too_large: u64,
    /// Over [`ZoneConfig::max_facts_per_second`](crate::ZoneConfig::max_facts_per_second).
    pub rate: u64,
}
