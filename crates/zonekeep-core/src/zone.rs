//! The `Zone` trait game code implements, and its hook types.

use crate::call::{CallKey, CallResult};
use crate::ctx::Ctx;
use crate::error::ZoneError;
use crate::fact::Settlement;
use crate::input::InputRefusal;
use crate::message::{ChildEvent, MessageFrom, MessageTarget};
use crate::player::{PlayerId, PlayerInfo};
use crate::rewind::{LagCompensation, Rewind};
use crate::tier::Tier;
use crate::timer::TimerId;
use crate::transfer::Arrival;
use crate::world::{EntityId, World};
use zonekeep_protocol::contract::Contract;

/// What a zone is created from.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneInit {
    /// Unique zone id (also feeds the RNG derivation).
    pub zone_id: String,
    /// Which game code runs it (the registry key).
    pub kind: String,
    /// Kind-specific create params.
    pub params: serde_json::Value,
}

/// Why a participant left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaveReason {
    /// Left on purpose.
    Left,
    /// Connection lost and not restored within the reconnect grace.
    Dropped,
    /// Removed by the zone or the host.
    Kicked,
    /// Moved to another zone.
    Transferred,
}

/// A zone's refusal of a join or observe, with its own reason code
/// (sent to the client; the meaning of codes is the game's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRefusal {
    /// Game-defined reason code.
    pub code: u16,
    /// Human-readable reason.
    pub reason: String,
}

impl JoinRefusal {
    /// A refusal with `code` and `reason`.
    pub fn new(code: u16, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for JoinRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.reason, self.code)
    }
}

/// One authoritative simulation: the game code of a zone kind.
///
/// Hooks run on the zone's simulation thread, one at a time, in a
/// deterministic order. Within a tick the host: hands each player's buffered
/// inputs to [`on_input`](Zone::on_input) (players in id order, per the
/// configured [`InputPolicy`](crate::InputPolicy)), calls
/// [`tick`](Zone::tick), fires due timers through
/// [`on_timer`](Zone::on_timer), applies kicks, then records
/// [`state_hash`](Zone::state_hash).
///
/// A zone must take time only from [`Ctx::time`]/[`Ctx::tick`] and randomness
/// only from [`Ctx::rng`]; then the same inputs at the same ticks give the same
/// state.
///
/// A zone that opts in to lag compensation ([`lag_compensation`](Zone::lag_compensation))
/// receives inputs carrying a view tick through [`apply_input_at`](Zone::apply_input_at), with
/// the world as that player drew it, instead of `on_input`.
///
/// # Who can reach which hook
///
/// Clients reach a zone only through inputs ([`sanitize`](Zone::sanitize), then
/// [`on_input`](Zone::on_input)) and their connection's life (join, drop, rejoin, leave).
/// [`on_message`](Zone::on_message) and [`on_child`](Zone::on_child) carry messages from other
/// zones ([`MessageFrom::Zone`]) or the operator ([`MessageFrom::Admin`]): no client can produce
/// one, so they are the place for server-originated commands. Messages queued by the host are
/// delivered at the start of the next tick, after fact settlements and before inputs, in the
/// order they arrived.
pub trait Zone: Send + 'static {
    /// A sanitized input, produced by [`sanitize`](Zone::sanitize).
    type Input: Send + 'static;

    /// Build the zone from its params. `ctx` has no players yet; timers may be scheduled.
    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError>
    where
        Self: Sized;

    /// A player asks to join; return a refusal to turn it away.
    /// The player is already visible in `ctx.players()` during this call.
    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        let _ = (ctx, player);
        Ok(())
    }

    /// An observer asks to watch; return a refusal to turn it away.
    fn on_observe(&mut self, ctx: &mut Ctx<'_>, observer: &PlayerInfo) -> Result<(), JoinRefusal> {
        let _ = (ctx, observer);
        Ok(())
    }

    /// A participant has left (it is no longer in `ctx.players()`).
    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, why: LeaveReason) {
        let _ = (ctx, player, why);
    }

    /// A participant's connection was lost; the reconnect grace has started
    /// and it keeps its place until the grace ends.
    fn on_drop(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let _ = (ctx, player);
    }

    /// A dropped participant came back within the grace.
    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let _ = (ctx, player);
    }

    /// A transfer this zone asked for ([`Ctx::transfer`]) is leaving: remove the player's entity
    /// and return the state the target zone needs (at most 256 KiB, else the transfer is refused
    /// and the player handed straight back through [`transfer_in`](Zone::transfer_in) with
    /// `returning`). The player stays a participant, moving, until the server reports the
    /// outcome. The default returns nothing.
    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        let _ = (ctx, player);
        Vec::new()
    }

    /// A player arrives by transfer ([`Arrival::returning`] false: from `arrival.from_zone`, in
    /// place of [`on_join`](Zone::on_join); the player is dropped until its connection arrives),
    /// or comes back after a transfer that failed (`returning` true: `arrival.state` is what
    /// [`transfer_out`](Zone::transfer_out) returned). A zone must always take its own player
    /// back: a refusal of a return is ignored and counted. A returning player may be new to
    /// this run of the zone (its move was returned after the zone restarted, and it joined
    /// again: [`ZoneHost::handle_transfer_return`](crate::ZoneHost::handle_transfer_return)):
    /// `arrival.state` is then all it carried, and [`Arrival::new_to_run`] says so. The default
    /// takes a player returning to the run it left without doing anything, and hands an
    /// arrival, or a returning player new to this run, to [`on_join`](Zone::on_join).
    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        if arrival.returning && !arrival.new_to_run {
            return Ok(());
        }
        self.on_join(ctx, player)
    }

    /// A message from another zone or the operator (never a player); see [`crate::message`].
    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: &MessageFrom, topic: u16, payload: &[u8]) {
        let _ = (ctx, from, topic, payload);
    }

    /// A child zone (one that named this zone its parent) changed tier or sent a message with
    /// [`Ctx::to_parent`].
    fn on_child(&mut self, ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>) {
        let _ = (ctx, child, event);
    }

    /// A message this zone sent could not be delivered (no bus, the target refused it or does
    /// not exist); `reason` is the server's.
    fn on_undeliverable(
        &mut self,
        ctx: &mut Ctx<'_>,
        to: &MessageTarget,
        topic: u16,
        reason: &str,
    ) {
        let _ = (ctx, to, topic, reason);
    }

    /// Decode, validate and clamp a raw input before it is buffered.
    /// A refusal is counted and the input is never buffered. Runs outside
    /// ticks as inputs arrive, so it must not change simulation state.
    fn sanitize(&mut self, player: PlayerId, payload: &[u8]) -> Result<Self::Input, InputRefusal>;

    /// Apply one sanitized input (inside a tick, before [`tick`](Zone::tick)).
    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: Self::Input) {
        let _ = (ctx, player, input);
    }

    /// Opt in to lag compensation: return the settings and the host keeps what every subscriber
    /// was sent, and hands inputs that carry a view tick to
    /// [`apply_input_at`](Zone::apply_input_at) with the world as that player drew it (see
    /// [`crate::rewind`]). Asked once, right after [`create`](Zone::create) or
    /// [`restore`](Zone::restore). The default `None` keeps nothing and costs nothing: every
    /// input goes to [`on_input`](Zone::on_input).
    fn lag_compensation(&self) -> Option<LagCompensation> {
        None
    }

    /// Apply one sanitized input judged against what `player` saw: `rewind` places every entity
    /// where that player drew it at the input's (clamped) view tick, for hit tests. Only called
    /// for a zone that opted in ([`lag_compensation`](Zone::lag_compensation)) and for inputs with
    /// a view tick once the player was sent a frame; the rest go to
    /// [`on_input`](Zone::on_input), which is also the default here.
    fn apply_input_at(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: PlayerId,
        input: Self::Input,
        rewind: &Rewind<'_>,
    ) {
        let _ = rewind;
        self.on_input(ctx, player, input);
    }

    /// Advance the simulation by one fixed step of `ctx.dt()`.
    fn tick(&mut self, ctx: &mut Ctx<'_>);

    /// A timer scheduled through `ctx.timers()` fired.
    fn on_timer(&mut self, ctx: &mut Ctx<'_>, id: TimerId, tag: u64) {
        let _ = (ctx, id, tag);
    }

    /// The zone's activity tier changed.
    fn on_tier(&mut self, ctx: &mut Ctx<'_>, from: Tier, to: Tier) {
        let _ = (ctx, from, to);
    }

    /// The zone is being shut down (after this no hook is called again).
    fn dispose(&mut self, ctx: &mut Ctx<'_>) {
        let _ = ctx;
    }

    /// Whether `viewer` may see `entity` while it is in range (stealth, fog of war, teams).
    /// Called during replication for entities within the viewer's radius; never consulted for
    /// the viewer's own controlled entity or for global entities. Must be a pure function of
    /// the zone and world state. The default shows everything in range.
    fn can_see(&self, viewer: PlayerId, entity: EntityId, world: &World) -> bool {
        let _ = (viewer, entity, world);
        true
    }

    /// [`can_see`](Zone::can_see) for one viewer at a time: replication asks for it once per
    /// viewer per patch and calls what it returns for each entity in that viewer's range. Override
    /// it when part of the answer depends only on the viewer (finding it, its team, its position):
    /// that part is then done once per viewer instead of once per entity. Its answers must be
    /// `can_see`'s. The default asks `can_see` for each entity.
    fn sight<'a>(
        &'a self,
        viewer: PlayerId,
        world: &'a World,
    ) -> impl FnMut(EntityId) -> bool + 'a {
        move |entity| self.can_see(viewer, entity, world)
    }

    /// Whether replication must consult [`Zone::can_see`]. A zone whose `can_see` shows
    /// everything (as the default does) may return `false`: the host then skips the calls, and a
    /// participant with an unbounded view radius sees every entity without any interest query,
    /// which is much cheaper with many entities. Must be a pure function of the zone's state; the
    /// default `true` is always correct.
    fn uses_can_see(&self) -> bool {
        true
    }

    /// What this kind's clients send and hear besides entities: its input payload layouts,
    /// event types and named constants (see [`Contract`]). `zonekeep codegen` writes typed
    /// input builders and event decoders from it. The default declares nothing.
    fn contract(&self) -> Contract {
        Contract::new()
    }

    /// A hash of the whole simulation state, for determinism checks and
    /// replay verification. `None` (the default) means the host uses the replicated world's
    /// hash ([`World::hash`]); a zone with state outside the world returns its own hash
    /// covering that state (it may fold in anything it keeps in the world as well).
    fn state_hash(&self) -> Option<u64> {
        None
    }

    /// The zone's own state as bytes, for saves (taken at a tick boundary).
    /// `None` (the default) means this kind is not persisted. Participants
    /// are not part of a save: after a restore they join again.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }

    /// Rebuild the zone from bytes produced by [`save`](Zone::save), instead
    /// of [`create`](Zone::create). Return [`ZoneError::Restore`] when the
    /// bytes cannot be read (for example the state's schema changed): the
    /// host reports it and the save is kept. The default refuses with
    /// [`ZoneError::NotRestorable`].
    fn restore(init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError>
    where
        Self: Sized,
    {
        let _ = (ctx, bytes);
        Err(ZoneError::NotRestorable(init.kind.clone()))
    }

    /// Turn a save written under the older state version `from` (see
    /// [`ZoneConfig::state_version`](crate::ZoneConfig::state_version)) into this version's
    /// bytes, which [`restore`](Zone::restore) then reads. Return
    /// [`ZoneError::NoMigration`] (the default) for a version it cannot read: a lasting world
    /// then does not start and its save is kept; another zone starts fresh. Any other error is
    /// the migration failing: the zone does not start and its save is kept.
    fn migrate(from: u32, bytes: &[u8]) -> Result<Vec<u8>, ZoneError>
    where
        Self: Sized,
    {
        let _ = bytes;
        Err(ZoneError::NoMigration(from))
    }

    /// The zone's whole in-memory state as bytes, for a recording started while the zone runs
    /// (an *image*, not a save: it is read back only by this same build, by
    /// [`from_image`](Zone::from_image), and must keep everything the zone's behaviour depends
    /// on — entity ids, cooldowns, per-player state). `None` (the default) means the kind has no
    /// image: a running zone is then recorded from its [`save`](Zone::save), which diverges
    /// wherever the save leaves state out.
    fn image(&self) -> Option<Vec<u8>> {
        None
    }

    /// Rebuild the zone from bytes produced by [`image`](Zone::image). Unlike
    /// [`restore`](Zone::restore), everything the host owns is already back as it was when the
    /// image was taken: the world with its entities and ids, the RNG's position, the timers, the
    /// facts in flight and the participants (whose hooks are not called again). So this only
    /// reads the bytes back; it must not spawn, schedule or draw from the RNG. The default
    /// refuses with [`ZoneError::NotRestorable`].
    fn from_image(init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError>
    where
        Self: Sized,
    {
        let _ = (ctx, bytes);
        Err(ZoneError::NotRestorable(init.kind.clone()))
    }

    /// A fact emitted with [`Ctx::emit_fact`] was settled by the sink
    /// (delivered at the start of the tick after the settlement arrived,
    /// before inputs). After a restore, a re-sent fact may be settled here
    /// although the zone saw its settlement before the crash: the outcome is
    /// the same (the sink is idempotent by key).
    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        let _ = (ctx, settlement);
    }

    /// A call made with [`Ctx::call`] has its result (delivered at the start of the tick after
    /// the result arrived, after fact settlements and before inputs). Counted against the zone's
    /// saved state, each call's result arrives once: after a restore, a call still in flight in
    /// the save is asked again and its result (from the host's journal when the effect already
    /// took place) arrives here then.
    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &CallKey, result: &CallResult) {
        let _ = (ctx, key, result);
    }

    /// Why this zone can no longer run, once it cannot: game code run in a sandbox (a module)
    /// that trapped, panicked or overran its budget answers with the reason. The server stops
    /// such a zone after the call that failed: its players are kicked with the reason, no final
    /// save is written (its last save stays as it was) and every other zone keeps its tick. A
    /// native zone never fails this way (a panic in Rust code is a bug of the host's build).
    fn failure(&self) -> Option<&str> {
        None
    }

    /// A flag another thread may set to stop the zone's running call, for game code that can be
    /// interrupted (a module): the server sets it when its lease lapses, so a long call does not
    /// keep acting for a host that may no longer own the zone. The zone then fails
    /// ([`failure`](Zone::failure)). Native code cannot be interrupted and has none.
    fn stop_handle(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        None
    }

    /// Log lines the zone's game code wrote that its rate limit dropped, since the zone
    /// started (a module's log is rate-limited; native code logs through the host's own
    /// logging). The server counts them in its metrics.
    fn log_lines_suppressed(&self) -> u64 {
        0
    }
}
