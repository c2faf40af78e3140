//! Prometheus metrics (`GET /metrics`), with bounded zone-label cardinality.
//!
//! Only the first [`ServerConfig::metrics_zone_labels`](crate::ServerConfig)
//! live zones get their own `zone` label; every later zone shares
//! `zone="_other"`. A labelled zone's series are removed when it stops and its
//! slot goes to the next zone created. Gauges are moved by deltas (never
//! `set`) so several zones can share the `_other` series.
//!
//! Process metrics follow the Prometheus conventions
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`), read from
//! `/proc/self/stat` and `/proc/self/statm` on Linux (absent elsewhere).

mod boards;
mod chat;
mod limits;
mod lobby;
mod matchmaker;
mod presence;
mod process;
mod relay;
mod stages;
mod webtransport;
mod zone;

pub use relay::RelayMetrics;
pub use webtransport::WebTransportMetrics;

pub use boards::BoardMetrics;
pub use chat::ChatMetrics;
pub use limits::LimitMetrics;
pub use lobby::LobbyMetrics;
pub use matchmaker::MatchMetrics;
pub use presence::PresenceMetrics;
pub use stages::{ZoneStageMetrics, WORK_COUNTERS};
pub use zone::ZoneMetrics;

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The label value shared by zones beyond the labelled ones.
pub const OTHER_ZONE: &str = "_other";

type Labels = Vec<(&'static str, String)>;

fn zone_label(zone: &str) -> Labels {
    vec![("zone", zone.to_owned())]
}

fn zone_outcome(zone: &str, outcome: &'static str) -> Labels {
    vec![("zone", zone.to_owned()), ("outcome", outcome.to_owned())]
}

/// Input outcomes counted per zone (label `outcome`).
pub const INPUT_OUTCOMES: &[&str] = &[
    "accepted",
    "duplicate",
    "stale",
    "overflowed",
    "refused",
    "superseded",
    "unroutable",
    "rate_limited",
    "inbox_full",
];

/// Bounds of `zonekeep_transfer_latency_seconds`: fine around the 50 ms a move should take.
const TRANSFER_LATENCY_BUCKETS: [f64; 18] = [
    0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0,
    2.0, 5.0,
];

fn tick_histogram() -> Histogram {
    // 50 µs .. ~0.8 s: covers cheap ticks and pathological ones.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 15))
}

/// Every metric the host exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    tick_duration: Family<Labels, Histogram, fn() -> Histogram>,
    ticks: Family<Labels, Counter>,
    ticks_dropped: Family<Labels, Counter>,
    tier: Family<Labels, Gauge>,
    zones_by_tier: Family<Labels, Gauge>,
    players: Family<Labels, Gauge>,
    observers: Family<Labels, Gauge>,
    entities: Family<Labels, Gauge>,
    inputs: Family<Labels, Counter>,
    bytes_out: Family<Labels, Counter>,
    frames_out: Family<Labels, Counter>,
    quiet_skipped: Family<Labels, Counter>,
    sync_notices: Family<Labels, Counter>,
    transfers: Family<Labels, Counter>,
    transfer_latency: Histogram,
    resumes: Family<Labels, Counter>,
    connections: Gauge,
    connections_refused: Family<Labels, Counter>,
    admin_refused: Family<Labels, Counter>,
    disconnects: Family<Labels, Counter>,
    pings_rate_limited: Counter,
    datagrams_rate_limited: Counter,
    datagrams_unsent: Counter,
    netsim_dropped: Counter,
    kicks: Family<Labels, Counter>,
    zones: Gauge,
    events_dropped: Counter,
    zones_failed: Counter,
    worlds_halted: Gauge,
    world_halts: Family<Labels, Counter>,
    log_lines_suppressed: Counter,
    zones_upgraded: Counter,
    inputs_frozen: Counter,
    recording_bytes: Counter,
    recordings_running: Gauge,
    recordings_stopped: Family<Labels, Counter>,
    webtransport: WebTransportMetrics,
    relay: RelayMetrics,
    limits: LimitMetrics,
    lobby: LobbyMetrics,
    matchmaker: MatchMetrics,
    boards: BoardMetrics,
    presence: PresenceMetrics,
    chat: ChatMetrics,
    stage_families: stages::StageFamilies,
    max_labelled: usize,
    labelled: Mutex<HashSet<String>>,
}

impl Metrics {
    /// A registry labelling at most `max_labelled_zones` zones individually.
    pub fn new(max_labelled_zones: usize) -> Self {
        let mut registry = Registry::default();
        let tick_duration =
            Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(tick_histogram);
        let m = Self {
            tick_duration,
            ticks: Family::default(),
            ticks_dropped: Family::default(),
            tier: Family::default(),
            zones_by_tier: Family::default(),
            players: Family::default(),
            observers: Family::default(),
            entities: Family::default(),
            inputs: Family::default(),
            bytes_out: Family::default(),
            frames_out: Family::default(),
            quiet_skipped: Family::default(),
            sync_notices: Family::default(),
            transfers: Family::default(),
            transfer_latency: Histogram::new(TRANSFER_LATENCY_BUCKETS.iter().copied()),
            resumes: Family::default(),
            connections: Gauge::default(),
            connections_refused: Family::default(),
            admin_refused: Family::default(),
            disconnects: Family::default(),
            pings_rate_limited: Counter::default(),
            datagrams_rate_limited: Counter::default(),
            datagrams_unsent: Counter::default(),
            netsim_dropped: Counter::default(),
            kicks: Family::default(),
            zones: Gauge::default(),
            events_dropped: Counter::default(),
            zones_failed: Counter::default(),
            worlds_halted: Gauge::default(),
            world_halts: Family::default(),
            log_lines_suppressed: Counter::default(),
            zones_upgraded: Counter::default(),
            inputs_frozen: Counter::default(),
            recording_bytes: Counter::default(),
            recordings_running: Gauge::default(),
            recordings_stopped: Family::default(),
            webtransport: WebTransportMetrics::default(),
            relay: RelayMetrics::default(),
            limits: LimitMetrics::default(),
            lobby: LobbyMetrics::default(),
            matchmaker: MatchMetrics::default(),
            boards: BoardMetrics::default(),
            presence: PresenceMetrics::default(),
            chat: ChatMetrics::default(),
            stage_families: stages::StageFamilies::new(&mut registry),
            max_labelled: max_labelled_zones,
            labelled: Mutex::new(HashSet::new()),
            registry: Registry::default(),
        };
        registry.register(
            "zonekeep_tick_duration_seconds",
            "Time one zone tick took",
            m.tick_duration.clone(),
        );
        registry.register("zonekeep_ticks", "Ticks run", m.ticks.clone());
        registry.register(
            "zonekeep_ticks_dropped",
            "Due ticks dropped by the catch-up cap",
            m.ticks_dropped.clone(),
        );
        registry.register(
            "zonekeep_zone_tier",
            "Zone tier (0 hot, 1 idle, 2 dormant); labelled zones only",
            m.tier.clone(),
        );
        registry.register(
            "zonekeep_zones_by_tier",
            "Zones per tier",
            m.zones_by_tier.clone(),
        );
        registry.register("zonekeep_players", "Players present", m.players.clone());
        registry.register(
            "zonekeep_observers",
            "Observers present",
            m.observers.clone(),
        );
        registry.register(
            "zonekeep_entities",
            "Replicated entities",
            m.entities.clone(),
        );
        registry.register("zonekeep_inputs", "Inputs by outcome", m.inputs.clone());
        registry.register(
            "zonekeep_bytes_out",
            "Bytes of frames sent",
            m.bytes_out.clone(),
        );
        registry.register("zonekeep_frames_out", "Frames sent", m.frames_out.clone());
        registry.register(
            "zonekeep_quiet_deltas_skipped",
            "Deltas not sent because they carried nothing new (keep-alive covers idle clients)",
            m.quiet_skipped.clone(),
        );
        registry.register(
            "zonekeep_sync_notices",
            "InputRefused and KnownSetCheck frames sent or suppressed, Resync requests honoured or suppressed",
            m.sync_notices.clone(),
        );
        registry.register(
            "zonekeep_transfers",
            "Moves of players between zones by what became of them: `moved`, `returned`, \
             `taken_back` (a zone took its player back), `client_too_old`, `queue_full`, \
             `not_recorded`, `fenced` (the source's owner changed meanwhile), `admission_undone`, \
             `resent` (a Transfer sent again to a connection that came back), `moved_untold`, \
             `recovered_accepted` and `recovered_returned` (settled by a zone's new owner), \
             `reclaimed` (a returned move's state given back to its player's join after a crash), \
             `unclaimed` (a reclaimed state given up again because its join was refused), \
             `character_not_retaken` (a returned move whose character could not be taken again \
             for its source: the player was let go with a retry hint)",
            m.transfers.clone(),
        );
        registry.register(
            "zonekeep_transfer_latency_seconds",
            "Moves into this host's zones, from the source recording the move (the tick the zone \
             asked for it) to the moved player's first frame leaving here; across machines it \
             includes their clocks' offset",
            m.transfer_latency.clone(),
        );
        registry.register(
            "zonekeep_resumes",
            "Players resumed within their reconnect grace, by what their first frame was: `delta` \
             (continued from the known set the client said it held, protocol version 4) or \
             `baseline` (full state)",
            m.resumes.clone(),
        );
        registry.register(
            "zonekeep_connections",
            "Open connections, from accept to close (including ones not yet past their handshake): \
             TCP sockets, and WebTransport sessions from their CONNECT request",
            m.connections.clone(),
        );
        registry.register(
            "zonekeep_connections_refused",
            "Connections refused or closed before being served: a cap (per_ip, total), no request \
             head in time (header_timeout), an HTTP/2 preface (http2), a Hello whose content version \
             the host refuses (content_outdated), a QUIC handshake over the bound of handshakes in \
             progress (handshakes)",
            m.connections_refused.clone(),
        );
        registry.register(
            "zonekeep_admin_refused",
            "Admin API requests refused for their credential: `missing` (no bearer token) or \
             `wrong` (a bearer token that is not the admin token)",
            m.admin_refused.clone(),
        );
        // Both series from the start, at 0: a refusal shows as a change, not as a new series.
        for reason in ["missing", "wrong"] {
            let _ = m
                .admin_refused
                .get_or_create(&vec![("reason", reason.to_owned())]);
        }
        registry.register(
            "zonekeep_disconnects",
            "Sessions the client ended, by how: closed (a WebSocket Close) or dropped (no Close)",
            m.disconnects.clone(),
        );
        registry.register(
            "zonekeep_pings_rate_limited",
            "Pings over the connection's ping rate, left without a Pong",
            m.pings_rate_limited.clone(),
        );
        registry.register(
            "zonekeep_datagrams_rate_limited",
            "WebTransport datagrams bringing no new input, over the session's datagram rate, ignored",
            m.datagrams_rate_limited.clone(),
        );
        registry.register(
            "zonekeep_datagrams_unsent",
            "States the QUIC connection refused to send as a datagram (closed, or the path shrank)",
            m.datagrams_unsent.clone(),
        );
        registry.register(
            "zonekeep_netsim_dropped",
            "Datagrams NetSim (dev) dropped as simulated loss or a full simulated queue",
            m.netsim_dropped.clone(),
        );
        registry.register("zonekeep_kicks", "Kicks sent, by code", m.kicks.clone());
        registry.register("zonekeep_zones", "Zones running", m.zones.clone());
        registry.register(
            "zonekeep_recording_bytes",
            "Bytes of zone recordings handed to their writers",
            m.recording_bytes.clone(),
        );
        registry.register(
            "zonekeep_recordings_running",
            "Zone recordings in progress",
            m.recordings_running.clone(),
        );
        registry.register(
            "zonekeep_recordings_stopped",
            "Zone recordings stopped, by reason",
            m.recordings_stopped.clone(),
        );
        registry.register(
            "zonekeep_events_dropped",
            "Zone events not delivered (oversize, or a subscriber's queue full)",
            m.events_dropped.clone(),
        );
        registry.register(
            "zonekeep_zones_failed",
            "Zones stopped because their game code failed (a module trap, panic or budget overrun)",
            m.zones_failed.clone(),
        );
        registry.register(
            "zonekeep_worlds_halted",
            "Lasting worlds halted now because their saves failed past their bound: not ticking, \
             refusing joins, their last committed save kept; each resumes from it once its store \
             answers",
            m.worlds_halted.clone(),
        );
        registry.register(
            "zonekeep_world_halts",
            "Lasting worlds halted (`halted`), started again from their last committed save \
             (`resumed`), or found unable to start again (`failed`)",
            m.world_halts.clone(),
        );
        registry.register(
            "zonekeep_module_log_lines_suppressed",
            "Log lines zones' game code wrote that the log's rate limit dropped",
            m.log_lines_suppressed.clone(),
        );
        registry.register(
            "zonekeep_zones_upgraded",
            "Zones rebuilt into their kind's new game code (a module deploy)",
            m.zones_upgraded.clone(),
        );
        registry.register(
            "zonekeep_inputs_frozen",
            "Inputs dropped because they were queued when their zone was frozen for an upgrade",
            m.inputs_frozen.clone(),
        );
        m.webtransport.register(&mut registry);
        m.relay.register(&mut registry);
        m.limits.register(&mut registry);
        m.lobby.register(&mut registry);
        m.matchmaker.register(&mut registry);
        m.boards.register(&mut registry);
        m.presence.register(&mut registry);
        m.chat.register(&mut registry);
        registry.register_collector(Box::new(process::ProcessCollector));
        Self { registry, ..m }
    }

    /// The registry, to add metrics owned elsewhere (persistence) before the
    /// host starts serving.
    pub(crate) fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Count one protocol feedback notice by `kind`: `input_refused_sent`,
    /// `input_refused_suppressed` (over the per-connection bound), `known_set_check_sent`,
    /// `resync_honoured`, `resync_suppressed` (asked again within a second).
    pub fn sync_notice(&self, kind: &'static str) {
        self.sync_notices
            .get_or_create(&vec![("kind", kind.to_owned())])
            .inc();
    }

    /// One move into a zone of this host took `seconds` from its record to the player's first
    /// frame here.
    pub fn transfer_latency(&self, seconds: f64) {
        self.transfer_latency.observe(seconds);
    }

    /// Count one step of a move of a player between zones by `outcome` (see the metric's help).
    pub fn transfer(&self, outcome: &'static str) {
        self.transfers
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }

    /// Count one resumed player by its first frame: `delta` (continued from what its client
    /// held) or `baseline`.
    pub fn resumed(&self, from: &'static str) {
        self.resumes
            .get_or_create(&vec![("from", from.to_owned())])
            .inc();
    }

    /// The open-connections gauge, moved by the accept loop's connection guards.
    pub(crate) fn connections_gauge(&self) -> Gauge {
        self.connections.clone()
    }

    /// The relay link endpoint's counters.
    pub fn relay(&self) -> &RelayMetrics {
        &self.relay
    }

    /// The WebTransport endpoint's handshake metrics.
    pub fn webtransport(&self) -> &WebTransportMetrics {
        &self.webtransport
    }

    /// A session ended by the client: `how` is `closed` (a WebSocket Close) or `dropped` (the
    /// socket ended without one: a crashed tab, a lost network). Neither is the client's error.
    pub fn disconnect(&self, how: &'static str) {
        self.disconnects
            .get_or_create(&vec![("how", how.to_owned())])
            .inc();
    }

    /// A Ping over the connection's ping rate got no Pong.
    pub fn ping_rate_limited(&self) {
        self.pings_rate_limited.inc();
    }

    /// A WebTransport datagram with nothing new was over the session's datagram rate.
    pub fn datagram_rate_limited(&self) {
        self.datagrams_rate_limited.inc();
    }

    /// A State could not be sent as a datagram.
    pub fn datagram_send_failed(&self) {
        self.datagrams_unsent.inc();
    }

    /// NetSim dropped a datagram.
    pub fn netsim_dropped(&self) {
        self.netsim_dropped.inc();
    }

    /// A connection was refused or closed before being served (`reason`: `per_ip`, `total`,
    /// `header_timeout`, `http2`, `handshakes` for a QUIC handshake over the bound of those in
    /// progress, or `content_outdated` for a Hello refused for its content version, whether with
    /// CONTENT_OUTDATED or, below protocol version 5, VERSION_MISMATCH).
    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// An admin API request refused for its credential (`reason`: `missing` when it carried no
    /// bearer token, `wrong` when its bearer token is not the admin token).
    pub fn admin_refused(&self, reason: &'static str) {
        self.admin_refused
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// The lobby's counters.
    pub fn lobby(&self) -> &LobbyMetrics {
        &self.lobby
    }

    /// The matchmaker's counters.
    pub fn matchmaker(&self) -> &MatchMetrics {
        &self.matchmaker
    }

    /// The leaderboards' counters.
    pub fn boards(&self) -> &BoardMetrics {
        &self.boards
    }

    /// Chat's counters.
    pub fn chat(&self) -> &ChatMetrics {
        &self.chat
    }

    /// Presence's counters.
    pub fn presence(&self) -> &PresenceMetrics {
        &self.presence
    }

    /// What the per-zone limits refused.
    pub fn limits(&self) -> &LimitMetrics {
        &self.limits
    }

    /// Zone events that could not be delivered.
    pub fn events_dropped(&self, n: u64) {
        self.events_dropped.inc_by(n);
    }

    /// A zone was rebuilt into its kind's new game code; `frozen_inputs` were dropped with it.
    pub fn zone_upgraded(&self, frozen_inputs: u64) {
        self.zones_upgraded.inc();
        self.inputs_frozen.inc_by(frozen_inputs);
    }

    /// A zone's game code failed (a module trapped, panicked or overran its budget).
    pub fn zone_failed(&self) {
        self.zones_failed.inc();
    }

    /// `n` lasting worlds are halted now (their saves failed).
    pub fn worlds_halted(&self, n: usize) {
        self.worlds_halted.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// A lasting world halted, or stopped being halted: `outcome` is `halted`, `resumed` or
    /// `failed` (its code could not start it again).
    pub fn world_halt(&self, outcome: &str) {
        self.world_halts
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }

    /// `n` more log lines of zones' game code were dropped by the log's rate limit.
    pub fn log_lines_suppressed(&self, n: u64) {
        self.log_lines_suppressed.inc_by(n);
    }

    /// A zone recording started.
    pub fn recording_started(&self) {
        self.recordings_running.inc();
    }

    /// `n` recorded bytes went to a recording's writer.
    pub fn recording_bytes(&self, n: u64) {
        self.recording_bytes.inc_by(n);
    }

    /// A zone recording stopped (`reason`: its snake_case stop reason).
    pub fn recording_stopped(&self, reason: &str) {
        self.recordings_running.dec();
        self.recordings_stopped
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// A Kick was sent with `code` (its PROTOCOL.md name, lower case).
    pub fn kick(&self, code: &str) {
        self.kicks
            .get_or_create(&vec![("code", code.to_owned())])
            .inc();
    }
}

#[cfg(test)]
mod tests;
