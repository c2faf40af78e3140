//! Per-player input buffers: sequencing, bounding and consumption policy.

use std::collections::VecDeque;

use crate::player::PlayerId;

/// How many buffered inputs a player's buffer hands to the zone per tick.
/// Chosen per zone in [`ZoneConfig::input_policy`](crate::ZoneConfig::input_policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputPolicy {
    /// One input per tick, oldest first (smooth; a burst is spread over ticks).
    #[default]
    Next,
    /// Only the newest input; older buffered ones are discarded and counted
    /// as superseded (for "current intent" games such as stick direction).
    Latest,
    /// Every buffered input, oldest first.
    Drain,
}

/// A zone's refusal of an input in [`Zone::sanitize`](crate::Zone::sanitize).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRefusal {
    /// Game-defined reason code.
    pub code: u16,
    /// Human-readable reason (for logs; not sent per input).
    pub reason: String,
}

impl InputRefusal {
    /// A refusal with `code` and `reason`.
    pub fn new(code: u16, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
}

/// What happened to one pushed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputOutcome {
    /// Buffered.
    Accepted,
    /// Buffered, but the buffer was full so the oldest buffered input was
    /// dropped (counted as overflowed).
    AcceptedDroppedOldest,
    /// Same sequence number as one already received.
    Duplicate,
    /// Older than the newest received and not buffered (already processed or dropped).
    Stale,
    /// The zone's `sanitize` refused it.
    Refused(InputRefusal),
    /// No such player in the zone.
    UnknownPlayer,
    /// Observers may not send inputs.
    Observer,
    /// The player is dropped (within grace); inputs wait for a rejoin.
    Disconnected,
    /// The player is moving to another zone ([`crate::transfer`]): refused, not buffered.
    Moving,
    /// The host has been disposed.
    Disposed,
}

impl InputOutcome {
    /// Whether the input was buffered.
    pub fn is_accepted(&self) -> bool {
        matches!(self, Self::Accepted | Self::AcceptedDroppedOldest)
    }
}

/// Facts about the input being applied, readable through
/// [`Ctx::input_meta`](crate::Ctx::input_meta) during `on_input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputMeta {
    /// The client's sequence number.
    pub seq: u32,
    /// The tick the client was viewing when it sent the input, clamped to the
    /// host tick at arrival (a client cannot claim to see the future).
    pub view_tick: u32,
}

/// Classification of a sequence number before sanitizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeqCheck {
    Fresh,
    Duplicate,
    Stale,
}

/// An input's payload as the client sent it. Most are a few bytes and stay inline, so keeping
/// them costs a queued input no allocation.
pub(crate) type RawPayload = smallvec::SmallVec<[u8; 24]>;

/// One player's input queue as a zone image holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueImage {
    /// The newest sequence number seen.
    pub(crate) highest: Option<u32>,
    /// The newest handed to the zone.
    pub(crate) last_processed: Option<u32>,
    /// Queued inputs, oldest first, with the payloads the client sent.
    pub(crate) queued: Vec<(InputMeta, Vec<u8>)>,
}

/// One player's bounded input queue.
#[derive(Debug)]
pub(crate) struct InputBuffer<I> {
    /// Each input with the payload the client sent (a zone image stores the queue as sent: the
    /// sanitized input is the zone's own type, which the host cannot write).
    queue: VecDeque<(InputMeta, I, RawPayload)>,
    capacity: usize,
    highest: Option<u32>,
    last_processed: Option<u32>,
}

impl<I> InputBuffer<I> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity: capacity.max(1),
            highest: None,
            last_processed: None,
        }
    }

    /// Drops every queued input unapplied (the player is leaving by transfer); they count as
    /// consumed, so the acknowledgement covers them and the client does not replay them.
    pub(crate) fn discard(&mut self) -> usize {
        let n = self.queue.len();
        if let Some((m, _, _)) = self.queue.back() {
            self.last_processed = Some(m.seq);
        }
        self.queue.clear();
        n
    }

    /// Continues a player's sequence after a restore: `seq` counts as consumed, so the client's
    /// resent older inputs are dropped as duplicates and acknowledgements carry on from it.
    pub(crate) fn resume_after(&mut self, seq: u32) {
        self.highest = Some(seq);
        self.last_processed = Some(seq);
    }

    /// Sequence numbers must increase; anything else is a duplicate or stale.
    pub(crate) fn check(&self, seq: u32) -> SeqCheck {
        match self.highest {
            Some(h) if seq == h => SeqCheck::Duplicate,
            Some(h) if seq < h => {
                if self.queue.iter().any(|(m, ..)| m.seq == seq) {
                    SeqCheck::Duplicate
                } else {
                    SeqCheck::Stale
                }
            }
            _ => SeqCheck::Fresh,
        }
    }

    /// Buffer a fresh input (caller ran [`check`](Self::check)); returns
    /// whether the oldest input was dropped to make room.
    pub(crate) fn push(&mut self, meta: InputMeta, input: I, raw: RawPayload) -> bool {
        let overflowed = if self.queue.len() >= self.capacity {
            self.queue.pop_front().is_some()
        } else {
            false
        };
        self.highest = Some(meta.seq);
        self.queue.push_back((meta, input, raw));
        overflowed
    }

    /// Move this tick's inputs into `out` per `policy`; returns how many
    /// buffered inputs were discarded unapplied (superseded under `Latest`).
    pub(crate) fn take(
        &mut self,
        policy: InputPolicy,
        player: PlayerId,
        out: &mut Vec<(PlayerId, InputMeta, I)>,
    ) -> u64 {
        let mut superseded = 0u64;
        match policy {
            InputPolicy::Next => {
                if let Some((m, i, _)) = self.queue.pop_front() {
                    self.last_processed = Some(m.seq);
                    out.push((player, m, i));
                }
            }
            InputPolicy::Latest => {
                if let Some((m, i, _)) = self.queue.pop_back() {
                    superseded = self.queue.len() as u64;
                    self.queue.clear();
                    self.last_processed = Some(m.seq);
                    out.push((player, m, i));
                }
            }
            InputPolicy::Drain => {
                for (m, i, _) in self.queue.drain(..) {
                    self.last_processed = Some(m.seq);
                    out.push((player, m, i));
                }
            }
        }
        superseded
    }

    /// The queue as an image stores it: each input's meta and payload, the newest sequence
    /// number seen and the newest handed to the zone.
    pub(crate) fn image(&self) -> QueueImage {
        QueueImage {
            highest: self.highest,
            last_processed: self.last_processed,
            queued: self
                .queue
                .iter()
                .map(|(m, _, raw)| (*m, raw.to_vec()))
                .collect(),
        }
    }

    /// Puts back the sequence numbers of an image (its queued inputs are offered again by the
    /// caller, through the zone's `sanitize`, and pushed).
    pub(crate) fn set_seqs(&mut self, highest: Option<u32>, last_processed: Option<u32>) {
        self.highest = highest;
        self.last_processed = last_processed;
    }

    /// The newest sequence number handed to the zone (for the ack).
    pub(crate) fn last_processed(&self) -> Option<u32> {
        self.last_processed
    }

    /// Inputs accepted and not yet handed to the zone.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: u32) -> InputMeta {
        InputMeta { seq, view_tick: 0 }
    }

    fn take(b: &mut InputBuffer<u32>, p: InputPolicy) -> (Vec<u32>, u64) {
        let mut out = Vec::new();
        let sup = b.take(p, PlayerId(1), &mut out);
        (out.into_iter().map(|(_, m, _)| m.seq).collect(), sup)
    }

    #[test]
    fn duplicates_and_stale_are_classified() {
        let mut b = InputBuffer::new(4);
        assert_eq!(b.check(5), SeqCheck::Fresh);
        b.push(meta(5), 5, RawPayload::new());
        b.push(meta(7), 7, RawPayload::new());
        assert_eq!(b.check(7), SeqCheck::Duplicate);
        assert_eq!(b.check(5), SeqCheck::Duplicate); // still buffered
        assert_eq!(b.check(6), SeqCheck::Stale); // skipped over, never buffered
        take(&mut b, InputPolicy::Drain);
        assert_eq!(b.check(5), SeqCheck::Stale); // already processed
        assert_eq!(b.check(8), SeqCheck::Fresh);
    }

    #[test]
    fn overflow_drops_oldest() {
        let mut b = InputBuffer::new(2);
        assert!(!b.push(meta(1), 1, RawPayload::new()));
        assert!(!b.push(meta(2), 2, RawPayload::new()));
        assert!(b.push(meta(3), 3, RawPayload::new()));
        assert_eq!(b.len(), 2);
        assert_eq!(take(&mut b, InputPolicy::Drain), (vec![2, 3], 0));
    }

    #[test]
    fn policies() {
        let mut b = InputBuffer::new(8);
        for s in 1..=3 {
            b.push(meta(s), s, RawPayload::new());
        }
        assert_eq!(take(&mut b, InputPolicy::Next), (vec![1], 0));
        assert_eq!(b.last_processed(), Some(1));
        assert_eq!(take(&mut b, InputPolicy::Latest), (vec![3], 1));
        assert_eq!(b.last_processed(), Some(3));
        assert_eq!(take(&mut b, InputPolicy::Next), (vec![], 0));
        assert_eq!(b.last_processed(), Some(3));
        for s in 4..=6 {
            b.push(meta(s), s, RawPayload::new());
        }
        assert_eq!(take(&mut b, InputPolicy::Drain), (vec![4, 5, 6], 0));
        assert_eq!(b.last_processed(), Some(6));
    }

    proptest::proptest! {
        /// Whatever arrives, the buffer stays bounded, applies strictly
        /// increasing seqs, and accounts for every fresh input exactly once.
        #[test]
        fn bounded_ordered_and_accounted(
            ops in proptest::collection::vec((0u32..64, 0u8..4), 0..200),
            cap in 1usize..6,
        ) {
            let mut b = InputBuffer::new(cap);
            let (mut fresh, mut dropped, mut superseded) = (0u64, 0u64, 0u64);
            let mut applied: Vec<u32> = Vec::new();
            for (seq, op) in ops {
                match op {
                    0 | 1 => {
                        if b.check(seq) == SeqCheck::Fresh {
                            fresh += 1;
                            dropped += u64::from(b.push(meta(seq), seq, RawPayload::new()));
                        }
                    }
                    2 => {
                        let (got, sup) = take(&mut b, InputPolicy::Next);
                        applied.extend(got);
                        superseded += sup;
                    }
                    _ => {
                        let (got, sup) = take(&mut b, InputPolicy::Latest);
                        applied.extend(got);
                        superseded += sup;
                    }
                }
                proptest::prop_assert!(b.len() <= cap);
            }
            proptest::prop_assert!(applied.windows(2).all(|w| w[0] < w[1]));
            proptest::prop_assert_eq!(b.last_processed(), applied.last().copied());
            let (rest, _) = take(&mut b, InputPolicy::Drain);
            proptest::prop_assert_eq!(
                fresh,
                applied.len() as u64 + rest.len() as u64 + dropped + superseded
            );
        }
    }
}
