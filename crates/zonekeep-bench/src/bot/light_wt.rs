//! The light bot over WebTransport (PROTOCOL.md §1.1): the Hello on a control stream, States in
//! datagrams (only their header is read: tick, base, ack), and Inputs datagrams that carry the
//! newest State tick it applied and its newest input with the unacknowledged ones before it.
//!
//! Its NetSim (`--net-*`) treats datagrams as datagrams: each is lost with the loss probability or
//! delayed by its own jitter, so they reorder; control-stream messages (Pings, Pongs, Kicks) pass
//! undelayed. Against the WebSocket light bot it leaves out reconnecting (a drop ends the bot,
//! counted in `drops`). Redirects name WebSocket URLs, so a bot redirected ends as
//! `redirect_scheme`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::{sleep_until, timeout_at};
use wtransport::{Connection, Endpoint as QuicEndpoint, RecvStream, SendStream};
use zonekeep_client::connection::webtransport::{discover, read_message, write_message, Endpoint};
use zonekeep_client::{NetSim, NetSimConfig};
use zonekeep_protocol::delta::{decode_delta_head, DeltaHead};
use zonekeep_protocol::limits::{DATAGRAM_VERSION, MAX_DATAGRAM_INPUTS};
use zonekeep_protocol::messages::{
    tag, ClientMessage, Hello, Input, Inputs, KickCode, Ping, ServerMessage, Welcome,
};

use super::light::kick_name;
use super::schedule::{first_input_at, InputGen};
use super::{micros, BotResult, Pending, Phase, RunShared};
use crate::config::StateAcks;

/// Asks the host (`GET /webtransport`) once per run.
async fn endpoint(shared: &RunShared) -> Result<Endpoint, String> {
    shared
        .webtransport
        .get_or_init(|| async { discover(&shared.cfg.url).await.map_err(|e| e.to_string()) })
        .await
        .clone()
}

/// An open session: the connection and its control stream.
struct Session {
    conn: Connection,
    send: SendStream,
    recv: RecvStream,
    welcome: Welcome,
}

/// Opens a session to `zone` and completes the handshake; the error is a short reason.
async fn open(shared: &RunShared, bot: u32, zone: &str) -> Result<(Session, usize), String> {
    let deadline = (Instant::now() + shared.cfg.handshake_timeout).min(shared.hard_deadline);
    let fut = async {
        let ep = endpoint(shared).await?;
        let (zone, ticket) = shared
            .tickets
            .ticket(bot, zone)
            .await
            .map_err(|_| "ticket".to_owned())?;
        let client = QuicEndpoint::client(ep.client_config()).map_err(|_| "connect".to_owned())?;
        let conn = client
            .connect(format!("{}/zones/{zone}", ep.url))
            .await
            .map_err(|e| {
                tracing::debug!(bot, error = %e, "webtransport connect");
                "connect".to_owned()
            })?;
        let (mut send, mut recv) = conn
            .open_bi()
            .await
            .map_err(|_| "connect".to_owned())?
            .await
            .map_err(|_| "connect".to_owned())?;
        let hello = ClientMessage::Hello(Hello {
            versions: vec![DATAGRAM_VERSION],
            ticket,
            reconnect_token: Vec::new(),
            content_version: String::new(),
            resume_from: None,
        })
        .to_bytes()
        .map_err(|_| "encode".to_owned())?;
        write_message(&mut send, &hello)
            .await
            .map_err(|_| "closed".to_owned())?;
        let first = read_message(&mut recv)
            .await
            .map_err(|()| "closed".to_owned())?;
        match ServerMessage::decode(&first, None) {
            Ok(ServerMessage::Welcome(welcome)) => Ok((
                Session {
                    conn,
                    send,
                    recv,
                    welcome,
                },
                hello.len() + first.len(),
            )),
            Ok(ServerMessage::Kick(k)) => Err(kick_name(k.code)),
            Ok(ServerMessage::Redirect(_)) => Err("redirect_scheme".to_owned()),
            _ => Err("protocol".to_owned()),
        }
    };
    timeout_at(deadline.into(), fut)
        .await
        .unwrap_or_else(|_| Err("timeout".to_owned()))
}

/// Runs one WebTransport light bot.
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
        open(&shared, bot, &zone).await
    };
    shared.first_join_done(index);
    let (mut s, bytes) = match first {
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
    drive(&shared, index, bot, &mut s, &mut res).await;
    s.conn.close(0u32.into(), b"");
    res
}

/// What the loop saw.
enum Seen {
    Datagram(Vec<u8>),
    Stream(Option<Vec<u8>>),
    /// A datagram the NetSim took (held or lost).
    Held,
    Gone,
}

/// Datagrams the NetSim holds per direction at most; more are dropped and counted.
const MAX_HELD: usize = 4096;

/// Datagrams held by the NetSim: `(due µs, order, bytes)`, soonest first.
type Held = std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, Vec<u8>)>>;

/// When the soonest held datagram is due.
fn held_due(held: &Held, origin: Instant) -> Option<Instant> {
    held.peek()
        .map(|std::cmp::Reverse((due, _, _))| origin + Duration::from_micros(*due))
}

async fn drive(shared: &RunShared, index: u32, bot: u32, s: &mut Session, res: &mut BotResult) {
    let cfg = &shared.cfg;
    let mut phase_rx = shared.phase.clone();
    let mut gen = InputGen::new(cfg, bot);
    let interval = cfg.input_interval();
    let now = Instant::now();
    let mut next_input = interval.map(|i| first_input_at(now, i, index, cfg.bots));
    let mut next_ping = now + Duration::from_secs(1);
    let origin = now;
    let mut in_window = false;
    let mut whole = false;
    let mut seq = 1u32;
    let mut newest = 0u64;
    let mut last_tick = s.welcome.tick;
    let mut last_patch: Option<Instant> = None;
    let mut pending = Pending::default();
    // Inputs no State has acknowledged yet, newest last: each Inputs datagram repeats them.
    let mut unacked: VecDeque<Input> = VecDeque::new();
    let mut acked_sent = 0u64;
    // A held acknowledgement goes alone at this instant unless an input carries it first.
    let mut ack_due: Option<Instant> = None;
    let simulate = !cfg.netsim.is_off();
    let mut sim_in = NetSim::new(NetSimConfig {
        seed: cfg.netsim.seed.wrapping_add(u64::from(bot)),
        ..cfg.netsim
    });
    let mut sim_out = NetSim::new(NetSimConfig {
        seed: cfg
            .netsim
            .seed
            .wrapping_add(u64::from(bot))
            .wrapping_mul(31),
        ..cfg.netsim
    });
    let (mut held_in, mut held_out) = (Held::new(), Held::new());
    let mut order = 0u64;
    shared.add(&shared.connected, 1);
    loop {
        let far = shared.hard_deadline;
        let input_at = next_input.unwrap_or(far);
        let out_due = held_due(&held_out, origin);
        let mut datagram_out: Option<Vec<Input>> = None;
        tokio::select! {
            biased;
            changed = phase_rx.changed() => {
                let p = if changed.is_ok() { *phase_rx.borrow_and_update() } else { Phase::Done };
                match p {
                    Phase::Measure if !in_window => { in_window = true; whole = true; }
                    Phase::Done => break,
                    _ => {}
                }
                continue;
            }
            _ = sleep_until(far.into()) => break,
            _ = sleep_until(ack_due.unwrap_or(far).into()), if ack_due.is_some() => {
                ack_due = None;
                if newest > acked_sent {
                    acked_sent = newest;
                    datagram_out = Some(unacked.iter().cloned().collect());
                }
            }
            _ = sleep_until(out_due.unwrap_or(far).into()), if out_due.is_some() => {
                let now = micros(origin, Instant::now());
                while held_out.peek().is_some_and(|std::cmp::Reverse((due, _, _))| *due <= now) {
                    if let Some(std::cmp::Reverse((_, _, bytes))) = held_out.pop() {
                        if s.conn.send_datagram(bytes).is_err() {
                            res.outgoing_full += 1;
                        }
                    }
                }
                continue;
            }
            seen = async {
                let in_due = held_due(&held_in, origin);
                tokio::select! {
                    biased;
                    _ = sleep_until(in_due.unwrap_or(far).into()), if in_due.is_some() => {
                        match held_in.pop() {
                            Some(std::cmp::Reverse((_, _, b))) => Seen::Datagram(b),
                            None => Seen::Held,
                        }
                    }
                    d = s.conn.receive_datagram() => match d {
                        Ok(d) if simulate => {
                            if let Some(due) = sim_in.schedule_datagram(micros(origin, Instant::now())) {
                                if held_in.len() < MAX_HELD {
                                    order += 1;
                                    held_in.push(std::cmp::Reverse((due, order, d.payload().to_vec())));
                                } else {
                                    res.netsim_overflow += 1;
                                }
                            }
                            Seen::Held
                        }
                        Ok(d) => Seen::Datagram(d.payload().to_vec()),
                        Err(_) => Seen::Gone,
                    },
                    m = read_message(&mut s.recv) => Seen::Stream(m.ok().map(|b| b.to_vec())),
                }
            } => {
                let measuring = in_window && shared.phase_now() == Phase::Measure;
                let b = match seen {
                    Seen::Held => continue,
                    Seen::Gone | Seen::Stream(None) => {
                        res.drops += 1;
                        whole = false;
                        break;
                    }
                    Seen::Datagram(b) | Seen::Stream(Some(b)) => b,
                };
                let len = b.len() as u64;
                res.total_bytes_in += len;
                shared.add(&shared.bytes_in, len);
                shared.add(&shared.msgs_in, 1);
                if measuring {
                    res.window.bytes_in += len;
                    res.window.msgs_in += 1;
                }
                match b.first().copied() {
                    Some(tag::STATE | tag::DELTA) => {
                        let now = Instant::now();
                        res.total_deltas += 1;
                        res.total_delta_bytes += len;
                        let Ok(DeltaHead { tick, ack, .. }) = decode_delta_head(&b) else {
                            res.drops += 1;
                            whole = false;
                            break;
                        };
                        if measuring {
                            res.window.deltas += 1;
                            res.window.delta_bytes += len;
                            if let Some(prev) = last_patch {
                                shared.record_patch_interval(micros(prev, now));
                            }
                        }
                        last_patch = Some(now);
                        // A late State changes nothing this bot holds; the newest is what it acks.
                        if tick > newest {
                            newest = tick;
                            last_tick = tick;
                        }
                        res.last_ack = res.last_ack.max(ack);
                        let done = pending.ack(ack, |at| {
                            if measuring {
                                shared.record_rtt(micros(at, now));
                            }
                        });
                        if measuring {
                            res.window.acked += done;
                        }
                        while unacked.front().is_some_and(|i| i.seq <= ack) {
                            unacked.pop_front();
                        }
                        // At most one acknowledgement per State tick (or none of its own,
                        // measuring what they cost: the next input carries it).
                        if newest > acked_sent {
                            match shared.cfg.state_acks {
                                StateAcks::EveryState => {
                                    acked_sent = newest;
                                    datagram_out = Some(unacked.iter().cloned().collect());
                                }
                                StateAcks::Held => {
                                    ack_due.get_or_insert(now + zonekeep_client::connection::webtransport::STATE_ACK_HOLD);
                                }
                                StateAcks::WithInputs => {}
                            }
                        }
                    }
                    Some(tag::KICK) => {
                        if let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(&b, None) {
                            *res.kicks.entry(kick_name(k.code)).or_insert(0) += 1;
                            if k.code != KickCode::SHUTTING_DOWN {
                                res.drops += 1;
                            }
                        }
                        whole = false;
                        break;
                    }
                    _ => {}
                }
            }
            _ = sleep_until(input_at.into()), if next_input.is_some() => {
                next_input = interval.map(|i| input_at + i);
                if let Some(input) = gen.next(last_tick) {
                    let this = seq;
                    seq = seq.wrapping_add(1).max(1);
                    pending.push(this, Instant::now());
                    if unacked.len() >= MAX_DATAGRAM_INPUTS {
                        unacked.pop_front();
                    }
                    unacked.push_back(Input { seq: this, view_tick: last_tick, payload: input.payload });
                    if in_window {
                        res.window.inputs += 1;
                    }
                    datagram_out = Some(unacked.iter().cloned().collect());
                    acked_sent = newest;
                    ack_due = None;
                }
            }
            _ = sleep_until(next_ping.into()) => {
                next_ping += Duration::from_secs(1);
                let client_time = micros(origin, Instant::now());
                if let Ok(bytes) = (ClientMessage::Ping(Ping { client_time })).to_bytes() {
                    if write_message(&mut s.send, &bytes).await.is_err() {
                        res.drops += 1;
                        whole = false;
                        break;
                    }
                }
            }
        }
        if let Some(inputs) = datagram_out {
            let msg = ClientMessage::Inputs(Inputs {
                state_ack: newest,
                inputs,
            });
            if let Ok(bytes) = msg.to_bytes() {
                if in_window {
                    res.window.bytes_out += bytes.len() as u64;
                }
                if simulate {
                    if let Some(due) = sim_out.schedule_datagram(micros(origin, Instant::now())) {
                        if held_out.len() < MAX_HELD {
                            order += 1;
                            held_out.push(std::cmp::Reverse((due, order, bytes)));
                        } else {
                            res.netsim_overflow += 1;
                        }
                    }
                } else if s.conn.send_datagram(bytes).is_err() {
                    res.outgoing_full += 1;
                }
            }
        }
    }
    shared
        .connected
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    res.whole_window = in_window && whole;
}
