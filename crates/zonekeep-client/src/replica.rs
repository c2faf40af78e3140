//! `Replica`: the entities the client draws, with an interpolation buffer.
//!
//! Patches arrive in bursts and late; drawing them as they come makes motion stutter. The replica
//! keeps a short history of positions per entity and draws everything `delay` ticks behind the
//! estimated server time, between the two samples around that instant. The delay covers the one-way
//! latency, one patch interval and the larger of a multiple of the measured jitter and the spread of
//! recent patches' ages on arrival ([`Replica::note_arrival`]): on a WebSocket a lost packet holds
//! every later one back until TCP retransmits it, and those stalls, not the mean jitter, are what
//! the delay must cover. It slews (never jumps; faster up than down), so the drawn timeline never
//! runs backwards. Spawns, despawns and field changes are held until the
//! drawn time reaches the tick they happened at, so they line up with the motion.
//!
//! Pure: time enters as [`Timing`], patches through [`Replica::apply`] or the begin/spawn/update/
//! despawn/end calls.

use std::collections::{BTreeMap, VecDeque};

use zonekeep_protocol::schema::FieldValue;

use crate::clock::ClockSync;
use crate::patch::Patch;

/// Tuning of the interpolation buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaConfig {
    /// Ticks between two patches (Welcome's `patch_every`).
    pub patch_every: u32,
    /// Lower bound of the delay (ticks).
    pub min_delay_ticks: f64,
    /// Upper bound of the delay (ticks).
    pub max_delay_ticks: f64,
    /// How many jitters of margin the delay keeps.
    pub jitter_factor: f64,
    /// How fast the delay may shrink, as a fraction of elapsed time (0.05 = time runs at up to 1.05×).
    pub slew: f64,
    /// How fast the delay may grow, as a fraction of elapsed time (0.25 = time runs at down to 0.75×).
    pub grow_slew: f64,
    /// Patch arrivals whose age counts towards the delay (the most recent ones).
    pub arrival_window: usize,
    /// Quantile of the arrival ages' spread the delay covers (0.99: all but the rarest stalls).
    pub arrival_quantile: f64,
    /// Position samples kept per entity; older ones are dropped (and counted) beyond it.
    pub buffer_capacity: usize,
    /// Pending field changes kept per entity; older ones are applied early (and counted) beyond it.
    pub pending_capacity: usize,
}

impl ReplicaConfig {
    /// Defaults for a zone with the given tick rate and patch cadence (both from Welcome): delay
    /// between one patch interval and one second.
    pub fn for_zone(tick_hz: u32, patch_every: u32) -> Self {
        let patch_every = patch_every.max(1);
        Self {
            patch_every,
            min_delay_ticks: f64::from(patch_every),
            max_delay_ticks: f64::from(tick_hz.max(patch_every)),
            jitter_factor: 2.0,
            slew: 0.05,
            grow_slew: 0.25,
            // Ten seconds of patches.
            arrival_window: (10 * tick_hz.max(1) / patch_every).max(16) as usize,
            arrival_quantile: 0.99,
            buffer_capacity: 64,
            pending_capacity: 64,
        }
    }

    /// The delay this config aims for given the measured one-way latency and jitter, and the
    /// spread of arrival ages (all in ticks).
    pub fn target_delay(&self, one_way_ticks: f64, jitter_ticks: f64, spread_ticks: f64) -> f64 {
        let want = one_way_ticks.max(0.0)
            + f64::from(self.patch_every)
            + (self.jitter_factor * jitter_ticks.max(0.0)).max(spread_ticks.max(0.0));
        want.clamp(
            self.min_delay_ticks,
            self.max_delay_ticks.max(self.min_delay_ticks),
        )
    }
}

/// What the replica needs to know about time for one frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Estimated current server tick (fractional).
    pub server_tick: f64,
    /// One-way latency in ticks (half the RTT).
    pub one_way_ticks: f64,
    /// Jitter in ticks.
    pub jitter_ticks: f64,
}

impl Timing {
    /// Timing from a clock at local time `now_us`; `None` before the clock has any estimate.
    pub fn from_clock(clock: &ClockSync, now_us: u64) -> Option<Self> {
        let server_tick = clock.server_tick_at(now_us)?;
        let one_way_ticks = clock.rtt_us().unwrap_or(0.0) / 2.0 * clock.tick_hz() / 1e6;
        Some(Self {
            server_tick,
            one_way_ticks,
            jitter_ticks: clock.jitter_ticks(),
        })
    }
}

/// One entity as drawn in the current frame.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityView<'a> {
    /// Entity id.
    pub id: u32,
    /// Kind index.
    pub kind: u32,
    /// Interpolated x.
    pub x: f32,
    /// Interpolated y.
    pub y: f32,
    /// Field values as of the drawn tick.
    pub fields: &'a [FieldValue],
}

/// Counters of what the bounds cut off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Position samples dropped because an entity's buffer was full.
    pub samples_dropped: u64,
    /// Field changes applied ahead of their tick because the pending queue was full.
    pub fields_forced: u64,
    /// Updates naming an entity the replica does not hold (should not happen with a correct mirror).
    pub unknown_updates: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    tick: f64,
    x: f32,
    y: f32,
}

#[derive(Debug)]
struct Entity {
    kind: u32,
    samples: VecDeque<Sample>,
    fields: Vec<FieldValue>,
    pending: VecDeque<(u64, u8, FieldValue)>,
    spawn_tick: u64,
    despawn_tick: Option<u64>,
    /// Seen in the current baseline (baseline entities not re-spawned are despawned at its tick).
    seen: bool,
    visible: bool,
    x: f32,
    y: f32,
}

/// The interpolated view of the world.
#[derive(Debug)]
pub struct Replica {
    cfg: ReplicaConfig,
    entities: BTreeMap<u32, Entity>,
    patch_tick: u64,
    /// Tick of the patch before the current one (None before the second patch).
    prev_patch_tick: Option<u64>,
    /// Tick of the last patch begun.
    last_patch_tick: Option<u64>,
    baseline: bool,
    delay: Option<f64>,
    last_server_tick: f64,
    render_tick: f64,
    entered: Vec<u32>,
    left: Vec<u32>,
    /// Ids `clear()` removed while visible, reported in the next frame's `left`.
    queued_left: Vec<u32>,
    stats: ReplicaStats,
    /// Ages of recent patches on arrival (estimated server tick then, minus the patch's tick).
    arrival_ages: VecDeque<f64>,
}

impl Replica {
    /// An empty replica.
    pub fn new(cfg: ReplicaConfig) -> Self {
        Self {
            cfg,
            entities: BTreeMap::new(),
            patch_tick: 0,
            prev_patch_tick: None,
            last_patch_tick: None,
            baseline: false,
            delay: None,
            last_server_tick: f64::NEG_INFINITY,
            render_tick: f64::NEG_INFINITY,
            entered: Vec::new(),
            left: Vec::new(),
            queued_left: Vec::new(),
            stats: ReplicaStats::default(),
            arrival_ages: VecDeque::new(),
        }
    }

    /// Records that the patch for `tick` arrived when the server was (by the clock's estimate) at
    /// `server_tick`: call it as each patch is received. The spread of these ages — how much later
    /// than the fastest recent patch the slow ones arrive — sizes the delay.
    pub fn note_arrival(&mut self, tick: u64, server_tick: f64) {
        if !server_tick.is_finite() {
            return;
        }
        self.arrival_ages.push_back(server_tick - tick as f64);
        while self.arrival_ages.len() > self.cfg.arrival_window.max(2) {
            self.arrival_ages.pop_front();
        }
    }

    /// How much later than the fastest recent patch nearly all of them arrived (ticks; the
    /// configured quantile of the ages minus their minimum), 0 without arrivals.
    pub fn arrival_spread_ticks(&self) -> f64 {
        let mut ages: Vec<f64> = self.arrival_ages.iter().copied().collect();
        if ages.is_empty() {
            return 0.0;
        }
        ages.sort_by(f64::total_cmp);
        let q = self.cfg.arrival_quantile.clamp(0.0, 1.0);
        let i = ((ages.len() - 1) as f64 * q).floor() as usize;
        ages[i.min(ages.len() - 1)] - ages[0]
    }

    /// The configuration.
    pub fn config(&self) -> &ReplicaConfig {
        &self.cfg
    }

    /// Applies a whole patch (the usual path).
    pub fn apply(&mut self, patch: &Patch) {
        self.begin_patch(patch.tick, patch.baseline);
        for &id in &patch.despawns {
            self.despawn(id);
        }
        for u in &patch.updates {
            self.update(u.id, u.pos, u.fields.iter().cloned());
        }
        for s in &patch.spawns {
            self.spawn(s.id, s.kind, s.x, s.y, s.fields.clone());
        }
        self.end_patch();
    }

    /// Starts a patch for `tick`. A baseline patch despawns, at its tick, every entity it does not
    /// spawn again; entities it spawns again keep their history, so a resume does not flicker.
    pub fn begin_patch(&mut self, tick: u64, baseline: bool) {
        self.patch_tick = tick;
        self.prev_patch_tick = self.last_patch_tick;
        self.last_patch_tick = Some(tick);
        self.baseline = baseline;
        if baseline {
            for e in self.entities.values_mut() {
                e.seen = false;
            }
        }
    }

    /// An entity entered the view at the current patch's tick.
    pub fn spawn(&mut self, id: u32, kind: u32, x: f32, y: f32, fields: Vec<FieldValue>) {
        let tick = self.patch_tick;
        let hold = self.hold_from(tick);
        if let Some(e) = self.entities.get_mut(&id) {
            if e.kind == kind && e.despawn_tick.is_none() {
                // Same entity again (a baseline after a resume): a fresh sample and the full state.
                e.seen = true;
                push_sample(&mut e.samples, &self.cfg, &mut self.stats, tick, hold, x, y);
                for (i, v) in fields.into_iter().enumerate() {
                    let i = u8::try_from(i).unwrap_or(u8::MAX);
                    push_pending(e, &self.cfg, &mut self.stats, tick, i, v);
                }
                return;
            }
        }
        // New, or a different entity reusing the id: the old one is replaced now (it loses at
        // most `delay` of its remaining time on screen).
        let visible = self.entities.get(&id).is_some_and(|e| e.visible);
        let mut samples = VecDeque::with_capacity(4);
        samples.push_back(Sample {
            tick: tick as f64,
            x,
            y,
        });
        self.entities.insert(
            id,
            Entity {
                kind,
                samples,
                fields,
                pending: VecDeque::new(),
                spawn_tick: tick,
                despawn_tick: None,
                seen: true,
                visible,
                x,
                y,
            },
        );
    }

    /// Where an entity a patch moves was still known to stand: at the previous patch (a host that
    /// fell behind a slow link sends one patch for several, so that may be more than one patch
    /// interval back), or one patch interval back before there was a previous patch.
    fn hold_from(&self, tick: u64) -> f64 {
        self.prev_patch_tick
            .filter(|&p| p < tick)
            .map_or(tick as f64 - f64::from(self.cfg.patch_every), |p| p as f64)
    }

    /// An entity already known changed at the current patch's tick.
    pub fn update(
        &mut self,
        id: u32,
        pos: Option<(f32, f32)>,
        fields: impl IntoIterator<Item = (u8, FieldValue)>,
    ) {
        let tick = self.patch_tick;
        let hold = self.hold_from(tick);
        let Some(e) = self.entities.get_mut(&id) else {
            self.stats.unknown_updates += 1;
            return;
        };
        if let Some((x, y)) = pos {
            push_sample(&mut e.samples, &self.cfg, &mut self.stats, tick, hold, x, y);
        }
        for (i, v) in fields {
            push_pending(e, &self.cfg, &mut self.stats, tick, i, v);
        }
    }

    /// An entity left the view at the current patch's tick.
    pub fn despawn(&mut self, id: u32) {
        if let Some(e) = self.entities.get_mut(&id) {
            e.despawn_tick.get_or_insert(self.patch_tick);
        }
    }

    /// Ends the current patch.
    pub fn end_patch(&mut self) {
        if self.baseline {
            let tick = self.patch_tick;
            for e in self.entities.values_mut() {
                if !e.seen {
                    e.despawn_tick.get_or_insert(tick);
                }
            }
            self.baseline = false;
        }
    }

    /// Replaces the world with a new zone's (a transfer's arrival, PROTOCOL.md §5.3.2): forgets
    /// everything, takes the zone's cadence from `cfg` and applies its `baseline`, whose entities
    /// are drawn from the very next frame (they were there before the client saw them), so the
    /// picture goes from the old world to the new one without a blank frame.
    pub fn enter_zone(&mut self, cfg: ReplicaConfig, baseline: &Patch) {
        self.clear();
        self.cfg = cfg;
        self.apply(baseline);
        for e in self.entities.values_mut() {
            e.spawn_tick = 0;
        }
    }

    /// Forgets everything at once (a fresh join as a new player). Visible entities are reported
    /// in the next frame's `left`.
    pub fn clear(&mut self) {
        self.queued_left.extend(
            self.entities
                .iter()
                .filter(|(_, e)| e.visible)
                .map(|(&id, _)| id),
        );
        self.entities.clear();
        self.arrival_ages.clear();
        self.prev_patch_tick = None;
        self.last_patch_tick = None;
        self.delay = None;
        self.render_tick = f64::NEG_INFINITY;
        self.last_server_tick = f64::NEG_INFINITY;
    }

    /// Advances the drawn time and recomputes every entity's drawn state, `entered` and `left`.
    /// Returns the drawn tick.
    pub fn frame(&mut self, timing: Timing) -> f64 {
        let target = self.cfg.target_delay(
            timing.one_way_ticks,
            timing.jitter_ticks,
            self.arrival_spread_ticks(),
        );
        let delay = match self.delay {
            None => target,
            Some(d) => {
                let elapsed = (timing.server_tick - self.last_server_tick).max(0.0);
                let down = self.cfg.slew * elapsed;
                let up = self.cfg.grow_slew * elapsed;
                d + (target - d).clamp(-down, up)
            }
        };
        self.delay = Some(delay);
        self.last_server_tick = timing.server_tick;
        // Never draw backwards, even if the clock estimate steps back.
        let render = (timing.server_tick - delay).max(self.render_tick);
        self.render_tick = render;

        self.entered.clear();
        self.left.clear();
        self.left.append(&mut self.queued_left);
        let mut gone = Vec::new();
        for (&id, e) in self.entities.iter_mut() {
            if e.despawn_tick.is_some_and(|t| render >= t as f64) {
                if e.visible {
                    self.left.push(id);
                }
                gone.push(id);
                continue;
            }
            // Field changes due by now, in arrival order (ticks ascend).
            while let Some((t, _, _)) = e.pending.front() {
                if (*t as f64) > render {
                    break;
                }
                if let Some((_, i, v)) = e.pending.pop_front() {
                    if let Some(slot) = e.fields.get_mut(usize::from(i)) {
                        *slot = v;
                    }
                }
            }
            // Keep the last sample at or before `render` and everything after it.
            while e.samples.len() >= 2 && e.samples.get(1).is_some_and(|s| s.tick <= render) {
                e.samples.pop_front();
            }
            let (x, y) = interpolate(&e.samples, render);
            e.x = x;
            e.y = y;
            let visible = render >= e.spawn_tick as f64;
            if visible && !e.visible {
                self.entered.push(id);
            } else if !visible && e.visible {
                self.left.push(id);
            }
            e.visible = visible;
        }
        for id in gone {
            self.entities.remove(&id);
        }
        render
    }

    /// Ids that became visible in the last frame.
    pub fn entered(&self) -> &[u32] {
        &self.entered
    }

    /// Ids that stopped being visible in the last frame.
    pub fn left(&self) -> &[u32] {
        &self.left
    }

    /// One visible entity as drawn in the last frame.
    pub fn get(&self, id: u32) -> Option<EntityView<'_>> {
        self.entities
            .get(&id)
            .filter(|e| e.visible)
            .map(|e| view(id, e))
    }

    /// Every visible entity as drawn in the last frame, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = EntityView<'_>> {
        self.entities
            .iter()
            .filter(|(_, e)| e.visible)
            .map(|(&id, e)| view(id, e))
    }

    /// Number of visible entities.
    pub fn visible_len(&self) -> usize {
        self.entities.values().filter(|e| e.visible).count()
    }

    /// Number of entities held, including those not yet or no longer visible.
    pub fn held_len(&self) -> usize {
        self.entities.len()
    }

    /// The current interpolation delay (ticks), once a frame ran.
    pub fn delay_ticks(&self) -> Option<f64> {
        self.delay
    }

    /// The tick drawn in the last frame.
    pub fn render_tick(&self) -> f64 {
        self.render_tick
    }

    /// What the bounds cut off so far.
    pub fn stats(&self) -> ReplicaStats {
        self.stats
    }
}

fn view(id: u32, e: &Entity) -> EntityView<'_> {
    EntityView {
        id,
        kind: e.kind,
        x: e.x,
        y: e.y,
        fields: &e.fields,
    }
}

/// Adds a position sample at `tick`. If the entity was last sampled before the previous patch, it
/// stood still in between (otherwise that patch would have moved it): a hold sample at `hold` (the
/// previous patch) keeps the interpolation from smearing the move over the whole quiet stretch.
fn push_sample(
    samples: &mut VecDeque<Sample>,
    cfg: &ReplicaConfig,
    stats: &mut ReplicaStats,
    tick: u64,
    hold: f64,
    x: f32,
    y: f32,
) {
    let t = tick as f64;
    if let Some(last) = samples.back().copied() {
        if last.tick >= t {
            // Same tick again (a baseline repeating the state): the newer value wins.
            if let Some(b) = samples.back_mut() {
                b.x = x;
                b.y = y;
            }
            return;
        }
        if last.tick < hold {
            samples.push_back(Sample {
                tick: hold,
                x: last.x,
                y: last.y,
            });
        }
    }
    samples.push_back(Sample { tick: t, x, y });
    while samples.len() > cfg.buffer_capacity.max(2) {
        samples.pop_front();
        stats.samples_dropped += 1;
    }
}

fn push_pending(
    e: &mut Entity,
    cfg: &ReplicaConfig,
    stats: &mut ReplicaStats,
    tick: u64,
    i: u8,
    v: FieldValue,
) {
    if e.pending.len() >= cfg.pending_capacity.max(1) {
        if let Some((_, oi, ov)) = e.pending.pop_front() {
            if let Some(slot) = e.fields.get_mut(usize::from(oi)) {
                *slot = ov;
            }
            stats.fields_forced += 1;
        }
    }
    e.pending.push_back((tick, i, v));
}

/// Position at `t` between the samples around it; holds the ends (never extrapolates).
fn interpolate(samples: &VecDeque<Sample>, t: f64) -> (f32, f32) {
    let Some(first) = samples.front() else {
        return (0.0, 0.0);
    };
    if t <= first.tick {
        return (first.x, first.y);
    }
    for (a, b) in samples.iter().zip(samples.iter().skip(1)) {
        if t >= a.tick && t < b.tick {
            let f = (t - a.tick) / (b.tick - a.tick);
            let lerp = |p: f32, q: f32| (f64::from(p) + (f64::from(q) - f64::from(p)) * f) as f32;
            return (lerp(a.x, b.x), lerp(a.y, b.y));
        }
    }
    samples.back().map_or((first.x, first.y), |l| (l.x, l.y))
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
