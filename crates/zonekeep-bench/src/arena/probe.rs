//! The probe client's correctness checks (WORKLOADS.md arena §5): after each decoded patch, every NPC the
//! probe holds must be where `npcPos(i, tick)` puts it with the closed-form hp; in scenario B no
//! expected NPC may be missing and nothing beyond `R` may be present.
//!
//! Positions are compared **exactly on the quantized integers**: the host sends
//! `pos_encode(npcPos(i, tick), pos_step)`, so the probe computes the same integer and any
//! difference at all is a mismatch (stricter than the workload's "within half the declared step").
//!
//! The probe knows its own player's exact `f32` position without trusting the server: it replays
//! the inputs it sent, `1..=ack`, from its spawn with [`apply_input`] — the same fold the zone runs.
//! That position is checked against what the server sent and is the centre of the B visibility test.
//!
//! With a byte budget (the crowded run) entities may be deferred by design, so only entities sent
//! in this patch are checked for values, and [`ProbeCounts::max_unsent_ticks`] measures how long an
//! entity in view went without being brought up to date.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use zonekeep_protocol::quant::pos_encode;

use super::math::{apply_input, npc_hp, within, ArenaConsts, NpcParams};
use super::{ArenaParams, Scenario, KIND_NPC, KIND_PLAYER};

/// Inputs the probe keeps while they wait for their ack (400 s at 10 inputs/s).
pub const MAX_UNACKED: usize = 4096;

/// One entity as the probe holds it after applying a patch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldEntity {
    /// Entity id (an NPC's id is its index).
    pub id: u32,
    /// Kind index ([`KIND_NPC`] or [`KIND_PLAYER`]).
    pub kind: u32,
    /// Quantized x as received.
    pub qx: i32,
    /// Quantized y as received.
    pub qy: i32,
    /// hp (NPCs), if the field decoded as an unsigned integer.
    pub hp: Option<u32>,
}

/// Mismatch and coverage counters; all mismatch counts must be 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCounts {
    /// Patches checked.
    pub patches: u64,
    /// NPC values checked (position and hp).
    pub npcs_checked: u64,
    /// NPCs whose quantized position differs from the formula.
    pub pos_mismatch: u64,
    /// NPCs whose hp differs from the closed form.
    pub hp_mismatch: u64,
    /// Expected NPCs (within R, or all in A) the probe does not hold (not counted with a budget,
    /// where late spawns are by design; see `max_unsent_ticks`).
    pub missing: u64,
    /// NPCs or players held beyond R (B only).
    pub unexpected: u64,
    /// Patches where the probe's own player was not where its acknowledged inputs put it.
    pub own_mismatch: u64,
    /// Entities of an unknown kind or NPC ids out of range.
    pub malformed: u64,
    /// Longest run of ticks an NPC in view went without being sent its current state.
    pub max_unsent_ticks: u64,
}

impl ProbeCounts {
    /// Sum of every mismatch counter.
    pub fn mismatches(&self) -> u64 {
        self.pos_mismatch
            + self.hp_mismatch
            + self.missing
            + self.unexpected
            + self.own_mismatch
            + self.malformed
    }

    /// Adds `other` (max for the staleness figure).
    pub fn add(&mut self, other: &ProbeCounts) {
        self.patches += other.patches;
        self.npcs_checked += other.npcs_checked;
        self.pos_mismatch += other.pos_mismatch;
        self.hp_mismatch += other.hp_mismatch;
        self.missing += other.missing;
        self.unexpected += other.unexpected;
        self.own_mismatch += other.own_mismatch;
        self.malformed += other.malformed;
        self.max_unsent_ticks = self.max_unsent_ticks.max(other.max_unsent_ticks);
    }
}

/// The validator of one probe bot.
#[derive(Debug, Clone)]
pub struct Probe {
    consts: ArenaConsts,
    npcs: NpcParams,
    scenario: Scenario,
    radius: f64,
    pos_step: f32,
    budgeted: bool,
    bounds: (f64, f64),
    spawn: (f32, f32),
    /// Inputs sent and not yet acknowledged, oldest first (input `folded.0 + 1` first).
    unacked: VecDeque<(f64, f64)>,
    /// Inputs recorded since the player (re)spawned.
    recorded: usize,
    /// `(inputs applied, position)` of the last fold, so each patch folds only new inputs.
    folded: (usize, (f32, f32)),
    /// Per NPC in view: the tick since which it has been behind (with a budget).
    behind_since: HashMap<u32, u64>,
    measuring: bool,
    counts: ProbeCounts,
    scratch: Vec<bool>,
}

impl Probe {
    /// A validator for bot `bot` of a run with `params`.
    pub fn new(params: &ArenaParams, bot: u32) -> Self {
        let consts = params.consts;
        let spawn = params.spawn(bot);
        Self {
            consts,
            npcs: NpcParams::new(params.npcs as usize, params.seed, consts.world),
            scenario: params.scenario,
            radius: params.radius,
            pos_step: params.pos_step,
            budgeted: params.budget.is_some(),
            bounds: params.player_bounds(),
            spawn,
            unacked: VecDeque::new(),
            recorded: 0,
            folded: (0, spawn),
            behind_since: HashMap::new(),
            measuring: false,
            counts: ProbeCounts::default(),
            scratch: Vec::new(),
        }
    }

    /// Records input `seq` (1-based, consecutive) as sent with displacement `(dx, dy)`. At most
    /// [`MAX_UNACKED`] wait for their ack; past that the probe stops recording (and so stops the
    /// own-position checks, which need every input) rather than grow.
    pub fn sent_input(&mut self, seq: u32, dx: f64, dy: f64) {
        let idx = seq.saturating_sub(1) as usize;
        if idx == self.recorded && self.unacked.len() < MAX_UNACKED {
            self.unacked.push_back((dx, dy));
            self.recorded += 1;
        }
    }

    /// The bot rejoined as a new player (sequences restart at 1, the player respawns).
    pub fn reset_player(&mut self) {
        self.unacked.clear();
        self.recorded = 0;
        self.folded = (0, self.spawn);
        self.behind_since.clear();
    }

    /// Counts mismatches only while measuring (the window of WORKLOADS.md arena §6).
    pub fn set_measuring(&mut self, on: bool) {
        self.measuring = on;
    }

    /// The counters so far.
    pub fn counts(&self) -> ProbeCounts {
        self.counts
    }

    /// The probe player's exact position after inputs `1..=ack`; `None` if `ack` names an input this
    /// probe did not record (then the own checks are skipped, not guessed).
    pub fn own_pos(&mut self, ack: u32) -> Option<(f32, f32)> {
        let n = ack as usize;
        // Acks of one player never go back; one beyond what was recorded cannot be replayed.
        if n < self.folded.0 || n > self.recorded {
            return None;
        }
        let (mut done, mut pos) = self.folded;
        while done < n {
            let (dx, dy) = self.unacked.pop_front()?;
            pos = apply_input(&self.consts, pos, dx, dy, self.bounds).unwrap_or(pos);
            done += 1;
        }
        self.folded = (done, pos);
        Some(pos)
    }

    fn q(&self, p: (f32, f32)) -> (i32, i32) {
        (
            pos_encode(p.0, self.pos_step),
            pos_encode(p.1, self.pos_step),
        )
    }

    /// Checks the probe's whole held state after the patch of `tick` was applied. `touched` says
    /// whether an id was spawned or updated by this patch (only those are value-checked with a
    /// budget); `own` is the probe's controlled entity.
    pub fn check(
        &mut self,
        tick: u64,
        ack: u32,
        own: Option<u32>,
        held: &[HeldEntity],
        touched: &dyn Fn(u32) -> bool,
    ) {
        let mut c = ProbeCounts {
            patches: 1,
            ..ProbeCounts::default()
        };
        let m = self.npcs.len();
        let own_pos = self.own_pos(ack);
        let mut seen = std::mem::take(&mut self.scratch);
        seen.clear();
        seen.resize(m, false);
        for e in held {
            match e.kind {
                KIND_NPC => {
                    let i = e.id as usize;
                    let Some(p) = self.npcs.pos(&self.consts, i, tick) else {
                        c.malformed += 1;
                        continue;
                    };
                    if let Some(s) = seen.get_mut(i) {
                        *s = true;
                    }
                    if self.scenario == Scenario::Interest {
                        if let Some(o) = own_pos {
                            if !within(o, p, self.radius) {
                                c.unexpected += 1;
                            }
                        }
                    }
                    if self.budgeted && !touched(e.id) {
                        continue;
                    }
                    c.npcs_checked += 1;
                    if (e.qx, e.qy) != self.q(p) {
                        c.pos_mismatch += 1;
                    }
                    let want = u32::from(npc_hp(&self.consts, u64::from(e.id), tick));
                    if e.hp != Some(want) {
                        c.hp_mismatch += 1;
                    }
                }
                KIND_PLAYER => {
                    let Some(o) = own_pos else { continue };
                    if Some(e.id) == own {
                        if (!self.budgeted || touched(e.id)) && (e.qx, e.qy) != self.q(o) {
                            c.own_mismatch += 1;
                        }
                    } else if self.scenario == Scenario::Interest {
                        // Another player's exact f32 is unknown to the probe: allow the
                        // quantization error (half a step on each axis) at the edge.
                        let step = f64::from(self.pos_step);
                        let x = f64::from(e.qx) * step;
                        let y = f64::from(e.qy) * step;
                        let dx = x - f64::from(o.0);
                        let dy = y - f64::from(o.1);
                        let slack = self.radius + step;
                        if dx * dx + dy * dy > slack * slack {
                            c.unexpected += 1;
                        }
                    }
                }
                _ => c.malformed += 1,
            }
        }
        // Expected NPCs not held, and staleness.
        let expect_all = self.scenario == Scenario::Broadcast;
        let mut max_behind = 0u64;
        for (i, &held_it) in seen.iter().enumerate() {
            let expected = expect_all
                || match (own_pos, self.npcs.pos(&self.consts, i, tick)) {
                    (Some(o), Some(p)) => within(o, p, self.radius),
                    _ => false,
                };
            let id = i as u32;
            if !expected {
                self.behind_since.remove(&id);
                continue;
            }
            if !held_it && !self.budgeted && own_pos.is_some() {
                c.missing += 1;
            }
            if self.budgeted {
                let current = held_it && touched(id);
                if current {
                    self.behind_since.remove(&id);
                } else {
                    let since = *self
                        .behind_since
                        .entry(id)
                        .or_insert(tick.saturating_sub(1));
                    max_behind = max_behind.max(tick.saturating_sub(since));
                }
            }
        }
        c.max_unsent_ticks = max_behind;
        self.scratch = seen;
        if self.measuring {
            self.counts.add(&c);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::arena::math::BotParams;

    #[test]
    fn own_position_folds_acknowledged_inputs_once() {
        let params = ArenaParams {
            npcs: 0,
            ..ArenaParams::default()
        };
        let c = params.consts;
        let bp = BotParams::new(3, c.world);
        let mut p = Probe::new(&params, 3);
        let mut want = (bp.x, bp.y);
        assert_eq!(p.own_pos(0), Some(want));
        for j in 0..50u32 {
            let (dx, dy) = bp.input(&c, u64::from(j));
            p.sent_input(j + 1, dx, dy);
        }
        assert_eq!(p.own_pos(51), None, "not sent yet");
        for j in 0..50u32 {
            let (dx, dy) = bp.input(&c, u64::from(j));
            want = apply_input(&c, want, dx, dy, (0.0, c.world)).unwrap();
            if j % 7 == 0 {
                assert_eq!(p.own_pos(j + 1), Some(want));
            }
        }
        assert_eq!(p.own_pos(50), Some(want));
        assert_eq!(p.own_pos(49), None, "acks never go back");
        assert!(p.unacked.is_empty());
        p.reset_player();
        assert_eq!(p.own_pos(0), Some((bp.x, bp.y)));
    }

    #[test]
    fn a_wrong_npc_position_or_hp_is_a_mismatch() {
        let params = ArenaParams {
            npcs: 3,
            ..ArenaParams::default()
        };
        let npcs = NpcParams::new(3, params.seed, params.consts.world);
        let mut p = Probe::new(&params, 0);
        p.set_measuring(true);
        let held = |k: u64, shift: i32, hp: u32| -> Vec<HeldEntity> {
            (0..3u32)
                .map(|i| {
                    let (x, y) = npcs.pos(&params.consts, i as usize, k).unwrap();
                    HeldEntity {
                        id: i,
                        kind: KIND_NPC,
                        qx: pos_encode(x, params.pos_step) + shift,
                        qy: pos_encode(y, params.pos_step),
                        hp: Some(hp),
                    }
                })
                .collect()
        };
        p.check(5, 0, None, &held(5, 0, 100), &|_| true);
        assert_eq!(p.counts().mismatches(), 0);
        p.check(6, 0, None, &held(6, 1, 100), &|_| true);
        assert_eq!(p.counts().pos_mismatch, 3);
        p.check(40, 0, None, &held(40, 0, 100), &|_| true);
        // Wave 1 at tick 40 hits NPC 1 only (i % 10 == 1).
        assert_eq!(p.counts().hp_mismatch, 1);
        p.check(41, 0, None, &held(41, 0, 100)[..2], &|_| true);
        assert_eq!(p.counts().missing, 1, "scenario A expects every NPC");
        assert_eq!(p.counts().patches, 4);
    }
}
