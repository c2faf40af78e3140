//! The connection's task: owns the transport, the mirror (and over WebTransport the ring of
//! States) and both NetSim directions, and reconnects. Here: its loop, the NetSim's delays
//! and the writes. Beside it: `messages` (what each server message does), `inputs` (inputs
//! and acknowledgements, the datagram path's among them), `reconnect` and `transfer`.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Bytes;
use zonekeep_protocol::messages::tag::INPUTS;
use zonekeep_protocol::messages::{ClientMessage, Input, Kick, KickCode, Ping, Welcome};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::states::StateRing;

mod inputs;
mod messages;
mod reconnect;
mod transfer;

use super::counters::add;
use super::link::{Incoming, Link};
use super::{CloseReason, Command, ConnectOptions, Event, Outgoing, Shared};
use crate::netsim::{NetSim, NetSimConfig};

/// Messages held by the incoming NetSim at most; the socket is not read beyond it (TCP pushes back).
const MIN_IN_DELAY_CAPACITY: usize = 64;

/// How long a client-initiated close waits for the host's Close reply.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// What one step of the loop decided.
enum Flow {
    Continue,
    /// The transport is gone (or unusable); `kick` if the host said why.
    Lost {
        reason: String,
        kick: Option<Kick>,
    },
    /// The connection ends.
    Stop(CloseReason),
    /// A Transfer moved the player: connect to the new zone (PROTOCOL.md §5.3.2).
    Moving,
}

fn lost(reason: impl Into<String>) -> Flow {
    Flow::Lost {
        reason: reason.into(),
        kick: None,
    }
}

/// Kick codes after which coming back is the right thing to do. TOO_MANY_REDIRECTS says the fleet
/// is still settling who owns the zone; ZONE_MOVED and HOST_FENCED say the session lives on at
/// another host; WORLD_HALTED, like INTERNAL_ERROR, says the lasting world comes back by itself
/// (from its last committed save, once its store answers), so it is retried with backoff;
/// CHARACTER_ELSEWHERE, like INTERNAL_ERROR too, says the zone holding the player's character
/// gives it back once it can be asked. CHARACTER_MOVED is not among them: the character now plays
/// in another game or on another device, and coming back would take it from there.
fn invites_reconnect(code: KickCode) -> bool {
    code.resumes_elsewhere()
        || matches!(
            code,
            KickCode::SHUTTING_DOWN
                | KickCode::INTERNAL_ERROR
                | KickCode::WORLD_HALTED
                | KickCode::CHARACTER_ELSEWHERE
                | KickCode::SLOW_CONSUMER
                | KickCode::IDLE_TIMEOUT
                | KickCode::TOO_MANY_REDIRECTS
        )
}

/// How a Kick that does not invite a reconnect ends the connection: CONTENT_OUTDATED and
/// CHARACTER_MOVED have their own reasons, since the application must update the client, or tell
/// the player that their character plays elsewhere now, rather than just report a kick.
fn final_kick(kick: Kick) -> CloseReason {
    match kick.code {
        KickCode::CONTENT_OUTDATED => CloseReason::ContentOutdated(kick),
        KickCode::CHARACTER_MOVED => CloseReason::CharacterMoved(kick),
        _ => CloseReason::Kicked(kick),
    }
}

/// Kick codes a new ticket cures whoever issued the refused one: it aged out or was used up.
fn ticket_expired(code: KickCode) -> bool {
    matches!(
        code,
        KickCode::TICKET_EXPIRED | KickCode::TICKET_NOT_YET_VALID | KickCode::TICKET_REPLAYED
    )
}

/// Kick codes refusing a ticket's signature or key. On a ticket the host accepted before, they
/// mean the host no longer has that key (it restarted with another one), which a new ticket cures;
/// on a ticket fetched for this very attempt, another from the same source would fail the same way.
fn ticket_key_refused(code: KickCode) -> bool {
    matches!(
        code,
        KickCode::BAD_TICKET | KickCode::TICKET_UNKNOWN_KEY | KickCode::TICKET_RETIRED_KEY
    )
}

pub(crate) struct Driver {
    url: String,
    /// Where else the zone may be entered, from the newest Welcome that listed them (PROTOCOL.md
    /// §5.3.1): tried in order when the entry URL cannot be reached.
    entries: Vec<String>,
    opts: ConnectOptions,
    shared: Arc<Shared>,
    link: Option<Link>,
    welcome: Welcome,
    /// What the application was last shown (over WebTransport, the newest State applied).
    mirror: Mirror,
    /// WebTransport: the states of the last States applied, to apply the next onto (§5.8).
    states: StateRing,
    /// WebTransport: inputs no State has acknowledged yet, newest last; each Inputs datagram
    /// repeats them (§4.5).
    unacked: VecDeque<Input>,
    /// WebTransport: the newest State tick acknowledged in an Inputs datagram.
    acked_sent: u64,
    /// WebTransport: when a State's acknowledgement that no input carried goes alone
    /// ([`super::webtransport::STATE_ACK_HOLD`] after the State).
    ack_due: Option<tokio::time::Instant>,
    /// WebSocket: inputs written (or held by the outgoing NetSim when the socket went) that no
    /// Delta has acknowledged yet, oldest first, as (seq, message), at most
    /// [`reconnect::UNACKED_KEPT`]. A resume sends them again (PROTOCOL.md §4.2): a zone handed
    /// over in a drain keeps only the inputs it consumed, and the ack of a later input would
    /// otherwise vouch for them.
    sent_unacked: VecDeque<(u32, Vec<u8>)>,
    events: mpsc::Sender<Event>,
    out_sim: NetSim,
    in_sim: NetSim,
    out_delay: VecDeque<(u64, Vec<u8>, bool)>,
    in_delay: VecDeque<(u64, Bytes)>,
    in_capacity: usize,
    ticket: String,
    rng: Xoshiro256PlusPlus,
    /// A Resync was sent: Deltas are skipped until the BASELINE that answers it (applying them to
    /// a known set the host does not describe would only spread the damage).
    awaiting_baseline: bool,
    /// A move to another zone under way (PROTOCOL.md §5.3.2).
    moving: Option<transfer::Moving>,
}

impl Driver {
    pub(crate) fn new(
        url: String,
        opts: ConnectOptions,
        shared: Arc<Shared>,
        link: Link,
        welcome: Welcome,
        events: mpsc::Sender<Event>,
    ) -> Self {
        // Backoff jitter only needs to differ between clients, not be unpredictable.
        let seed = RandomState::new().hash_one(Instant::now());
        // The two directions get different streams from the one seed.
        let in_cfg = NetSimConfig {
            seed: opts.netsim.seed.wrapping_add(1),
            ..opts.netsim
        };
        Self {
            out_sim: NetSim::new(opts.netsim),
            in_sim: NetSim::new(in_cfg),
            in_capacity: opts.event_capacity.max(MIN_IN_DELAY_CAPACITY),
            ticket: opts.ticket.clone(),
            entries: welcome.websocket_entries().map(str::to_owned).collect(),
            url,
            opts,
            shared,
            link: Some(link),
            welcome,
            mirror: Mirror::new(),
            states: StateRing::new(),
            unacked: VecDeque::new(),
            acked_sent: 0,
            ack_due: None,
            sent_unacked: VecDeque::new(),
            events,
            out_delay: VecDeque::new(),
            in_delay: VecDeque::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            awaiting_baseline: false,
            moving: None,
        }
    }

    pub(crate) async fn run(
        mut self,
        mut out_rx: mpsc::Receiver<Outgoing>,
        mut cmd_rx: mpsc::Receiver<Command>,
    ) {
        let reason = self.run_inner(&mut out_rx, &mut cmd_rx).await;
        tracing::debug!(zone = %self.welcome.zone_id, ?reason, "connection closed");
        // The application may be gone already; then nobody needs the event.
        let _ = self.events.send(Event::Closed(reason)).await;
    }

    async fn run_inner(
        &mut self,
        out_rx: &mut mpsc::Receiver<Outgoing>,
        cmd_rx: &mut mpsc::Receiver<Command>,
    ) -> CloseReason {
        let mut ping = self.ping_interval();
        loop {
            let flow = match self.step(out_rx, cmd_rx, &mut ping).await {
                // The new zone's connection failed before its BASELINE: the move goes on.
                Flow::Lost { reason, kick } if self.moving.is_some() => {
                    self.link = None;
                    self.in_delay.clear();
                    self.out_delay.clear();
                    self.transfer_failed(reason, kick.as_ref()).await
                }
                other => other,
            };
            match flow {
                Flow::Continue => {}
                Flow::Moving => {
                    let mut netsim = None;
                    let outcome = tokio::select! {
                        r = self.transfer_connect(out_rx) => r,
                        () = wait_close(cmd_rx, &mut netsim) => Err(CloseReason::Client),
                    };
                    if let Some(cfg) = netsim {
                        self.set_netsim(cfg);
                    }
                    if let Err(reason) = outcome {
                        self.end_move().await;
                        return reason;
                    }
                    ping = self.ping_interval();
                }
                Flow::Stop(reason) => {
                    self.end_move().await;
                    self.close_ws().await;
                    return reason;
                }
                Flow::Lost { reason, kick } => {
                    // Abrupt: no close handshake on a transport we consider dead.
                    self.link = None;
                    self.in_delay.clear();
                    // Inputs the outgoing NetSim still held were stamped and never sent: a resume
                    // sends them with the unacknowledged ones.
                    for (_, bytes, is_input) in std::mem::take(&mut self.out_delay) {
                        if is_input {
                            self.keep_unacked(bytes);
                        }
                    }
                    let retry = self.opts.reconnect.enabled
                        && kick.as_ref().is_none_or(|k| invites_reconnect(k.code));
                    if !retry {
                        return kick.map_or(CloseReason::Lost(reason), final_kick);
                    }
                    // The zone moved while the player is in it: its new owner is waiting for the
                    // resume, so the first attempt goes without backoff.
                    // The player's socket changes, the player does not: the application hears
                    // of a disconnect only if that first attempt does not land.
                    let at_once = kick.as_ref().is_some_and(|k| k.code.resumes_elsewhere());
                    tracing::debug!(zone = %self.welcome.zone_id, %reason, "transport lost; reconnecting");
                    let mut untold = None;
                    if at_once {
                        untold = Some(reason);
                    } else if let Flow::Stop(r) = self.emit(Event::Disconnected { reason }).await {
                        return r;
                    }
                    let mut netsim = None;
                    let outcome = tokio::select! {
                        r = self.reconnect(out_rx, untold) => r,
                        () = wait_close(cmd_rx, &mut netsim) => Err(CloseReason::Client),
                    };
                    if let Some(cfg) = netsim {
                        self.set_netsim(cfg);
                    }
                    if let Err(reason) = outcome {
                        return reason;
                    }
                    ping = self.ping_interval();
                }
            }
        }
    }

    fn ping_interval(&self) -> Interval {
        let mut ping = tokio::time::interval(self.opts.ping_interval.max(Duration::from_millis(1)));
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ping
    }

    fn deadline(&self, due_us: u64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.shared.origin + Duration::from_micros(due_us))
    }

    async fn step(
        &mut self,
        out_rx: &mut mpsc::Receiver<Outgoing>,
        cmd_rx: &mut mpsc::Receiver<Command>,
        ping: &mut Interval,
    ) -> Flow {
        let in_due = self.in_delay.front().map(|d| self.deadline(d.0));
        let out_due = self.out_delay.front().map(|d| self.deadline(d.0));
        let can_read = self.in_delay.len() < self.in_capacity;
        let can_take = self.out_delay.len() < self.opts.outgoing_capacity.max(1);
        let Some(link) = self.link.as_mut() else {
            return lost("no transport");
        };
        tokio::select! {
            cmd = cmd_rx.recv() => match cmd {
                None | Some(Command::Close) => Flow::Stop(CloseReason::Client),
                Some(Command::DropTransport) => lost("transport dropped by the application"),
                Some(Command::SetNetSim(cfg)) => {
                    self.set_netsim(cfg);
                    Flow::Continue
                }
            },
            msg = link.next(), if can_read => self.on_frame(msg).await,
            () = sleep_until(in_due), if in_due.is_some() => self.deliver_due_incoming().await,
            o = out_rx.recv(), if can_take => match o {
                // Every input handle is gone, and with them the Connection.
                None => Flow::Stop(CloseReason::Client),
                Some(o) => self.queue_out(o).await,
            },
            () = sleep_until(out_due), if out_due.is_some() => self.flush_due_outgoing().await,
            () = sleep_until(self.ack_due), if self.ack_due.is_some() => self.ack_hold_ended(),
            _ = ping.tick() => {
                if !can_take {
                    // The simulated link is saturated; a Ping queued behind it would only measure
                    // the queue. The next tick tries again.
                    return Flow::Continue;
                }
                let now = self.shared.now_us();
                add(&self.shared.counters.pings, 1);
                match ClientMessage::Ping(Ping { client_time: now }).to_bytes() {
                    Ok(bytes) => self.queue_out(Outgoing { bytes, queued_us: now, is_input: false }).await,
                    Err(e) => Flow::Stop(CloseReason::Lost(format!("cannot encode Ping: {e}"))),
                }
            }
        }
    }

    fn set_netsim(&mut self, cfg: NetSimConfig) {
        self.out_sim.set_config(cfg);
        self.in_sim.set_config(NetSimConfig {
            seed: cfg.seed.wrapping_add(1),
            ..cfg
        });
    }

    async fn on_frame(&mut self, msg: Incoming) -> Flow {
        match msg {
            Incoming::Failed(e) => self.transport_ended(e).await,
            Incoming::Message(b) => {
                self.shared.counters.received(b.len());
                if self.in_sim.config().is_off() && self.in_delay.is_empty() {
                    self.process(b).await
                } else {
                    let due = self.in_sim.schedule(self.shared.now_us());
                    self.hold_incoming(due, b);
                    Flow::Continue
                }
            }
            Incoming::Datagram(b) => {
                self.shared.counters.received(b.len());
                if self.in_sim.config().is_off() {
                    return self.process(b).await;
                }
                // A datagram is lost or delayed on its own, so it may overtake others.
                if let Some(due) = self.in_sim.schedule_datagram(self.shared.now_us()) {
                    self.hold_incoming(due, b);
                }
                Flow::Continue
            }
            Incoming::Text => lost("the host sent a text frame"),
            Incoming::Closed(code) => {
                // A Kick lost in transit is still known from the close code (PROTOCOL.md §6:
                // 4000 + the Kick code); the Kick itself, when it arrived, was handled first.
                let code = code.unwrap_or(0);
                let flow = self.transport_ended("closed by the host".to_owned()).await;
                match flow {
                    Flow::Lost { reason, kick: None } if (4001..=4999).contains(&code) => {
                        Flow::Lost {
                            reason,
                            kick: Some(Kick {
                                code: KickCode((code - 4000) as u16),
                                reason: "from the close code".to_owned(),
                            }),
                        }
                    }
                    other => other,
                }
            }
            Incoming::Nothing => Flow::Continue,
        }
    }

    /// Holds a message the incoming NetSim delays until `due`, in delivery order.
    fn hold_incoming(&mut self, due: u64, b: Bytes) {
        let at = self.in_delay.partition_point(|d| d.0 <= due);
        self.in_delay.insert(at, (due, b));
    }

    /// The socket ended: messages still held by the NetSim had arrived before the end, so they are
    /// delivered now (a Kick among them explains the close).
    async fn transport_ended(&mut self, reason: String) -> Flow {
        while let Some((_, b)) = self.in_delay.pop_front() {
            match self.process(b).await {
                Flow::Continue => {}
                other => return other,
            }
        }
        lost(reason)
    }

    async fn deliver_due_incoming(&mut self) -> Flow {
        let now = self.shared.now_us();
        while self.in_delay.front().is_some_and(|d| d.0 <= now) {
            let Some((_, b)) = self.in_delay.pop_front() else {
                break;
            };
            match self.process(b).await {
                Flow::Continue => {}
                other => return other,
            }
        }
        Flow::Continue
    }

    async fn queue_out(&mut self, o: Outgoing) -> Flow {
        // Over WebTransport an input leaves at once in an Inputs datagram, which the NetSim
        // delays or loses on its own (`send_inputs`).
        let datagram = o.is_input && matches!(self.link, Some(Link::WebTransport(_)));
        if datagram || (self.out_sim.config().is_off() && self.out_delay.is_empty()) {
            return self.write(o.bytes, o.is_input).await;
        }
        // Scheduling continues while queued messages drain, so switching NetSim off never
        // reorders messages.
        let due = self.out_sim.schedule(o.queued_us);
        self.out_delay.push_back((due, o.bytes, o.is_input));
        Flow::Continue
    }

    async fn flush_due_outgoing(&mut self) -> Flow {
        let now = self.shared.now_us();
        while self.out_delay.front().is_some_and(|d| d.0 <= now) {
            let Some((_, bytes, is_input)) = self.out_delay.pop_front() else {
                break;
            };
            match self.write(bytes, is_input).await {
                Flow::Continue => {}
                other => return other,
            }
        }
        Flow::Continue
    }

    async fn write(&mut self, bytes: Vec<u8>, is_input: bool) -> Flow {
        if is_input && matches!(self.link, Some(Link::WebTransport(_))) {
            if let Ok(ClientMessage::Input(input)) = ClientMessage::decode(&bytes) {
                return self.send_input(input);
            }
        }
        if is_input {
            // Kept before the write: an input whose write fails is sent again on a resume.
            self.keep_unacked(bytes.clone());
        }
        let Some(link) = self.link.as_mut() else {
            return lost("no transport");
        };
        let len = bytes.len();
        // An Inputs datagram the outgoing NetSim held back.
        if let (Link::WebTransport(wt), Some(&INPUTS)) = (&*link, bytes.first()) {
            if wt.conn.send_datagram(bytes).is_ok() {
                self.shared.counters.sent(len);
            }
            return Flow::Continue;
        }
        if let Err(e) = link.send(bytes).await {
            return lost(e);
        }
        self.shared.counters.sent(len);
        if is_input {
            add(&self.shared.counters.inputs_sent, 1);
        }
        Flow::Continue
    }

    /// Hands an event to the application, waiting if its channel is full (counted).
    async fn emit(&mut self, ev: Event) -> Flow {
        let ev = match self.events.try_send(ev) {
            Ok(()) => return Flow::Continue,
            Err(mpsc::error::TrySendError::Closed(_)) => return Flow::Stop(CloseReason::Client),
            Err(mpsc::error::TrySendError::Full(ev)) => ev,
        };
        add(&self.shared.counters.events_full, 1);
        match self.events.send(ev).await {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::Stop(CloseReason::Client),
        }
    }

    async fn close_ws(&mut self) {
        let Some(link) = self.link.take() else {
            return;
        };
        // Best effort: a close, then the host's reply, within a bound.
        let _ = tokio::time::timeout(CLOSE_WAIT, link.close()).await;
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Resolves when the application asks to close (or is gone); remembers NetSim changes meanwhile.
async fn wait_close(cmd_rx: &mut mpsc::Receiver<Command>, netsim: &mut Option<NetSimConfig>) {
    loop {
        match cmd_rx.recv().await {
            None | Some(Command::Close) => return,
            Some(Command::SetNetSim(cfg)) => *netsim = Some(cfg),
            // Already reconnecting.
            Some(Command::DropTransport) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{final_kick, invites_reconnect, CloseReason, Kick, KickCode};

    #[test]
    fn the_kicks_that_invite_a_reconnect() {
        let invited: Vec<KickCode> = (0..=40)
            .chain([300, 999])
            .map(KickCode)
            .filter(|c| invites_reconnect(*c))
            .collect();
        assert_eq!(
            invited,
            [
                KickCode::SHUTTING_DOWN,
                KickCode::IDLE_TIMEOUT,
                KickCode::SLOW_CONSUMER,
                KickCode::INTERNAL_ERROR,
                KickCode::ZONE_MOVED,
                KickCode::HOST_FENCED,
                KickCode::TOO_MANY_REDIRECTS,
                KickCode::WORLD_HALTED,
                KickCode::CHARACTER_ELSEWHERE,
            ]
        );
        // A halted lasting world comes back by itself: retried with backoff like INTERNAL_ERROR,
        // not at once like a move.
        assert!(!KickCode::WORLD_HALTED.resumes_elsewhere());
        // What an older session is told instead is retried the same way.
        assert!(invites_reconnect(KickCode::WORLD_HALTED.for_version(8)));
    }

    #[test]
    fn a_moved_character_ends_the_session_and_one_held_elsewhere_is_retried() {
        // Held by a zone that could not give it back yet: retried with backoff like INTERNAL_ERROR.
        assert!(invites_reconnect(KickCode::CHARACTER_ELSEWHERE));
        assert!(!KickCode::CHARACTER_ELSEWHERE.resumes_elsewhere());
        // Taken into another game or device: no reconnect, and a reason of its own.
        assert!(!invites_reconnect(KickCode::CHARACTER_MOVED));
        let kick = |code| Kick {
            code,
            reason: "your character joined zone dungeon-2".into(),
        };
        assert_eq!(
            final_kick(kick(KickCode::CHARACTER_MOVED)),
            CloseReason::CharacterMoved(kick(KickCode::CHARACTER_MOVED))
        );
        assert_eq!(
            final_kick(kick(KickCode::KICKED)),
            CloseReason::Kicked(kick(KickCode::KICKED))
        );
        // What a session of version 9 is told instead is decided the same way, without the reason.
        assert!(invites_reconnect(
            KickCode::CHARACTER_ELSEWHERE.for_version(9)
        ));
        assert!(!invites_reconnect(KickCode::CHARACTER_MOVED.for_version(9)));
        assert_eq!(
            final_kick(kick(KickCode::CHARACTER_MOVED.for_version(9))),
            CloseReason::Kicked(kick(KickCode::KICKED))
        );
    }
}
