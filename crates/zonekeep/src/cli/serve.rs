//! `zonekeep serve`: its flags, how they layer over the environment, the config file and the
//! defaults, and running the host they describe until a signal stops it.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use zonekeep_server::persist::Persistence;
use zonekeep_server::{Host, Secret, ServerConfig};

use super::{base_config, init_logging, shutdown_signal, Common};
use crate::kinds::register_kinds;

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// Address to listen on [default: 127.0.0.1:7350].
    #[arg(long, env = "ZONEKEEP_LISTEN")]
    listen: Option<SocketAddr>,
    /// Dev mode: /dev/ticket mints guest tickets, /dev/netsim simulates bad networks; when no ticket
    /// key is configured, one is created in the data directory (dev-ticket.key) and reused; implies
    /// --dev-kinds.
    #[arg(long, env = "ZONEKEEP_DEV")]
    dev: bool,
    /// Also register the dev and bench zone kinds (dots, doors, courier, ledger-test,
    /// character-test, call-test, arena-workload, arena-workload-budget, arena-workload-crowd)
    /// without the rest of dev mode, e.g. for `zonekeep bench --workload arena` against a host with signed tickets only. A production host serves the arena alone.
    #[arg(long, env = "ZONEKEEP_DEV_KINDS")]
    dev_kinds: bool,
    /// A zone kind whose game code is a WebAssembly module (docs/MODULES.md), as KIND=FILE (the
    /// file is watched and deployed here when it changes) or KIND (it runs what `zonekeep module
    /// push` deployed to the store, as every host of a fleet does); may be given more than once.
    #[arg(long = "module", value_name = "KIND[=FILE]", value_parser = crate::modules::parse_module_arg)]
    modules: Vec<crate::modules::ModuleArg>,
    /// Serve the files of DIR at `/` (a game's own page: DIR/index.html at `/`); paths DIR does
    /// not hold fall back to the built-in arena and gallery pages and the SDK they ship
    /// (`/sdk/index.js`). Dotfiles, `..` and links leading out of DIR are never served.
    #[arg(long = "static", value_name = "DIR", env = "ZONEKEEP_STATIC")]
    static_dir: Option<PathBuf>,
    /// Admin bearer token (at least 16 bytes); without it the admin API is off.
    #[arg(long, env = "ZONEKEEP_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// The lobby's bearer token (at least 16 bytes, not the admin token): the credential your
    /// game's back end calls /lobby with (docs/LOBBY.md); without it the lobby is off.
    #[arg(long, env = "ZONEKEEP_LOBBY_TOKEN", hide_env_values = true)]
    lobby_token: Option<String>,
    /// The relay credential (at least 16 bytes, not the admin token): relays (`zonekeep relay`)
    /// link to this host's zones with it; without it the host takes no relays.
    #[arg(long, env = "ZONEKEEP_RELAY_TOKEN", hide_env_values = true)]
    relay_token: Option<String>,
    /// Send each new WebSocket player of a zone that relays serve to the relay with the most
    /// room (a Redirect) instead of serving it here.
    #[arg(long)]
    relay_placement: bool,
    /// How long a lobby seat (and its ticket) is held for a player who has not arrived, seconds
    /// [default: 60].
    #[arg(long, env = "ZONEKEEP_LOBBY_SEAT_HOLD_SECS")]
    lobby_seat_hold_secs: Option<u64>,
    /// Most player seats one client address may hold in a lobby room; 0 = no cap [default: 4].
    #[arg(long, env = "ZONEKEEP_LOBBY_PLAYERS_PER_ADDRESS")]
    lobby_players_per_address: Option<u32>,
    /// Most observer seats one client address may hold in a lobby room; 0 = no cap [default: 2].
    #[arg(long, env = "ZONEKEEP_LOBBY_OBSERVERS_PER_ADDRESS")]
    lobby_observers_per_address: Option<u32>,
    /// The region this host serves (the matchmaker places a match's zone in one region, and a
    /// region's hosts answer its probes) [default: local].
    #[arg(long, env = "ZONEKEEP_REGION")]
    region: Option<String>,
    /// A matchmaking queue this host serves as a matchmaker replica, repeatable:
    /// `NAME:size=N:kind=KIND[:max_rtt_ms=M][:widen_secs=S]` (docs/MATCHMAKING.md). With `--dev`
    /// and none given: `duel:size=2:kind=arena`.
    #[arg(
        long = "match-queue",
        value_name = "SPEC",
        env = "ZONEKEEP_MATCH_QUEUES",
        value_delimiter = ','
    )]
    match_queues: Vec<String>,
    /// The matchmaker's Redis candidate index (`redis://host:port`); without it matches are
    /// formed from the store alone.
    #[arg(long, env = "ZONEKEEP_MATCH_REDIS", hide_env_values = true)]
    match_redis: Option<String>,
    /// A leaderboard this host declares, repeatable:
    /// `NAME[:op=incr|best|set][:order=desc|asc][:period=all|daily|weekly][:total=T][:keep=N]`
    /// (docs/LEADERBOARDS.md). With `--dev` and none given: `score:total=score` and
    /// `score.daily:total=score:period=daily`.
    #[arg(
        long = "board",
        value_name = "SPEC",
        env = "ZONEKEEP_BOARDS",
        value_delimiter = ','
    )]
    boards: Vec<String>,
    /// The leaderboards' Redis ranking index (`redis://host:port`); without it boards are read
    /// from the store alone.
    #[arg(long, env = "ZONEKEEP_BOARD_REDIS", hide_env_values = true)]
    board_redis: Option<String>,
    /// Chat lines the store keeps per channel [default: 200].
    #[arg(long, env = "ZONEKEEP_CHAT_KEEP")]
    chat_keep: Option<u32>,
    /// Longest chat line this host takes, bytes, at most 1024 [default: 500].
    #[arg(long, env = "ZONEKEEP_CHAT_MAX_LINE")]
    chat_max_line: Option<u32>,
    /// Chat lines one principal may say per second on this host [default: 2].
    #[arg(long, env = "ZONEKEEP_CHAT_RATE")]
    chat_rate: Option<f64>,
    /// Chat lines one principal may say at once, beyond the rate [default: 5].
    #[arg(long, env = "ZONEKEEP_CHAT_BURST")]
    chat_burst: Option<u32>,
    /// Lines of each of its channels a session is sent as it attaches, at most 200 [default: 50].
    #[arg(long, env = "ZONEKEEP_CHAT_HISTORY")]
    chat_history: Option<u32>,
    /// How often a search's client must heartbeat, seconds (it expires after three missed)
    /// [default: 10].
    #[arg(long, env = "ZONEKEEP_MATCH_HEARTBEAT_SECS")]
    match_heartbeat_secs: Option<u64>,
    /// The oldest protocol version a client may ask for a match with; older ones are answered
    /// 426 `client_outdated` [default: any this host speaks].
    #[arg(long, env = "ZONEKEEP_MIN_PROTOCOL_VERSION")]
    min_protocol_version: Option<u32>,
    /// Simulation threads; 0 = one per core [default: 0].
    #[arg(long, env = "ZONEKEEP_SIM_THREADS")]
    sim_threads: Option<usize>,
    /// WebSocket I/O threads, each owning many connections; 0 = one per two cores [default: 0].
    #[arg(long, env = "ZONEKEEP_WS_IO_THREADS")]
    ws_io_threads: Option<usize>,
    /// Time every stage of every zone's ticks for the admin API and /metrics [default: true].
    #[arg(long, env = "ZONEKEEP_STAGE_TIMING")]
    stage_timing: Option<bool>,
    /// Which zone lifecycle log lines (target zonekeep::lifecycle) to write: all, or failures
    /// only (fenced, lease lapsed, failed, halted) [default: all].
    #[arg(long, env = "ZONEKEEP_LIFECYCLE_LOG", value_enum)]
    lifecycle_log: Option<LifecycleLogArg>,
    /// Total open connections [default: 10000].
    #[arg(long, env = "ZONEKEEP_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Open connections per client IP [default: 32].
    #[arg(long, env = "ZONEKEEP_MAX_CONNECTIONS_PER_IP")]
    max_connections_per_ip: Option<usize>,
    /// Time to send a complete HTTP request head, ms (slowloris guard) [default: 5000].
    #[arg(long, env = "ZONEKEEP_HEADER_READ_TIMEOUT_MS")]
    header_read_timeout_ms: Option<u64>,
    /// Time a plain HTTP request may take, body included, ms (408 after it) [default: 30000].
    #[arg(long, env = "ZONEKEEP_REQUEST_TIMEOUT_MS")]
    request_timeout_ms: Option<u64>,
    /// Time from the WebSocket upgrade (WebTransport: the validated QUIC Initial) to the Hello, ms
    /// [default: 5000].
    #[arg(long, env = "ZONEKEEP_HANDSHAKE_TIMEOUT_MS")]
    handshake_timeout_ms: Option<u64>,
    /// Kick a connection that sends nothing for this long, ms [default: 30000].
    #[arg(long, env = "ZONEKEEP_IDLE_TIMEOUT_MS")]
    idle_timeout_ms: Option<u64>,
    /// Largest client message, bytes (≤ 8192) [default: 8192].
    #[arg(long, env = "ZONEKEEP_MAX_MESSAGE_BYTES")]
    max_message_bytes: Option<usize>,
    /// Per-connection WebSocket read buffer, bytes [default: 1024].
    #[arg(long, env = "ZONEKEEP_READ_BUFFER_BYTES")]
    read_buffer_bytes: Option<usize>,
    /// Per-connection WebSocket write buffer before a flush, bytes [default: 0].
    #[arg(long, env = "ZONEKEEP_WRITE_BUFFER_BYTES")]
    write_buffer_bytes: Option<usize>,
    /// Hard cap of a connection's WebSocket write buffer, bytes [default: 1114112].
    #[arg(long, env = "ZONEKEEP_MAX_WRITE_BUFFER_BYTES")]
    max_write_buffer_bytes: Option<usize>,
    /// Frames queued per connection before it is kicked as a slow consumer [default: 64].
    #[arg(long, env = "ZONEKEEP_OUTBOX_FRAMES")]
    outbox_frames: Option<usize>,
    /// Time allowed to write the final Kick, ms [default: 1000].
    #[arg(long, env = "ZONEKEEP_KICK_WRITE_TIMEOUT_MS")]
    kick_write_timeout_ms: Option<u64>,
    /// Kernel send buffer for accepted sockets, bytes; 0 = OS default [default: 131072].
    #[arg(long, env = "ZONEKEEP_SOCKET_SEND_BUFFER")]
    socket_send_buffer: Option<usize>,
    /// Kick with SLOW_CONSUMER a client that leaves a WebSocket Ping unanswered this long, ms
    /// (it stopped reading) [default: 10000].
    #[arg(long, env = "ZONEKEEP_READ_PROGRESS_TIMEOUT_MS")]
    read_progress_timeout_ms: Option<u64>,
    /// Sustained inputs per second per connection [default: 60].
    #[arg(long, env = "ZONEKEEP_INPUT_RATE")]
    input_rate: Option<f64>,
    /// Input burst above the rate [default: 30].
    #[arg(long, env = "ZONEKEEP_INPUT_BURST")]
    input_burst: Option<u32>,
    /// Rate-limited inputs tolerated per second before a kick [default: 10].
    #[arg(long, env = "ZONEKEEP_ABUSE_RATE")]
    abuse_rate: Option<f64>,
    /// Burst of rate-limited inputs tolerated before a kick [default: 120].
    #[arg(long, env = "ZONEKEEP_ABUSE_BURST")]
    abuse_burst: Option<u32>,
    /// Sustained Pings per second per connection; the excess gets no Pong [default: 10].
    #[arg(long, env = "ZONEKEEP_PING_RATE")]
    ping_rate: Option<f64>,
    /// Ping burst above the rate [default: 20].
    #[arg(long, env = "ZONEKEEP_PING_BURST")]
    ping_burst: Option<u32>,
    /// Input inbox per zone [default: 8192].
    #[arg(long, env = "ZONEKEEP_ZONE_INBOX")]
    zone_inbox: Option<usize>,
    /// Command queue per simulation thread [default: 1024].
    #[arg(long, env = "ZONEKEEP_SIM_QUEUE")]
    sim_queue: Option<usize>,
    /// Zones this host runs at most [default: 1000].
    #[arg(long, env = "ZONEKEEP_MAX_ZONES")]
    max_zones: Option<usize>,
    /// Most live entities in any zone; more spawns are refused [default: 65536].
    #[arg(long, env = "ZONEKEEP_ZONE_MAX_ENTITIES")]
    zone_max_entities: Option<usize>,
    /// Largest fact payload a zone may emit, bytes of JSON [default: 16384].
    #[arg(long, env = "ZONEKEEP_ZONE_MAX_FACT_BYTES")]
    zone_max_fact_bytes: Option<usize>,
    /// Most facts a zone may emit per second of zone time [default: 256].
    #[arg(long, env = "ZONEKEEP_ZONE_MAX_FACTS_PER_SECOND")]
    zone_max_facts_per_second: Option<u32>,
    /// Zones labelled individually in metrics; the rest are "_other" [default: 32].
    #[arg(long, env = "ZONEKEEP_METRICS_ZONE_LABELS")]
    metrics_zone_labels: Option<usize>,
    /// Bound on the whole graceful shutdown, from the signal to the exit (one deadline for every
    /// phase; no store call is waited for past it), ms [default: 10000].
    #[arg(long, env = "ZONEKEEP_SHUTDOWN_TIMEOUT_MS")]
    shutdown_timeout_ms: Option<u64>,
    /// Time a pushed module's compilation may take before the deploy is refused, ms [default: 20000].
    #[arg(long, env = "ZONEKEEP_MODULE_COMPILE_TIMEOUT_MS")]
    module_compile_timeout_ms: Option<u64>,
    /// Clock-skew leeway for ticket exp/nbf, seconds [default: 5].
    #[arg(long, env = "ZONEKEEP_TICKET_LEEWAY_SECS")]
    ticket_leeway_secs: Option<u64>,
    /// Largest ticket lifetime (exp − now) accepted, seconds [default: 600].
    #[arg(long, env = "ZONEKEEP_TICKET_MAX_LIFETIME_SECS")]
    ticket_max_lifetime_secs: Option<u64>,
    /// Ticket ids remembered against replay [default: 100000].
    #[arg(long, env = "ZONEKEEP_TICKET_REPLAY_CAPACITY")]
    ticket_replay_capacity: Option<usize>,
    /// Reconnect tokens held at most [default: 100000].
    #[arg(long, env = "ZONEKEEP_RECONNECT_CAPACITY")]
    reconnect_capacity: Option<usize>,
    /// This host's id in the fleet directory; hosts sharing a PostgreSQL store need distinct
    /// ids [default: made once and kept in DATA_DIR/host-id].
    #[arg(long, env = "ZONEKEEP_HOST_ID")]
    host_id: Option<String>,
    /// Base URL other hosts send this host's clients to, ws:// or wss:// with host and port
    /// [default: ws:// and the listen address].
    #[arg(long, env = "ZONEKEEP_ADVERTISE")]
    advertise: Option<String>,
    /// Zones placement may put on this host; new zones go to the live host with the most room
    /// [default: --max-zones].
    #[arg(long, env = "ZONEKEEP_CAPACITY")]
    capacity: Option<u32>,
    /// A client whose zone another host owns is sent there with a Redirect (`redirect`), or its
    /// WebSocket is forwarded there (`proxy`, when only one address is public) [default: redirect].
    #[arg(long, env = "ZONEKEEP_ROUTE")]
    route: Option<zonekeep_server::fleet::RouteMode>,
    /// The game content version this host runs, a dotted number such as 1.4.0, which Welcome tells
    /// clients (protocol version 5) [default: none].
    #[arg(long, env = "ZONEKEEP_CONTENT_VERSION")]
    content_version: Option<String>,
    /// The oldest content version a client may have, a dotted number: a client with older, missing
    /// or malformed content is refused with CONTENT_OUTDATED (the SDKs stop and ask for a reload),
    /// one below protocol version 5 with VERSION_MISMATCH [default: none, every client admitted].
    #[arg(long, env = "ZONEKEEP_MIN_CONTENT_VERSION")]
    min_content_version: Option<String>,
    /// UDP address of the WebTransport endpoint (HTTP/3: States and inputs in datagrams; see
    /// PROTOCOL.md §1.1) [default: off; with --dev, the listen address's IP and port number].
    /// Outside dev mode it needs --webtransport-cert and --webtransport-key.
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT")]
    webtransport: Option<SocketAddr>,
    /// The cross-zone bus across hosts: a NATS server with JetStream, `nats://host:port`
    /// [default: in process; zones of other hosts cannot be messaged].
    #[arg(long, env = "ZONEKEEP_BUS")]
    bus: Option<String>,
    /// PEM certificate chain for the WebTransport endpoint.
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_CERT")]
    webtransport_cert: Option<PathBuf>,
    /// PEM private key for the WebTransport endpoint.
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_KEY")]
    webtransport_key: Option<PathBuf>,
    /// WebTransport handshakes in progress at most, apart from --max-connections; more are
    /// refused [default: 128].
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_MAX_HANDSHAKES")]
    webtransport_max_handshakes: Option<usize>,
    /// Threads of the WebTransport endpoint's own runtime; 0 = one per two cores [default: 0].
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_THREADS")]
    webtransport_threads: Option<usize>,
    #[command(flatten)]
    persist: crate::persist_args::PersistArgs,
}

macro_rules! overlay {
    ($cfg:ident, $args:ident, $($field:ident),* $(,)?) => {
        $( if let Some(v) = $args.$field { $cfg.$field = v; } )*
    };
}

/// `--lifecycle-log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LifecycleLogArg {
    /// Every lifecycle event.
    All,
    /// Failures only.
    Failures,
}

pub(super) fn serve_config(args: &ServeArgs) -> Result<ServerConfig> {
    let mut cfg = base_config(&args.common)?;
    if let Some(l) = args.lifecycle_log {
        cfg.lifecycle_log = match l {
            LifecycleLogArg::All => zonekeep_server::sim::LifecycleLog::All,
            LifecycleLogArg::Failures => zonekeep_server::sim::LifecycleLog::Failures,
        };
    }
    overlay!(
        cfg,
        args,
        listen,
        sim_threads,
        ws_io_threads,
        stage_timing,
        max_connections,
        max_connections_per_ip,
        header_read_timeout_ms,
        request_timeout_ms,
        handshake_timeout_ms,
        idle_timeout_ms,
        max_message_bytes,
        read_buffer_bytes,
        write_buffer_bytes,
        max_write_buffer_bytes,
        outbox_frames,
        kick_write_timeout_ms,
        socket_send_buffer,
        read_progress_timeout_ms,
        ping_rate,
        ping_burst,
        input_rate,
        input_burst,
        abuse_rate,
        abuse_burst,
        zone_inbox,
        sim_queue,
        max_zones,
        zone_max_entities,
        zone_max_fact_bytes,
        zone_max_facts_per_second,
        metrics_zone_labels,
        shutdown_timeout_ms,
        module_compile_timeout_ms,
        ticket_leeway_secs,
        ticket_max_lifetime_secs,
        ticket_replay_capacity,
        reconnect_capacity,
        webtransport_max_handshakes,
        webtransport_threads,
    );
    if args.dev {
        cfg.dev = true;
    }
    if let Some(id) = &args.host_id {
        cfg.host_id = Some(id.clone());
    }
    if let Some(url) = &args.advertise {
        cfg.advertise = Some(url.clone());
    }
    if let Some(c) = args.capacity {
        cfg.capacity = Some(c);
    }
    if let Some(r) = args.route {
        cfg.route = r;
    }
    if let Some(v) = &args.content_version {
        cfg.content_version = v.clone();
    }
    if let Some(v) = args.webtransport {
        cfg.webtransport = Some(v);
    }
    if let Some(v) = &args.bus {
        cfg.bus = Some(v.clone());
    }
    if let Some(v) = &args.webtransport_cert {
        cfg.webtransport_cert = Some(v.clone());
    }
    if let Some(v) = &args.webtransport_key {
        cfg.webtransport_key = Some(v.clone());
    }
    if let Some(v) = &args.min_content_version {
        cfg.min_content_version = Some(v.clone());
    }
    if let Some(t) = &args.admin_token {
        cfg.admin_token = Some(Secret::new(t.clone()));
    }
    if let Some(t) = &args.lobby_token {
        cfg.lobby_token = Some(Secret::new(t.clone()));
    }
    if let Some(t) = &args.relay_token {
        cfg.relay_token = Some(Secret::new(t.clone()));
    }
    if args.relay_placement {
        cfg.relay_placement = true;
    }
    if let Some(v) = args.lobby_seat_hold_secs {
        cfg.lobby_seat_hold_secs = v;
    }
    if let Some(v) = args.lobby_players_per_address {
        cfg.lobby_players_per_address = v;
    }
    if let Some(v) = args.lobby_observers_per_address {
        cfg.lobby_observers_per_address = v;
    }
    if let Some(v) = &args.region {
        cfg.region = v.clone();
    }
    if !args.match_queues.is_empty() {
        cfg.match_queues = args.match_queues.clone();
    }
    if cfg.dev && cfg.match_queues.is_empty() {
        // The demo's "Play" page finds a match of two arena players.
        cfg.match_queues = vec!["duel:size=2:kind=arena".into()];
    }
    if let Some(v) = &args.match_redis {
        cfg.match_redis = Some(Secret::new(v.clone()));
    }
    if let Some(v) = args.match_heartbeat_secs {
        cfg.match_heartbeat_secs = v;
    }
    if !args.boards.is_empty() {
        cfg.boards = args.boards.clone();
    }
    if cfg.dev && cfg.boards.is_empty() {
        // The demo's arena page shows the top ten of all time; pickups feed both boards.
        cfg.boards = vec![
            "score:total=score".into(),
            "score.daily:total=score:period=daily".into(),
        ];
    }
    if let Some(v) = &args.board_redis {
        cfg.board_redis = Some(Secret::new(v.clone()));
    }
    if let Some(v) = args.chat_keep {
        cfg.chat_keep = v;
    }
    if let Some(v) = args.chat_max_line {
        cfg.chat_max_line = v;
    }
    if let Some(v) = args.chat_rate {
        cfg.chat_rate = v;
    }
    if let Some(v) = args.chat_burst {
        cfg.chat_burst = v;
    }
    if let Some(v) = args.chat_history {
        cfg.chat_history = v;
    }
    if let Some(v) = args.min_protocol_version {
        cfg.min_protocol_version = v;
    }
    args.persist.apply(&mut cfg);
    cfg.validate()?;
    Ok(cfg)
}

pub(super) fn serve(args: ServeArgs) -> Result<()> {
    let cfg = serve_config(&args)?;
    let dev_kinds = args.dev || args.dev_kinds;
    init_logging("info");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("zonekeep-io")
        .build()?;
    runtime.block_on(async move {
        let listen = cfg.listen;
        let dev = cfg.dev;
        let admin = cfg.admin_token.is_some();
        let persistence = Persistence::open(cfg.persist_config()?)
            .await
            .context("opening the store")?;
        // The arena demo is the default kind (a ticket without a `kind` claim gets it) and its
        // page is served at `/`.
        let builder = register_kinds(Host::builder().config(cfg), dev_kinds);
        let (builder, modules) = crate::modules::register_modules(builder, &args.modules)?;
        let web = match &args.static_dir {
            Some(dir) => crate::static_site::router(dir)?,
            None => zonekeep_arena::web_routes(),
        };
        let host = builder.persistence(persistence).build()?;
        if let Some(modules) = &modules {
            crate::modules::watch_files(modules, &args.modules, host.upgrader())?;
        }
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        let addr = listener.local_addr()?;
        host.join_fleet(addr).await?;
        // Scripts and tests read this line to find the port when listening on :0; it is a URL a
        // terminal lets you open (the arena page is at `/`).
        println!("zonekeep listening on http://{addr}");
        let kinds = if dev_kinds {
            "arena (default, page at /), gallery (page at /gallery), cells (page at /cells), dots, \
             doors, courier, ledger-test, character-test, call-test, arena-workload, arena-workload-budget, \
             arena-workload-crowd"
        } else {
            "arena (default, page at /), gallery (page at /gallery), cells (page at /cells)"
        };
        let modules: Vec<&str> = args.modules.iter().map(|m| m.kind.as_str()).collect();
        tracing::info!(%addr, dev, admin_api = admin, "zone kinds: {kinds}; modules: {modules:?}");
        if let Some(dir) = &args.static_dir {
            tracing::info!(dir = %dir.display(), "serving the directory's files at /");
        }
        host.serve_with(listener, web, shutdown_signal()).await?;
        Ok(())
    })
}
