//! One zone on its simulation thread: the host and its subscribers (connections). Its
//! participants come and go in `participants`, the per-advance work of the hot path is in `step`,
//! and how the zone stops (saved, failed, halted or fenced) is in `stop`.

mod detail;
mod participants;
mod step;
mod stop;
mod transfer;
mod upgrade;
pub(crate) use participants::Admission;
pub use upgrade::ZoneUpgrade;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zonekeep_core::{PlayerId, Tier, ZoneHost};

use super::limit_log::LimitLog;
use super::notices::Notices;
use super::registry::ZoneEntry;
use super::{InboxInput, SimContext};
use crate::metrics::ZoneMetrics;
use crate::net::conn::{ConnHandle, Offer};
use crate::persist::ZonePersist;
use crate::recording::ZoneRecording;

/// One participant's connection (`None` while it is dropped, within the grace).
struct Sub {
    conn: Option<ConnHandle>,
    /// The ack of the last Delta sent, and the tick it was sent at (quiet-frame suppression).
    last_frame: super::notices::LastFrame,
    /// InputRefused, KnownSetCheck and Resync bookkeeping.
    notices: Notices,
    /// The newest State tick its datagram client acknowledged, as last handed to the zone.
    state_acked: u64,
    /// The generation of the entry URLs it was last told (PROTOCOL.md §5.3.1); `None` for a
    /// session below version 7, which has no message for them.
    entries_told: Option<u64>,
    /// The protocol version its last session negotiated (a move needs version 8).
    version: u32,
    /// For a player that just arrived by a move: when its source recorded the move (ms since
    /// the Unix epoch), until its first frame here is sent and the move's latency counted.
    moved_at_ms: Option<u64>,
    /// The connection's last measured round trip (a WebSocket Ping and its Pong, QUIC's own
    /// estimate for WebTransport); `None` until measured, and while dropped.
    rtt: Option<Duration>,
    /// The bytes queued to its last connection, kept once it dropped.
    bytes_dropped: u64,
    /// When its bytes-per-second was last measured (the zone's clock), and its byte count then.
    rate_mark: (Duration, u64),
    /// Bytes queued per second over the last measured window (see [`RATE_WINDOW`]).
    bytes_per_s: u64,
}

/// How often a zone measures its participants' bytes per second anew (as it steps).
const RATE_WINDOW: Duration = Duration::from_secs(1);

impl Sub {
    /// Bytes queued to its connection (to its last one, while dropped).
    fn bytes_out(&self) -> u64 {
        self.conn
            .as_ref()
            .map_or(self.bytes_dropped, ConnHandle::bytes_out)
    }

    /// Measures its bytes per second since the last measurement, at `now`.
    fn roll_rate(&mut self, now: Duration) {
        let bytes = self.bytes_out();
        let (at, before) = self.rate_mark;
        let secs = now.saturating_sub(at).as_secs_f64();
        if secs > 0.0 {
            self.bytes_per_s = (bytes.saturating_sub(before) as f64 / secs).round() as u64;
        }
        self.rate_mark = (now, bytes);
    }
}

pub(crate) struct ZoneRun {
    pub host: ZoneHost,
    /// Facts, settlements and saves; `None` without persistence.
    persist: Option<ZonePersist>,
    pub entry: Arc<ZoneEntry>,
    inbox: crossbeam_channel::Receiver<InboxInput>,
    pub metrics: ZoneMetrics,
    subs: BTreeMap<PlayerId, Sub>,
    inbox_capacity: usize,
    tick_stats: (u64, u128, u64),
    /// Who was present when [`Self::publish`] last published it (count, largest id), and how
    /// many of them were players and observers.
    present_fingerprint: (usize, u32),
    present_roles: (u32, u32),
    /// Participants whose connection has a datagram path (its acknowledgements are read each
    /// patch): the others are not looked at, however many.
    datagram_subs: BTreeSet<PlayerId>,
    ticks_dropped: u64,
    /// The zone's count of log lines its rate limit dropped, as last counted in the metrics.
    log_suppressed: u64,
    /// The rate-limited WARN line of what the zone's limits refused.
    limit_log: LimitLog,
    /// The zone's recording, while one runs.
    recording: Option<ZoneRecording>,
    /// The generation of the host's entry URLs its sessions were last told.
    entries_told: u64,
    /// Players moves brought in whose connection may still come, by transfer id.
    arrivals: std::collections::HashMap<String, PlayerId>,
    /// The transfer ids of `arrivals`, oldest first.
    arrival_order: std::collections::VecDeque<String>,
    /// The zone's end of the cross-zone bus, once bound (at its first step with a bus).
    bus: Option<crate::bus::ZoneBus>,
    /// What the zone did since it started here (its work counters).
    pub work: super::work::WorkCounters,
    /// The work counters already added to `/metrics`.
    work_exported: super::work::WorkCounters,
    /// The world's version when the work counters last counted its writes.
    world_version: u64,
    /// When its participants' bytes per second were last measured (the zone's clock).
    rates_at: Duration,
    /// The relay links that follow the zone: each patch goes to each (see [`crate::net::relay`]).
    relay_links: Vec<FollowingLink>,
}

/// A relay link following the zone.
struct FollowingLink {
    out: Arc<crate::net::relay::LinkOut>,
    /// It has not had its first patch (the world's image) yet.
    starting: bool,
}

fn tier_name(t: Tier) -> &'static str {
    match t {
        Tier::Hot => "hot",
        Tier::Idle => "idle",
        Tier::Dormant => "dormant",
    }
}

impl ZoneRun {
    pub fn new(
        host: ZoneHost,
        persist: Option<ZonePersist>,
        entry: Arc<ZoneEntry>,
        inbox: crossbeam_channel::Receiver<InboxInput>,
        inbox_capacity: usize,
        metrics: ZoneMetrics,
    ) -> Self {
        let mut run = Self {
            host,
            persist,
            entry,
            inbox,
            metrics,
            subs: BTreeMap::new(),
            inbox_capacity,
            tick_stats: (0, 0, 0),
            present_fingerprint: (0, 0),
            present_roles: (0, 0),
            datagram_subs: BTreeSet::new(),
            ticks_dropped: 0,
            log_suppressed: 0,
            limit_log: LimitLog::default(),
            recording: None,
            entries_told: 0,
            arrivals: std::collections::HashMap::new(),
            arrival_order: std::collections::VecDeque::new(),
            bus: None,
            work: super::work::WorkCounters::default(),
            work_exported: super::work::WorkCounters::default(),
            world_version: 0,
            rates_at: Duration::ZERO,
            relay_links: Vec::new(),
        };
        run.world_version = run.host.world().version();
        run.publish();
        run
    }

    /// Start recording the zone (see [`ZoneHost::start_recording`]).
    pub fn start_recording(
        &mut self,
        ctx: &SimContext,
        limits: zonekeep_core::recording::RecordLimits,
    ) -> Result<(), String> {
        let rec =
            ZoneRecording::start(&ctx.recordings, &self.entry.zone_id, &mut self.host, limits)?;
        self.recording = Some(rec);
        Ok(())
    }

    /// Stop the zone's recording, if one runs.
    pub fn stop_recording(&mut self) {
        if let Some(r) = self.recording.take() {
            r.stop(
                &mut self.host,
                zonekeep_core::recording::StopReason::Requested,
            );
        }
    }

    /// Hand the recorded bytes to the recording's writer; forget a recording that ended.
    fn pump_recording(&mut self) {
        if let Some(r) = &mut self.recording {
            if !r.pump(&mut self.host) {
                self.recording = None;
            }
        }
    }

    /// Measures every participant's bytes per second anew, once per [`RATE_WINDOW`] (called as
    /// the zone steps).
    pub(super) fn roll_rates(&mut self, now: Duration) {
        if now.saturating_sub(self.rates_at) < RATE_WINDOW {
            return;
        }
        self.rates_at = now;
        for sub in self.subs.values_mut() {
            sub.roll_rate(now);
        }
    }
}

/// Offer a frame; count it when queued.
fn send_frame(metrics: &ZoneMetrics, conn: &ConnHandle, frame: Bytes) -> bool {
    let len = frame.len() as u64;
    match conn.offer(frame) {
        Offer::Queued => {
            metrics.record_out(1, len);
            true
        }
        Offer::Overflowed | Offer::Closed => false,
    }
}
