//! One host call, decoded and run: [`dispatch`], the function the exports call, usable natively
//! over byte buffers.

use std::fmt;
use std::time::Duration;

use crate::ctx::{Ctx, SdkState};
use crate::log::{log, Level};
use crate::rng::Rng;
use crate::wire::{DecodeError, Reader, Writer};
use crate::zone::{
    Arrival, ChildEvent, MessageFrom, MigrateError, Player, PlayerId, Role, Tier, Zone,
};
use call::Call;
use zonekeep_abi::migration;

mod call;

/// The ABI version this SDK speaks (`zk_abi`).
pub const ABI_VERSION: i32 = zonekeep_abi::ABI_VERSION;

/// The first byte of every save the SDK writes: the version of its header.
pub const SAVE_FORMAT: u8 = 2;

/// Bytes of the SDK's save header: [`SAVE_FORMAT`], the RNG state as 4 × `u64`, then the
/// count of fact keys the SDK made as a `u64`.
pub const SAVE_HEADER_LEN: usize = 1 + 4 * 8 + 8;

/// A call's `op` (docs/MODULES.md, "Calls").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// 1: build the zone.
    Create = zonekeep_abi::op::CREATE as isize,
    /// 2: a participant asks to join.
    Join = zonekeep_abi::op::JOIN as isize,
    /// 3: a participant left.
    Leave = zonekeep_abi::op::LEAVE as isize,
    /// 4: a participant's connection was lost.
    Drop = zonekeep_abi::op::DROP as isize,
    /// 5: a dropped participant came back.
    Rejoin = zonekeep_abi::op::REJOIN as isize,
    /// 6: accept or refuse a raw input.
    Sanitize = zonekeep_abi::op::SANITIZE as isize,
    /// 7: apply accepted inputs, in order (those not followed by a tick).
    Inputs = zonekeep_abi::op::INPUTS as isize,
    /// 8: apply the tick's accepted inputs, in order, then run the tick.
    Tick = zonekeep_abi::op::TICK as isize,
    /// 9: a timer fired.
    Timer = zonekeep_abi::op::TIMER as isize,
    /// 10: the save's bytes.
    Save = zonekeep_abi::op::SAVE as isize,
    /// 11: rebuild the zone from a save.
    Restore = zonekeep_abi::op::RESTORE as isize,
    /// 12: the zone's state hash.
    StateHash = zonekeep_abi::op::STATE_HASH as isize,
    /// 13: a fact was settled.
    Settled = zonekeep_abi::op::SETTLED as isize,
    /// 14: the zone settings the module asks for.
    Config = zonekeep_abi::op::CONFIG as isize,
    /// 15: a transfer leaves; answers the player's state, then commands.
    TransferOut = zonekeep_abi::op::TRANSFER_OUT as isize,
    /// 16: a player arrives by transfer, or comes back.
    TransferIn = zonekeep_abi::op::TRANSFER_IN as isize,
    /// 17: a zone message.
    Message = zonekeep_abi::op::MESSAGE as isize,
    /// 18: a child zone's message or tier change.
    Child = zonekeep_abi::op::CHILD as isize,
    /// 19: a message the zone sent could not be delivered.
    Undeliverable = zonekeep_abi::op::UNDELIVERABLE as isize,
    /// 20: migrate a save of an older state version.
    Migrate = zonekeep_abi::op::MIGRATE as isize,
    /// 21: a durable call's result.
    CallResult = zonekeep_abi::op::CALL_RESULT as isize,
}

impl Op {
    /// Every op, in number order.
    pub const ALL: [Op; 21] = [
        Op::Create,
        Op::Join,
        Op::Leave,
        Op::Drop,
        Op::Rejoin,
        Op::Sanitize,
        Op::Inputs,
        Op::Tick,
        Op::Timer,
        Op::Save,
        Op::Restore,
        Op::StateHash,
        Op::Settled,
        Op::Config,
        Op::TransferOut,
        Op::TransferIn,
        Op::Message,
        Op::Child,
        Op::Undeliverable,
        Op::Migrate,
        Op::CallResult,
    ];

    /// The op numbered `n`, if any.
    pub fn from_number(n: u32) -> Option<Self> {
        let i = usize::try_from(n.checked_sub(1)?).ok()?;
        Self::ALL.get(i).copied()
    }

    /// The op's number.
    pub fn number(self) -> u32 {
        self as u32
    }
}

/// Why a call cannot go on: the exports log it at [`Level::Panic`] and trap, and the host stops
/// the zone with the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fatal {
    /// An op number the ABI does not have.
    UnknownOp(u32),
    /// The call's input could not be read.
    Malformed {
        /// The call.
        op: Op,
        /// What was wrong.
        error: DecodeError,
    },
    /// A hook call before CREATE or RESTORE built the zone.
    NotCreated(Op),
    /// CREATE or RESTORE on a zone already built.
    AlreadyCreated(Op),
    /// [`Zone::create`] returned an error.
    Create(String),
    /// [`Zone::restore`] returned an error.
    Restore(String),
    /// RESTORE's save was not written by this SDK (bad header).
    BadSave(String),
    /// The input length the host passed to `zk_call` is not one the guest allocated.
    BadLength {
        /// The length passed.
        len: i64,
        /// The bytes allocated by the last `zk_alloc`.
        allocated: usize,
    },
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOp(op) => write!(f, "unknown op {op}"),
            Self::Malformed { op, error } => write!(f, "malformed {op:?} input: {error}"),
            Self::NotCreated(op) => write!(f, "{op:?} before CREATE or RESTORE"),
            Self::AlreadyCreated(op) => write!(f, "{op:?} on a zone already created"),
            Self::Create(e) => write!(f, "create failed: {e}"),
            Self::Restore(e) => write!(f, "restore failed: {e}"),
            Self::BadSave(e) => write!(f, "restore failed: bad save: {e}"),
            Self::BadLength { len, allocated } => write!(
                f,
                "zk_call with {len} input bytes, but zk_alloc gave {allocated}"
            ),
        }
    }
}

impl std::error::Error for Fatal {}

/// Everything a module keeps between calls: the zone (once created) and the SDK's own state.
pub struct Guest<Z> {
    zone: Option<Z>,
    sdk: SdkState,
}

impl<Z> Default for Guest<Z> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Z> Guest<Z> {
    /// A module before CREATE.
    pub fn new() -> Self {
        Self {
            zone: None,
            sdk: SdkState::new(Rng::from_state([0; 4])),
        }
    }

    /// The zone, once created or restored.
    pub fn zone(&self) -> Option<&Z> {
        self.zone.as_ref()
    }

    /// The zone, mutably (for tests).
    pub fn zone_mut(&mut self) -> Option<&mut Z> {
        self.zone.as_mut()
    }

    /// The RNG's current state.
    pub fn rng_state(&self) -> [u64; 4] {
        self.sdk.rng.state()
    }

    /// How many entities the zone has alive (spawned and not despawned).
    pub fn live_entities(&self) -> usize {
        self.sdk.handles.live_count()
    }

    /// The SDK's copy of `player`'s character, as [`Ctx::character`] reads it.
    pub fn character(&self, player: PlayerId) -> Option<&[u8]> {
        self.sdk.characters.get(player)
    }
}

/// Run call `op` on `input` (the bytes the host wrote), writing the call's output to `out`
/// (cleared first). This is all the `zk_call` export does besides moving bytes, so tests drive
/// a zone natively through it.
pub fn dispatch<Z: Zone>(
    guest: &mut Guest<Z>,
    op: u32,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Fatal> {
    out.clear();
    let op = Op::from_number(op).ok_or(Fatal::UnknownOp(op))?;
    let mut w = Writer::from_vec(std::mem::take(out));
    let result = run(guest, op, input, &mut w);
    *out = w.into_vec();
    result
}

fn run<Z: Zone>(guest: &mut Guest<Z>, op: Op, input: &[u8], w: &mut Writer) -> Result<(), Fatal> {
    let malformed = |error| Fatal::Malformed { op, error };
    let mut r = Reader::new(input);
    let tick = r.u64().map_err(malformed)?;
    // Read every field first, so a malformed input runs no hook.
    let call = Call::read(op, &mut r).map_err(malformed)?;
    r.finish().map_err(malformed)?;

    let sdk = &mut guest.sdk;
    match call {
        Call::Create {
            seed,
            zone_id,
            params,
            fact_prefix,
        } => {
            if guest.zone.is_some() {
                return Err(Fatal::AlreadyCreated(op));
            }
            *sdk = SdkState::new(Rng::for_zone(seed, zone_id));
            sdk.fact_prefix = fact_prefix.to_owned();
            sdk.zone_id = zone_id.to_owned();
            let mut ctx = Ctx::new(tick, Duration::ZERO, sdk, w);
            guest.zone = Some(Z::create(&mut ctx, params).map_err(Fatal::Create)?);
        }
        Call::Restore {
            zone_id,
            params,
            fact_prefix,
            save,
        } => {
            if guest.zone.is_some() {
                return Err(Fatal::AlreadyCreated(op));
            }
            let (rng, facts_made, bytes) = split_save(save)?;
            *sdk = SdkState::new(rng);
            sdk.fact_prefix = fact_prefix.to_owned();
            sdk.facts_made = facts_made;
            sdk.zone_id = zone_id.to_owned();
            let mut ctx = Ctx::new(tick, Duration::ZERO, sdk, w);
            guest.zone = Some(Z::restore(&mut ctx, params, bytes).map_err(Fatal::Restore)?);
        }
        // Asked of a fresh instance, before any zone is built.
        Call::Config => Z::settings().encode_with(&Z::contract(), w),
        // Likewise: the zone's own migration, with the SDK's header kept around it.
        Call::Migrate { from, save } => migrate::<Z>(from, save, w),
        Call::Save => {
            let zone = guest.zone.as_ref().ok_or(Fatal::NotCreated(op))?;
            write_header(w, sdk.rng.state(), sdk.facts_made);
            w.raw(&zone.save());
        }
        Call::StateHash => {
            let zone = guest.zone.as_ref().ok_or(Fatal::NotCreated(op))?;
            if let Some(h) = zone.state_hash() {
                w.u64(h);
            }
        }
        Call::Sanitize { player, payload } => {
            let zone = guest.zone.as_mut().ok_or(Fatal::NotCreated(op))?;
            if let Err(refusal) = zone.sanitize(player, payload) {
                w.u16(refusal.code).str(&refusal.reason);
            }
        }
        Call::TransferOut { player } => {
            let zone = guest.zone.as_mut().ok_or(Fatal::NotCreated(op))?;
            // The state goes first, then the commands the hook wrote (its despawn).
            let mut commands = Writer::new();
            let time = tick_time(sdk.dt, tick);
            let state = zone.transfer_out(&mut Ctx::new(tick, time, sdk, &mut commands), player);
            // The character goes back to the host with the player; the hook could still read it.
            sdk.characters.drop_player(player);
            w.bytes(&state).raw(&commands.into_vec());
        }
        hook => {
            let zone = guest.zone.as_mut().ok_or(Fatal::NotCreated(op))?;
            let time = match hook {
                Call::Tick { time_us, dt_us, .. } => {
                    sdk.dt = Duration::from_micros(u64::from(dt_us));
                    Duration::from_micros(time_us)
                }
                _ => tick_time(sdk.dt, tick),
            };
            let mut ctx = Ctx::new(tick, time, sdk, w);
            run_hook(zone, &mut ctx, hook);
        }
    }
    Ok(())
}

/// The SDK's header in front of a save's zone bytes: [`SAVE_FORMAT`], the RNG's state, the
/// count of fact keys made.
fn write_header(w: &mut Writer, rng: [u64; 4], facts_made: u64) {
    w.u8(SAVE_FORMAT);
    for word in rng {
        w.u64(word);
    }
    w.u64(facts_made);
}

/// MIGRATE's answer: the zone's bytes of `save` through [`Zone::migrate`], the SDK's header
/// (written again in this SDK's format) in front of the migrated bytes; a save without the
/// header is a failed migration.
fn migrate<Z: Zone>(from: u32, save: &[u8], w: &mut Writer) {
    let (rng, facts_made, bytes) = match split_save(save) {
        Ok(split) => split,
        Err(Fatal::BadSave(why)) => {
            w.u8(migration::FAILED).str(&format!("bad save: {why}"));
            return;
        }
        Err(other) => {
            w.u8(migration::FAILED).str(&other.to_string());
            return;
        }
    };
    match Z::migrate(from, bytes) {
        Ok(migrated) => {
            w.u8(migration::MIGRATED);
            write_header(w, rng.state(), facts_made);
            w.raw(&migrated);
        }
        Err(MigrateError::NoMigration) => {
            w.u8(migration::NONE);
        }
        Err(MigrateError::Failed(why)) => {
            w.u8(migration::FAILED).str(&why);
        }
    }
}

/// `tick × dt`, saturating.
fn tick_time(dt: Duration, tick: u64) -> Duration {
    let nanos = dt.as_nanos().saturating_mul(u128::from(tick));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Each input decoded again (the host sanitized it on arrival) and handed to the zone, in order.
fn apply_inputs<Z: Zone>(zone: &mut Z, ctx: &mut Ctx<'_>, inputs: Vec<(PlayerId, &[u8])>) {
    for (player, payload) in inputs {
        match zone.sanitize(player, payload) {
            Ok(input) => zone.on_input(ctx, player, input),
            Err(refusal) => log(
                Level::Warn,
                &format!("input of player {player} refused when applied: {refusal}"),
            ),
        }
    }
}

/// A joining (or arriving) player of `role` has a character when the zone's kind keeps them and
/// it is a player: the SDK keeps its copy of `character` from now on.
fn admit_character<Z: Zone>(ctx: &mut Ctx<'_>, player: PlayerId, role: Role, character: &[u8]) {
    if role == Role::Player && Z::settings().characters {
        ctx.sdk.characters.admit(player, character);
    }
}

/// A hook call that builds a [`Ctx`] and appends commands.
fn run_hook<Z: Zone>(zone: &mut Z, ctx: &mut Ctx<'_>, call: Call<'_>) {
    match call {
        Call::Join {
            player,
            principal,
            role,
            claims,
            character,
        } => {
            admit_character::<Z>(ctx, player, role, character);
            let info = Player {
                id: player,
                principal: principal.to_owned(),
                role,
                claims: claims.to_owned(),
            };
            if let Err(refusal) = zone.on_join(ctx, info) {
                // The host hands the character of a refused join back unchanged.
                ctx.sdk.characters.drop_player(player);
                ctx.refuse(refusal.code, &refusal.reason);
            }
        }
        Call::Leave { player, why } => {
            zone.on_leave(ctx, player, why);
            // Handed back after the hook, which may still change it.
            ctx.sdk.characters.drop_player(player);
        }
        Call::Drop { player } => zone.on_drop(ctx, player),
        Call::Rejoin { player } => zone.on_rejoin(ctx, player),
        Call::Inputs { inputs } => apply_inputs(zone, ctx, inputs),
        Call::Tick { inputs, .. } => {
            apply_inputs(zone, ctx, inputs);
            zone.tick(ctx);
        }
        Call::Timer { tag } => zone.on_timer(ctx, tag),
        Call::Settled { key, ok, detail } => {
            let outcome = if ok { Ok(detail) } else { Err(detail) };
            zone.on_fact_settled(ctx, key, outcome);
        }
        Call::TransferIn {
            player,
            principal,
            claims,
            from_zone,
            returning,
            new_to_run,
            state,
            character,
        } => {
            admit_character::<Z>(ctx, player, Role::Player, character);
            let info = Player {
                id: player,
                principal: principal.to_owned(),
                role: Role::Player,
                claims: claims.to_owned(),
            };
            let arrival = Arrival {
                state,
                from_zone,
                claims,
                returning,
                new_to_run,
            };
            if let Err(refusal) = zone.transfer_in(ctx, info, arrival) {
                // A refused arrival leaves with its character; a returning player stays (the
                // host ignores the refusal), and so does its character.
                if !returning {
                    ctx.sdk.characters.drop_player(player);
                }
                ctx.refuse(refusal.code, &refusal.reason);
            }
        }
        Call::Message {
            from,
            topic,
            payload,
        } => {
            let from = match from.strip_prefix("zone:") {
                Some(z) => MessageFrom::Zone(z),
                None => MessageFrom::Admin,
            };
            zone.on_message(ctx, from, topic, payload);
        }
        Call::Child {
            child,
            topic,
            payload,
        } => zone.on_child(ctx, child, child_event(topic, payload)),
        Call::Undeliverable {
            group,
            to,
            topic,
            reason,
        } => zone.on_undeliverable(ctx, to, group, topic, reason),
        Call::Answer { key, result } => zone.on_call_result(ctx, key, &result),
        Call::Create { .. }
        | Call::TransferOut { .. }
        | Call::Config
        | Call::Migrate { .. }
        | Call::Restore { .. }
        | Call::Save
        | Call::StateHash
        | Call::Sanitize { .. } => {}
    }
}

/// A child's message: topic `0xFFFF` with two valid tier codes is its tier change.
fn child_event(topic: u16, payload: &[u8]) -> ChildEvent<'_> {
    let tier = |c: u8| match c {
        0 => Some(Tier::Hot),
        1 => Some(Tier::Idle),
        2 => Some(Tier::Dormant),
        _ => None,
    };
    if topic == 0xFFFF {
        if let [a, b] = payload {
            if let (Some(from), Some(to)) = (tier(*a), tier(*b)) {
                return ChildEvent::Tier { from, to };
            }
        }
    }
    ChildEvent::Message { topic, payload }
}

/// The SDK's header off the front of a save: the RNG, the fact keys made, and the zone's own
/// bytes.
fn split_save(save: &[u8]) -> Result<(Rng, u64, &[u8]), Fatal> {
    let mut r = Reader::new(save);
    let bad = |e: DecodeError| Fatal::BadSave(e.to_string());
    let format = r.u8().map_err(bad)?;
    // Format 1 (ABI 1) had no count of fact keys: none were made under a prefix then.
    if format != SAVE_FORMAT && format != 1 {
        return Err(Fatal::BadSave(format!(
            "format {format}, this SDK reads {SAVE_FORMAT}"
        )));
    }
    let mut s = [0u64; 4];
    for word in &mut s {
        *word = r.u64().map_err(bad)?;
    }
    let facts_made = if format == 1 {
        0
    } else {
        r.u64().map_err(bad)?
    };
    Ok((Rng::from_state(s), facts_made, r.rest()))
}
