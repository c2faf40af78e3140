//! The history of what every subscriber was sent, kept for `history_ticks`, and the clamps that
//! turn an input's view tick into a [`Rewind`](super::Rewind).
//!
//! Per patch, one record holds every entity's quantized position (shared by all subscribers)
//! and, per subscriber, a bitset of the entities its client holds. An entity whose update the
//! byte budget deferred is held at a position an earlier patch sent; the subscriber's set then
//! carries one age byte per rank (how many patches back that position was sent), and older
//! records are kept, for their positions only, as long as an age refers to them. Positions
//! deferred for longer than an age can say are listed explicitly.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::geom::Capsule;
use super::{LagCompensation, Rewind, MAX_HISTORY_TICKS};
use crate::player::PlayerId;
use crate::replicate::{SentView, SubscriberId};
use crate::world::World;

/// Round trips kept per participant: the reach follows the worst of them.
pub(crate) const RTT_SAMPLES: usize = 8;

/// Records kept beyond the window for reuse (their buffers' capacity), at most.
const SPARE_RECORDS: usize = 2;

/// An age marker: the sent position is in [`SentSet::lagging`], not in an older record.
const LISTED: u8 = u8::MAX;

/// One patch: every entity's quantized position as replicated, and what each subscriber's client
/// held after it.
#[derive(Debug, Default)]
pub(crate) struct PatchRecord {
    tick: u64,
    /// Numbers the records: consecutive, so an age in patches is a distance in the deque.
    seq: u64,
    /// Entity ids by rank, ascending (the world's columns at this patch).
    ids: Vec<u32>,
    /// Quantized positions by rank.
    pos: Vec<(i32, i32)>,
    /// Ascending by subscriber; one per subscriber that was sent a frame at this patch. Emptied
    /// once the record falls out of the window and is kept only for its positions.
    subs: Vec<SentSet>,
    /// The largest age any of `subs` refers to: how many records before this one must stay.
    max_age: u8,
}

/// What one subscriber's client held after one patch.
#[derive(Debug, Default, Clone)]
pub(crate) struct SentSet {
    sub: u32,
    /// The frame said nothing new (a server skips sending such frames; see the module docs).
    quiet: bool,
    /// One bit per rank: the client holds this entity.
    known: Vec<u64>,
    /// Empty when every held entity's sent position is the world's at this patch. Otherwise one
    /// byte per rank: 0 for those, else how many patches back the position the client holds was
    /// sent (the byte budget deferred its updates since), or [`LISTED`].
    ages: Vec<u8>,
    /// Sent positions too old for an age, `(rank, qx, qy)`, ascending by rank.
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
            + self.ages.capacity()
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

    /// The rank of `id` here; `hint` is its rank in a record of the same layout.
    fn rank_of(&self, id: u32, hint: usize) -> Option<usize> {
        if self.ids.get(hint) == Some(&id) {
            return Some(hint);
        }
        self.ids.binary_search(&id).ok()
    }

    fn heap_bytes(&self) -> usize {
        self.ids.capacity() * std::mem::size_of::<u32>()
            + self.pos.capacity() * std::mem::size_of::<(i32, i32)>()
            + self.subs.capacity() * std::mem::size_of::<SentSet>()
            + self.subs.iter().map(SentSet::heap_bytes).sum::<usize>()
    }
}

/// The quantized position the client of `set` (recorded in `records[at]`) held for the entity
/// at `rank` there, if it held it.
fn held(
    records: &VecDeque<PatchRecord>,
    at: usize,
    set: &SentSet,
    rank: usize,
) -> Option<(i32, i32)> {
    if !set.holds(rank) {
        return None;
    }
    let rec = records.get(at)?;
    match set.ages.get(rank).copied().unwrap_or(0) {
        0 => rec.pos.get(rank).copied(),
        LISTED => {
            let rank32 = u32::try_from(rank).ok()?;
            let i = set.lagging.binary_search_by_key(&rank32, |l| l.0).ok()?;
            set.lagging.get(i).map(|l| (l.1, l.2))
        }
        age => {
            let then = records.get(at.checked_sub(usize::from(age))?)?;
            let id = *rec.ids.get(rank)?;
            then.pos.get(then.rank_of(id, rank)?).copied()
        }
    }
}

/// One recorded state of one subscriber.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drawn<'h> {
    records: &'h VecDeque<PatchRecord>,
    at: usize,
    sent: &'h SentSet,
}

impl<'h> Drawn<'h> {
    fn rec(&self) -> Option<&'h PatchRecord> {
        self.records.get(self.at)
    }

    /// The quantized position the client held for the entity at `rank`, if it held it.
    fn held(&self, rank: usize) -> Option<(i32, i32)> {
        held(self.records, self.at, self.sent, rank)
    }

    /// [`held`](Self::held) by id; `hint` is its rank in a record of the same layout.
    fn held_id(&self, id: u32, hint: usize) -> Option<(i32, i32)> {
        let rank = self.rec()?.rank_of(id, hint)?;
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
    fn place(&self, id: u32, rank: usize, qa: (i32, i32)) -> (f32, f32) {
        let q = match self.b.and_then(|b| b.held_id(id, rank)) {
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
        let rank = self.a.rec()?.ids.binary_search(&id).ok()?;
        let qa = self.a.held(rank)?;
        Some(self.place(id, rank, qa))
    }

    pub(super) fn drawn(&self) -> impl Iterator<Item = (u32, (f32, f32))> + '_ {
        let a = self.a;
        let ids: &[u32] = a.rec().map_or(&[], |r| &r.ids);
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
                let id = *ids.get(rank)?;
                let qa = a.held(rank)?;
                Some((id, self.place(id, rank, qa)))
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
    /// The next record's number.
    next_seq: u64,
    spare: Vec<PatchRecord>,
    /// Per participant, the last [`RTT_SAMPLES`] round trips reported, oldest first.
    rtt: BTreeMap<PlayerId, VecDeque<Duration>>,
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
            next_seq: 0,
            spare: Vec::new(),
            rtt: BTreeMap::new(),
        }
    }

    /// The driver measured `player`'s round trip.
    pub(crate) fn set_rtt(&mut self, player: PlayerId, rtt: Duration) {
        let samples = self.rtt.entry(player).or_default();
        if samples.len() >= RTT_SAMPLES {
            samples.pop_front();
        }
        samples.push_back(rtt);
    }

    /// The worst of `player`'s recent round trips (zero before any): a stall that held the link
    /// back raised the client's playout delay, which comes down only slowly after it.
    fn worst_rtt(&self, player: PlayerId) -> Duration {
        self.rtt
            .get(&player)
            .and_then(|s| s.iter().max())
            .copied()
            .unwrap_or_default()
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
        rec.seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        rec.max_age = 0;
        let cols = world.columns();
        rec.ids.clear();
        rec.ids.extend_from_slice(cols.ids);
        rec.pos.clear();
        rec.pos
            .extend((0..cols.ids.len()).map(|r| world.rank_qpos(r).unwrap_or((0, 0))));
        let words = cols.ids.len().div_ceil(64);
        let records = &self.records;
        // The previous record, when it is the previous patch (ages count patches).
        let last = records.len().checked_sub(1).filter(|&at| {
            records
                .get(at)
                .is_some_and(|r| r.seq.wrapping_add(1) == rec.seq)
        });
        let mut used = 0usize;
        let mut prev: Option<SentView<'a>> = None;
        for (sub, view) in subs {
            if used == rec.subs.len() {
                rec.subs.push(SentSet::default());
            }
            let shared = used > 0 && prev.as_ref().is_some_and(|p| p.same_as(&view));
            let (done, rest) = rec.subs.split_at_mut(used);
            let Some(set) = rest.first_mut() else {
                break;
            };
            set.sub = sub.0;
            set.quiet = quiet(sub);
            set.known.clear();
            set.ages.clear();
            set.lagging.clear();
            match done.last() {
                // The replicator shares one sent state between subscribers in it: so do we.
                Some(first) if shared => {
                    set.known.extend_from_slice(&first.known);
                    set.ages.extend_from_slice(&first.ages);
                    set.lagging.extend_from_slice(&first.lagging);
                }
                _ => {
                    let before = last.and_then(|at| {
                        let r = records.get(at)?;
                        Some((at, r, r.sent(sub.0)?))
                    });
                    set.known.resize(words, 0);
                    for (rank, qx, qy) in view.held() {
                        let r = rank as usize;
                        if let Some(w) = set.known.get_mut(r / 64) {
                            *w |= 1 << (r % 64);
                        }
                        if rec.pos.get(r) == Some(&(qx, qy)) {
                            continue;
                        }
                        // Not sent this patch, so held since the previous one: one patch older.
                        let age = before.and_then(|(at, prec, pset)| {
                            let id = *rec.ids.get(r)?;
                            let pr = prec.rank_of(id, r)?;
                            let age = pset.ages.get(pr).copied().unwrap_or(0);
                            let held_then = held(records, at, pset, pr)?;
                            (age < LISTED - 1 && held_then == (qx, qy)).then_some(age + 1)
                        });
                        if set.ages.is_empty() {
                            set.ages.resize(cols.ids.len(), 0);
                        }
                        match (age, set.ages.get_mut(r)) {
                            (Some(age), Some(slot)) => {
                                *slot = age;
                                rec.max_age = rec.max_age.max(age);
                            }
                            (_, slot) => {
                                if let Some(slot) = slot {
                                    *slot = LISTED;
                                }
                                set.lagging.push((rank, qx, qy));
                            }
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
    /// `newest − history_ticks` and the one at or before it (the earlier side of a span), with
    /// their subscribers' sets; and, for their positions only, the older ones their ages refer to.
    fn prune(&mut self, newest: u64) {
        let boundary = newest.saturating_sub(self.history_ticks);
        let window = self
            .records
            .iter()
            .rposition(|r| r.tick <= boundary)
            .unwrap_or(0);
        let Some(first_kept) = self.records.get(window).map(|r| r.tick) else {
            return;
        };
        let needed = self
            .records
            .iter()
            .skip(window)
            .map(|r| r.seq.saturating_sub(u64::from(r.max_age)))
            .min()
            .unwrap_or(0);
        while self.records.front().is_some_and(|r| r.seq < needed) {
            if let Some(old) = self.records.pop_front() {
                if self.spare.len() < SPARE_RECORDS {
                    self.spare.push(old);
                }
            }
        }
        for r in self.records.iter_mut().take_while(|r| r.tick < first_kept) {
            r.subs.clear();
            r.max_age = 0;
        }
    }

    /// The oldest sent position any kept record refers to, in patches back.
    #[cfg(test)]
    pub(crate) fn max_age(&self) -> u8 {
        self.records.iter().map(|r| r.max_age).max().unwrap_or(0)
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
        let reach = self.worst_rtt(player).saturating_add(self.max_view_delay);
        let reach_ticks =
            u64::try_from(reach.as_nanos() / self.dt.as_nanos().max(1)).unwrap_or(u64::MAX);
        let floor = now
            .saturating_sub(self.history_ticks)
            .max(now.saturating_sub(reach_ticks))
            .max(oldest);
        let tick = u64::from(view_tick).max(floor).min(newest);

        let a_at = self
            .records
            .iter()
            .rposition(|r| r.tick <= tick && r.sent(sub).is_some())?;
        let a_rec = self.records.get(a_at)?;
        let a = Drawn {
            records: &self.records,
            at: a_at,
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
        // The later side: the first state after it that said something to the client.
        let b = self
            .records
            .iter()
            .enumerate()
            .skip(a_at + 1)
            .find_map(|(at, r)| {
                r.sent(sub).filter(|s| !s.quiet).map(|sent| Drawn {
                    records: &self.records,
                    at,
                    sent,
                })
            });
        let frac = match b.and_then(|b| b.rec()) {
            Some(r) if r.tick > a_tick => {
                tick.saturating_sub(a_tick) as f64 / (r.tick - a_tick) as f64
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
