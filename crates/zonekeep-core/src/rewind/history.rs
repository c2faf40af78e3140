//! The history of what every subscriber was sent, kept for `history_ticks`, and the clamps that
//! turn an input's view tick into a [`Rewind`](super::Rewind).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::geom::Capsule;
use super::{LagCompensation, Rewind, MAX_HISTORY_TICKS};
use crate::player::PlayerId;
use crate::replicate::{SentView, SubscriberId};
use crate::world::World;

/// Records kept beyond the window for reuse (their buffers' capacity), at most.
const SPARE_RECORDS: usize = 2;

/// One patch: every entity's quantized position as replicated, and what each subscriber's client
/// held after it.
#[derive(Debug, Default)]
pub(crate) struct PatchRecord {
    tick: u64,
    /// Entity ids by rank, ascending (the world's columns at this patch).
    ids: Vec<u32>,
    /// Quantized positions by rank.
    pos: Vec<(i32, i32)>,
    /// Ascending by subscriber; one per subscriber that was sent a frame at this patch.
    subs: Vec<SentSet>,
}

/// What one subscriber's client held after one patch.
#[derive(Debug, Default, Clone)]
pub(crate) struct SentSet {
    sub: u32,
    /// The frame said nothing new (a server skips sending such frames; see the module docs).
    quiet: bool,
    /// One bit per rank: the client holds this entity.
    known: Vec<u64>,
    /// Held entities whose sent position is not the world's at this patch (the byte budget
    /// deferred their update): `(rank, qx, qy)`, ascending by rank.
    lagging: Vec<(u32, i32, i32)>,
}

impl SentSet {
    fn holds(&self, rank: usize) -> bool {
        self.known
            .get(rank / 64)
            .is_some_and(|w| w >> (rank % 64) & 1 == 1)
    }

    fn heap_bytes(&self) -> usize {
        self.known.capacity() * std::mem::size_of::<u64>()
            + self.lagging.capacity() * std::mem::size_of::<(u32, i32, i32)>()
    }
}

impl PatchRecord {
    fn sent(&self, sub: u32) -> Option<&SentSet> {
        self.subs
            .binary_search_by_key(&sub, |s| s.sub)
            .ok()
            .and_then(|i| self.subs.get(i))
    }

    fn heap_bytes(&self) -> usize {
        self.ids.capacity() * std::mem::size_of::<u32>()
            + self.pos.capacity() * std::mem::size_of::<(i32, i32)>()
            + self.subs.capacity() * std::mem::size_of::<SentSet>()
            + self.subs.iter().map(SentSet::heap_bytes).sum::<usize>()
    }
}

/// One recorded state of one subscriber.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drawn<'h> {
    rec: &'h PatchRecord,
    sent: &'h SentSet,
}

impl Drawn<'_> {
    /// The quantized position the client held for the entity at `rank`, if it held it.
    fn held(&self, rank: usize) -> Option<(i32, i32)> {
        if !self.sent.holds(rank) {
            return None;
        }
        let rank32 = u32::try_from(rank).ok()?;
        match self.sent.lagging.binary_search_by_key(&rank32, |l| l.0) {
            Ok(i) => self.sent.lagging.get(i).map(|l| (l.1, l.2)),
            Err(_) => self.rec.pos.get(rank).copied(),
        }
    }

    fn held_id(&self, id: u32) -> Option<(i32, i32)> {
        let rank = self.rec.ids.binary_search(&id).ok()?;
        self.held(rank)
    }
}

/// The two recorded states around a view tick and the fraction between them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span<'h> {
    a: Drawn<'h>,
    b: Option<Drawn<'h>>,
    frac: f64,
    step: f64,
}

impl Span<'_> {
    fn place(&self, id: u32, qa: (i32, i32)) -> (f32, f32) {
        let q = match self.b.and_then(|b| b.held_id(id)) {
            // As the SDKs do: interpolate in quanta, then scale.
            Some(qb) => (
                f64::from(qa.0) + (f64::from(qb.0) - f64::from(qa.0)) * self.frac,
                f64::from(qa.1) + (f64::from(qb.1) - f64::from(qa.1)) * self.frac,
            ),
            // Despawned at the later state: drawn where it was until then.
            None => (f64::from(qa.0), f64::from(qa.1)),
        };
        ((q.0 * self.step) as f32, (q.1 * self.step) as f32)
    }

    pub(super) fn position_of(&self, id: u32) -> Option<(f32, f32)> {
        let qa = self.a.held_id(id)?;
        Some(self.place(id, qa))
    }

    pub(super) fn drawn(&self) -> impl Iterator<Item = (u32, (f32, f32))> + '_ {
        let a = self.a;
        a.sent
            .known
            .iter()
            .enumerate()
            .flat_map(|(w, &bits)| {
                let mut bits = bits;
                std::iter::from_fn(move || {
                    if bits == 0 {
                        return None;
                    }
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    Some(w * 64 + b)
                })
            })
            .filter_map(move |rank| {
                let id = *a.rec.ids.get(rank)?;
                let qa = a.held(rank)?;
                Some((id, self.place(id, qa)))
            })
    }
}

/// What every subscriber was sent over the last `history_ticks`, for a zone that opted in.
#[derive(Debug)]
pub(crate) struct RewindHistory {
    history_ticks: u64,
    max_view_delay: Duration,
    dt: Duration,
    step: f64,
    colliders: Vec<Option<Capsule>>,
    records: VecDeque<PatchRecord>,
    spare: Vec<PatchRecord>,
    rtt: BTreeMap<PlayerId, Duration>,
}

impl RewindHistory {
    pub(crate) fn new(settings: &LagCompensation, dt: Duration, pos_step: f32) -> Self {
        Self {
            history_ticks: u64::from(settings.history_ticks.clamp(1, MAX_HISTORY_TICKS)),
            max_view_delay: settings.max_view_delay,
            dt,
            step: f64::from(pos_step),
            colliders: super::colliders(&settings.colliders),
            records: VecDeque::new(),
            spare: Vec::new(),
            rtt: BTreeMap::new(),
        }
    }

    /// The driver measured `player`'s round trip.
    pub(crate) fn set_rtt(&mut self, player: PlayerId, rtt: Duration) {
        self.rtt.insert(player, rtt);
    }

    /// The participant left: forget its round trip (its recorded states age out).
    pub(crate) fn forget(&mut self, player: PlayerId) {
        self.rtt.remove(&player);
    }

    /// Records what every subscriber holds after the frames of patch `tick` were built;
    /// `quiet(subscriber)` says whether its frame said nothing new.
    pub(crate) fn record<'a>(
        &mut self,
        tick: u64,
        world: &World,
        subs: impl Iterator<Item = (SubscriberId, SentView<'a>)>,
        quiet: impl Fn(SubscriberId) -> bool,
    ) {
        let mut rec = self.spare.pop().unwrap_or_default();
        rec.tick = tick;
        let cols = world.columns();
        rec.ids.clear();
        rec.ids.extend_from_slice(cols.ids);
        rec.pos.clear();
        rec.pos
            .extend((0..cols.ids.len()).map(|r| world.rank_qpos(r).unwrap_or((0, 0))));
        let words = cols.ids.len().div_ceil(64);
        let mut used = 0usize;
        let mut prev: Option<SentView<'a>> = None;
        for (sub, view) in subs {
            if used == rec.subs.len() {
                rec.subs.push(SentSet::default());
            }
            let shared = prev.as_ref().is_some_and(|p| p.same_as(&view)) && used > 0;
            let (done, rest) = rec.subs.split_at_mut(used);
            let Some(set) = rest.first_mut() else {
                break;
            };
            set.sub = sub.0;
            set.quiet = quiet(sub);
            set.known.clear();
            set.lagging.clear();
            match done.last() {
                // The replicator shares one sent state between subscribers in it: so do we.
                Some(last) if shared => {
                    set.known.extend_from_slice(&last.known);
                    set.lagging.extend_from_slice(&last.lagging);
                }
                _ => {
                    set.known.resize(words, 0);
                    for (rank, qx, qy) in view.held() {
                        let r = rank as usize;
                        if let Some(w) = set.known.get_mut(r / 64) {
                            *w |= 1 << (r % 64);
                        }
                        if rec.pos.get(r) != Some(&(qx, qy)) {
                            set.lagging.push((rank, qx, qy));
                        }
                    }
                }
            }
            used += 1;
            prev = Some(view);
        }
        rec.subs.truncate(used);
        self.records.push_back(rec);
        self.prune(tick);
    }

    /// Keeps the records an input applied after `newest` may need: those after
    /// `newest − history_ticks`, and the one at or before it (the earlier side of a span).
    fn prune(&mut self, newest: u64) {
        let boundary = newest.saturating_sub(self.history_ticks);
        while self.records.len() >= 2 && self.records.get(1).is_some_and(|r| r.tick <= boundary)
            || self.records.len() as u64 > self.history_ticks + 2
        {
            if let Some(old) = self.records.pop_front() {
                if self.spare.len() < SPARE_RECORDS {
                    self.spare.push(old);
                }
            }
        }
    }

    /// How many patches are kept.
    #[cfg(test)]
    pub(crate) fn patches(&self) -> usize {
        self.records.len()
    }

    /// Heap bytes held by the history (records and spare buffers).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.records
            .iter()
            .chain(&self.spare)
            .map(PatchRecord::heap_bytes)
            .sum::<usize>()
            + self.records.capacity() * std::mem::size_of::<PatchRecord>()
            + self.colliders.capacity() * std::mem::size_of::<Option<Capsule>>()
    }

    /// The world as `player` drew it at `view_tick`, clamped, for an input applied in tick
    /// `now`; `None` for view tick 0 or a subscriber with no recorded state.
    pub(crate) fn rewind_for(
        &self,
        player: PlayerId,
        view_tick: u32,
        now: u64,
    ) -> Option<Rewind<'_>> {
        if view_tick == 0 {
            return None;
        }
        let sub = player.0;
        let with_sub = |r: &&PatchRecord| r.sent(sub).is_some();
        let newest = self.records.iter().rev().find(with_sub)?.tick;
        let oldest = self.records.iter().find(with_sub)?.tick;
        let reach = self
            .rtt
            .get(&player)
            .copied()
            .unwrap_or_default()
            .saturating_add(self.max_view_delay);
        let reach_ticks =
            u64::try_from(reach.as_nanos() / self.dt.as_nanos().max(1)).unwrap_or(u64::MAX);
        let floor = now
            .saturating_sub(self.history_ticks)
            .max(now.saturating_sub(reach_ticks))
            .max(oldest);
        let tick = u64::from(view_tick).max(floor).min(newest);

        // The later side first: the first state after `tick` that the client was sent.
        let a_at = self
            .records
            .iter()
            .rposition(|r| r.tick <= tick && r.sent(sub).is_some())?;
        let a_rec = self.records.get(a_at)?;
        let a = Drawn {
            rec: a_rec,
            sent: a_rec.sent(sub)?,
        };
        // A quiet frame gave the client no sample: the earlier sample is the last frame that said
        // something (its positions are the same).
        let a_tick = self
            .records
            .range(..=a_at)
            .rev()
            .find(|r| r.sent(sub).is_some_and(|s| !s.quiet))
            .map_or(a_rec.tick, |r| r.tick);
        let b = self.records.range(a_at + 1..).find_map(|r| {
            r.sent(sub)
                .filter(|s| !s.quiet)
                .map(|sent| Drawn { rec: r, sent })
        });
        let frac = match b {
            Some(b) if b.rec.tick > a_tick => {
                (tick.saturating_sub(a_tick)) as f64 / (b.rec.tick - a_tick) as f64
            }
            _ => 0.0,
        };
        let span = Span {
            a,
            b,
            frac,
            step: self.step,
        };
        Some(super::rewind(
            tick,
            now.saturating_sub(tick),
            span,
            &self.colliders,
        ))
    }
}
