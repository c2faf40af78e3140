//! A zone whose game code is a module: each hook is one call into the instance, and its answer,
//! a command buffer, is applied to the zone's world and context.

use std::cell::{OnceCell, RefCell};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use zonekeep_core::rand_core::RngCore;
use zonekeep_core::{
    Arrival, CallKey, CallResult, ChildEvent, Ctx, EntityId, FactOutcome, InputRefusal,
    JoinRefusal, LeaveReason, MessageFrom, MessageTarget, PlayerId, PlayerInfo, Role, Settlement,
    TimerId, World, Zone, ZoneError, ZoneInit, TIER_TOPIC,
};

use crate::commands::CommandApplier;
use crate::error::Failure;
use crate::guest::{clean_line, Guest};
use crate::load::ZoneModule;
use crate::wire::{put_bytes, put_str, put_u32, put_u64, put_u8, Reader};
use zonekeep_abi::{call_result, migration, op, returning};

/// Refusal code of an input or join offered to a failed zone.
pub const FAILED_CODE: u16 = u16::MAX;

/// The instance: behind a `RefCell` because saving and hashing are calls too, and the zone
/// model asks for them through `&self`.
struct Instance {
    guest: Guest,
    /// The zone's tick as of the last call that knew it (a sanitize or save is not told it).
    tick: u64,
}

/// Fails the zone for good with `f` (the first failure is the reason).
fn fail(failed: &OnceCell<String>, f: &Failure) {
    if failed.get().is_none() {
        tracing::error!(target: "zonekeep::module", reason = %f, "module zone failed");
        let _ = failed.set(f.to_string());
    }
}

impl Instance {
    /// Calls `op` with `body` after the tick; on failure the zone is failed for good.
    fn call(
        &mut self,
        failed: &OnceCell<String>,
        op: u32,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Option<&[u8]> {
        if failed.get().is_some() {
            return None;
        }
        let input = &mut self.guest.input;
        input.clear();
        put_u64(input, self.tick);
        body(input);
        // The host's own calls come at moments of its choosing (a save every few seconds, a
        // hash when recording): they spend only their own budget, so a replay without them runs
        // the game's calls on the same budgets.
        let tick = match op {
            op::CREATE | op::RESTORE | op::SAVE | op::STATE_HASH | op::CONFIG => None,
            _ => Some(self.tick),
        };
        match self.guest.call(op, tick) {
            Ok(out) => Some(out),
            Err(f) => {
                fail(failed, &f);
                None
            }
        }
    }
}

/// A zone running a module's game code (see the [crate docs](crate)).
pub struct ModuleZone {
    module: Arc<ZoneModule>,
    instance: RefCell<Instance>,
    failed: OnceCell<String>,
    mirror: CommandApplier,
    /// The inputs handed over since the last call, encoded (`u32 player`, `bytes payload` each):
    /// they go with the tick that follows them (one call per tick rather than one per input),
    /// or ahead of any other call.
    inputs: Vec<u8>,
    inputs_n: u32,
}

impl std::fmt::Debug for ModuleZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleZone")
            .field("module", &self.module)
            .field("failed", &self.failed.get())
            .finish_non_exhaustive()
    }
}

/// CREATE's fields (RESTORE's before the save): the seed, the zone, its params, and the prefix
/// of the fact keys the module's SDK makes: `{zone_id}:{boot_epoch}:m`, which the host's own
/// keys (`{zone_id}:{boot_epoch}:{n}`) never start with.
fn put_init(input: &mut Vec<u8>, seed: u64, init: &ZoneInit, boot_epoch: u64) {
    put_u64(input, seed);
    put_str(input, &init.zone_id);
    put_str(input, &init.params.to_string());
    put_str(input, &format!("{}:{boot_epoch}:m", init.zone_id));
}

/// `player`'s character as JOIN and TRANSFER_IN pass it: the core hands it to the zone before
/// the join hook runs; empty when the player has none here.
fn character_of(ctx: &Ctx<'_>, player: PlayerId) -> Vec<u8> {
    ctx.character(player)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

impl ModuleZone {
    fn start(
        module: &Arc<ZoneModule>,
        init: &ZoneInit,
        ctx: &mut Ctx<'_>,
        op: u32,
        save: Option<&[u8]>,
    ) -> Result<Self, ZoneError> {
        let guest =
            Guest::new(module, &init.zone_id).map_err(|f| ZoneError::Failed(f.to_string()))?;
        let seed = ctx.rng().next_u64();
        let mut zone = Self {
            module: module.clone(),
            instance: RefCell::new(Instance {
                guest,
                tick: ctx.tick(),
            }),
            failed: OnceCell::new(),
            mirror: CommandApplier::default(),
            inputs: Vec::new(),
            inputs_n: 0,
        };
        let boot_epoch = ctx.boot_epoch();
        zone.run(ctx, op, |input| {
            put_init(input, seed, init, boot_epoch);
            if let Some(save) = save {
                put_bytes(input, save);
            }
        });
        match zone.failure() {
            None => Ok(zone),
            Some(why) if save.is_some() => Err(ZoneError::Restore(why.to_owned())),
            Some(why) => Err(ZoneError::Failed(why.to_owned())),
        }
    }

    /// A new zone of `module`'s game (its CREATE call).
    pub fn create(
        module: &Arc<ZoneModule>,
        init: &ZoneInit,
        ctx: &mut Ctx<'_>,
    ) -> Result<Self, ZoneError> {
        Self::start(module, init, ctx, op::CREATE, None)
    }

    /// A zone of `module`'s game rebuilt from `save` (its RESTORE call). A module that cannot
    /// read the save fails here, with its reason, and the save is kept.
    pub fn restore(
        module: &Arc<ZoneModule>,
        init: &ZoneInit,
        ctx: &mut Ctx<'_>,
        save: &[u8],
    ) -> Result<Self, ZoneError> {
        Self::start(module, init, ctx, op::RESTORE, Some(save))
    }

    /// `save`, written under the older state version `from`, as `module`'s own state version
    /// reads it: the module's MIGRATE answer (docs/MODULES.md), asked of a throwaway instance no
    /// zone uses, under the same fuel and time budgets as a start.
    ///
    /// [`ZoneError::NoMigration`] when the module has no migration from `from`: it answered so,
    /// answered nothing (as a module answers a call it does not know), or declares no state
    /// version at all (a module written before state versions, which is never asked).
    /// [`ZoneError::Failed`], naming why, when the migration failed: the module said so, or the
    /// call trapped, overran its budget or answered something malformed.
    pub fn migrate(module: &Arc<ZoneModule>, from: u32, save: &[u8]) -> Result<Vec<u8>, ZoneError> {
        if module.settings().state_version.is_none() {
            return Err(ZoneError::NoMigration(from));
        }
        let mut out = Guest::migrate(module, from, save)
            .map_err(|f| ZoneError::Failed(format!("the module's MIGRATE call failed: {f}")))?;
        let malformed = |why: String| {
            ZoneError::Failed(format!("the module's MIGRATE answer is malformed: {why}"))
        };
        let Some(&code) = out.first() else {
            return Err(ZoneError::NoMigration(from));
        };
        match code {
            migration::NONE if out.len() == 1 => Err(ZoneError::NoMigration(from)),
            migration::NONE => Err(malformed(format!(
                "{} bytes after answer 0 (no migration)",
                out.len() - 1
            ))),
            migration::MIGRATED => Ok(out.split_off(1)),
            migration::FAILED => {
                let mut r = Reader::new(&out[1..]);
                let reason = r.str("the reason").map_err(|f| match f {
                    Failure::Abi(why) => malformed(why),
                    other => malformed(other.to_string()),
                })?;
                if !r.is_empty() {
                    return Err(malformed(format!(
                        "{} bytes after the reason",
                        r.remaining()
                    )));
                }
                // Shown to operators as a log line would be: cut, and unable to forge lines.
                let cap = module.engine().sandbox().log_line_bytes;
                let reason = clean_line(reason.as_bytes(), cap);
                Err(ZoneError::Failed(if reason.is_empty() {
                    "the migration failed (no reason given)".to_owned()
                } else {
                    reason
                }))
            }
            n => Err(malformed(format!("answer {n}: 0, 1 or 2"))),
        }
    }

    /// The module this zone runs.
    pub fn module(&self) -> &Arc<ZoneModule> {
        &self.module
    }

    /// Fuel the last call used.
    pub fn fuel_used(&self) -> u64 {
        self.instance.borrow().guest.fuel_used()
    }

    /// Log lines the rate limit dropped so far.
    pub fn log_suppressed(&self) -> u64 {
        self.instance.borrow().guest.log_suppressed()
    }

    /// The instance's linear memory, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.instance.borrow().guest.memory_bytes()
    }

    /// The inputs waiting for their tick, as a call's trailing field (`u32 n`, then each), and
    /// forgotten here.
    fn take_inputs(&mut self) -> (u32, Vec<u8>) {
        (
            std::mem::take(&mut self.inputs_n),
            std::mem::take(&mut self.inputs),
        )
    }

    /// One hook: the call, then its commands applied. A failure of either fails the zone.
    /// Inputs still waiting go first, in an INPUTS call of their own.
    fn run(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: u32,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Option<JoinRefusal> {
        self.flush_inputs(ctx, op);
        self.call(ctx, op, body)
    }

    /// Inputs still waiting go ahead of any call but a TICK (which carries them).
    fn flush_inputs(&mut self, ctx: &mut Ctx<'_>, op: u32) {
        if op != op::TICK && self.inputs_n > 0 {
            let (n, inputs) = self.take_inputs();
            self.call(ctx, op::INPUTS, |buf| {
                put_u32(buf, n);
                buf.extend_from_slice(&inputs);
            });
            self.inputs = inputs;
            self.inputs.clear();
        }
    }

    fn call(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: u32,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Option<JoinRefusal> {
        self.call_with_state(ctx, op, body, None)
    }

    /// [`call`](Self::call); with `state`, the answer starts with `bytes state`, copied there
    /// before the commands that follow are applied (TRANSFER_OUT).
    fn call_with_state(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: u32,
        body: impl FnOnce(&mut Vec<u8>),
        state: Option<&mut Vec<u8>>,
    ) -> Option<JoinRefusal> {
        let inst = self.instance.get_mut();
        inst.tick = ctx.tick();
        let mut out = inst.call(&self.failed, op, body)?;
        if let Some(state) = state {
            let mut r = Reader::new(out);
            match r.bytes("transfer state") {
                Ok(b) => state.extend_from_slice(b),
                Err(f) => {
                    fail(&self.failed, &f);
                    return None;
                }
            }
            out = r.rest();
        }
        let join = op == op::JOIN || op == op::TRANSFER_IN;
        match self.mirror.apply(ctx, out, join) {
            Ok(refusal) => refusal,
            Err(f) => {
                fail(&self.failed, &f);
                None
            }
        }
    }

    fn failed_refusal(&self) -> Option<JoinRefusal> {
        self.failure()
            .map(|why| JoinRefusal::new(FAILED_CODE, format!("zone failed: {why}")))
    }
}

impl Zone for ModuleZone {
    type Input = Vec<u8>;

    /// A module zone is made by its kind's factory ([`crate::register`]), which holds the
    /// module; a type alone cannot make one.
    fn create(init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Err(ZoneError::Failed(format!(
            "zone kind {:?} is a module: register it with zonekeep_wasm::register",
            init.kind
        )))
    }

    fn restore(init: &ZoneInit, ctx: &mut Ctx<'_>, _bytes: &[u8]) -> Result<Self, ZoneError> {
        <Self as Zone>::create(init, ctx)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.flush_inputs(ctx, op::JOIN);
        let character = character_of(ctx, player.id);
        let refusal = self.call(ctx, op::JOIN, |input| {
            put_u32(input, player.id.0);
            put_str(input, player.principal.as_str());
            put_u8(input, u8::from(player.role == Role::Observer));
            put_str(
                input,
                &serde_json::Value::Object(player.claims.clone()).to_string(),
            );
            put_bytes(input, &character);
        });
        match refusal.or_else(|| self.failed_refusal()) {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }

    fn on_observe(&mut self, ctx: &mut Ctx<'_>, observer: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.on_join(ctx, observer)
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, why: LeaveReason) {
        let why = match why {
            LeaveReason::Left => 0,
            LeaveReason::Dropped => 1,
            LeaveReason::Kicked => 2,
            LeaveReason::Transferred => 3,
        };
        self.run(ctx, op::LEAVE, |input| {
            put_u32(input, player.0);
            put_u8(input, why);
        });
    }

    fn on_drop(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        self.run(ctx, op::DROP, |input| put_u32(input, player.0));
    }

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        self.flush_inputs(ctx, op::TRANSFER_OUT);
        let mut state = Vec::new();
        self.call_with_state(
            ctx,
            op::TRANSFER_OUT,
            |input| put_u32(input, player.0),
            Some(&mut state),
        );
        state
    }

    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        self.flush_inputs(ctx, op::TRANSFER_IN);
        let character = character_of(ctx, player.id);
        let refusal = self.call(ctx, op::TRANSFER_IN, |input| {
            put_u32(input, player.id.0);
            put_str(input, player.principal.as_str());
            // The participant's claims: its ticket's, with what the other zone handed over
            // merged over them (the module keeps them as the player's, as JOIN's).
            put_str(
                input,
                &serde_json::Value::Object(player.claims.clone()).to_string(),
            );
            put_str(input, arrival.from_zone);
            put_u8(
                input,
                match (arrival.returning, arrival.new_to_run) {
                    (false, _) => returning::ARRIVAL,
                    (true, false) => returning::RETURN,
                    (true, true) => returning::RETURN_NEW_TO_RUN,
                },
            );
            put_bytes(input, arrival.state);
            put_bytes(input, &character);
        });
        match refusal.or_else(|| self.failed_refusal()) {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: &MessageFrom, topic: u16, payload: &[u8]) {
        let from = match from {
            MessageFrom::Admin => "admin".to_owned(),
            MessageFrom::Zone(z) => format!("zone:{z}"),
        };
        self.run(ctx, op::MESSAGE, |input| {
            put_str(input, &from);
            input.extend_from_slice(&topic.to_le_bytes());
            put_bytes(input, payload);
        });
    }

    fn on_child(&mut self, ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>) {
        let tier;
        let (topic, payload) = match event {
            ChildEvent::Tier { from, to } => {
                tier = [
                    zonekeep_core::message::tier_code(from),
                    zonekeep_core::message::tier_code(to),
                ];
                (TIER_TOPIC, &tier[..])
            }
            ChildEvent::Message { topic, payload } => (topic, payload),
        };
        self.run(ctx, op::CHILD, |input| {
            put_str(input, child);
            input.extend_from_slice(&topic.to_le_bytes());
            put_bytes(input, payload);
        });
    }

    fn on_undeliverable(
        &mut self,
        ctx: &mut Ctx<'_>,
        to: &MessageTarget,
        topic: u16,
        reason: &str,
    ) {
        let (kind, name) = match to {
            MessageTarget::Zone(z) => (0, z),
            MessageTarget::Group(g) => (1, g),
        };
        self.run(ctx, op::UNDELIVERABLE, |input| {
            put_u8(input, kind);
            put_str(input, name);
            input.extend_from_slice(&topic.to_le_bytes());
            put_str(input, reason);
        });
    }

    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        self.run(ctx, op::REJOIN, |input| put_u32(input, player.0));
    }

    fn sanitize(&mut self, player: PlayerId, payload: &[u8]) -> Result<Vec<u8>, InputRefusal> {
        let inst = self.instance.get_mut();
        let Some(out) = inst.call(&self.failed, op::SANITIZE, |input| {
            put_u32(input, player.0);
            put_bytes(input, payload);
        }) else {
            return Err(InputRefusal::new(FAILED_CODE, "zone failed"));
        };
        if out.is_empty() {
            return Ok(payload.to_vec());
        }
        let mut r = Reader::new(out);
        let refusal = r
            .u16("refusal code")
            .and_then(|code| Ok(InputRefusal::new(code, r.str("refusal reason")?)));
        match refusal {
            Ok(refusal) => Err(refusal),
            Err(f) => {
                fail(&self.failed, &f);
                Err(InputRefusal::new(FAILED_CODE, "zone failed"))
            }
        }
    }

    /// Kept for the tick that follows (see `inputs`).
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, input: Vec<u8>) {
        put_u32(&mut self.inputs, player.0);
        put_bytes(&mut self.inputs, &input);
        self.inputs_n = self.inputs_n.saturating_add(1);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let time_us = u64::try_from(ctx.time().as_micros()).unwrap_or(u64::MAX);
        let dt_us = u32::try_from(ctx.dt().as_micros()).unwrap_or(u32::MAX);
        let (n, inputs) = self.take_inputs();
        self.run(ctx, op::TICK, |input| {
            put_u64(input, time_us);
            put_u32(input, dt_us);
            put_u32(input, n);
            input.extend_from_slice(&inputs);
        });
        self.inputs = inputs;
        self.inputs.clear();
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, id: TimerId, tag: u64) {
        self.mirror.timer_fired(id, tag);
        self.run(ctx, op::TIMER, |input| put_u64(input, tag));
    }

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        let (ok, detail) = match &settlement.outcome {
            FactOutcome::Ok(v) => (1, v.to_string()),
            FactOutcome::Refused(why) => (0, why.clone()),
        };
        self.run(ctx, op::SETTLED, |input| {
            put_str(input, settlement.key.as_str());
            put_u8(input, ok);
            put_str(input, &detail);
        });
    }

    /// CALL_RESULT: the key, then the result's code and its value, or its error's code and
    /// message.
    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &CallKey, result: &CallResult) {
        self.run(ctx, op::CALL_RESULT, |input| {
            put_str(input, key.as_str());
            match result {
                CallResult::Ok(value) => {
                    put_u8(input, call_result::OK);
                    put_str(input, &value.to_string());
                }
                CallResult::Err { code, message } => {
                    put_u8(input, call_result::ERR);
                    put_str(input, code);
                    put_str(input, message);
                }
            }
        });
    }

    /// Answered from the zone's SET_SEEN_BY lists, without a call.
    fn can_see(&self, viewer: PlayerId, entity: EntityId, _world: &World) -> bool {
        self.mirror.can_see(viewer, entity)
    }

    fn uses_can_see(&self) -> bool {
        self.mirror.hides_anything()
    }

    fn contract(&self) -> zonekeep_protocol::contract::Contract {
        self.module.contract().clone()
    }

    fn state_hash(&self) -> Option<u64> {
        let mut inst = self.instance.borrow_mut();
        let out = inst.call(&self.failed, op::STATE_HASH, |_| {})?;
        if out.is_empty() {
            return None;
        }
        match Reader::new(out).u64("state hash") {
            Ok(h) => Some(h),
            Err(f) => {
                fail(&self.failed, &f);
                None
            }
        }
    }

    /// The module's save; none once the zone has failed, so its last good save is kept.
    fn save(&self) -> Option<Vec<u8>> {
        let mut inst = self.instance.borrow_mut();
        inst.call(&self.failed, op::SAVE, |_| {})
            .map(<[u8]>::to_vec)
    }

    fn failure(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Stops the zone's running call (or its next one) from any thread, within one epoch
    /// period; the zone then fails with "stopped by the host".
    fn stop_handle(&self) -> Option<Arc<AtomicBool>> {
        Some(self.instance.borrow().guest.stop_handle())
    }

    fn log_lines_suppressed(&self) -> u64 {
        self.log_suppressed()
    }
}
