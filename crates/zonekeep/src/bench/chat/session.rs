//! One session of `bench chat`: it joins (a WebSocket, a Hello offering version 11, the
//! Welcome), then reads (every chat line and refusal, Pings answered) and writes (Pongs,
//! keep-alive Pings, and as a sender its lines at its rate through the window) until the bench
//! stops it.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::{timeout, Interval, MissedTickBehavior};
use zonekeep_core::{Claims, Role};
use zonekeep_protocol::messages::{
    tag, Chat, ClientMessage, Hello, KickCode, Ping, ServerMessage, CHAT_PROTOCOL,
};
use zonekeep_server::ticket::{mint, unix_now, MintRequest};

use super::ws::{self, Incoming};
use super::{Ctx, Spec, JOIN_TIMEOUT};

/// Keep-alive Pings (the host's idle timeout is 30 s by default).
const PING_EVERY: Duration = Duration::from_secs(5);
/// Ticket lifetime: well under the host's default maximum of 10 minutes.
const TICKET_TTL_SECS: u64 = 300;

/// What one session's reader saw.
#[derive(Default)]
pub(super) struct Seen {
    /// It heard its zone channel's history: live lines follow.
    pub(super) ready: bool,
    /// This run's lines heard live on its zone's channel: `(sender, n)`.
    pub(super) heard: HashSet<(u32, u32)>,
    pub(super) latency_us: Vec<u64>,
    pub(super) duplicates: u64,
    pub(super) out_of_order: u64,
    /// This run's lines heard in another zone (or another zone's lines heard here).
    pub(super) misrouted: u64,
    /// The refs its ChatReplies answered, and their codes.
    pub(super) refused_refs: HashSet<u32>,
    pub(super) refused: BTreeMap<String, u64>,
    /// Why it ended before the bench closed it.
    pub(super) ended: Option<String>,
}

/// One session's end.
pub(super) struct Outcome {
    pub(super) spec: Spec,
    /// Why it could not join.
    pub(super) failed: Option<String>,
    pub(super) seen: Seen,
    pub(super) sent: u32,
}

/// How a session hears from the bench: where it says it is ready (once), when to start talking
/// (the first instant of the window) and when to stop.
pub(super) struct Wires {
    pub(super) ready: Option<mpsc::UnboundedSender<()>>,
    pub(super) go: watch::Receiver<Option<Instant>>,
    pub(super) stop: watch::Receiver<bool>,
}

impl Wires {
    fn said_ready(&mut self) {
        if let Some(tx) = self.ready.take() {
            let _ = tx.send(());
        }
    }
}

/// One session: joins, then reads and writes until the bench stops it.
pub(super) async fn session(
    ctx: Arc<Ctx>,
    spec: Spec,
    join: Arc<Semaphore>,
    mut wires: Wires,
) -> Outcome {
    let opened = {
        let _permit = join.acquire().await;
        timeout(JOIN_TIMEOUT, open(&ctx, &spec))
            .await
            .unwrap_or_else(|_| Err("no Welcome in time".into()))
    };
    let (reader, writer) = match opened {
        Ok(halves) => halves,
        Err(why) => {
            wires.said_ready();
            return Outcome {
                spec,
                failed: Some(why),
                seen: Seen::default(),
                sent: 0,
            };
        }
    };
    let (pong_tx, pong_rx) = mpsc::channel(16);
    let go = wires.go.clone();
    let stop = wires.stop.clone();
    let (mut seen, (sent, failed_write)) = tokio::join!(
        read(reader, &ctx, &spec, pong_tx, &mut wires),
        write(writer, &ctx, &spec, pong_rx, go, stop),
    );
    if let Some(w) = failed_write {
        let read = seen.ended.take().unwrap_or_else(|| "-".into());
        seen.ended = Some(format!("writing failed ({w}); then reading: {read}"));
    }
    if seen.ended.is_some() {
        ctx.live.ended.fetch_add(1, Ordering::Relaxed);
    }
    Outcome {
        spec,
        failed: None,
        seen,
        sent,
    }
}

/// Connects, says Hello and reads the Welcome; the error is a short reason for the report.
async fn open(ctx: &Ctx, spec: &Spec) -> Result<(ws::Reader, ws::Writer), String> {
    let zone = &ctx.zones[spec.zone];
    let mut claims = Claims::new();
    if let Some(kind) = &ctx.kind {
        claims.insert("kind".into(), Value::from(kind.clone()));
    }
    let req = MintRequest {
        sub: spec.principal.clone(),
        zone: zone.clone(),
        role: Role::Player,
        ttl_secs: TICKET_TTL_SECS,
        params: None,
        claims,
    };
    let ticket = mint(&ctx.key, &req, unix_now()).map_err(|e| format!("mint: {e}"))?;
    let hello = ClientMessage::Hello(Hello {
        versions: vec![CHAT_PROTOCOL],
        ticket,
        reconnect_token: Vec::new(),
        content_version: String::new(),
        resume_from: None,
    })
    .to_bytes()
    .map_err(|e| format!("hello: {e}"))?;
    let path = format!("/zones/{}", crate::bench::http::enc(zone));
    let (mut rd, mut wr) = ws::connect(&ctx.authority, &path).await?;
    wr.binary(&hello).await?;
    loop {
        match rd.next().await? {
            Incoming::Ping(p) => wr.pong(&p).await?,
            Incoming::Close(code) => {
                return Err(format!("closed (code {code:?}) before a Welcome"))
            }
            Incoming::Data(b) => {
                return match ServerMessage::decode(&b, None) {
                    Ok(ServerMessage::Welcome(w)) if w.version >= CHAT_PROTOCOL => Ok((rd, wr)),
                    Ok(ServerMessage::Welcome(w)) => {
                        Err(format!("welcomed at version {}", w.version))
                    }
                    Ok(ServerMessage::Kick(k)) => Err(kick_text(k.code, &k.reason)),
                    Ok(ServerMessage::Redirect(r)) => Err(format!(
                        "redirected to {} (bench chat loads one host: give its URL)",
                        r.url
                    )),
                    Ok(_) => Err("a message before the Welcome".into()),
                    Err(e) => Err(format!("undecodable answer to Hello: {e}")),
                };
            }
        }
    }
}

/// `"NAME: reason"` of a Kick.
fn kick_text(code: KickCode, reason: &str) -> String {
    let name = code
        .name()
        .map_or_else(|| format!("KICK_{}", code.0), str::to_owned);
    format!("{name}: {reason}")
}

/// Reads until the bench stops: answers Pings (through the writer), tells when the history
/// came, and records every chat line and refusal.
async fn read(
    mut rd: ws::Reader,
    ctx: &Ctx,
    spec: &Spec,
    pongs: mpsc::Sender<Vec<u8>>,
    wires: &mut Wires,
) -> Seen {
    let mut seen = Seen::default();
    let own = &ctx.channels[spec.zone];
    let mut last_seq = 0u64;
    let mut stop = wires.stop.clone();
    loop {
        let next = tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            m = rd.next() => m,
        };
        let b = match next {
            Ok(Incoming::Data(b)) => b,
            Ok(Incoming::Ping(p)) => {
                // A full queue means the writer is stuck: the host pings again.
                let _ = pongs.try_send(p);
                continue;
            }
            // A Close heard after this end sent its own is the host's answer to it: the end the
            // bench asked for, not an early one (the writer closes only once the bench stops,
            // or after a failed write, which the session reports on its own).
            Ok(Incoming::Close(_)) if rd.closing() => break,
            Ok(Incoming::Close(code)) => {
                let at = ctx.origin.elapsed().as_secs_f64();
                seen.ended.get_or_insert_with(|| {
                    format!("closed by the host (unasked, code {code:?}) at {at:.1} s")
                });
                break;
            }
            Err(e) => {
                seen.ended.get_or_insert(e);
                break;
            }
        };
        match b.first().copied() {
            Some(tag::CHAT_LINES) => {
                let Ok(ServerMessage::ChatLines(lines)) = ServerMessage::decode(&b, None) else {
                    seen.ended = Some("an undecodable ChatLines".into());
                    break;
                };
                if lines.history {
                    if lines.channel == *own && !seen.ready {
                        seen.ready = true;
                        ctx.live.ready.fetch_add(1, Ordering::Relaxed);
                        wires.said_ready();
                    }
                    continue;
                }
                let now = ctx.now_us();
                for line in &lines.lines {
                    let Some((s, n, t)) = ctx.parse(&line.body) else {
                        continue;
                    };
                    if lines.channel != *own || s as usize / ctx.senders != spec.zone {
                        seen.misrouted += 1;
                        continue;
                    }
                    ctx.live.delivered.fetch_add(1, Ordering::Relaxed);
                    if spec.sender.is_some_and(|(g, _)| g == s) {
                        ctx.live.kept.fetch_add(1, Ordering::Relaxed);
                    }
                    seen.latency_us.push(now.saturating_sub(t));
                    let fresh = seen.heard.insert((s, n));
                    if !fresh {
                        seen.duplicates += 1;
                    } else if line.seq <= last_seq {
                        seen.out_of_order += 1;
                    }
                    last_seq = last_seq.max(line.seq);
                }
            }
            Some(tag::CHAT_REPLY) => {
                if let Ok(ServerMessage::ChatReply(r)) = ServerMessage::decode(&b, None) {
                    ctx.live.refused.fetch_add(1, Ordering::Relaxed);
                    seen.refused_refs.insert(r.reference);
                    *seen.refused.entry(r.code.to_string()).or_default() += 1;
                }
            }
            Some(tag::KICK) => {
                if let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(&b, None) {
                    seen.ended = Some(format!("kicked {}", kick_text(k.code, &k.reason)));
                }
            }
            _ => {}
        }
    }
    if !seen.ready {
        // Said only once: a session that ended before its history is no longer waited for.
        wires.said_ready();
    }
    seen
}

/// Until the bench says stop (or is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The first instant of the window, once the bench gives it (`None`: the bench is gone).
async fn started(go: &mut watch::Receiver<Option<Instant>>) -> Option<Instant> {
    go.wait_for(Option::is_some).await.ok().and_then(|t| *t)
}

/// The next tick of `sends`, never when there is none.
async fn tick(sends: &mut Option<Interval>) {
    match sends {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Writes until the bench stops or the reader ended: Pongs, keep-alive Pings, and as a sender
/// its lines through the window. Answers how many lines it sent, and the error of a write that
/// failed.
async fn write(
    mut wr: ws::Writer,
    ctx: &Ctx,
    spec: &Spec,
    mut pongs: mpsc::Receiver<Vec<u8>>,
    mut go: watch::Receiver<Option<Instant>>,
    mut stop: watch::Receiver<bool>,
) -> (u32, Option<String>) {
    let ping_bytes = ClientMessage::Ping(Ping { client_time: 0 })
        .to_bytes()
        .unwrap_or_default();
    let mut ping = tokio::time::interval_at((Instant::now() + PING_EVERY).into(), PING_EVERY);
    let mut sends: Option<Interval> = None;
    let mut until = None;
    let mut waiting = spec.sender.is_some();
    let mut n = 0u32;
    loop {
        let wrote = tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            p = pongs.recv() => match p {
                Some(p) => wr.pong(&p).await,
                None => return (n, None),
            },
            t0 = started(&mut go), if waiting => {
                waiting = false;
                if let (Some(t0), Some((_, phase))) = (t0, spec.sender) {
                    let mut i = tokio::time::interval_at((t0 + phase).into(), ctx.period);
                    i.set_missed_tick_behavior(MissedTickBehavior::Delay);
                    sends = Some(i);
                    until = Some(t0 + ctx.window);
                }
                Ok(())
            }
            _ = tick(&mut sends) => {
                if until.is_some_and(|u| Instant::now() >= u) {
                    sends = None;
                    continue;
                }
                let Some((g, _)) = spec.sender else { continue };
                n += 1;
                let chat = ClientMessage::Chat(Chat {
                    reference: n,
                    channel: ctx.channels[spec.zone].clone(),
                    body: ctx.body(g, n),
                });
                ctx.live.sent.fetch_add(1, Ordering::Relaxed);
                match chat.to_bytes() {
                    Ok(bytes) => wr.binary(&bytes).await,
                    Err(e) => Err(format!("encoding a Chat: {e}")),
                }
            }
            _ = ping.tick() => wr.binary(&ping_bytes).await,
        };
        if let Err(e) = wrote {
            // The reader sees the socket end, and the report says both.
            wr.close().await;
            return (n, Some(e));
        }
    }
    wr.close().await;
    (n, None)
}
