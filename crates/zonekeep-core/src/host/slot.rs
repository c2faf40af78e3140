//! The one place the zone's type is known: [`Slot<Z>`] holds the game code and its typed input
//! buffers, and [`ZoneSlot`] is the object-safe face [`ZoneHost`](super::ZoneHost) calls through.
//!
//! The host's own state (schedule, roster, timers, world, replicator, outputs) is not generic, so
//! every host method is written once; only what must touch `Z` or `Z::Input` crosses this trait.
//! Replication's per-entity `can_see` check stays monomorphised: the whole frame build runs
//! inside [`ZoneSlot::build_frames`].

use std::any::Any;
use std::collections::BTreeMap;

use super::Core;
use crate::call::{CallKey, CallResult};
use crate::ctx::Ctx;
use crate::fact::Settlement;
use crate::input::{
    InputBuffer, InputMeta, InputOutcome, InputPolicy, InputRefusal, QueueImage, RawPayload,
    SeqCheck,
};
use crate::message::{ChildEvent, MessageFrom, MessageTarget};
use crate::player::{PlayerId, PlayerInfo, Role};
use crate::replicate::SubscriberId;
use crate::replicate::{BuildStats, FrameHead, FrameInput, ReplicateError, Replicator};
use crate::rewind::{LagCompensation, RewindHistory};
use crate::tier::Tier;
use crate::timer::TimerId;
use crate::transfer::Arrival;
use crate::world::World;
use crate::zone::{JoinRefusal, LeaveReason, Zone};

/// Events of one build, split by recipient (see `frames::route_events`).
pub(super) type EventsFor<'e> = dyn Fn(PlayerId) -> &'e [(u16, &'e [u8])] + 'e;

/// The zone-typed half of a host, behind one trait object.
pub(super) trait ZoneSlot: Send {
    /// `on_join` or `on_observe`; a player gets an input buffer of `capacity` when admitted.
    fn join(
        &mut self,
        ctx: &mut Ctx<'_>,
        info: &PlayerInfo,
        capacity: usize,
    ) -> Result<(), JoinRefusal>;
    /// `transfer_out`, after discarding the player's queued inputs.
    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, id: PlayerId) -> Vec<u8>;
    /// `transfer_in`; an arriving player gets an input buffer of `capacity` when admitted.
    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        info: &PlayerInfo,
        arrival: &Arrival<'_>,
        capacity: usize,
    ) -> Result<(), JoinRefusal>;
    /// `on_message`.
    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: &MessageFrom, topic: u16, payload: &[u8]);
    /// `on_child`.
    fn on_child(&mut self, ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>);
    /// `on_undeliverable`.
    fn on_undeliverable(&mut self, ctx: &mut Ctx<'_>, to: &MessageTarget, topic: u16, reason: &str);
    /// `on_drop`.
    fn on_drop(&mut self, ctx: &mut Ctx<'_>, id: PlayerId);
    /// `on_rejoin`.
    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, id: PlayerId);
    /// Forget the participant's buffer, then `on_leave`.
    fn leave(&mut self, ctx: &mut Ctx<'_>, id: PlayerId, why: LeaveReason);
    /// Sequence check, `sanitize` and buffering of one input of a connected player.
    fn offer(&mut self, id: PlayerId, meta: InputMeta, payload: &[u8]) -> InputOutcome;
    /// The newest sequence number handed to the zone for `id`.
    fn last_processed(&self, id: PlayerId) -> Option<u32>;
    /// Continues `id`'s input sequence after `seq` (a restored participant).
    fn resume_after(&mut self, id: PlayerId, seq: u32);
    /// Take each buffer's inputs under `policy` and apply them; returns how many were superseded.
    /// With a history (the zone opted in to lag compensation), inputs with a view tick are
    /// judged against what their player was sent. `applied` gets each player whose ack moved
    /// (it took an input), once.
    fn apply_inputs(
        &mut self,
        core: &mut Core,
        policy: InputPolicy,
        history: Option<&RewindHistory>,
        applied: &mut Vec<PlayerId>,
    ) -> u64;
    /// The zone's lag compensation settings (asked once, after create or restore).
    fn lag_compensation(&self) -> Option<LagCompensation>;
    /// `on_fact_settled`.
    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement);
    /// `on_call_result`.
    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &CallKey, result: &CallResult);
    /// `tick`.
    fn tick(&mut self, ctx: &mut Ctx<'_>);
    /// `on_timer`.
    fn on_timer(&mut self, ctx: &mut Ctx<'_>, id: TimerId, tag: u64);
    /// `on_tier`.
    fn on_tier(&mut self, ctx: &mut Ctx<'_>, from: Tier, to: Tier);
    /// `dispose`, then drop every input buffer.
    fn dispose(&mut self, ctx: &mut Ctx<'_>);
    /// `save`.
    fn save(&self) -> Option<Vec<u8>>;

    /// The zone's [`Zone::image`].
    fn image(&self) -> Option<Vec<u8>>;

    /// Every player's input queue, with the payloads as sent.
    fn queues_image(&self) -> Vec<(PlayerId, QueueImage)>;
    /// Inputs accepted and not yet applied, over every participant.
    fn inputs_queued(&self) -> usize;

    /// Rebuilds a player's input queue from an image, sanitizing its payloads again.
    fn restore_queue(
        &mut self,
        id: PlayerId,
        image: QueueImage,
        capacity: usize,
    ) -> Result<(), InputRefusal>;
    /// The zone's own state hash.
    fn state_hash(&self) -> Option<u64>;
    /// The kind's client contract ([`Zone::contract`]).
    fn contract(&self) -> zonekeep_protocol::contract::Contract;
    /// Why the zone can no longer run ([`Zone::failure`]).
    fn failure(&self) -> Option<&str>;
    /// The zone's stop flag ([`Zone::stop_handle`]).
    fn stop_handle(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>>;
    /// Log lines its rate limit dropped ([`Zone::log_lines_suppressed`]).
    fn log_lines_suppressed(&self) -> u64;
    /// Whether the zone filters entities per viewer ([`Zone::uses_can_see`]).
    fn uses_can_see(&self) -> bool;
    /// Build the Delta of every subscriber `due` (acks from the input buffers, `can_see` from
    /// the zone).
    fn build_frames(
        &self,
        replicator: &mut Replicator,
        world: &World,
        tick: u64,
        due: &mut dyn FnMut(SubscriberId) -> bool,
        events: &EventsFor<'_>,
        sink: &mut dyn FnMut(SubscriberId, FrameHead, &[u8]),
    ) -> Result<BuildStats, ReplicateError>;
    /// The zone value, for typed access in tests and tools.
    fn zone_any(&self) -> &dyn Any;
    /// The zone value, mutably.
    fn zone_any_mut(&mut self) -> &mut dyn Any;
}

/// A zone and its players' typed input buffers.
pub(super) struct Slot<Z: Zone> {
    pub(super) zone: Z,
    buffers: BTreeMap<PlayerId, InputBuffer<Z::Input>>,
    /// Reused between ticks so applying inputs does not allocate.
    scratch: Vec<(PlayerId, InputMeta, Z::Input)>,
}

impl<Z: Zone> Slot<Z> {
    pub(super) fn new(zone: Z) -> Self {
        Self {
            zone,
            buffers: BTreeMap::new(),
            scratch: Vec::new(),
        }
    }
}

impl<Z: Zone> ZoneSlot for Slot<Z> {
    fn join(
        &mut self,
        ctx: &mut Ctx<'_>,
        info: &PlayerInfo,
        capacity: usize,
    ) -> Result<(), JoinRefusal> {
        match info.role {
            Role::Player => {
                self.zone.on_join(ctx, info)?;
                self.buffers.insert(info.id, InputBuffer::new(capacity));
            }
            Role::Observer => self.zone.on_observe(ctx, info)?,
        }
        Ok(())
    }

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, id: PlayerId) -> Vec<u8> {
        if let Some(b) = self.buffers.get_mut(&id) {
            b.discard();
        }
        self.zone.transfer_out(ctx, id)
    }

    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        info: &PlayerInfo,
        arrival: &Arrival<'_>,
        capacity: usize,
    ) -> Result<(), JoinRefusal> {
        let verdict = self.zone.transfer_in(ctx, info, arrival);
        // A returning player keeps its buffer (and its input sequence) whatever the verdict; one
        // new to this run (its move was returned after the zone restarted) gets one, as the
        // zone cannot refuse its own player.
        let admitted = verdict.is_ok() || arrival.returning;
        if admitted && !(arrival.returning && self.buffers.contains_key(&info.id)) {
            self.buffers.insert(info.id, InputBuffer::new(capacity));
        }
        verdict
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: &MessageFrom, topic: u16, payload: &[u8]) {
        self.zone.on_message(ctx, from, topic, payload);
    }

    fn on_child(&mut self, ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>) {
        self.zone.on_child(ctx, child, event);
    }

    fn on_undeliverable(
        &mut self,
        ctx: &mut Ctx<'_>,
        to: &MessageTarget,
        topic: u16,
        reason: &str,
    ) {
        self.zone.on_undeliverable(ctx, to, topic, reason);
    }

    fn on_drop(&mut self, ctx: &mut Ctx<'_>, id: PlayerId) {
        self.zone.on_drop(ctx, id);
    }

    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, id: PlayerId) {
        self.zone.on_rejoin(ctx, id);
    }

    fn leave(&mut self, ctx: &mut Ctx<'_>, id: PlayerId, why: LeaveReason) {
        self.buffers.remove(&id);
        self.zone.on_leave(ctx, id, why);
    }

    fn offer(&mut self, id: PlayerId, meta: InputMeta, payload: &[u8]) -> InputOutcome {
        let Some(buffer) = self.buffers.get_mut(&id) else {
            return InputOutcome::UnknownPlayer;
        };
        match buffer.check(meta.seq) {
            SeqCheck::Duplicate => return InputOutcome::Duplicate,
            SeqCheck::Stale => return InputOutcome::Stale,
            SeqCheck::Fresh => {}
        }
        let input = match self.zone.sanitize(id, payload) {
            Ok(input) => input,
            Err(refusal) => return InputOutcome::Refused(refusal),
        };
        if buffer.push(meta, input, RawPayload::from_slice(payload)) {
            InputOutcome::AcceptedDroppedOldest
        } else {
            InputOutcome::Accepted
        }
    }

    fn last_processed(&self, id: PlayerId) -> Option<u32> {
        self.buffers.get(&id).and_then(InputBuffer::last_processed)
    }

    fn resume_after(&mut self, id: PlayerId, seq: u32) {
        if let Some(b) = self.buffers.get_mut(&id) {
            b.resume_after(seq);
        }
    }

    fn apply_inputs(
        &mut self,
        core: &mut Core,
        policy: InputPolicy,
        history: Option<&RewindHistory>,
        applied: &mut Vec<PlayerId>,
    ) -> u64 {
        let mut superseded = 0u64;
        let mut batch = std::mem::take(&mut self.scratch);
        for (id, buffer) in &mut self.buffers {
            superseded = superseded.saturating_add(buffer.take(policy, *id, &mut batch));
        }
        // The batch is in buffer order: a player's inputs are side by side.
        for (id, _, _) in &batch {
            if applied.last() != Some(id) {
                applied.push(*id);
            }
        }
        for (id, meta, input) in batch.drain(..) {
            let tick = core.tick;
            match history.and_then(|h| h.rewind_for(id, meta.view_tick, tick)) {
                Some(rewind) => {
                    self.zone
                        .apply_input_at(&mut core.ctx(Some(meta)), id, input, &rewind)
                }
                None => self.zone.on_input(&mut core.ctx(Some(meta)), id, input),
            }
        }
        self.scratch = batch;
        superseded
    }

    fn lag_compensation(&self) -> Option<LagCompensation> {
        self.zone.lag_compensation()
    }

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        self.zone.on_fact_settled(ctx, settlement);
    }

    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &CallKey, result: &CallResult) {
        self.zone.on_call_result(ctx, key, result);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.zone.tick(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, id: TimerId, tag: u64) {
        self.zone.on_timer(ctx, id, tag);
    }

    fn on_tier(&mut self, ctx: &mut Ctx<'_>, from: Tier, to: Tier) {
        self.zone.on_tier(ctx, from, to);
    }

    fn dispose(&mut self, ctx: &mut Ctx<'_>) {
        self.zone.dispose(ctx);
        self.buffers.clear();
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.zone.save()
    }

    fn image(&self) -> Option<Vec<u8>> {
        self.zone.image()
    }

    fn queues_image(&self) -> Vec<(PlayerId, QueueImage)> {
        self.buffers
            .iter()
            .map(|(id, b)| (*id, b.image()))
            .collect()
    }

    fn inputs_queued(&self) -> usize {
        self.buffers.values().map(|b| b.len()).sum()
    }

    fn restore_queue(
        &mut self,
        id: PlayerId,
        image: QueueImage,
        capacity: usize,
    ) -> Result<(), InputRefusal> {
        let mut buffer = InputBuffer::new(capacity);
        for (meta, payload) in image.queued {
            let input = self.zone.sanitize(id, &payload)?;
            buffer.push(meta, input, RawPayload::from_vec(payload));
        }
        buffer.set_seqs(image.highest, image.last_processed);
        self.buffers.insert(id, buffer);
        Ok(())
    }

    fn state_hash(&self) -> Option<u64> {
        self.zone.state_hash()
    }

    fn contract(&self) -> zonekeep_protocol::contract::Contract {
        self.zone.contract()
    }

    fn failure(&self) -> Option<&str> {
        self.zone.failure()
    }

    fn stop_handle(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        self.zone.stop_handle()
    }

    fn log_lines_suppressed(&self) -> u64 {
        self.zone.log_lines_suppressed()
    }

    fn uses_can_see(&self) -> bool {
        self.zone.uses_can_see()
    }

    fn build_frames(
        &self,
        replicator: &mut Replicator,
        world: &World,
        tick: u64,
        due: &mut dyn FnMut(SubscriberId) -> bool,
        events: &EventsFor<'_>,
        sink: &mut dyn FnMut(SubscriberId, FrameHead, &[u8]),
    ) -> Result<BuildStats, ReplicateError> {
        let zone = &self.zone;
        let buffers = &self.buffers;
        let inputs = |sub: SubscriberId| {
            let id = PlayerId(sub.0);
            FrameInput {
                ack: buffers
                    .get(&id)
                    .and_then(InputBuffer::last_processed)
                    .unwrap_or(0),
                events: events(id),
            }
        };
        // A subscriber's candidates are asked about one after another: one sight per subscriber.
        let mut sight: Option<(SubscriberId, _)> = None;
        let can_see = zone
            .uses_can_see()
            .then_some(move |sub: SubscriberId, entity| {
                if !matches!(&sight, Some((of, _)) if *of == sub) {
                    sight = Some((sub, zone.sight(PlayerId(sub.0), world)));
                }
                sight.as_mut().is_some_and(|(_, sees)| sees(entity))
            });
        replicator.build_due(world, tick, can_see, due, inputs, sink)
    }

    fn zone_any(&self) -> &dyn Any {
        &self.zone
    }

    fn zone_any_mut(&mut self) -> &mut dyn Any {
        &mut self.zone
    }
}
