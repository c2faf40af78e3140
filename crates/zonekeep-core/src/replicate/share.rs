//! Whole-body sharing between subscribers in the same state.
//!
//! Two subscribers that were sent exactly the same things (same known entries: ids, base positions,
//! field versions, priorities) and see exactly the same entities this patch get the same despawns,
//! updates and spawns, byte for byte; only the header (ack, control) and events differ. That is the
//! common case of a small arena where everyone sees everyone. Each subscriber carries a **state id**:
//! a fresh id whenever its frame is computed on its own, the leader's new id when it copies a
//! leader's result, and [`EMPTY_STATE`] when it holds nothing (new or reset). Equal ids therefore mean
//! identical sent state by construction, with no comparison or hashing. The first subscriber of a
//! build with a given state id (the leader) builds its frame normally and leaves its body; a later
//! subscriber with the same id whose visible set is identical (compared exactly) gets the leader's
//! body and resulting state copied.
//!
//! States that became equal by different paths (say, after budgets spread a BASELINE over several
//! patches differently per subscriber) are merged: after a clean frame computed on its own, a
//! subscriber's state is keyed (length and both ends), and if an earlier subscriber of this build has
//! the same key and **exactly** equal entries, it adopts that subscriber's state id.
//!
//! Only clean leaders are shared: a budget that deferred something makes the selection depend on the
//! subscriber's own priorities, so that frame is not reused.
//!
//! A subscriber on datagrams is built against the state its client acknowledged, and each kept
//! state keeps its id: rebased onto it, the subscriber takes that id back. States against the same
//! acknowledged state (by either path above) therefore share one body too, whichever tick each
//! client acknowledged it at.

use super::{BuildStats, Entry, FrameInput, Subscriber};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use zonekeep_protocol::delta::{DeltaHeader, DeltaWriter};
use zonekeep_protocol::limits::{MAX_EVENTS, MAX_EVENT_PAYLOAD, MAX_SERVER_MESSAGE};
use zonekeep_protocol::wire::{put_bytes, put_varint, varint_len};

/// Hasher for the per-build maps: their keys are state ids and already-mixed merge keys, so one
/// multiply spreads them; SipHash's DoS resistance buys nothing for keys no client chooses.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K);
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The state id of a subscriber that holds nothing and awaits a BASELINE.
pub(super) const EMPTY_STATE: u64 = 0;

const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn mix(h: u64, v: u64) -> u64 {
    (h.rotate_left(23) ^ v).wrapping_mul(K)
}

/// A cheap key of a sent state (length and both ends), used only to find merge candidates, which
/// are then compared exactly. States that differ almost always differ in one of these.
fn merge_key(entries: &[Entry]) -> u64 {
    let mut h = mix(0x243F_6A88_85A3_08D3, entries.len() as u64);
    for e in entries.first().into_iter().chain(entries.last()) {
        h = mix(h, (u64::from(e.id) << 32) | u64::from(e.qx as u32));
        h = mix(
            h,
            (u64::from(e.qy as u32) << 32) | u64::from(e.prio.to_bits()),
        );
        h = mix(h, e.version ^ (u64::from(e.sent) << 63));
    }
    h
}

/// Bytes of the Delta header the writer emits for `h` (tag, tick, a State's base, ack, flags,
/// control).
pub(super) fn header_len(h: &DeltaHeader) -> usize {
    1 + varint_len(h.tick)
        + h.base.map_or(0, varint_len)
        + varint_len(u64::from(h.ack))
        + 1
        + h.control
            .map_or(0, |c| varint_len(c.map_or(0, |id| u64::from(id) + 1)))
}

/// Bytes of the events section for the kept `events` (indices into `input.events`).
pub(super) fn events_len(input: &FrameInput<'_>, kept: &[u32]) -> usize {
    if kept.is_empty() {
        return 0;
    }
    let mut n = varint_len(kept.len() as u64);
    for &i in kept {
        if let Some((t, p)) = input.events.get(i as usize) {
            n += varint_len(u64::from(*t)) + varint_len(p.len() as u64) + p.len();
        }
    }
    n
}

/// Keeps the events within protocol limits and [`MAX_FRAME_EVENT_BYTES`](super::MAX_FRAME_EVENT_BYTES)
/// (indices into `input.events`), counting the rest.
pub(super) fn filter_events(input: &FrameInput<'_>, kept: &mut Vec<u32>, stats: &mut BuildStats) {
    kept.clear();
    let mut bytes = 0usize;
    for (i, (topic, payload)) in input.events.iter().enumerate() {
        let len = varint_len(u64::from(*topic)) + varint_len(payload.len() as u64) + payload.len();
        if kept.len() < MAX_EVENTS
            && payload.len() <= MAX_EVENT_PAYLOAD
            && bytes + len <= super::MAX_FRAME_EVENT_BYTES
        {
            bytes += len;
            kept.push(i as u32);
        } else {
            stats.events_dropped += 1;
        }
    }
}

/// What a frame sent, for stats and for followers.
/// Whether a frame with this header and these sections says nothing new (see
/// [`FrameHead::quiet`](super::FrameHead::quiet)).
pub(super) fn is_quiet(h: &DeltaHeader, sent: &Sent) -> bool {
    !h.baseline
        && h.control.is_none()
        && !h.has_events
        && sent.updates == 0
        && sent.spawns == 0
        && sent.despawns == 0
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sent {
    pub(super) updates: u64,
    pub(super) spawns: u64,
    pub(super) despawns: u64,
}

#[derive(Debug, Clone)]
struct Leader {
    index: usize,
    baseline: bool,
    body: std::ops::Range<usize>,
    post_state: u64,
    sent: Sent,
}

/// Per-build registry of leaders.
#[derive(Debug, Clone, Default)]
pub(super) struct Share {
    leaders: KeyMap<Option<Leader>>,
    bodies: Vec<u8>,
    next_state: u64,
    /// Post-build merge key → (subscriber index, state id), for merging.
    merge: KeyMap<(usize, u64)>,
    kept: Vec<u32>,
    /// Bodies reused this build.
    pub(super) shared: u64,
}

impl Share {
    pub(super) fn begin(&mut self) {
        self.leaders.clear();
        self.merge.clear();
        self.bodies.clear();
        self.shared = 0;
    }

    /// A state id never handed out before.
    pub(super) fn fresh_state(&mut self) -> u64 {
        self.next_state += 1;
        self.next_state
    }

    /// After a clean frame computed on its own: adopt the state id of an earlier subscriber of this
    /// build whose sent state is exactly equal, or offer this one for later subscribers.
    pub(super) fn merge(&mut self, done: &[Subscriber], index: usize, sub: &mut Subscriber) {
        let fp = merge_key(&sub.entries);
        match self.merge.get(&fp) {
            Some(&(j, state)) => {
                if let Some(other) = done.get(j) {
                    let equal = std::sync::Arc::ptr_eq(&other.entries, &sub.entries)
                        || other.entries == sub.entries;
                    if other.state == state && equal {
                        sub.state = state;
                        // Share one copy from now on.
                        sub.entries = std::sync::Arc::clone(&other.entries);
                    }
                }
            }
            None => {
                self.merge.insert(fp, (index, sub.state));
            }
        }
    }

    /// If no subscriber in `state` ran yet this build, reserves the leader slot.
    pub(super) fn reserve(&mut self, state: u64) -> bool {
        if self.leaders.contains_key(&state) {
            return false;
        }
        self.leaders.insert(state, None);
        true
    }

    /// Publishes a clean leader's result.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn publish(
        &mut self,
        state: u64,
        index: usize,
        baseline: bool,
        body: &[u8],
        post_state: u64,
        sent: Sent,
    ) {
        let start = self.bodies.len();
        self.bodies.extend_from_slice(body);
        self.leaders.insert(
            state,
            Some(Leader {
                index,
                baseline,
                body: start..self.bodies.len(),
                post_state,
                sent,
            }),
        );
    }

    /// Writes `sub`'s frame into `out` from a matching leader in `done`, if there is one; on success
    /// `sub`'s sent state becomes the leader's.
    pub(super) fn follow(
        &mut self,
        done: &[Subscriber],
        sub: &mut Subscriber,
        tick: u64,
        input: &FrameInput<'_>,
        out: &mut Vec<u8>,
        stats: &mut BuildStats,
    ) -> Option<bool> {
        let Some(Some(l)) = self.leaders.get(&sub.state) else {
            return None;
        };
        let leader = done.get(l.index)?;
        let same = l.baseline == sub.baseline && leader.view.visible() == sub.view.visible();
        if !same {
            return None;
        }
        let body = self.bodies.get(l.body.clone())?;
        let mut dropped = BuildStats::default();
        let mut kept = std::mem::take(&mut self.kept);
        filter_events(input, &mut kept, &mut dropped);
        let want_control = sub.cfg.control.map(|c| c.0);
        let header = DeltaHeader {
            tick,
            ack: input.ack,
            baseline: sub.baseline,
            control: (sub.control_sent != Some(want_control)).then_some(want_control),
            has_events: !kept.is_empty(),
            base: sub.acked.as_ref().map(|a| a.base),
        };
        out.clear();
        // The writer emits the tag and header; the body is the leader's, then this subscriber's events.
        let _header_only = DeltaWriter::new(out, &header);
        out.extend_from_slice(body);
        let mut ok = true;
        if !kept.is_empty() {
            put_varint(out, kept.len() as u64);
            for &i in &kept {
                if let Some((t, p)) = input.events.get(i as usize) {
                    put_varint(out, u64::from(*t));
                    ok &= put_bytes(out, p, MAX_EVENT_PAYLOAD).is_ok();
                }
            }
        }
        self.kept = kept;
        let fits = sub.budget().is_none_or(|b| out.len() <= b);
        if !ok || !fits || out.len() > MAX_SERVER_MESSAGE {
            out.clear();
            return None;
        }
        sub.entries = std::sync::Arc::clone(&leader.entries);
        sub.state = l.post_state;
        sub.baseline = false;
        sub.rebased = false;
        sub.control_sent = Some(want_control);
        stats.events_dropped += dropped.events_dropped;
        stats.updates += l.sent.updates;
        stats.spawns += l.sent.spawns;
        stats.despawns += l.sent.despawns;
        self.shared += 1;
        Some(is_quiet(&header, &l.sent))
    }
}
