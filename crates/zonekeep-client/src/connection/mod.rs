//! `Connection`: one client's session with a zone over WebSocket.
//!
//! [`connect`] performs the Hello → Welcome handshake and spawns a task that owns the socket. The
//! task decodes server messages against the [`Mirror`](zonekeep_protocol::mirror::Mirror)'s known
//! set, turns each Delta into a [`Patch`] with absolute positions, answers the clock (a Ping every
//! second), applies the client-side [`NetSim`](crate::netsim::NetSim) in both directions, and
//! reconnects when the transport drops: first with the reconnect token (same player, fresh
//! baseline), then — after the grace window or a refusal — with a fresh ticket from the
//! application's callback (a new player). The application reads [`Event`]s from a bounded channel
//! and sends inputs with [`Connection::send_input`] or an [`InputSender`].
//!
//! In a fleet the URL given to [`connect`] is the **entry URL**: any host answers there, and one
//! that does not own the zone redirects the handshake to the owner (PROTOCOL.md §5.3.1). The
//! connection follows up to three Redirects per attempt with the same Hello, counts them
//! ([`CountersSnapshot::redirects`]) and otherwise hides them. Every reconnect starts at the entry
//! URL again, since the zone's owner may have changed; a Kick ZONE_MOVED or HOST_FENCED is such a
//! change, and the connection resumes at once, without backoff on its first attempt.
//!
//! Content versions (PROTOCOL.md §4.1.2): [`ConnectOptions::content_version`] tells the host which
//! game content this client was built for, and every Welcome of protocol version 5 says which
//! content the host runs ([`Welcome::content_version`]). A host that requires newer content
//! refuses the client with Kick CONTENT_OUTDATED, which is final: [`connect`] returns
//! [`ClientError::ContentOutdated`], and a running connection ends with
//! [`CloseReason::ContentOutdated`] instead of reconnecting.
//!
//! Characters (PROTOCOL.md §5.3 "Characters", protocol version 10): a player's character
//! (inventory, level, gold) is held by one zone at a time. When the player joins another zone — from
//! another game or device — the zone holding the character kicks this connection with
//! CHARACTER_MOVED. That is final: the connection does not reconnect (that would take the character
//! back from the other game at once) and ends with [`CloseReason::CharacterMoved`], which the
//! application shows as "your character moved to another device"; playing here again is a new
//! [`connect`]. A join or resume refused with CHARACTER_ELSEWHERE (another zone holds the character
//! and could not give it back yet) is retried with backoff like INTERNAL_ERROR, with the same ticket
//! and reconnect-token rules.

mod counters;
mod driver;
mod link;
mod socket;
pub mod webtransport;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zonekeep_protocol::limits::MAX_INPUT_PAYLOAD;
use zonekeep_protocol::messages::{
    ClientMessage, Hello, Input, InputRefused, Kick, Welcome, CHARACTER_PROTOCOL, ENTRIES_PROTOCOL,
    HALT_PROTOCOL, TRANSFER_PROTOCOL,
};
use zonekeep_protocol::EncodeError;

pub use counters::{ws_header_len, CountersSnapshot};

use crate::clock::ClockSync;
use crate::error::ClientError;
use crate::netsim::NetSimConfig;
use crate::patch::Patch;
use counters::Counters;

/// A future yielding a fresh ticket (or why there is none).
pub type TicketFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// The application's source of fresh tickets, called when the reconnect token cannot be used.
pub type TicketSource = Arc<dyn Fn() -> TicketFuture + Send + Sync>;

/// How the connection recovers from a dropped transport.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconnectPolicy {
    /// Reconnect at all. When false a dropped transport (or a Kick ZONE_MOVED or HOST_FENCED) ends
    /// the connection.
    pub enabled: bool,
    /// How long after the drop the reconnect token is still tried: at most this, and at most the
    /// grace window the host announced in Welcome (the host's default is 15 s). After it, or after
    /// `RECONNECT_REFUSED`, a fresh ticket is used.
    pub grace: Duration,
    /// Attempts before giving up.
    pub max_attempts: u32,
    /// First backoff; it doubles per attempt up to `backoff_max`, each scaled by a random 50–100%.
    /// After a Kick ZONE_MOVED or HOST_FENCED the first attempt waits for none: the zone has a new
    /// owner already (or will in a moment), and the player is waiting.
    pub backoff_min: Duration,
    /// Largest backoff.
    pub backoff_max: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            grace: Duration::from_secs(15),
            max_attempts: 8,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
        }
    }
}

/// Everything [`connect`] needs besides the URL.
#[derive(Clone)]
pub struct ConnectOptions {
    /// The signed ticket for this zone.
    pub ticket: String,
    /// Protocol versions offered (default: `[5, 7, 8, 9, 10]`, the versions this crate implements
    /// over WebSocket; 8 adds Transfer, PROTOCOL.md §5.3.2, 9 the Kick code WORLD_HALTED, §5.3, and
    /// 10 the Kick codes CHARACTER_MOVED and CHARACTER_ELSEWHERE, §5.3 "Characters").
    pub versions: Vec<u32>,
    /// The game content version this client was built for, a dotted number such as `1.4.0`
    /// (empty = none). A host requiring a minimum refuses older (or no) content with Kick
    /// CONTENT_OUTDATED, which ends the connection for good (PROTOCOL.md §4.1.2).
    pub content_version: String,
    /// Capacity of the event channel. When full the connection stops reading the socket until
    /// the application catches up (the host then sees a slow consumer), never drops an event.
    pub event_capacity: usize,
    /// Capacity of the outgoing queue; `send_input` fails with `Backpressure` beyond it.
    pub outgoing_capacity: usize,
    /// Interval between Pings.
    pub ping_interval: Duration,
    /// Time allowed for connect + Hello → Welcome, Redirects followed on the way included.
    pub handshake_timeout: Duration,
    /// Reconnect behaviour.
    pub reconnect: ReconnectPolicy,
    /// Where fresh tickets come from: after the grace window, when the host refuses the reconnect
    /// token (e.g. it restarted), and when it refuses the ticket of a resume for a reason a new
    /// ticket fixes. `None` = give up then.
    pub fresh_ticket: Option<TicketSource>,
    /// Network simulation applied to messages in each direction (the handshake is not delayed).
    pub netsim: NetSimConfig,
    /// How the connection reaches the host (default WebSocket).
    pub transport: Transport,
}

/// How a connection reaches the host (PROTOCOL.md §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Deltas in order over a WebSocket.
    #[default]
    WebSocket,
    /// A WebTransport session: States in datagrams, each against the newest state this client
    /// acknowledged, so a lost packet holds nothing back; inputs in datagrams, each repeating the
    /// unacknowledged ones before it. The entry URL stays the `ws://` URL: the host says at
    /// `GET /webtransport` where its endpoint is and which certificate to pin.
    WebTransport,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The ticket is a credential: never printed.
        f.debug_struct("ConnectOptions")
            .field("versions", &self.versions)
            .field("content_version", &self.content_version)
            .field("event_capacity", &self.event_capacity)
            .field("outgoing_capacity", &self.outgoing_capacity)
            .field("ping_interval", &self.ping_interval)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("reconnect", &self.reconnect)
            .field("fresh_ticket", &self.fresh_ticket.is_some())
            .field("netsim", &self.netsim)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl ConnectOptions {
    /// Defaults around a ticket: this crate's protocol version, 1024 events, 256 outgoing messages, a Ping a
    /// second, a 10 s handshake, reconnect on, no NetSim.
    pub fn new(ticket: impl Into<String>) -> Self {
        Self {
            ticket: ticket.into(),
            // Over WebSocket, version 6 is version 5: offering both keeps a host of either
            // version in reach.
            versions: vec![
                5,
                ENTRIES_PROTOCOL,
                TRANSFER_PROTOCOL,
                HALT_PROTOCOL,
                CHARACTER_PROTOCOL,
            ],
            content_version: String::new(),
            event_capacity: 1024,
            outgoing_capacity: 256,
            ping_interval: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(10),
            reconnect: ReconnectPolicy::default(),
            fresh_ticket: None,
            netsim: NetSimConfig::default(),
            transport: Transport::WebSocket,
        }
    }

    /// Sets the fresh-ticket callback.
    pub fn with_fresh_ticket<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        self.fresh_ticket = Some(Arc::new(move || Box::pin(f()) as TicketFuture));
        self
    }
}

/// Why the connection ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CloseReason {
    /// The application called [`Connection::close`] (or dropped the connection).
    Client,
    /// The host kicked this client with a code that does not invite a reconnect.
    Kicked(Kick),
    /// The host refused this client's content version (Kick CONTENT_OUTDATED, PROTOCOL.md
    /// §4.1.2), typically on a reconnect after the game was updated: the client was built for
    /// older content than the host now accepts. The application must update (or reload) the
    /// client; reconnecting cannot help.
    ContentOutdated(Kick),
    /// The player's character was taken into another zone (Kick CHARACTER_MOVED, PROTOCOL.md §5.3
    /// "Characters"): the player started playing in another game or on another device, and this
    /// session is over. The connection did not reconnect, since that would take the character back
    /// at once; the application tells the player (e.g. "your character moved to another device")
    /// and leaves it to them to play here again, with a new [`connect`]. Also the end of a move to
    /// another zone that met this Kick there. A session below protocol version 10 is kicked with
    /// KICKED instead, and ends as [`CloseReason::Kicked`].
    CharacterMoved(Kick),
    /// The transport dropped and reconnecting was disabled, impossible or failed every attempt.
    Lost(String),
}

/// What the connection reports to the application, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A new Welcome after a reconnect (the first one is returned by [`connect`]). `resumed`: the
    /// same player continues (inputs keep their sequence, and those no Delta acknowledged are
    /// sent again first: PROTOCOL.md §4.2); otherwise this is a new player (input sequences restart at
    /// 1: reset prediction). A BASELINE Delta follows either way.
    Welcome {
        /// The Welcome.
        welcome: Welcome,
        /// Whether the reconnect token resumed the same player.
        resumed: bool,
    },
    /// One Delta, decoded and applied to the known set.
    Delta(Patch),
    /// A zone event delivered in a Delta (right after that Delta's `Event::Delta`).
    Event {
        /// Tick of the Delta that carried it.
        tick: u64,
        /// Topic.
        topic: u16,
        /// Payload.
        payload: Vec<u8>,
    },
    /// The host kicked this client. If the code invites it (`SHUTTING_DOWN`, `INTERNAL_ERROR`,
    /// `WORLD_HALTED`, `CHARACTER_ELSEWHERE`, `SLOW_CONSUMER`, `IDLE_TIMEOUT`,
    /// `TOO_MANY_REDIRECTS`, and `ZONE_MOVED` or `HOST_FENCED`, which resume at once through the
    /// entry URL) a reconnect follows; otherwise `Closed` does (`CHARACTER_MOVED`:
    /// [`CloseReason::CharacterMoved`]).
    Kick(Kick),
    /// The zone refused one of this client's inputs (its `seq` and the zone's reason code): a
    /// predictor drops it ([`Predictor::refuse`](crate::predictor::Predictor::refuse)), since no
    /// ack will ever cover its effect.
    InputRefused(InputRefused),
    /// A move to another zone (PROTOCOL.md §5.3.2); see [`TransferEvent`].
    Transfer(TransferEvent),
    /// The transport dropped; reconnecting now. Not emitted when a Kick ZONE_MOVED or
    /// HOST_FENCED moves the session and the first attempt at the zone's new owner lands: the
    /// Kick and the `Welcome { resumed: true }` that follows tell of the move, and the player
    /// never left (a drain or a failover is no disconnect to the game).
    Disconnected {
        /// What happened.
        reason: String,
    },
    /// The connection ended; no more events follow.
    Closed(CloseReason),
}

/// The steps of a move to another zone (PROTOCOL.md §5.3.2), as [`Event::Transfer`] tells them.
#[derive(Debug, Clone, PartialEq)]
pub enum TransferEvent {
    /// The host moved the player to zone `to`: the connection is on its way there. Keep drawing
    /// the world you have (no Delta comes meanwhile, and inputs are refused by the source);
    /// [`TransferEvent::Arrived`] follows once the new zone is reached.
    Started {
        /// The zone the player leaves.
        from: String,
        /// The zone the player now belongs to.
        to: String,
    },
    /// The new zone's Welcome and its BASELINE, in one event: replace the old world with this one
    /// at once (e.g. [`Replica::enter_zone`](crate::replica::Replica::enter_zone)), so that no
    /// frame is drawn between them. The player starts afresh there (input sequence from 1).
    Arrived {
        /// The zone the player left.
        from: String,
        /// The new zone's Welcome (boxed: it carries the zone's schema).
        welcome: Box<Welcome>,
        /// The new zone's BASELINE.
        baseline: Patch,
    },
    /// A Transfer could not be followed: its URL is not `ws://` or `wss://` (it is ignored and
    /// the session goes on where it was), or an attempt at the new zone failed. `retrying`: the
    /// move goes on (another attempt with backoff while the credential is valid, or the session
    /// where it was); otherwise the connection closes next.
    Failed {
        /// What went wrong.
        reason: String,
        /// Whether the connection carries on.
        retrying: bool,
    },
}

/// State shared by the connection's task and its handles.
#[derive(Debug)]
pub(crate) struct Shared {
    origin: Instant,
    next_seq: AtomicU32,
    /// Tick of the newest Delta (the default view tick).
    last_tick: AtomicU64,
    /// The application's view tick; `u64::MAX` = not set, use `last_tick`.
    view_tick: AtomicU64,
    player_id: AtomicU32,
    clock: Mutex<ClockSync>,
    counters: Counters,
}

impl Shared {
    fn now_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, ClockSync> {
        // A panic while holding the lock cannot leave a ClockSync half-updated in a harmful way.
        self.clock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A message on its way out, stamped with when the application produced it.
#[derive(Debug)]
pub(crate) struct Outgoing {
    bytes: Vec<u8>,
    queued_us: u64,
    is_input: bool,
}

#[derive(Debug)]
pub(crate) enum Command {
    Close,
    DropTransport,
    SetNetSim(NetSimConfig),
}

/// A cloneable handle that sends inputs (for a task other than the one reading events).
#[derive(Debug, Clone)]
pub struct InputSender {
    out: mpsc::Sender<Outgoing>,
    shared: Arc<Shared>,
}

impl InputSender {
    /// Sends one input: stamps the next sequence number and the view tick, queues it, and returns
    /// the sequence. Never waits: a full queue is [`ClientError::Backpressure`] (and counted).
    pub fn send_input(&self, payload: &[u8]) -> Result<u32, ClientError> {
        if payload.len() > MAX_INPUT_PAYLOAD {
            return Err(ClientError::Encode(EncodeError::TooLong {
                what: "input payload",
                len: payload.len() as u64,
                max: MAX_INPUT_PAYLOAD as u64,
            }));
        }
        let permit = self.out.try_reserve().map_err(|e| match e {
            mpsc::error::TrySendError::Full(()) => {
                counters::add(&self.shared.counters.outgoing_full, 1);
                ClientError::Backpressure
            }
            mpsc::error::TrySendError::Closed(()) => ClientError::Closed,
        })?;
        // The sequence is taken only once the message is sure to be queued, so refused sends
        // leave no gap.
        let seq = self.shared.next_seq.fetch_add(1, Ordering::Relaxed);
        let view_tick = match self.shared.view_tick.load(Ordering::Relaxed) {
            u64::MAX => self.shared.last_tick.load(Ordering::Relaxed),
            t => t,
        };
        let bytes = ClientMessage::Input(Input {
            seq,
            view_tick,
            payload: payload.to_vec(),
        })
        .to_bytes()?;
        permit.send(Outgoing {
            bytes,
            queued_us: self.shared.now_us(),
            is_input: true,
        });
        Ok(seq)
    }
}

/// A live session with a zone. Dropping it closes the connection without waiting.
#[derive(Debug)]
pub struct Connection {
    input: InputSender,
    events: mpsc::Receiver<Event>,
    commands: mpsc::Sender<Command>,
    task: Option<JoinHandle<()>>,
    transport: Transport,
}

/// Connects to the zone at `url` (e.g. `ws://127.0.0.1:7350/zones/arena-1`), performs the
/// handshake and starts the connection's task. `url` is the entry URL: Redirects are followed
/// (at most three; more is [`ClientError::TooManyRedirects`], a URL other than `ws://` or
/// `wss://` is [`ClientError::RedirectScheme`]) and every reconnect starts there again. A Kick
/// during the handshake is [`ClientError::Kicked`], or [`ClientError::ContentOutdated`] when the
/// host refuses the client's content version; this first join is not retried, so a Kick that a
/// running connection would retry (INTERNAL_ERROR, WORLD_HALTED, CHARACTER_ELSEWHERE, …) is the
/// application's to retry here. The BASELINE Delta that follows Welcome arrives as the first event.
pub async fn connect(
    url: &str,
    opts: ConnectOptions,
) -> Result<(Connection, Welcome), ClientError> {
    let shared = Arc::new(Shared {
        origin: Instant::now(),
        next_seq: AtomicU32::new(1),
        last_tick: AtomicU64::new(0),
        view_tick: AtomicU64::new(u64::MAX),
        player_id: AtomicU32::new(0),
        clock: Mutex::new(ClockSync::new(1)),
        counters: Counters::default(),
    });
    let hello = Hello {
        versions: opts.versions.clone(),
        ticket: opts.ticket.clone(),
        reconnect_token: Vec::new(),
        content_version: opts.content_version.clone(),
        resume_from: None,
    };
    let opts_transport = opts.transport;
    let (link, welcome) = socket::open(
        url,
        &hello,
        opts.handshake_timeout,
        &shared.counters,
        opts.transport,
    )
    .await?;
    counters::add(&shared.counters.fresh_joins, 1);
    shared.player_id.store(welcome.player_id, Ordering::Relaxed);
    shared.last_tick.store(welcome.tick, Ordering::Relaxed);
    {
        let mut clock = shared.clock();
        *clock = ClockSync::new(welcome.tick_hz);
        clock.on_welcome(welcome.tick, shared.now_us());
    }
    let (out_tx, out_rx) = mpsc::channel(opts.outgoing_capacity.max(1));
    let (ev_tx, ev_rx) = mpsc::channel(opts.event_capacity.max(1));
    let (cmd_tx, cmd_rx) = mpsc::channel(8);
    let driver = driver::Driver::new(
        url.to_owned(),
        opts,
        Arc::clone(&shared),
        link,
        welcome.clone(),
        ev_tx,
    );
    let transport = opts_transport;
    let task = tokio::spawn(driver.run(out_rx, cmd_rx));
    let conn = Connection {
        transport,
        input: InputSender {
            out: out_tx,
            shared,
        },
        events: ev_rx,
        commands: cmd_tx,
        task: Some(task),
    };
    Ok((conn, welcome))
}

impl Connection {
    /// The transport the connection was opened with (every reconnect uses it too).
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The next event; `None` once the connection has ended and every event was read.
    pub async fn recv(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// Sends one input; see [`InputSender::send_input`].
    pub fn send_input(&self, payload: &[u8]) -> Result<u32, ClientError> {
        self.input.send_input(payload)
    }

    /// A cloneable input handle.
    pub fn input_sender(&self) -> InputSender {
        self.input.clone()
    }

    /// Sets the view tick stamped on inputs (the tick the application is displaying, e.g. the
    /// replica's drawn tick). Until set, the newest Delta's tick is used.
    pub fn set_view_tick(&self, tick: u64) {
        self.input
            .shared
            .view_tick
            .store(tick.min(u64::MAX - 1), Ordering::Relaxed);
    }

    /// The sequence number the next input will get.
    pub fn next_seq(&self) -> u32 {
        self.input.shared.next_seq.load(Ordering::Relaxed)
    }

    /// This connection's current player id (changes after a fresh rejoin).
    pub fn player_id(&self) -> u32 {
        self.input.shared.player_id.load(Ordering::Relaxed)
    }

    /// Microseconds on the connection's local monotonic clock (the time base of [`Self::clock`]).
    pub fn now_us(&self) -> u64 {
        self.input.shared.now_us()
    }

    /// A copy of the clock estimate (server tick, RTT, jitter).
    pub fn clock(&self) -> ClockSync {
        self.input.shared.clock().clone()
    }

    /// The estimated server tick now.
    pub fn server_tick_now(&self) -> Option<f64> {
        let now = self.now_us();
        self.input.shared.clock().server_tick_at(now)
    }

    /// The counters so far.
    pub fn counters(&self) -> CountersSnapshot {
        self.input.shared.counters.snapshot()
    }

    /// Changes the network simulation at run time.
    pub async fn set_netsim(&self, cfg: NetSimConfig) -> Result<(), ClientError> {
        self.commands
            .send(Command::SetNetSim(cfg))
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Drops the transport abruptly (no Close frame), as a network failure would; the connection
    /// then reconnects per its policy. For tests and load tools.
    pub async fn drop_transport(&self) -> Result<(), ClientError> {
        self.commands
            .send(Command::DropTransport)
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Closes the connection (WebSocket close handshake) and waits for its task to finish. Events
    /// not yet read are discarded.
    pub async fn close(mut self) {
        // A send error means the task already ended.
        let _ = self.commands.send(Command::Close).await;
        // Keep draining so the task is never stuck on a full event channel while closing.
        while self.events.recv().await.is_some() {}
        if let Some(task) = self.task.take() {
            // A join error only reports the task's panic or cancellation; the connection is
            // closed either way.
            let _ = task.await;
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The task sees the command channel close (or this Close) and closes the socket itself;
        // it is detached rather than aborted so the close handshake still happens.
        if self.task.take().is_some() {
            // Full or closed both mean the task will see the end on its own.
            let _ = self.commands.try_send(Command::Close);
        }
    }
}
