//! Host configuration: every limit is a deliberate value with a documented default.
//!
//! The binary layers sources as flags > environment > TOML file > these
//! defaults; this module owns the values, the TOML form (unknown keys are an
//! error) and validation with clear messages. Durations are milliseconds in
//! fields named `*_ms`.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::ticket::{KeyError, KeyRing, TicketKey, TicketPolicy};

/// A secret string: never printed by `Debug`/`Display`.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret value.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret's bytes (use, never log).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One ticket key in the TOML file (`[[ticket_keys]]`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// Key id (`kid` in ticket headers).
    pub kid: String,
    /// HS256 secret, at least 32 bytes.
    pub secret: Secret,
    /// Retired keys refuse their tickets with `TICKET_RETIRED_KEY`.
    #[serde(default)]
    pub retired: bool,
}

/// Everything a host can be told. See each field for its default.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on. Default `127.0.0.1:7350`.
    pub listen: SocketAddr,
    /// Simulation threads; 0 = one per core. Default 0.
    pub sim_threads: usize,
    /// WebSocket I/O threads, each owning many connections; 0 = one per two cores (at least
    /// one). Default 0.
    pub ws_io_threads: usize,
    /// Time every stage of every zone's ticks (the admin API's `stages`, the
    /// `zonekeep_zone_stage_seconds` histograms). Default true; off, no stage clock is read.
    pub stage_timing: bool,
    /// Which zone lifecycle lines (target `zonekeep::lifecycle`) are written: `all` (default)
    /// or `failures` (fenced, lease lapsed, failed, halted).
    pub lifecycle_log: crate::sim::LifecycleLog,
    /// Dev mode: `/dev/ticket` and `/dev/netsim` routes exist, and without a configured ticket key
    /// the host keeps its own in `data_dir/dev-ticket.key` (created once, reused). Default false.
    pub dev: bool,
    /// Total open connections (TCP sockets, and WebTransport sessions from their CONNECT request);
    /// more are closed at accept. Default 10000.
    pub max_connections: usize,
    /// Open connections per client IP; more get `TOO_MANY_CONNECTIONS`. Default 32.
    pub max_connections_per_ip: usize,
    /// Time allowed to send a complete HTTP request head, counted from accept for the first
    /// request and from the previous response on a kept-alive connection: a socket that sends
    /// nothing, or only part of a head, is closed and its slots freed (slowloris guard). Default 5000.
    pub header_read_timeout_ms: u64,
    /// Time a plain HTTP request (not a WebSocket upgrade) may take from its head to its response,
    /// body included: a slow body cannot hold the connection's slots. Answered with 408. Default 30000.
    pub request_timeout_ms: u64,
    /// Time from the WebSocket upgrade (WebTransport: from the validated QUIC Initial) to the
    /// Hello. Default 5000.
    pub handshake_timeout_ms: u64,
    /// A connection that sends nothing for this long is kicked. Default 30000.
    pub idle_timeout_ms: u64,
    /// Largest client message (and frame), bytes; protocol maximum 8192. Default 8192.
    pub max_message_bytes: usize,
    /// Per-connection WebSocket read buffer, bytes. Default 1024: inputs are small (≤ 8 KiB,
    /// usually a few bytes; a larger message still arrives whole) and an idle connection then
    /// costs under 16 KiB (BENCHMARKS.md, Connection density).
    pub read_buffer_bytes: usize,
    /// Per-connection WebSocket write buffer before a flush, bytes. Default 0 (write through).
    pub write_buffer_bytes: usize,
    /// Hard cap of a connection's WebSocket write buffer, bytes (≥ one 1 MiB frame). Default 1114112.
    pub max_write_buffer_bytes: usize,
    /// Frames queued per connection before it is kicked as a slow consumer. Default 64.
    pub outbox_frames: usize,
    /// How long the final Kick may take to write before the socket is dropped. Default 1000.
    pub kick_write_timeout_ms: u64,
    /// Kernel send buffer for accepted sockets, bytes; 0 = OS default (which grows to megabytes
    /// for a client that does not read). Default 131072: a few round trips of a busy zone's
    /// frames, so backpressure reaches the outbox (and the slow-consumer kick) early.
    pub socket_send_buffer: usize,
    /// A client must prove it reads: the host sends a WebSocket Ping when none is outstanding
    /// and kicks with `SLOW_CONSUMER` when its Pong (answered by every WebSocket stack as it
    /// reads, after the frames queued before it) has not arrived within this long. Default 10000.
    pub read_progress_timeout_ms: u64,
    /// Sustained inputs per second allowed per connection (GCRA). Default 60.
    pub input_rate: f64,
    /// Input burst above the rate. Default 30.
    pub input_burst: u32,
    /// Rate-limited inputs tolerated per second before the connection is kicked. Default 10.
    pub abuse_rate: f64,
    /// Burst of rate-limited inputs tolerated before kicking (`RATE_LIMITED`). Default 120.
    pub abuse_burst: u32,
    /// Sustained Pings per second allowed per connection (GCRA); excess Pings get no Pong and
    /// count against the abuse threshold like excess inputs. Default 10.
    pub ping_rate: f64,
    /// Ping burst above the rate. Default 20.
    pub ping_burst: u32,
    /// Bounded input inbox per zone (overflow is counted and dropped). Default 8192.
    pub zone_inbox: usize,
    /// Bounded command queue per simulation thread. Default 1024.
    pub sim_queue: usize,
    /// Zones a host runs at most. Default 1000.
    pub max_zones: usize,
    /// Most live entities in any zone of this host: a kind whose `ZoneConfig::max_entities` is
    /// higher is lowered to it, and a spawn beyond is refused with `WorldError::EntityCap`.
    /// Default 65536.
    pub zone_max_entities: usize,
    /// Largest fact payload (bytes of JSON text) any zone of this host may emit; a kind's
    /// higher `ZoneConfig::max_fact_bytes` is lowered to it. Default 16384.
    pub zone_max_fact_bytes: usize,
    /// Most facts any zone of this host may emit per second of zone time; a kind's higher
    /// `ZoneConfig::max_facts_per_second` is lowered to it. Default 256.
    pub zone_max_facts_per_second: u32,
    /// Zones labelled individually in metrics; the rest are `_other`. Default 32.
    pub metrics_zone_labels: usize,
    /// Bound on the whole graceful shutdown, from the signal to the exit (one
    /// deadline shared by every phase: freezing zones, final saves, closing
    /// connections, facts, leaving the fleet). Default 10000.
    pub shutdown_timeout_ms: u64,
    /// Time a module's compilation may take, from the deploy that asked for it, before the
    /// deploy is refused and nothing of it installed. Modules compile one at a time on a thread
    /// of their own; a few more may wait. Default 20000.
    pub module_compile_timeout_ms: u64,
    /// Clock-skew leeway for ticket `exp`/`nbf`, seconds. Default 5.
    pub ticket_leeway_secs: u64,
    /// Largest `exp − now` accepted, seconds. Default 600.
    pub ticket_max_lifetime_secs: u64,
    /// Ticket ids remembered for replay protection. Default 100000.
    pub ticket_replay_capacity: usize,
    /// Single ticket secret (env `ZONEKEEP_TICKET_SECRET`), at least 32 bytes.
    pub ticket_secret: Option<Secret>,
    /// Key id of `ticket_secret`. Default `"default"`.
    pub ticket_kid: String,
    /// More keys for rotation (`[[ticket_keys]]`).
    pub ticket_keys: Vec<KeyConfig>,
    /// Admin bearer token (env `ZONEKEEP_ADMIN_TOKEN`); without it the admin API is off.
    pub admin_token: Option<Secret>,
    /// The relay credential (env `ZONEKEEP_RELAY_TOKEN`): relays open their links to this host
    /// (`GET /relay/{zone_id}`) with it as a bearer token; without it the host takes no relays.
    /// At least 16 bytes, and not the admin token.
    pub relay_token: Option<Secret>,
    /// Messages queued to one relay link (patches, and its clients' own messages) before the
    /// link counts as not keeping up and is closed. Default 4096.
    pub relay_link_queue: usize,
    /// Clients one relay link may hold (admitted or being admitted). Default 20000.
    pub relay_link_clients: usize,
    /// Send each new WebSocket player of a zone that relays serve to the relay with the most room
    /// (a Redirect, protocol version 3), instead of serving it here. Default false.
    pub relay_placement: bool,
    /// The lobby's bearer token (env `ZONEKEEP_LOBBY_TOKEN`), the application back end's
    /// credential for `/lobby` (rooms, join_or_create); without it the lobby is off. At least 16
    /// bytes, and not the admin token.
    pub lobby_token: Option<Secret>,
    /// How long a seat the lobby handed out is held for a player who has not arrived, and its
    /// ticket lives, seconds (within `ticket_max_lifetime_secs`). Default 60.
    pub lobby_seat_hold_secs: u64,
    /// Most player seats one client address may hold in a room (0: no cap). Default 4.
    pub lobby_players_per_address: u32,
    /// Most observer seats one client address may hold in a room (0: no cap). Default 2.
    pub lobby_observers_per_address: u32,
    /// A room nobody was in, nor held a seat in, for this long is forgotten, seconds.
    /// Default 300.
    pub lobby_room_idle_secs: u64,
    /// The region this host serves (`[A-Za-z0-9_.:-]`, at most 64 bytes): the matchmaker places a
    /// match's zone on a host of the region its players play best in. Default `local`.
    pub region: String,
    /// Matchmaking queues this host serves as a matchmaker replica
    /// (`NAME:size=N:kind=KIND[:max_rtt_ms=M][:widen_secs=S]`, docs/MATCHMAKING.md); none: the
    /// matchmaker is off here.
    pub match_queues: Vec<String>,
    /// The matchmaker's candidate index (`redis://host:port`); none: matches are formed from
    /// the store alone.
    pub match_redis: Option<Secret>,
    /// Leaderboards this host declares at start
    /// (`NAME[:op=incr|best|set][:order=desc|asc][:period=all|daily|weekly][:total=T][:keep=N]`,
    /// docs/LEADERBOARDS.md); every host of a fleet may declare the same ones, and one declared
    /// with other settings refuses the start.
    pub boards: Vec<String>,
    /// The leaderboards' ranking index (`redis://host:port`); none: boards are read from the
    /// store alone.
    pub board_redis: Option<Secret>,
    /// Chat lines the store keeps per channel (older ones are dropped as new ones come).
    /// Default 200.
    pub chat_keep: u32,
    /// Longest chat line this host takes, bytes (at most 1,024, the wire's bound). Default 500.
    pub chat_max_line: u32,
    /// Chat lines one principal may say per second on this host. Default 2.
    pub chat_rate: f64,
    /// Chat lines one principal may say at once, beyond the rate. Default 5.
    pub chat_burst: u32,
    /// Lines of each of its channels a session is sent as it attaches. Default 50.
    pub chat_history: u32,
    /// A search's client must heartbeat at least this often, seconds (it expires after three
    /// missed). Default 10.
    pub match_heartbeat_secs: u64,
    /// The oldest protocol version a client may ask the matchmaker for a match with (426
    /// `client_outdated` below it); 0: any the host speaks. Default 0.
    pub min_protocol_version: u32,
    /// Reconnect tokens held at most (one per player). Default 100000.
    pub reconnect_capacity: usize,
    /// Where zone saves and the fact ledger live: `sqlite` (a file in
    /// `data_dir`) or a `postgres://` URL (may hold a password: never printed).
    /// Default `sqlite`.
    pub store: Secret,
    /// Directory of the SQLite database. Default `./data`.
    pub data_dir: PathBuf,
    /// Periodic zone save interval, e.g. `5s`, `500ms`, `2m`. Default `5s`.
    pub save_every: String,
    /// How long a lasting world's newest state may wait unsaved (its saves failing or hung)
    /// before the world halts, e.g. `15s`. Default: three of its kind's save intervals.
    pub lasting_halt_after: Option<String>,
    /// Where facts are committed: `ledger` (the store's ledger) or
    /// `webhook:http://...`. Default `ledger`.
    pub fact_sink: String,
    /// Where durable calls that no in-process handler takes are POSTed: an `http://` URL.
    /// Default none (such calls are answered `NO_HANDLER`).
    pub call_webhook: Option<String>,
    /// How long answered durable calls stay in the call journal (a repeated key within it is
    /// answered from there), e.g. `7d` is written `168h`. Default `168h` (7 days).
    pub call_results_keep: String,
    /// Dev/bench: delay every store call by this much, ms; 0 = none. Default 0.
    pub store_delay_ms: u64,
    /// This host's id in the fleet directory (1..=128 of `[A-Za-z0-9._:-]`). Default: an id made
    /// once and kept in `data_dir/host-id`, so a restart is the same host.
    pub host_id: Option<String>,
    /// The `ws://` or `wss://` base URL other hosts send clients to (no path). Default:
    /// `ws://` and the address the host listens on (`127.0.0.1` for an unspecified address).
    pub advertise: Option<String>,
    /// Zones placement may put on this host (new zones go to the host with the most room).
    /// Default: `max_zones`.
    pub capacity: Option<u32>,
    /// What a host does with a client whose zone another host owns. Default `redirect`.
    pub route: crate::fleet::RouteMode,
    /// The game content version this host runs, a dotted number such as `1.4.0` (PROTOCOL.md
    /// §4.1.2), which Welcome tells clients of protocol version 5. Default empty (none).
    pub content_version: String,
    /// The oldest content version a client may have, a dotted number: a Hello with an older,
    /// empty or malformed content version is refused with `CONTENT_OUTDATED`, one below protocol
    /// version 5 with `VERSION_MISMATCH`, before its ticket is verified or spent. Default none:
    /// every client is admitted.
    pub min_content_version: Option<String>,
    /// The cross-zone bus across hosts: a NATS server with JetStream (`nats://host:port`).
    /// `None` = the in-process bus: zone messages reach only zones of this host, and in a fleet
    /// a message to another host's zone is undeliverable ("no bus configured"). Default none.
    pub bus: Option<String>,
    /// UDP address of the WebTransport endpoint (HTTP/3; PROTOCOL.md §1.1), `None` = off. In dev
    /// mode the host makes its own short-lived certificate and publishes its hash at
    /// `GET /webtransport`; otherwise `webtransport_cert` and `webtransport_key` are required.
    pub webtransport: Option<SocketAddr>,
    /// PEM certificate chain of the WebTransport endpoint.
    pub webtransport_cert: Option<PathBuf>,
    /// PEM private key of the WebTransport endpoint.
    pub webtransport_key: Option<PathBuf>,
    /// WebTransport handshakes in progress at most (QUIC and the CONNECT request, from an address
    /// that answered a Retry), apart from `max_connections`; more are refused at once
    /// (`CONNECTION_REFUSED`), and one address may hold `max_connections_per_ip` of them. Each
    /// costs the host tens of kilobytes until it completes or the handshake timeout ends it.
    /// Default 128.
    pub webtransport_max_handshakes: usize,
    /// Threads of the WebTransport endpoint's own runtime, which runs its QUIC connections and
    /// sessions; 0 = one per two cores (at least one), as the WebSocket I/O threads. Default 0.
    pub webtransport_threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7350)),
            sim_threads: 0,
            ws_io_threads: 0,
            stage_timing: true,
            lifecycle_log: crate::sim::LifecycleLog::All,
            dev: false,
            max_connections: 10_000,
            max_connections_per_ip: 32,
            header_read_timeout_ms: 5_000,
            request_timeout_ms: 30_000,
            handshake_timeout_ms: 5_000,
            idle_timeout_ms: 30_000,
            max_message_bytes: 8_192,
            read_buffer_bytes: 1_024,
            write_buffer_bytes: 0,
            max_write_buffer_bytes: (1 << 20) + (64 << 10),
            outbox_frames: 64,
            kick_write_timeout_ms: 1_000,
            socket_send_buffer: 128 << 10,
            read_progress_timeout_ms: 10_000,
            input_rate: 60.0,
            input_burst: 30,
            abuse_rate: 10.0,
            abuse_burst: 120,
            ping_rate: 10.0,
            ping_burst: 20,
            zone_inbox: 8_192,
            sim_queue: 1_024,
            max_zones: 1_000,
            zone_max_entities: 65_536,
            zone_max_fact_bytes: 16 * 1024,
            zone_max_facts_per_second: 256,
            metrics_zone_labels: 32,
            shutdown_timeout_ms: 10_000,
            module_compile_timeout_ms: 20_000,
            ticket_leeway_secs: 5,
            ticket_max_lifetime_secs: 600,
            ticket_replay_capacity: 100_000,
            ticket_secret: None,
            ticket_kid: "default".into(),
            ticket_keys: Vec::new(),
            admin_token: None,
            lobby_token: None,
            relay_token: None,
            relay_link_queue: 4096,
            relay_link_clients: 20_000,
            relay_placement: false,
            lobby_seat_hold_secs: 60,
            lobby_players_per_address: 4,
            lobby_observers_per_address: 2,
            lobby_room_idle_secs: 300,
            region: "local".into(),
            match_queues: Vec::new(),
            match_redis: None,
            boards: Vec::new(),
            board_redis: None,
            chat_keep: 200,
            chat_max_line: 500,
            chat_rate: 2.0,
            chat_burst: 5,
            chat_history: 50,
            match_heartbeat_secs: 10,
            min_protocol_version: 0,
            reconnect_capacity: 100_000,
            store: Secret::new("sqlite"),
            data_dir: PathBuf::from("./data"),
            save_every: "5s".into(),
            lasting_halt_after: None,
            fact_sink: "ledger".into(),
            call_webhook: None,
            call_results_keep: "168h".into(),
            store_delay_ms: 0,
            host_id: None,
            advertise: None,
            capacity: None,
            route: crate::fleet::RouteMode::Redirect,
            content_version: String::new(),
            min_content_version: None,
            bus: None,
            webtransport: None,
            webtransport_cert: None,
            webtransport_key: None,
            webtransport_max_handshakes: 128,
            webtransport_threads: 0,
        }
    }
}

/// A configuration error, with the offending key named.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML file could not be parsed (includes unknown keys).
    #[error("config file: {0}")]
    Toml(String),
    /// A value is out of range.
    #[error("config: {key} {problem}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A ticket key is unusable.
    // Displayed with its message and no `source`: an error chain printed in full (`{:#}`) would
    // otherwise say the same thing twice.
    #[error("config: {0}")]
    Key(KeyError),
    /// A content version (`content_version`, `min_content_version`) is not a dotted number.
    #[error("config: {key} (--{flag}) {error}")]
    ContentVersion {
        /// The key.
        key: &'static str,
        /// The `zonekeep serve` flag that sets it.
        flag: &'static str,
        /// What is wrong.
        error: crate::content::ContentVersionError,
    },
}

impl From<KeyError> for ConfigError {
    fn from(e: KeyError) -> Self {
        ConfigError::Key(e)
    }
}

pub(crate) fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        problem: problem.into(),
    }
}

impl ServerConfig {
    /// Parse a TOML document (unknown keys are an error), then validate it.
    pub fn from_toml_str(s: &str) -> Result<Self, ConfigError> {
        let c: Self = toml::from_str(s).map_err(|e| ConfigError::Toml(e.to_string()))?;
        Ok(c)
    }

    /// `config` (a zone kind's) under this host's per-zone ceilings (`zone_max_entities`,
    /// `zone_max_fact_bytes`, `zone_max_facts_per_second`).
    pub fn zone_limits(&self, mut config: zonekeep_core::ZoneConfig) -> zonekeep_core::ZoneConfig {
        config.max_entities = config.max_entities.min(self.zone_max_entities);
        config.max_fact_bytes = config.max_fact_bytes.min(self.zone_max_fact_bytes);
        config.max_facts_per_second = config
            .max_facts_per_second
            .min(self.zone_max_facts_per_second);
        config
    }

    /// Check every value; the first problem is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max_connections", self.max_connections as u64),
            ("max_connections_per_ip", self.max_connections_per_ip as u64),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("max_message_bytes", self.max_message_bytes as u64),
            ("read_buffer_bytes", self.read_buffer_bytes as u64),
            ("outbox_frames", self.outbox_frames as u64),
            ("kick_write_timeout_ms", self.kick_write_timeout_ms),
            ("input_burst", u64::from(self.input_burst)),
            ("abuse_burst", u64::from(self.abuse_burst)),
            ("ping_burst", u64::from(self.ping_burst)),
            ("read_progress_timeout_ms", self.read_progress_timeout_ms),
            ("zone_inbox", self.zone_inbox as u64),
            ("sim_queue", self.sim_queue as u64),
            ("max_zones", self.max_zones as u64),
            ("zone_max_entities", self.zone_max_entities as u64),
            ("zone_max_fact_bytes", self.zone_max_fact_bytes as u64),
            (
                "zone_max_facts_per_second",
                u64::from(self.zone_max_facts_per_second),
            ),
            ("shutdown_timeout_ms", self.shutdown_timeout_ms),
            ("module_compile_timeout_ms", self.module_compile_timeout_ms),
            ("ticket_max_lifetime_secs", self.ticket_max_lifetime_secs),
            ("ticket_replay_capacity", self.ticket_replay_capacity as u64),
            ("reconnect_capacity", self.reconnect_capacity as u64),
            (
                "webtransport_max_handshakes",
                self.webtransport_max_handshakes as u64,
            ),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(invalid(key, "must be greater than 0"));
            }
        }
        crate::fleet::validate_config(self)?;
        if self.webtransport_cert.is_some() != self.webtransport_key.is_some() {
            return Err(invalid(
                "webtransport_cert",
                "and webtransport_key go together (a certificate chain and its private key)",
            ));
        }
        if self.webtransport.is_some() && !self.dev && self.webtransport_cert.is_none() {
            return Err(invalid(
                "webtransport",
                "needs webtransport_cert and webtransport_key outside dev mode (browsers accept a \
                 self-signed certificate only for development)",
            ));
        }
        if self.max_message_bytes > zonekeep_protocol::limits::MAX_CLIENT_MESSAGE {
            return Err(invalid(
                "max_message_bytes",
                format!(
                    "must be at most {} (PROTOCOL.md §7)",
                    zonekeep_protocol::limits::MAX_CLIENT_MESSAGE
                ),
            ));
        }
        if self.max_write_buffer_bytes
            < self.write_buffer_bytes + zonekeep_protocol::limits::MAX_SERVER_MESSAGE
        {
            return Err(invalid(
                "max_write_buffer_bytes",
                "must hold write_buffer_bytes plus one largest server message (1 MiB)",
            ));
        }
        for (key, v) in [
            ("input_rate", self.input_rate),
            ("abuse_rate", self.abuse_rate),
            ("ping_rate", self.ping_rate),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1e6) {
                return Err(invalid(key, "must be a number in (0, 1000000]"));
            }
        }
        if self.ticket_kid.is_empty() {
            return Err(invalid("ticket_kid", "must not be empty"));
        }
        if self
            .admin_token
            .as_ref()
            .is_some_and(|t| t.expose().len() < 16)
        {
            return Err(invalid("admin_token", "must be at least 16 bytes"));
        }
        if let Some(t) = &self.lobby_token {
            if t.expose().len() < 16 {
                return Err(invalid("lobby_token", "must be at least 16 bytes"));
            }
            if self
                .admin_token
                .as_ref()
                .is_some_and(|a| a.expose() == t.expose())
            {
                return Err(invalid(
                    "lobby_token",
                    "must differ from the admin token: the application's back end holds it",
                ));
            }
        }
        if let Some(t) = &self.relay_token {
            if t.expose().len() < 16 {
                return Err(invalid("relay_token", "must be at least 16 bytes"));
            }
            if self
                .admin_token
                .as_ref()
                .is_some_and(|a| a.expose() == t.expose())
            {
                return Err(invalid(
                    "relay_token",
                    "must differ from the admin token: every relay holds it",
                ));
            }
        }
        if self.relay_link_queue == 0 || self.relay_link_queue > 1 << 20 {
            return Err(invalid("relay_link_queue", "must be 1..=1048576"));
        }
        if self.relay_link_clients == 0 || self.relay_link_clients > 1 << 20 {
            return Err(invalid("relay_link_clients", "must be 1..=1048576"));
        }
        if self.lobby_seat_hold_secs == 0 || self.lobby_seat_hold_secs > 3600 {
            return Err(invalid("lobby_seat_hold_secs", "must be 1..=3600"));
        }
        if !crate::matchmaker::valid_label(&self.region) {
            return Err(invalid(
                "region",
                "must be 1..=64 bytes of letters, digits, '_', '-', '.' and ':'",
            ));
        }
        self.match_queues()?;
        if self.match_heartbeat_secs == 0 || self.match_heartbeat_secs > 600 {
            return Err(invalid("match_heartbeat_secs", "must be 1..=600"));
        }
        if self.min_protocol_version > zonekeep_protocol::limits::PROTOCOL_VERSION {
            return Err(invalid(
                "min_protocol_version",
                "is newer than this host speaks",
            ));
        }
        if let Some(r) = &self.match_redis {
            if !r.expose().starts_with("redis://") {
                return Err(invalid("match_redis", "must be a redis:// URL"));
            }
        }
        self.boards()?;
        if let Some(r) = &self.board_redis {
            if !r.expose().starts_with("redis://") {
                return Err(invalid("board_redis", "must be a redis:// URL"));
            }
        }
        if self.chat_keep == 0 || self.chat_keep > 100_000 {
            return Err(invalid("chat_keep", "must be 1..=100000"));
        }
        if self.chat_max_line == 0 || self.chat_max_line > 1024 {
            return Err(invalid("chat_max_line", "must be 1..=1024 bytes"));
        }
        if !(self.chat_rate.is_finite() && self.chat_rate > 0.0 && self.chat_rate <= 1000.0) {
            return Err(invalid(
                "chat_rate",
                "must be above 0 and at most 1000 per second",
            ));
        }
        if self.chat_burst == 0 || self.chat_burst > 1000 {
            return Err(invalid("chat_burst", "must be 1..=1000"));
        }
        if self.chat_history > 200 || self.chat_history > self.chat_keep {
            return Err(invalid(
                "chat_history",
                "must be at most 200 and at most chat_keep",
            ));
        }
        self.key_ring()?;
        self.persist_config()?;
        self.content_policy()?;
        Ok(())
    }

    /// The matchmaking queues, parsed (docs/MATCHMAKING.md).
    pub fn match_queues(&self) -> Result<Vec<crate::matchmaker::QueueSpec>, ConfigError> {
        let mut out: Vec<crate::matchmaker::QueueSpec> = Vec::new();
        for text in &self.match_queues {
            let q = crate::matchmaker::QueueSpec::parse(text)
                .map_err(|why| invalid("match_queues", &why))?;
            if out.iter().any(|o| o.name == q.name) {
                return Err(invalid("match_queues", "names a queue twice"));
            }
            out.push(q);
        }
        Ok(out)
    }

    /// The configured leaderboards, parsed (docs/LEADERBOARDS.md).
    pub fn boards(&self) -> Result<Vec<zonekeep_store::BoardDef>, ConfigError> {
        let mut out: Vec<zonekeep_store::BoardDef> = Vec::new();
        for text in &self.boards {
            let b = crate::boards::spec::parse(text).map_err(|why| invalid("boards", &why))?;
            if out.iter().any(|o| o.name == b.name) {
                return Err(invalid("boards", "names a board twice"));
            }
            out.push(b);
        }
        Ok(out)
    }

    /// The content versions (`content_version`, `min_content_version`), checked: each must be a
    /// dotted number (PROTOCOL.md §4.1.2), and the host's own must not be older than the minimum
    /// it requires of clients.
    pub fn content_policy(&self) -> Result<crate::content::ContentPolicy, ConfigError> {
        use crate::content::{ContentPolicy, ContentVersion};
        let current = match self.content_version.as_str() {
            "" => None,
            v => Some(
                ContentVersion::parse(v).map_err(|error| ConfigError::ContentVersion {
                    key: "content_version",
                    flag: "content-version",
                    error,
                })?,
            ),
        };
        let min = match &self.min_content_version {
            None => None,
            Some(v) => {
                Some(
                    ContentVersion::parse(v).map_err(|error| ConfigError::ContentVersion {
                        key: "min_content_version",
                        flag: "min-content-version",
                        error,
                    })?,
                )
            }
        };
        if let (Some(c), Some(m)) = (&current, &min) {
            if c < m {
                return Err(invalid(
                    "content_version",
                    format!(
                        "{c} is older than min_content_version {m}: the host would refuse its own clients"
                    ),
                ));
            }
        }
        Ok(ContentPolicy::new(current, min))
    }

    /// The persistence settings (`store`, `data_dir`, `save_every`,
    /// `fact_sink`, `store_delay_ms`), checked. Final saves at shutdown are
    /// bounded by the host's one shutdown deadline (`shutdown_timeout_ms`).
    pub fn persist_config(&self) -> Result<crate::persist::PersistConfig, ConfigError> {
        use crate::persist::{parse_duration, FactSinkSpec, PersistConfig};
        let store = self.store.expose().trim();
        let known = store.is_empty()
            || store.eq_ignore_ascii_case("sqlite")
            || store.starts_with("postgres://")
            || store.starts_with("postgresql://");
        if !known {
            // Only the scheme: the rest may hold credentials.
            let scheme: String = store
                .split(':')
                .next()
                .unwrap_or("")
                .chars()
                .take(32)
                .collect();
            return Err(invalid(
                "store",
                format!("must be \"sqlite\" or a postgres:// URL, not {scheme:?}..."),
            ));
        }
        let save_every =
            parse_duration(&self.save_every).map_err(|e| invalid("save_every", e.to_string()))?;
        if save_every.is_zero() {
            return Err(invalid("save_every", "must be greater than 0"));
        }
        let lasting_halt_after = self
            .lasting_halt_after
            .as_deref()
            .map(|s| {
                parse_duration(s)
                    .map_err(|e| invalid("lasting_halt_after", e.to_string()))
                    .and_then(|d| {
                        if d.is_zero() {
                            Err(invalid("lasting_halt_after", "must be greater than 0"))
                        } else {
                            Ok(d)
                        }
                    })
            })
            .transpose()?;
        let fact_sink: FactSinkSpec = self
            .fact_sink
            .parse()
            .map_err(|e: crate::persist::ConfigError| invalid("fact_sink", e.to_string()))?;
        if let FactSinkSpec::Webhook(url) = &fact_sink {
            if !url.starts_with("http://") {
                return Err(invalid(
                    "fact_sink",
                    "the webhook URL must start with http:// (https is not supported)",
                ));
            }
        }
        let call_webhook = match self.call_webhook.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) if url.starts_with("http://") => Some(url.to_owned()),
            Some(_) => {
                return Err(invalid(
                    "call_webhook",
                    "the webhook URL must start with http:// (https is not supported)",
                ))
            }
        };
        let keep = parse_duration(&self.call_results_keep)
            .map_err(|e| invalid("call_results_keep", e.to_string()))?;
        if keep < Duration::from_secs(60) {
            return Err(invalid("call_results_keep", "must be at least 1m"));
        }
        Ok(PersistConfig {
            store: store.to_owned(),
            call_webhook,
            calls: crate::persist::CallWorkerConfig {
                keep,
                ..crate::persist::CallWorkerConfig::default()
            },
            data_dir: self.data_dir.clone(),
            save_every,
            lasting_halt_after,
            fact_sink,
            store_delay: (self.store_delay_ms > 0)
                .then(|| Duration::from_millis(self.store_delay_ms)),
            ..PersistConfig::default()
        })
    }

    /// The configured ticket keys, or `None` when no key is configured.
    pub fn key_ring(&self) -> Result<Option<KeyRing>, ConfigError> {
        let mut keys = Vec::new();
        if let Some(s) = &self.ticket_secret {
            keys.push(TicketKey::new(
                self.ticket_kid.clone(),
                s.expose().as_bytes(),
                false,
            )?);
        }
        for k in &self.ticket_keys {
            keys.push(TicketKey::new(
                k.kid.clone(),
                k.secret.expose().as_bytes(),
                k.retired,
            )?);
        }
        if keys.is_empty() {
            return Ok(None);
        }
        Ok(Some(KeyRing::new(keys)?))
    }

    /// Ticket time rules.
    pub fn ticket_policy(&self) -> TicketPolicy {
        TicketPolicy {
            leeway_secs: self.ticket_leeway_secs,
            max_lifetime_secs: self.ticket_max_lifetime_secs,
        }
    }

    /// Simulation threads to start (resolving 0 to the core count).
    pub fn sim_thread_count(&self) -> usize {
        if self.sim_threads > 0 {
            self.sim_threads
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    }

    /// The WebSocket I/O threads to start: as configured, else one per two cores (at least one):
    /// on two cores one I/O thread writing every socket was cheaper than two (BENCHMARKS.md).
    pub fn ws_io_thread_count(&self) -> usize {
        io_thread_count(self.ws_io_threads)
    }

    /// The WebTransport endpoint's runtime threads: as configured, else one per two cores (at
    /// least one), as [`ServerConfig::ws_io_thread_count`].
    pub fn webtransport_thread_count(&self) -> usize {
        io_thread_count(self.webtransport_threads)
    }

    /// `ms` as a duration (helper for the `*_ms` fields).
    pub fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }
}

/// WebSocket I/O threads for a `configured` count (a host's or a relay's): that many, or with 0
/// one per two cores, at least one.
pub(crate) fn io_thread_count(configured: usize) -> usize {
    if configured > 0 {
        configured
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get() / 2)
            .unwrap_or(1)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_validate() {
        ServerConfig::default().validate().unwrap();
    }

    #[test]
    fn webtransport_needs_a_certificate_outside_dev_mode() {
        let on = ServerConfig {
            webtransport: Some("127.0.0.1:4433".parse().unwrap()),
            ticket_secret: Some(Secret::new("s".repeat(32))),
            ..ServerConfig::default()
        };
        let e = on.validate().unwrap_err();
        assert!(e.to_string().contains("webtransport"), "{e}");
        let half = ServerConfig {
            webtransport_cert: Some("cert.pem".into()),
            ..on.clone()
        };
        let e = half.validate().unwrap_err();
        assert!(e.to_string().contains("webtransport_key"), "{e}");
        let dev = ServerConfig {
            dev: true,
            ..on.clone()
        };
        dev.validate().unwrap();
        let configured = ServerConfig {
            webtransport_cert: Some("cert.pem".into()),
            webtransport_key: Some("key.pem".into()),
            ..on
        };
        configured.validate().unwrap();
    }

    #[test]
    fn unknown_keys_are_an_error() {
        let e = ServerConfig::from_toml_str("listen = \"127.0.0.1:1\"\nbogus = 3\n").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn toml_with_keys_parses_and_secrets_are_redacted() {
        let c = ServerConfig::from_toml_str(
            r#"
            idle_timeout_ms = 100
            [[ticket_keys]]
            kid = "a"
            secret = "0123456789abcdef0123456789abcdef"
            [[ticket_keys]]
            kid = "old"
            secret = "0123456789abcdef0123456789abcdeX"
            retired = true
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.idle_timeout_ms, 100);
        assert_eq!(c.key_ring().unwrap().unwrap().keys().len(), 2);
        assert!(!format!("{c:?}").contains("0123456789"));
    }

    #[test]
    fn bad_values_name_their_key() {
        let c = ServerConfig {
            outbox_frames: 0,
            ..ServerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("outbox_frames"));
        let c = ServerConfig {
            ticket_secret: Some(Secret::new("short")),
            ..ServerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at least 32"));
        let c = ServerConfig {
            max_message_bytes: 100_000,
            ..ServerConfig::default()
        };
        assert!(c.validate().is_err());
    }

    #[test]
    fn content_versions_are_dotted_numbers_named_by_key_and_flag() {
        let c = ServerConfig::from_toml_str(
            "content_version = \"1.5.0\"\nmin_content_version = \"1.4\"\n",
        )
        .unwrap();
        c.validate().unwrap();
        let p = c.content_policy().unwrap();
        assert_eq!(p.current().map(|v| v.as_str()), Some("1.5.0"));
        assert_eq!(p.min().map(|v| v.as_str()), Some("1.4"));
        let d = ServerConfig::default().content_policy().unwrap();
        assert_eq!((d.current(), d.min()), (None, None));

        for (c, key, flag) in [
            (
                ServerConfig {
                    min_content_version: Some("1.4-beta".into()),
                    ..ServerConfig::default()
                },
                "min_content_version",
                "--min-content-version",
            ),
            (
                ServerConfig {
                    min_content_version: Some(String::new()),
                    ..ServerConfig::default()
                },
                "min_content_version",
                "--min-content-version",
            ),
            (
                ServerConfig {
                    content_version: "v2".into(),
                    ..ServerConfig::default()
                },
                "content_version",
                "--content-version",
            ),
            (
                ServerConfig {
                    content_version: "1".repeat(65),
                    ..ServerConfig::default()
                },
                "content_version",
                "--content-version",
            ),
        ] {
            let e = c.validate().unwrap_err();
            assert!(
                matches!(e, ConfigError::ContentVersion { key: k, .. } if k == key),
                "{e:?}"
            );
            let text = e.to_string();
            assert!(text.contains(key) && text.contains(flag), "{text}");
        }
        let behind = ServerConfig {
            content_version: "1.3".into(),
            min_content_version: Some("1.4".into()),
            ..ServerConfig::default()
        };
        let e = behind.validate().unwrap_err().to_string();
        assert!(e.contains("content_version") && e.contains("older"), "{e}");
    }

    #[test]
    fn persistence_keys_map_onto_persist_config() {
        let c = ServerConfig::from_toml_str(
            r#"
            store = "postgres://u:hunter2@db/zk"
            data_dir = "/var/lib/zonekeep"
            save_every = "250ms"
            lasting_halt_after = "2s"
            fact_sink = "webhook:http://127.0.0.1:9/facts"
            call_webhook = "http://127.0.0.1:9/calls"
            call_results_keep = "24h"
            store_delay_ms = 1000
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert!(
            !format!("{c:?}").contains("hunter2"),
            "the store URL is redacted"
        );
        let p = c.persist_config().unwrap();
        assert_eq!(p.store, "postgres://u:hunter2@db/zk");
        assert_eq!(p.data_dir, PathBuf::from("/var/lib/zonekeep"));
        assert_eq!(p.save_every, Duration::from_millis(250));
        assert_eq!(p.lasting_halt_after_for("any"), Duration::from_secs(2));
        assert_eq!(
            p.fact_sink,
            crate::persist::FactSinkSpec::Webhook("http://127.0.0.1:9/facts".into())
        );
        assert_eq!(p.store_delay, Some(Duration::from_secs(1)));
        assert_eq!(p.call_webhook.as_deref(), Some("http://127.0.0.1:9/calls"));
        assert_eq!(p.calls.keep, Duration::from_secs(24 * 3600));
        let d = ServerConfig::default().persist_config().unwrap();
        assert_eq!(d.call_webhook, None);
        assert_eq!(d.calls.keep, Duration::from_secs(7 * 24 * 3600), "7 days");
        assert_eq!(d.store, "sqlite");
        assert_eq!(d.save_every, Duration::from_secs(5));
        assert_eq!(
            d.lasting_halt_after_for("any"),
            Duration::from_secs(15),
            "three save intervals"
        );
        assert_eq!(d.store_delay, None);

        for (c, key, hint) in [
            (
                ServerConfig {
                    store: Secret::new("mysql://root:pw@x"),
                    ..ServerConfig::default()
                },
                "store",
                "mysql",
            ),
            (
                ServerConfig {
                    save_every: "5 parsecs".into(),
                    ..ServerConfig::default()
                },
                "save_every",
                "5s",
            ),
            (
                ServerConfig {
                    lasting_halt_after: Some("soon".into()),
                    ..ServerConfig::default()
                },
                "lasting_halt_after",
                "5s",
            ),
            (
                ServerConfig {
                    lasting_halt_after: Some("0ms".into()),
                    ..ServerConfig::default()
                },
                "lasting_halt_after",
                "greater than 0",
            ),
            (
                ServerConfig {
                    save_every: "0s".into(),
                    ..ServerConfig::default()
                },
                "save_every",
                "greater than 0",
            ),
            (
                ServerConfig {
                    fact_sink: "kafka".into(),
                    ..ServerConfig::default()
                },
                "fact_sink",
                "ledger",
            ),
            (
                ServerConfig {
                    fact_sink: "webhook:https://x".into(),
                    ..ServerConfig::default()
                },
                "fact_sink",
                "http://",
            ),
            (
                ServerConfig {
                    call_webhook: Some("ftp://x".into()),
                    ..ServerConfig::default()
                },
                "call_webhook",
                "http://",
            ),
            (
                ServerConfig {
                    call_results_keep: "10s".into(),
                    ..ServerConfig::default()
                },
                "call_results_keep",
                "at least 1m",
            ),
            (
                ServerConfig {
                    call_results_keep: "a week".into(),
                    ..ServerConfig::default()
                },
                "call_results_keep",
                "invalid duration",
            ),
        ] {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(hint), "{e}");
            assert!(!e.contains("pw@"), "no credentials in errors: {e}");
        }
    }
}
