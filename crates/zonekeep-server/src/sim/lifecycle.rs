//! A zone's life as structured log lines on the `zonekeep::lifecycle` target: `event` names what
//! happened (`created`, `restored`, `joined`, `left`, `tier`, `saved`, `moving`, `stopped`,
//! `unloaded`, `released`, `fenced`, `lease_lapsed`, `failed`, `halted`), `zone` which zone.
//!
//! Failures (`fenced`, `lease_lapsed`, `failed`, `halted`) are warnings or errors and always
//! written. With `lifecycle_log = "failures"` nothing else is; with `"all"` (the default) the
//! rest is written at info, except `saved`, which comes every few seconds per zone and is at
//! debug (`RUST_LOG=info,zonekeep::lifecycle=debug` shows it).

use serde::Deserialize;

/// Which lifecycle lines a host writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LifecycleLog {
    /// Every event.
    #[default]
    All,
    /// Failures only.
    Failures,
}

/// Writes lifecycle lines as the host's setting says.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Lifecycle {
    mode: LifecycleLog,
}

impl Lifecycle {
    pub(crate) fn new(mode: LifecycleLog) -> Self {
        Self { mode }
    }

    fn all(&self) -> bool {
        self.mode == LifecycleLog::All
    }

    /// The zone started: afresh at tick 0, or from its save.
    pub(crate) fn started(&self, zone: &str, kind: &str, tick: u64) {
        if self.all() {
            let event = if tick == 0 { "created" } else { "restored" };
            tracing::info!(target: "zonekeep::lifecycle", event = %event, zone = %zone, kind = %kind, tick, "zone started");
        }
    }

    /// A participant joined (or came back to its place).
    pub(crate) fn joined(&self, zone: &str, player: u32, principal: &str, role: &str) {
        if self.all() {
            tracing::info!(target: "zonekeep::lifecycle", event = %"joined", zone = %zone, player, principal = %principal, role = %role, "participant joined");
        }
    }

    /// A participant left.
    pub(crate) fn left(&self, zone: &str, player: u32, reason: &str) {
        if self.all() {
            tracing::info!(target: "zonekeep::lifecycle", event = %"left", zone = %zone, player, reason = %reason, "participant left");
        }
    }

    /// The zone changed tier.
    pub(crate) fn tier(&self, zone: &str, from: &str, to: &str, tick: u64) {
        if self.all() {
            tracing::info!(target: "zonekeep::lifecycle", event = %"tier", zone = %zone, from = %from, to = %to, tick, "zone changed tier");
        }
    }

    /// A save was handed to the store.
    pub(crate) fn saved(&self, zone: &str, seq: u64) {
        if self.all() {
            tracing::debug!(target: "zonekeep::lifecycle", event = %"saved", zone = %zone, seq, "zone saved");
        }
    }

    /// A player is moving to another zone.
    pub(crate) fn moving(&self, zone: &str, player: u32, to: &str) {
        if self.all() {
            tracing::info!(target: "zonekeep::lifecycle", event = %"moving", zone = %zone, player, to = %to, "player moving to another zone");
        }
    }

    /// The zone left this host without failing: `event` is `stopped` (by an operator),
    /// `unloaded` (dormant) or `released` (handed to another host, or before a restart).
    pub(crate) fn ended(&self, zone: &str, event: &'static str, detail: &str) {
        if self.all() {
            tracing::info!(target: "zonekeep::lifecycle", event = %event, zone = %zone, detail = %detail, "zone {event}");
        }
    }

    /// Another host claimed the zone, or this host's lease on it lapsed.
    pub(crate) fn fenced(&self, zone: &str, lease_lapsed: bool) {
        if lease_lapsed {
            tracing::error!(target: "zonekeep::lifecycle", event = %"lease_lapsed", zone = %zone, "zone stopped: this host's lease lapsed; unloading without a final save");
        } else {
            tracing::warn!(target: "zonekeep::lifecycle", event = %"fenced", zone = %zone, "zone fenced: another host claimed it; unloading without a final save");
        }
    }

    /// The zone's game code failed.
    pub(crate) fn failed(&self, zone: &str, reason: &str) {
        tracing::error!(target: "zonekeep::lifecycle", event = %"failed", zone = %zone, reason = %reason, "zone failed: stopped without a final save");
    }

    /// A lasting world halted because its saves failed.
    pub(crate) fn halted(&self, zone: &str, tick: u64, last_saved_seq: Option<u64>, reason: &str) {
        tracing::error!(target: "zonekeep::lifecycle", event = %"halted", zone = %zone, tick, last_saved_seq, reason = %reason, "lasting world halted: its saves failed; it resumes from its last committed save once its store answers");
    }
}
