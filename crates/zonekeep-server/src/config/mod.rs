//! Host configuration: every limit is a deliberate value with a documented default.
//!
//! The binary layers sources as flags > environment > TOML file > these
//! defaults; this module owns the values, the TOML form (unknown keys are an
//! error) and validation with clear messages. Durations are milliseconds in
//! fields named `*_ms`.

mod error;
mod settings;
#[cfg(test)]
mod tests;
mod validate;

pub(crate) use error::invalid;
pub use error::ConfigError;
pub(crate) use settings::io_thread_count;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

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

impl ServerConfig {
    /// Parse a TOML document (unknown keys are an error). Its values are not checked here: flags
    /// and the environment are layered on it first, then [`ServerConfig::validate`] checks the
    /// result.
    pub fn from_toml_str(s: &str) -> Result<Self, ConfigError> {
        let c: Self = toml::from_str(s).map_err(|e| ConfigError::Toml(e.to_string()))?;
        Ok(c)
    }
}
