//! Observers at a lower patch rate than players ([`ZoneConfig::observer_patch_every`]): which
//! patches are an observer's, and the events addressed to it in the patches it sits out, held
//! for its next frame.
//!
//! A zone's host and a relay ([`crate::relay::RelayZone`]) run this same code on the same
//! inputs (the patch's tick, the tick of the patch before, the patch's events and which
//! subscribers sit it out), so a relayed observer gets byte for byte the frames its host would
//! have built. Each held event is kept once, however many observers wait for it (an observer
//! keeps only where its wait starts), so holding costs a crowd of observers little beside the
//! frames of those whose turn it is.
//!
//! [`ZoneConfig::observer_patch_every`]: crate::ZoneConfig::observer_patch_every

use std::collections::{BTreeMap, VecDeque};

use crate::player::PlayerId;
use crate::replicate::MAX_FRAME_EVENT_BYTES;
use zonekeep_protocol::limits::MAX_EVENTS;

/// A zone's observer rate, as its host runs it and as a relay is told it once, in its link's
/// image (see the [link format](crate::relay#link-message-format)): with the tick of each patch
/// and of the one before, all an observer's turns follow from it, so the origin never tells a
/// relay whose turn it is.
///
/// The rule: patch index `i = tick / patch_every` is observer `id`'s turn when
/// `(i + id) % observer_patch_every == 0`, staggered by id so each patch serves about one
/// observer in `observer_patch_every`. A patch serves every observer whose turn fell after the
/// patch before it, up to its own (a host catching up builds one patch for several patch
/// ticks, and no observer loses its turn to that); the first patch serves them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverRate {
    /// Ticks per patch ([`ZoneConfig::patch_every`](crate::ZoneConfig::patch_every)): turns
    /// count patches, not ticks.
    pub patch_every: u32,
    /// An observer gets a frame on one patch in this many
    /// ([`ZoneConfig::observer_patch_every`](crate::ZoneConfig::observer_patch_every)).
    pub observer_patch_every: u32,
}

impl Default for ObserverRate {
    fn default() -> Self {
        Self {
            patch_every: 1,
            observer_patch_every: 1,
        }
    }
}

impl ObserverRate {
    /// The rate a zone's config asks for.
    pub fn of(config: &crate::ZoneConfig) -> Self {
        Self {
            patch_every: config.patch_every,
            observer_patch_every: config.observer_patch_every,
        }
    }

    /// Whether some observers sit patches out (otherwise nothing here runs).
    pub(crate) fn staggered(&self) -> bool {
        self.observer_patch_every > 1
    }

    /// Whether observer `id`'s turn came in the patch of `tick`, the patch before being that
    /// of `before` (0: none). Patch index `i = tick / patch_every` is `id`'s when
    /// `(i + id) % observer_patch_every == 0`: turns are staggered by id, so each patch serves
    /// about one observer in `observer_patch_every`. A patch built after skipped ones (a host
    /// catching up runs several patch ticks and builds once) serves every observer whose turn
    /// fell in between, so no observer waits longer than its rate because of it; the first
    /// patch serves every observer.
    pub(crate) fn turn(&self, before: u64, tick: u64, id: PlayerId) -> bool {
        let every = u64::from(self.observer_patch_every);
        if every <= 1 || before == 0 {
            return true;
        }
        let per = u64::from(self.patch_every.max(1));
        let (now, then) = (tick / per, before / per);
        let gap = now.saturating_sub(then);
        // Some index j in (then, now] has (j + id) % every == 0.
        gap >= every || (now % every + u64::from(id.0) % every) % every < gap
    }
}

/// Bytes an event takes in a frame's events: its topic and length varints and its payload (as
/// the replicator counts them against [`MAX_FRAME_EVENT_BYTES`]).
fn wire_len(topic: u16, payload: &[u8]) -> usize {
    use zonekeep_protocol::wire::varint_len;
    varint_len(u64::from(topic)) + varint_len(payload.len() as u64) + payload.len()
}

/// How many events, and their bytes in a frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Size {
    count: usize,
    bytes: usize,
}

impl Size {
    fn plus(self, other: Size) -> Size {
        Size {
            count: self.count.saturating_add(other.count),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    /// More than one frame carries (the replicator would drop the rest).
    fn over(self) -> bool {
        self.count > MAX_EVENTS || self.bytes > MAX_FRAME_EVENT_BYTES
    }
}

/// One event of a recent patch, kept while an observer that sat that patch out waits for it.
#[derive(Debug)]
struct Kept {
    /// `None`: everyone.
    to: Option<PlayerId>,
    topic: u16,
    payload: Vec<u8>,
}

/// What one observer waits for: the log's events from `from` on addressed to it or to
/// everyone, `size` in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hold {
    from: u64,
    size: Size,
}

/// The events observers that sat patches out wait for. Each event of those patches is kept
/// once, in a log shared by every observer waiting; an observer holds only where its events
/// start. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct HeldEvents {
    /// Recent events, oldest first, from the oldest any observer waits for.
    log: VecDeque<Kept>,
    /// The number of `log`'s first event (events are numbered in the order they came).
    first: u64,
    /// Observers with events waiting, by id.
    holds: BTreeMap<PlayerId, Hold>,
    /// The number of the current patch's first event.
    start: u64,
    /// The current patch's events for everyone.
    all: Size,
    /// The current patch's events of each participant addressed one, on top of `all`.
    own: BTreeMap<PlayerId, Size>,
}

/// One patch's frame events of the observers whose waiting events go out in it (see
/// [`HeldEvents::plan`]), borrowing the log.
#[derive(Debug, Default)]
pub(crate) struct Plan<'h> {
    /// Each such observer's events, in order: what it waited for, then the patch's own.
    lists: BTreeMap<PlayerId, Vec<(u16, &'h [u8])>>,
    /// What each of them still waits for after its frame (its events past one frame's worth).
    rest: BTreeMap<PlayerId, Hold>,
}

impl<'h> Plan<'h> {
    /// The events of `id`'s frame this patch, when it is an observer whose waiting events go
    /// out in it; otherwise `None` (its events are the patch's own).
    pub(crate) fn events(&self, id: PlayerId) -> Option<&[(u16, &'h [u8])]> {
        self.lists.get(&id).map(Vec::as_slice)
    }

    /// Whether `id` gets a frame this patch whatever its turn: what it waits for and the
    /// patch's events would no longer fit one frame, so they go out now rather than be dropped.
    pub(crate) fn early(&self, id: PlayerId) -> bool {
        self.lists.contains_key(&id)
    }

    /// What the observers served from the log still wait for, once the patch is built.
    pub(crate) fn into_rest(self) -> Rest {
        Rest(self.rest)
    }
}

/// What [`Plan::into_rest`] leaves: owned, so the log can change again.
#[derive(Debug, Default)]
pub(crate) struct Rest(BTreeMap<PlayerId, Hold>);

impl HeldEvents {
    /// Keeps the events of the patch being built, each `(recipient or None for everyone,
    /// topic, payload)` in order: observers that sit it out will wait for them. Call once per
    /// patch, before [`plan`](Self::plan).
    pub(crate) fn begin<'e>(
        &mut self,
        events: impl Iterator<Item = (Option<PlayerId>, u16, &'e [u8])>,
    ) {
        self.start = self.first.saturating_add(self.log.len() as u64);
        self.all = Size::default();
        self.own.clear();
        for (to, topic, payload) in events {
            let size = Size {
                count: 1,
                bytes: wire_len(topic, payload),
            };
            match to {
                None => self.all = self.all.plus(size),
                Some(p) => {
                    let own = self.own.entry(p).or_default();
                    *own = own.plus(size);
                }
            }
            self.log.push_back(Kept {
                to,
                topic,
                payload: payload.to_vec(),
            });
        }
    }

    /// The current patch's events addressed to `id` (its own and everyone's).
    fn current(&self, id: PlayerId) -> Size {
        self.all
            .plus(self.own.get(&id).copied().unwrap_or_default())
    }

    /// The frame events of each waiting observer served this patch: those whose turn it is
    /// (`before` and `tick` as for [`ObserverRate::turn`]) and those whose waiting events and
    /// the patch's would no longer fit one frame. Each gets what it waited for and then the
    /// patch's events, as many as fit one frame in order; the rest waits for its next frame.
    pub(crate) fn plan(&self, rate: &ObserverRate, before: u64, tick: u64) -> Plan<'_> {
        let mut plan = Plan::default();
        for (&id, hold) in &self.holds {
            let total = hold.size.plus(self.current(id));
            if !rate.turn(before, tick, id) && !total.over() {
                continue;
            }
            let mut list = Vec::new();
            let mut sent = Size::default();
            let mut rest = None;
            let skip = usize::try_from(hold.from.saturating_sub(self.first)).unwrap_or(usize::MAX);
            for (n, e) in self.log.iter().enumerate().skip(skip) {
                if e.to.is_some_and(|to| to != id) {
                    continue;
                }
                let len = wire_len(e.topic, &e.payload);
                if sent.count >= MAX_EVENTS
                    || sent.bytes.saturating_add(len) > MAX_FRAME_EVENT_BYTES
                {
                    rest = Some(Hold {
                        from: self.first.saturating_add(n as u64),
                        size: Size {
                            count: total.count.saturating_sub(sent.count),
                            bytes: total.bytes.saturating_sub(sent.bytes),
                        },
                    });
                    break;
                }
                sent = sent.plus(Size {
                    count: 1,
                    bytes: len,
                });
                list.push((e.topic, e.payload.as_slice()));
            }
            if let Some(rest) = rest {
                plan.rest.insert(id, rest);
            }
            plan.lists.insert(id, list);
        }
        plan
    }

    /// After the patch was built: `sat_out` are the observers that sat it out, ascending (they
    /// wait for its events too), `rest` what the observers served from the log still wait for,
    /// kept for those that got their frame (`framed`). Every other observer's wait ends: it was
    /// served, or it is no longer subscribed (its client dropped or it left), and what it waited
    /// for goes with its connection, as a dropped player's frames in flight do. The log keeps
    /// only what someone still waits for.
    pub(crate) fn end(
        &mut self,
        sat_out: &[PlayerId],
        rest: Rest,
        framed: impl Fn(PlayerId) -> bool,
    ) {
        // Both ascend by id and never share one (those served were due, the others not), so
        // the map is built in one pass rather than by an insert per observer.
        let mut holds: Vec<(PlayerId, Hold)> = Vec::with_capacity(sat_out.len());
        for &id in sat_out {
            let now = self.current(id);
            let hold = match self.holds.get(&id) {
                Some(h) => Hold {
                    from: h.from,
                    size: h.size.plus(now),
                },
                None if now.count > 0 => Hold {
                    from: self.start,
                    size: now,
                },
                None => continue,
            };
            holds.push((id, hold));
        }
        holds.extend(rest.0.into_iter().filter(|(id, _)| framed(*id)));
        holds.sort_unstable_by_key(|(id, _)| *id);
        self.holds = holds.into_iter().collect();
        let keep_from = self
            .holds
            .values()
            .map(|h| h.from)
            .min()
            .unwrap_or_else(|| self.first.saturating_add(self.log.len() as u64));
        while self.first < keep_from && self.log.pop_front().is_some() {
            self.first += 1;
        }
    }

    /// `id` stopped being served (its client dropped, it is moving, it left or its frames are
    /// built elsewhere now): what it waited for goes with its connection, as a dropped
    /// player's frames in flight do. A host and a relay forget at the same points of a
    /// participant's life (where its subscriber is parked or removed), so a relayed observer
    /// holds what a direct one would.
    pub(crate) fn forget(&mut self, id: PlayerId) {
        self.holds.remove(&id);
    }

    /// Observers with events waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.holds.len()
    }

    /// Events kept for them.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.log.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(every: u32) -> ObserverRate {
        ObserverRate {
            patch_every: 2,
            observer_patch_every: every,
        }
    }

    #[test]
    fn turns_are_staggered_by_id_and_none_is_skipped() {
        let r = rate(3);
        // Patches at ticks 4, 6, ..., 22 are indices 2 to 11: each observer once in three.
        for id in 0..9u32 {
            let mine: Vec<u64> = (4..=22u64)
                .step_by(2)
                .filter(|&t| r.turn(t - 2, t, PlayerId(id)))
                .collect();
            let want: Vec<u64> = (2..=11u64)
                .filter(|i| (i + u64::from(id)) % 3 == 0)
                .map(|i| i * 2)
                .collect();
            assert_eq!(mine, want, "{id}");
            assert!((3..=4).contains(&mine.len()), "{id}: {mine:?}");
        }
        // A patch after two skipped ones serves every turn that fell in between.
        assert!((0..9).all(|id| r.turn(4, 10, PlayerId(id))));
        // Two indices apart: the two turns in (2, 4] are served, not the third.
        let served: Vec<u32> = (0..6).filter(|&id| r.turn(4, 8, PlayerId(id))).collect();
        assert_eq!(served, [0, 2, 3, 5]);
        // The first patch serves everyone; a rate of 1 is every patch.
        assert!((0..9).all(|id| r.turn(0, 6, PlayerId(id))));
        assert!((0..9).all(|id| rate(1).turn(4, 6, PlayerId(id))));
    }

    #[test]
    fn an_observer_waiting_past_one_frame_is_served_early_and_nothing_is_lost() {
        let r = rate(1000);
        let mut held = HeldEvents::default();
        let id = PlayerId(7);
        let big = vec![0u8; 16_000];
        let mut got = Vec::new();
        let mut early = 0;
        for patch in 1..=100u64 {
            let tick = patch * 2;
            // Twenty 16 kB events a patch: a frame holds 16 patches' worth at most.
            let events: Vec<(Option<PlayerId>, u16, &[u8])> =
                (0..20u16).map(|n| (Some(id), n, big.as_slice())).collect();
            held.begin(events.into_iter());
            let plan = held.plan(&r, tick - 2, tick);
            let served = plan
                .events(id)
                .map(|l| l.iter().map(|(t, _)| *t).collect::<Vec<_>>());
            let sat_out: Vec<PlayerId> = match &served {
                Some(list) => {
                    assert!(plan.early(id));
                    let bytes: usize = list.len() * wire_len(0, &big);
                    assert!(bytes <= MAX_FRAME_EVENT_BYTES);
                    got.extend(list.iter().copied());
                    early += 1;
                    Vec::new()
                }
                None => vec![id],
            };
            let rest = plan.into_rest();
            held.end(&sat_out, rest, |_| true);
        }
        assert!(early > 5, "{early} frames");
        // In order, none lost, what is left still waiting.
        let waiting = held.kept();
        assert_eq!(got.len() + waiting, 100 * 20);
        assert!(got.iter().copied().eq((0..20u16).cycle().take(got.len())));
        assert_eq!(held.waiting(), 1);
    }
}
