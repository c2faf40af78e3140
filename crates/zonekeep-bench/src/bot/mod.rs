//! The bots: one tokio task per bot, two kinds.
//!
//! - [`light`]: a lean protocol client for bots that do not decode (WORKLOADS.md arena §3 "count bytes and
//!   messages without decoding"): it reads each Delta's header only (tick and ack) and keeps
//!   every buffer small, so one process can hold thousands of connections.
//! - [`full`]: a `zonekeep_client::Connection` feeding a `Replica` (the real client cost: decode,
//!   known set, interpolation), plus the arena probe's checks when it is the probe.
//!
//! Both share the run's phase (join/warm-up → measure → done), the input schedule, RTT and
//! patch-interval histograms, and return a [`BotResult`]. Every loop ends at the run's hard
//! deadline at the latest.

pub mod full;
pub mod light;
pub mod light_wt;
pub(crate) mod schedule;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::{watch, Semaphore};

use crate::aim::AimCounts;
use crate::arena::probe::ProbeCounts;
use crate::config::BenchConfig;
use crate::stats::Histogram;
use crate::tickets::Tickets;

/// Where the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Joining and warming up: nothing is counted into the window.
    Warmup,
    /// The measured window.
    Measure,
    /// Over: bots leave.
    Done,
}

/// Pending inputs awaiting their ack: `(seq, sent at)`, bounded.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    q: VecDeque<(u32, Instant)>,
    pub dropped: u64,
}

/// Inputs remembered for RTT at most (10 s of inputs at 100/s); older ones are forgotten and
/// counted.
const MAX_PENDING: usize = 1024;

impl Pending {
    pub fn push(&mut self, seq: u32, at: Instant) {
        if self.q.len() >= MAX_PENDING {
            self.q.pop_front();
            self.dropped += 1;
        }
        self.q.push_back((seq, at));
    }

    /// Pops every input up to `ack`, calling `f` with its send time.
    pub fn ack(&mut self, ack: u32, mut f: impl FnMut(Instant)) -> u64 {
        let mut n = 0;
        while let Some(&(seq, at)) = self.q.front() {
            if seq > ack {
                break;
            }
            self.q.pop_front();
            f(at);
            n += 1;
        }
        n
    }

    pub fn clear(&mut self) {
        self.q.clear();
    }
}

/// A bot's figures over the measured window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowCounts {
    /// Payload bytes received.
    pub bytes_in: u64,
    /// WebSocket header bytes received.
    pub frame_bytes_in: u64,
    /// Messages received.
    pub msgs_in: u64,
    /// Deltas received.
    pub deltas: u64,
    /// Delta payload bytes.
    pub delta_bytes: u64,
    /// Inputs sent.
    pub inputs: u64,
    /// Payload bytes sent.
    pub bytes_out: u64,
    /// Inputs acknowledged.
    pub acked: u64,
}

/// What a bot reports when it ends.
#[derive(Debug, Clone, Default)]
pub struct BotResult {
    /// Bot index.
    pub bot: u32,
    /// Completed the first handshake.
    pub joined: bool,
    /// Why the first join failed (Kick code name or transport failure).
    pub join_error: Option<String>,
    /// Connected from window start to window end without a drop.
    pub whole_window: bool,
    /// Window figures.
    pub window: WindowCounts,
    /// Transport drops.
    pub drops: u64,
    /// Reconnects that succeeded.
    pub reconnects: u64,
    /// Reconnects that resumed the same player.
    pub resumes: u64,
    /// Reconnects that joined as a new player (the bot's first join not included): the token was
    /// refused or unusable. A fleet that moves zones without losing players keeps this at 0.
    pub fresh_joins: u64,
    /// Redirects followed during handshakes, the first join's included.
    pub redirects: u64,
    /// Kicks received after joining, by code name.
    pub kicks: BTreeMap<String, u64>,
    /// Payload bytes received over the whole life.
    pub total_bytes_in: u64,
    /// Delta bytes received over the whole life.
    pub total_delta_bytes: u64,
    /// Deltas received over the whole life.
    pub total_deltas: u64,
    /// Inputs refused locally (queue full).
    pub outgoing_full: u64,
    /// Datagrams the bot's NetSim dropped because its queue was full (WebTransport).
    pub netsim_overflow: u64,
    /// Probe counters (the arena probe only).
    pub probe: Option<ProbeCounts>,
    /// Aimed shots (aim workload).
    pub aim: Option<AimCounts>,
    /// Highest ack seen.
    pub last_ack: u32,
}

/// State every bot of a run shares.
#[derive(Debug)]
pub struct RunShared {
    /// The run's configuration.
    pub cfg: BenchConfig,
    /// Ticket source.
    pub tickets: Tickets,
    /// Phase changes.
    pub phase: watch::Receiver<Phase>,
    /// Joins in flight at once.
    pub join_gate: Semaphore,
    /// Bots whose first handshake completed.
    pub joined: AtomicU64,
    /// Bots whose first join failed.
    pub failed: AtomicU64,
    /// Bots currently connected.
    pub connected: AtomicU64,
    /// Payload bytes received by all bots (progress line).
    pub bytes_in: AtomicU64,
    /// Messages received by all bots (progress line).
    pub msgs_in: AtomicU64,
    /// Probe mismatches so far (progress line).
    pub mismatches: AtomicU64,
    /// Input → ack RTT, µs (window only).
    pub rtt: Mutex<Histogram>,
    /// Patch intervals per connection, µs (window only).
    pub patch_interval: Mutex<Histogram>,
    /// No loop runs past this.
    pub hard_deadline: Instant,
    /// Time of the first connect attempt, and of the last successful first join.
    pub join_span: Mutex<(Option<Instant>, Option<Instant>)>,
    /// The host's WebTransport endpoint (URL, pinned certificate hash), asked once per run.
    pub webtransport:
        tokio::sync::OnceCell<Result<zonekeep_client::connection::webtransport::Endpoint, String>>,
    /// First joins finished (either way) by the first bot of each zone. The other bots wait for
    /// all of them: the first join creates the zone, and joins racing its creation could be
    /// refused by the host.
    pub first_wave: watch::Sender<u32>,
    /// The zone URL a bot was last welcomed at after following a Redirect: the zone's owner.
    pub owner: Mutex<Option<String>>,
}

impl RunShared {
    /// A bot was welcomed at `zone_url` after following a Redirect there.
    pub fn saw_owner(&self, zone_url: &str) {
        *self.owner.lock().unwrap_or_else(|p| p.into_inner()) = Some(zone_url.to_owned());
    }

    /// The base URL (`ws://host:port`) of the host the bots were redirected to, if any.
    pub fn owner_base(&self) -> Option<String> {
        let url = self
            .owner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        url.rsplit_once("/zones/").map(|(base, _)| base.to_owned())
    }

    /// The current phase.
    pub fn phase_now(&self) -> Phase {
        *self.phase.borrow()
    }

    pub(crate) fn record_rtt(&self, us: u64) {
        self.rtt
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(us);
    }

    pub(crate) fn record_patch_interval(&self, us: u64) {
        self.patch_interval
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(us);
    }

    pub(crate) fn add(&self, c: &AtomicU64, v: u64) {
        c.fetch_add(v, Ordering::Relaxed);
    }

    pub(crate) fn mark_join_start(&self, now: Instant) {
        let mut s = self
            .join_span
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if s.0.is_none() {
            s.0 = Some(now);
        }
    }

    pub(crate) fn mark_joined(&self, now: Instant) {
        let mut s = self
            .join_span
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        s.1 = Some(s.1.map_or(now, |t| t.max(now)));
        drop(s);
        self.add(&self.joined, 1);
    }
}

impl RunShared {
    /// Bots that each open a distinct zone (the first `min(bots, zones)` indices).
    pub fn first_wave_size(&self) -> u32 {
        self.cfg.bots.min(self.cfg.zones.distinct())
    }

    /// Waits for the zone-creating first joins before bot `index` may join (no-op for them).
    pub(crate) async fn wait_for_zone(&self, index: u32) {
        let wave = self.first_wave_size();
        if index < wave {
            return;
        }
        let mut rx = self.first_wave.subscribe();
        let deadline = self.hard_deadline;
        // An error means the sender is gone (the run ended): go on and fail fast.
        let _ = tokio::time::timeout_at(deadline.into(), rx.wait_for(|done| *done >= wave)).await;
    }

    /// Bot `index` finished its first join attempt.
    pub(crate) fn first_join_done(&self, index: u32) {
        if index < self.first_wave_size() {
            self.first_wave.send_modify(|n| *n += 1);
        }
    }
}

/// Micros between two instants (0 if reversed).
pub(crate) fn micros(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX)
}

/// Runs bot `index` (0-based within this process) to completion.
pub async fn run_bot(shared: Arc<RunShared>, index: u32) -> BotResult {
    let bot = shared.cfg.bot_offset.saturating_add(index);
    if shared.cfg.transport == crate::config::Transport::WebTransport {
        light_wt::run(shared, index, bot).await
    } else if shared.cfg.decode.decodes(index) {
        full::run(shared, index, bot).await
    } else {
        light::run(shared, index, bot).await
    }
}
