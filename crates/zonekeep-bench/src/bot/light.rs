//! The light bot: speaks the protocol directly, reads only Delta headers (tick, ack), keeps its
//! buffers small. Used for every bot that does not decode, and for idle connection density.
//!
//! It still behaves like a client where the host can tell: it sends Pings, stamps inputs with the
//! newest tick, follows Redirects (at most three per attempt, the same Hello at every hop),
//! reconnects with its reconnect token after a drop (a fresh ticket in the Hello, as tickets are
//! single-use) — at once after ZONE_MOVED or HOST_FENCED, always through the entry URL — and honours
//! the client-side NetSim in both directions.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use zonekeep_client::connection::ws_header_len;
use zonekeep_client::NetSim;
use zonekeep_protocol::delta::{decode_delta_head, DeltaHead};
use zonekeep_protocol::limits::{MAX_REDIRECTS, MAX_SERVER_MESSAGE, PROTOCOL_VERSION};
use zonekeep_protocol::messages::{
    ClientMessage, Hello, Input, KickCode, Ping, ServerMessage, Welcome,
};

use super::schedule::{first_input_at, InputGen};
use super::{micros, BotResult, Pending, Phase, RunShared};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const TAG_DELTA: u8 = 0x82;
const TAG_KICK: u8 = 0x84;

/// Kick codes after which a client comes back (as `zonekeep-client` does). WORLD_HALTED, like
/// INTERNAL_ERROR, is retried with backoff: the lasting world resumes by itself from its last
/// committed save once its store answers. So is CHARACTER_ELSEWHERE: the zone holding the player's
/// character gives it back once it can be asked. CHARACTER_MOVED is final: the character plays
/// elsewhere now, and coming back would take it from there.
pub(crate) fn invites_reconnect(code: KickCode) -> bool {
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

/// A Kick code's name, or its number for codes this build does not know.
pub(crate) fn kick_name(code: KickCode) -> String {
    code.name()
        .map_or_else(|| format!("KICK_{}", code.0), str::to_owned)
}

/// Small buffers: an idle bot must cost little so one process holds many.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_write_buffer_size(1 << 20)
        .max_message_size(Some(MAX_SERVER_MESSAGE))
        .max_frame_size(Some(MAX_SERVER_MESSAGE))
}

/// Connects bot `bot` to `zone` through the entry URL and completes the handshake, following up
/// to [`MAX_REDIRECTS`] Redirects with the same Hello (each counted in `redirects`, whatever the
/// outcome); `resume` = reconnect token. The error is a short reason for the report (Kick code
/// name, `connect`, `timeout`, `ticket`, `closed`, `too_many_redirects`, `redirect_scheme`).
pub(crate) async fn open(
    shared: &RunShared,
    bot: u32,
    zone: &str,
    resume: Option<&[u8]>,
    redirects: &mut u64,
) -> Result<(Ws, Welcome, usize), String> {
    let deadline = (Instant::now() + shared.cfg.handshake_timeout).min(shared.hard_deadline);
    let fut = async {
        let (zone, ticket) = shared.tickets.ticket(bot, zone).await.map_err(|e| {
            tracing::debug!(bot, error = %e, "ticket");
            "ticket".to_owned()
        })?;
        let hello = ClientMessage::Hello(Hello {
            versions: vec![PROTOCOL_VERSION],
            ticket,
            reconnect_token: resume.map(<[u8]>::to_vec).unwrap_or_default(),
            content_version: String::new(),
            resume_from: None,
        })
        .to_bytes()
        .map_err(|_| "encode".to_owned())?;
        let mut url = shared.cfg.zone_url(&zone);
        let mut followed = 0;
        let mut bytes = 0;
        loop {
            let (mut ws, answer, n) = handshake(bot, &url, &hello).await?;
            bytes += n;
            let redirect = match answer {
                ServerMessage::Welcome(w) => {
                    if followed > 0 {
                        shared.saw_owner(&url);
                    }
                    return Ok((ws, w, bytes));
                }
                ServerMessage::Kick(k) => return Err(kick_name(k.code)),
                ServerMessage::Redirect(r) => r,
                _ => return Err("protocol".to_owned()),
            };
            // The host closes after a Redirect; ours is a courtesy.
            let _ = timeout_at(
                (Instant::now() + Duration::from_millis(250)).into(),
                ws.close(None),
            )
            .await;
            if followed >= MAX_REDIRECTS {
                return Err("too_many_redirects".to_owned());
            }
            let Some(next) = redirect.websocket_url() else {
                return Err("redirect_scheme".to_owned());
            };
            followed += 1;
            *redirects += 1;
            url = next.to_owned();
        }
    };
    timeout_at(deadline.into(), fut)
        .await
        .unwrap_or_else(|_| Err("timeout".to_owned()))
}

/// One hop: connects to `url`, sends the encoded Hello and reads the host's first message.
/// Returns the socket, that message and the bytes sent and received.
async fn handshake(
    bot: u32,
    url: &str,
    hello: &[u8],
) -> Result<(Ws, ServerMessage, usize), String> {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(ws_config()), true)
        .await
        .map_err(|e| {
            tracing::debug!(bot, error = %e, "connect");
            "connect".to_owned()
        })?;
    ws.send(Message::binary(hello.to_vec()))
        .await
        .map_err(|_| "connect".to_owned())?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Binary(b))) => {
                return match ServerMessage::decode(&b, None) {
                    Ok(m) => Ok((ws, m, hello.len() + b.len())),
                    Err(_) => Err("protocol".to_owned()),
                };
            }
            Some(Ok(Message::Close(_))) | None => return Err("closed".to_owned()),
            Some(Ok(_)) => {}
            Some(Err(_)) => return Err("closed".to_owned()),
        }
    }
}

/// Messages the NetSim may hold back per direction. Incoming: the bot stops reading the socket
/// while full (backpressure, as a slow network would). Outgoing: further inputs and pings are
/// refused and counted as `outgoing_full`.
const MAX_DELAYED: usize = 4096;

/// A FIFO of messages held back by the NetSim (delivery times never decrease: head-of-line).
#[derive(Debug, Default)]
struct Delayed {
    q: VecDeque<(Instant, Vec<u8>)>,
}

impl Delayed {
    fn due(&self) -> Option<Instant> {
        self.q.front().map(|(t, _)| *t)
    }
}

/// Why a session ended.
enum End {
    Done,
    Dropped,
    Kicked(KickCode),
}

struct Session {
    ws: Ws,
    welcome: Welcome,
    seq: u32,
    last_tick: u64,
    last_patch: Option<Instant>,
    pending: Pending,
}

/// Runs one light bot.
pub async fn run(shared: Arc<RunShared>, index: u32, bot: u32) -> BotResult {
    let mut res = BotResult {
        bot,
        ..BotResult::default()
    };
    let zone = shared.cfg.zones.zone_of(bot);
    shared.wait_for_zone(index).await;
    let first = {
        let Ok(_permit) = shared.join_gate.acquire().await else {
            res.join_error = Some("aborted".into());
            shared.first_join_done(index);
            return res;
        };
        shared.mark_join_start(Instant::now());
        open(&shared, bot, &zone, None, &mut res.redirects).await
    };
    shared.first_join_done(index);
    let (ws, welcome, bytes) = match first {
        Ok(x) => x,
        Err(e) => {
            shared.add(&shared.failed, 1);
            res.join_error = Some(e);
            return res;
        }
    };
    shared.mark_joined(Instant::now());
    res.joined = true;
    res.total_bytes_in += bytes as u64;
    let mut s = Session {
        ws,
        welcome,
        seq: 1,
        last_tick: 0,
        last_patch: None,
        pending: Pending::default(),
    };
    s.last_tick = s.welcome.tick;
    drive(&shared, index, bot, &zone, &mut s, &mut res).await;
    let _ = timeout_at(
        (Instant::now() + Duration::from_secs(1)).into(),
        s.ws.close(None),
    )
    .await;
    res
}

async fn drive(
    shared: &RunShared,
    index: u32,
    bot: u32,
    zone: &str,
    s: &mut Session,
    res: &mut BotResult,
) {
    let cfg = &shared.cfg;
    let mut phase_rx = shared.phase.clone();
    let mut gen = InputGen::new(cfg, bot);
    let interval = cfg.input_interval();
    let ping_every = match &cfg.workload {
        crate::config::Workload::Idle { ping_every } => *ping_every,
        _ => Duration::from_secs(1),
    };
    let now = Instant::now();
    let mut next_input = interval.map(|i| first_input_at(now, i, index, cfg.bots));
    let mut next_ping = now + ping_every;
    let origin = now;
    let simulate = !cfg.netsim.is_off();
    let mut sim_in = NetSim::new(cfg.netsim);
    let mut sim_out = NetSim::new(cfg.netsim);
    let mut inq = Delayed::default();
    let mut outq = Delayed::default();
    let mut in_window = false;
    let mut whole = false;
    shared.add(&shared.connected, 1);
    loop {
        let far = shared.hard_deadline;
        let input_at = next_input.unwrap_or(far);
        let in_due = inq.due().unwrap_or(far);
        let out_due = outq.due().unwrap_or(far);
        let end = tokio::select! {
            biased;
            changed = phase_rx.changed() => {
                let p = if changed.is_ok() { *phase_rx.borrow_and_update() } else { Phase::Done };
                match p {
                    Phase::Measure if !in_window => { in_window = true; whole = true; None }
                    Phase::Done => Some(End::Done),
                    _ => None,
                }
            }
            _ = sleep_until(far.into()) => Some(End::Done),
            _ = sleep_until(in_due.into()), if simulate && in_due < far => {
                match inq.q.pop_front() {
                    Some((_, b)) => on_binary(shared, s, res, &b, in_window),
                    None => None,
                }
            }
            _ = sleep_until(out_due.into()), if simulate && out_due < far => {
                match outq.q.pop_front() {
                    Some((_, b)) => s.ws.send(Message::binary(b)).await.err().map(|_| End::Dropped),
                    None => None,
                }
            }
            msg = s.ws.next(), if inq.q.len() < MAX_DELAYED => match msg {
                Some(Ok(Message::Binary(b))) => {
                    if simulate {
                        let now = Instant::now();
                        let at = sim_in.schedule(micros(origin, now));
                        inq.q.push_back((origin + Duration::from_micros(at), b.to_vec()));
                        None
                    } else {
                        on_binary(shared, s, res, &b, in_window)
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => Some(End::Dropped),
                Some(Ok(_)) => None,
            },
            _ = sleep_until(input_at.into()), if next_input.is_some() => {
                let now = Instant::now();
                next_input = interval.map(|i| input_at + i);
                // A full NetSim queue refuses the input before it takes a sequence number.
                let room = !simulate || outq.q.len() < MAX_DELAYED;
                if !room {
                    res.outgoing_full += 1;
                }
                match if room { gen.next(s.last_tick) } else { None } {
                    Some(input) => {
                        let seq = s.seq;
                        s.seq = s.seq.wrapping_add(1).max(1);
                        match ClientMessage::Input(Input { seq, view_tick: s.last_tick, payload: input.payload }).to_bytes() {
                            Ok(bytes) => {
                                s.pending.push(seq, now);
                                if in_window {
                                    res.window.inputs += 1;
                                    res.window.bytes_out += bytes.len() as u64;
                                }
                                send(s, &mut outq, &mut sim_out, simulate, origin, bytes, &mut res.outgoing_full).await
                            }
                            Err(_) => None,
                        }
                    }
                    None => None,
                }
            }
            _ = sleep_until(next_ping.into()) => {
                next_ping += ping_every;
                let client_time = micros(origin, Instant::now());
                match ClientMessage::Ping(Ping { client_time }).to_bytes() {
                    Ok(bytes) => send(s, &mut outq, &mut sim_out, simulate, origin, bytes, &mut res.outgoing_full).await,
                    Err(_) => None,
                }
            }
        };
        match end {
            None => {}
            Some(End::Done) => break,
            Some(End::Kicked(code)) if !invites_reconnect(code) => {
                whole = false;
                break;
            }
            Some(end @ (End::Dropped | End::Kicked(_))) => {
                whole = false;
                res.drops += 1;
                shared
                    .connected
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                // The zone moved: its new owner waits for the resume, so no backoff first.
                let at_once = matches!(end, End::Kicked(code) if code.resumes_elsewhere());
                if !reconnect(shared, bot, zone, s, res, at_once).await {
                    res.whole_window = false;
                    return;
                }
                shared.add(&shared.connected, 1);
                inq.q.clear();
                outq.q.clear();
            }
        }
    }
    shared
        .connected
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    res.whole_window = in_window && whole;
}

async fn send(
    s: &mut Session,
    outq: &mut Delayed,
    sim: &mut NetSim,
    simulate: bool,
    origin: Instant,
    bytes: Vec<u8>,
    overflow: &mut u64,
) -> Option<End> {
    if simulate {
        if outq.q.len() >= MAX_DELAYED {
            *overflow += 1;
            return None;
        }
        let at = sim.schedule(micros(origin, Instant::now()));
        outq.q
            .push_back((origin + Duration::from_micros(at), bytes));
        return None;
    }
    s.ws.send(Message::binary(bytes))
        .await
        .err()
        .map(|_| End::Dropped)
}

/// Handles one server message; returns how the session ends, if it does.
fn on_binary(
    shared: &RunShared,
    s: &mut Session,
    res: &mut BotResult,
    b: &[u8],
    in_window: bool,
) -> Option<End> {
    let len = b.len() as u64;
    res.total_bytes_in += len;
    shared.add(&shared.bytes_in, len);
    shared.add(&shared.msgs_in, 1);
    let measuring = in_window && shared.phase_now() == Phase::Measure;
    if measuring {
        res.window.bytes_in += len;
        res.window.frame_bytes_in += ws_header_len(b.len(), false);
        res.window.msgs_in += 1;
    }
    match b.first().copied() {
        Some(TAG_DELTA) => {
            let now = Instant::now();
            res.total_deltas += 1;
            res.total_delta_bytes += len;
            let Ok(DeltaHead { tick, ack, .. }) = decode_delta_head(b) else {
                return Some(End::Dropped);
            };
            s.last_tick = tick;
            if measuring {
                res.window.deltas += 1;
                res.window.delta_bytes += len;
                if let Some(prev) = s.last_patch {
                    shared.record_patch_interval(micros(prev, now));
                }
            }
            s.last_patch = Some(now);
            res.last_ack = res.last_ack.max(ack);
            let acked = s.pending.ack(ack, |at| {
                if measuring {
                    shared.record_rtt(micros(at, now));
                }
            });
            if measuring {
                res.window.acked += acked;
            }
            None
        }
        Some(TAG_KICK) => match ServerMessage::decode(b, None) {
            Ok(ServerMessage::Kick(k)) => {
                *res.kicks.entry(kick_name(k.code)).or_insert(0) += 1;
                Some(End::Kicked(k.code))
            }
            _ => Some(End::Dropped),
        },
        // Pong, KnownSetCheck, InputRefused, and Welcome only during handshakes: nothing to track
        // beyond the bytes (this bot keeps no known set and predicts nothing).
        _ => None,
    }
}

/// Reconnects through the entry URL with the reconnect token (`at_once`: the first attempt
/// without backoff); `false` if every attempt failed or the run ended.
async fn reconnect(
    shared: &RunShared,
    bot: u32,
    zone: &str,
    s: &mut Session,
    res: &mut BotResult,
    at_once: bool,
) -> bool {
    let mut backoff = Duration::from_millis(100);
    let mut use_token = !s.welcome.reconnect_token.is_empty();
    for attempt in 0..shared.cfg.reconnect_attempts.max(1) {
        let wait = if at_once && attempt == 0 {
            Duration::ZERO
        } else {
            let b = backoff;
            backoff = (backoff * 2).min(shared.cfg.reconnect_backoff_max);
            b
        };
        if shared.phase_now() == Phase::Done || Instant::now() + wait >= shared.hard_deadline {
            return false;
        }
        tokio::time::sleep(wait).await;
        let token = use_token.then(|| s.welcome.reconnect_token.clone());
        match open(shared, bot, zone, token.as_deref(), &mut res.redirects).await {
            Ok((ws, welcome, bytes)) => {
                res.total_bytes_in += bytes as u64;
                res.reconnects += 1;
                if welcome.player_id == s.welcome.player_id && token.is_some() {
                    res.resumes += 1;
                } else {
                    // A new player: its input sequence starts over.
                    res.fresh_joins += 1;
                    s.seq = 1;
                }
                s.pending.clear();
                s.last_patch = None;
                s.last_tick = welcome.tick;
                s.ws = ws;
                s.welcome = welcome;
                return true;
            }
            Err(e) => {
                tracing::debug!(bot, reason = %e, "reconnect attempt failed");
                // Past the grace window the token is refused: come back as a new player.
                if e == "RECONNECT_REFUSED" {
                    use_token = false;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{invites_reconnect, KickCode};

    #[test]
    fn comes_back_after_the_kicks_the_client_comes_back_after() {
        for code in [
            KickCode::SHUTTING_DOWN,
            KickCode::INTERNAL_ERROR,
            KickCode::WORLD_HALTED,
            KickCode::CHARACTER_ELSEWHERE,
            KickCode::SLOW_CONSUMER,
            KickCode::IDLE_TIMEOUT,
            KickCode::TOO_MANY_REDIRECTS,
            KickCode::ZONE_MOVED,
            KickCode::HOST_FENCED,
        ] {
            assert!(invites_reconnect(code), "{code}");
        }
        for code in [
            KickCode::KICKED,
            KickCode::ZONE_STOPPED,
            KickCode::JOIN_REFUSED,
            KickCode::CONTENT_OUTDATED,
            KickCode::CHARACTER_MOVED,
            KickCode::VERSION_MISMATCH,
        ] {
            assert!(!invites_reconnect(code), "{code}");
        }
    }
}
