//! The bus's counters, read by the host's `/metrics`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::BusError;

/// Counters of one host's bus. Lock-free; every counter only grows.
#[derive(Debug, Default)]
pub struct BusStats {
    sent: AtomicU64,
    published: AtomicU64,
    delivered: AtomicU64,
    duplicates: AtomicU64,
    undeliverable: [AtomicU64; BusError::LABELS.len()],
    queue_full: AtomicU64,
    decode_errors: AtomicU64,
    notices_dropped: AtomicU64,
    connected: AtomicBool,
}

impl BusStats {
    /// Envelopes the bus accepted for delivery (published and acknowledged, or handed to a
    /// local zone's inbox).
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
    /// Messages published to the NATS stream: one envelope alone, or a batch of them. Against
    /// [`sent`](Self::sent), how well sends coalesce (always 0 in process).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }
    /// Messages applied by a receiving zone on this host (counted by the host).
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }
    /// Copies dropped as duplicates: by JetStream's dedup window or by a zone's dedup table.
    pub fn duplicates(&self) -> u64 {
        self.duplicates.load(Ordering::Relaxed)
    }
    /// Messages reported undeliverable, per [`BusError::LABELS`] entry.
    pub fn undeliverable(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        BusError::LABELS
            .iter()
            .zip(&self.undeliverable)
            .map(|(l, c)| (*l, c.load(Ordering::Relaxed)))
    }
    /// Sends refused because the outgoing queue was full.
    pub fn queue_full(&self) -> u64 {
        self.queue_full.load(Ordering::Relaxed)
    }
    /// Bytes from NATS that were not an envelope (terminated, never delivered).
    pub fn decode_errors(&self) -> u64 {
        self.decode_errors.load(Ordering::Relaxed)
    }
    /// Undeliverable notices dropped because the sending zone's notice queue was full or the
    /// zone no longer runs here.
    pub fn notices_dropped(&self) -> u64 {
        self.notices_dropped.load(Ordering::Relaxed)
    }
    /// Whether the bus can reach its transport now (always true in process).
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Counts one message a zone applied (the host calls this after `handle_message`).
    pub fn note_delivered(&self) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one duplicate a zone dropped (the host calls this after `handle_message`).
    pub fn note_duplicate(&self) {
        self.duplicates.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_published(&self) {
        self.published.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_undeliverable(&self, why: &BusError) {
        let i = BusError::LABELS
            .iter()
            .position(|l| *l == why.label())
            .unwrap_or(0);
        self.undeliverable[i].fetch_add(1, Ordering::Relaxed);
        if matches!(why, BusError::QueueFull) {
            self.queue_full.fetch_add(1, Ordering::Relaxed);
        }
    }
    pub(crate) fn note_decode_error(&self) {
        self.decode_errors.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_notice_dropped(&self) {
        self.notices_dropped.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Relaxed);
    }
}
