//! `zonekeep relay`: serve a host's zones to clients for it (see
//! `zonekeep_server::net::relay::process`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use zonekeep_server::config::Secret;
use zonekeep_server::net::relay::process::{Relay, RelayConfig};

/// `zonekeep relay`'s flags.
#[derive(Debug, Args)]
pub(crate) struct RelayArgs {
    /// The zones' host (its base URL, `http://host:port`): the relay links to it for each zone
    /// its clients join.
    #[arg(long, env = "ZONEKEEP_RELAY_ORIGIN")]
    origin: String,
    /// The relay credential the host was given (`--relay-token` there). Prefer the environment
    /// variable: flags show up in `ps`.
    #[arg(long, env = "ZONEKEEP_RELAY_TOKEN", hide_env_values = true)]
    relay_token: String,
    /// Address clients connect to [default: 127.0.0.1:7360].
    #[arg(long, env = "ZONEKEEP_LISTEN", default_value = "127.0.0.1:7360")]
    listen: SocketAddr,
    /// Most clients at once [default: 20000].
    #[arg(long, default_value_t = 20_000)]
    max_clients: usize,
    /// Frames queued to one client before it is kicked as a slow consumer [default: 256].
    #[arg(long, default_value_t = 256)]
    outbox_frames: usize,
    /// Messages from the host waiting for a zone's thread before its link counts as
    /// overloaded [default: 4096].
    #[arg(long, default_value_t = 4096)]
    link_queue: usize,
    /// Where clients connect to this relay (`ws://host:port`), as the host tells the new players
    /// it places here [default: ws:// and the --listen address].
    #[arg(long, env = "ZONEKEEP_RELAY_PUBLIC_URL")]
    public_url: Option<String>,
    /// Each client socket's kernel send buffer in bytes, 0 for the system's [default: 131072].
    #[arg(long, default_value_t = 128 << 10)]
    socket_send_buffer: usize,
    /// I/O threads serving the clients' sockets, 0 for one per two cores [default: 0].
    #[arg(long, default_value_t = 0)]
    io_threads: usize,
    /// Seconds a client has to send its Hello [default: 10].
    #[arg(long, default_value_t = 10)]
    handshake_timeout_secs: u64,
    /// Seconds a client may send nothing (no message, no datagram) before it is closed with
    /// IDLE_TIMEOUT, at least 1; the SDKs ping well within the default [default: 30, a host's].
    #[arg(long)]
    idle_timeout_secs: Option<u64>,
    /// UDP address of the WebTransport endpoint (HTTP/3: States and inputs in datagrams; see
    /// PROTOCOL.md §1.1), which `GET /webtransport` publishes as a host's does [default: off;
    /// with --dev, the listen address's IP and port number]. Outside dev mode it needs
    /// --webtransport-cert and --webtransport-key.
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT")]
    webtransport: Option<SocketAddr>,
    /// PEM certificate chain for the WebTransport endpoint.
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_CERT")]
    webtransport_cert: Option<PathBuf>,
    /// PEM private key for the WebTransport endpoint.
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_KEY")]
    webtransport_key: Option<PathBuf>,
    /// WebTransport handshakes in progress at most, apart from --max-clients; more are refused
    /// [default: 128].
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_MAX_HANDSHAKES")]
    webtransport_max_handshakes: Option<usize>,
    /// Threads of the WebTransport endpoint's own runtime; 0 = one per two cores [default: 0].
    #[arg(long, env = "ZONEKEEP_WEBTRANSPORT_THREADS", default_value_t = 0)]
    webtransport_threads: usize,
    /// Dev mode: WebTransport on (at the listen address's port number unless --webtransport
    /// says otherwise) with a self-signed certificate made at start, whose hash
    /// `GET /webtransport` publishes for clients to pin.
    #[arg(long)]
    dev: bool,
}

/// Runs the relay until SIGTERM or Ctrl-C.
pub(crate) fn run(args: RelayArgs) -> Result<()> {
    let mut cfg = RelayConfig::new(args.origin, Secret::new(args.relay_token));
    cfg.max_clients = args.max_clients;
    cfg.outbox_frames = args.outbox_frames;
    cfg.link_queue = args.link_queue;
    cfg.socket_send_buffer = args.socket_send_buffer;
    cfg.public_url = args.public_url;
    cfg.io_threads = args.io_threads;
    cfg.handshake_timeout = Duration::from_secs(args.handshake_timeout_secs.max(1));
    if let Some(secs) = args.idle_timeout_secs {
        cfg.idle_timeout = Duration::from_secs(secs.max(1));
    }
    cfg.webtransport = args.webtransport;
    cfg.webtransport_cert = args.webtransport_cert;
    cfg.webtransport_key = args.webtransport_key;
    cfg.dev_certificate = args.dev;
    if let Some(n) = args.webtransport_max_handshakes {
        cfg.webtransport_max_handshakes = n;
    }
    cfg.webtransport_threads = args.webtransport_threads;
    let relay = Relay::new(cfg).map_err(anyhow::Error::msg)?;
    crate::cli::init_logging("info");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("zonekeep-relay")
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        // Scripts and tests read this line to find the port when listening on :0.
        println!("zonekeep relay listening on http://{addr}");
        relay
            .serve(listener, crate::cli::shutdown_signal())
            .await
            .context("serving")?;
        Ok(())
    })
}
