//! What an attached client sends after its Hello: inputs into the zone's inbox, Pings and
//! Resyncs, each under the connection's rate limits.

use std::num::NonZeroU32;
use std::time::Duration;

use bytes::Bytes;
use governor::{Quota, RateLimiter};
use zonekeep_protocol::messages::ClientMessage;

use super::Attached;
use crate::error::SessionError;
use crate::host::Shared;
use crate::sim::{pong_frame, InboxInput, JoinFailure, SimCommand};

pub(crate) type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    governor::clock::DefaultClock,
>;

/// A connection's rate limits: `inputs`, `pings` and `datagrams` drop the excess, `abuse` kicks
/// sustained excess of any.
pub(crate) struct Limits {
    inputs: Limiter,
    pings: Limiter,
    /// Datagrams that bring no new input (acknowledgements, repeats): twice the input rate.
    pub(crate) datagrams: Limiter,
    pub(crate) abuse: Limiter,
}

/// A limiter of `rate` per second in bursts of `burst`.
fn limiter(rate: f64, burst: u32) -> Limiter {
    let period = Duration::from_secs_f64(1.0 / rate);
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    RateLimiter::direct(
        Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst),
    )
}

impl Limits {
    /// The host's configured rates.
    pub(crate) fn new(cfg: &crate::config::ServerConfig) -> Self {
        Self {
            inputs: limiter(cfg.input_rate, cfg.input_burst),
            pings: limiter(cfg.ping_rate, cfg.ping_burst),
            datagrams: limiter(cfg.input_rate * 2.0, cfg.input_burst.saturating_mul(2)),
            abuse: limiter(cfg.abuse_rate, cfg.abuse_burst),
        }
    }
}

impl Limits {
    /// Whether a Ping is answered: `Ok(false)` over the connection's ping rate (it goes
    /// without a Pong), an error when the excess is sustained. `limited` counts a Ping over the
    /// rate.
    pub(crate) fn ping(&self, limited: impl FnOnce()) -> Result<bool, SessionError> {
        if self.pings.check().is_ok() {
            return Ok(true);
        }
        limited();
        if self.abuse.check().is_err() {
            return Err(SessionError::RateLimited);
        }
        Ok(false)
    }
}

/// Act on one client message after the handshake; a Ping's answer is returned for the writer.
pub(crate) fn handle_message(
    shared: &Shared,
    a: &Attached,
    limits: &Limits,
    bytes: &[u8],
) -> Result<Option<Bytes>, SessionError> {
    // A host whose lease lapsed (paused, cut off from its store) acts for no zone: the client is
    // sent to resume elsewhere before anything it sent is looked at — after a pause, what it sent
    // meanwhile arrives as one burst that is no fault of the client's.
    if shared.fleet().is_some_and(|f| !f.gate.holds_now()) {
        return Err(JoinFailure::Fenced.into());
    }
    match ClientMessage::decode(bytes) {
        Ok(ClientMessage::Input(i)) => {
            accept_input(shared, a, limits, i)?;
            Ok(None)
        }
        Ok(ClientMessage::Ping(p)) => {
            // A Pong costs the host a write: a client may not make it answer without bound.
            if !limits.ping(|| shared.metrics.ping_rate_limited())? {
                return Ok(None);
            }
            let now_us = u64::try_from(shared.clock.now().as_micros()).unwrap_or(u64::MAX);
            Ok(Some(pong_frame(p.client_time, now_us, a.entry.tick())))
        }
        Ok(ClientMessage::Resync(r)) => {
            // A Resync costs the zone a BASELINE: it spends an input token, so a client cannot
            // ask faster than it may send inputs (and the zone honours one a second).
            if limits.inputs.check().is_err() {
                if limits.abuse.check().is_err() {
                    return Err(SessionError::RateLimited);
                }
                return Ok(None);
            }
            tracing::debug!(zone = %a.entry.zone_id, player = %a.player, tick = r.tick, "client asked for a BASELINE");
            let cmd = SimCommand::Resync {
                zone_id: a.entry.zone_id.clone(),
                player: a.player,
                conn_id: a.conn_id,
            };
            // A full command queue drops it: the next failed check asks again.
            let _ = shared.pool.send(a.entry.thread, cmd);
            Ok(None)
        }
        Ok(ClientMessage::Hello(_)) => Err(SessionError::Protocol("Hello out of place".into())),
        Ok(ClientMessage::Inputs(_)) => Err(SessionError::Protocol(
            "Inputs is a WebTransport datagram, not a WebSocket message".into(),
        )),
        Ok(ClientMessage::Chat(c)) => chat(a, c.reference, |chat, m| chat.say(m, c)),
        Ok(ClientMessage::ChatReport(r)) => chat(a, r.reference, |chat, m| chat.report(m, r)),
        Ok(ClientMessage::ChatHistory(h)) => chat(a, h.reference, |chat, m| chat.history(m, h)),
        Err(e) => Err(SessionError::Protocol(format!("undecodable message: {e}"))),
    }
}

/// A chat message (version 11): handed to chat, whose immediate answer (a refusal) goes back
/// to the client. A session of an older version that sends one breaks the protocol.
fn chat(
    a: &Attached,
    reference: u32,
    act: impl FnOnce(
        &std::sync::Arc<crate::chat::Chat>,
        &std::sync::Arc<crate::chat::hub::Member>,
    ) -> Option<Bytes>,
) -> Result<Option<Bytes>, SessionError> {
    if a.version < zonekeep_protocol::messages::CHAT_PROTOCOL {
        return Err(SessionError::Protocol(format!(
            "chat messages need protocol version {} (this session speaks {})",
            zonekeep_protocol::messages::CHAT_PROTOCOL,
            a.version
        )));
    }
    match &a.chat {
        Some(seat) => Ok(act(seat.chat(), &seat.member)),
        None => Ok(Some(crate::chat::reply(
            reference,
            zonekeep_protocol::messages::ChatReplyCode::NOT_ALLOWED,
            0,
            "this host keeps no chat (it runs without a store)",
        ))),
    }
}

/// One input from the client, over its rate or into the zone's inbox (WebSocket Input and the
/// inputs of a WebTransport Inputs datagram alike).
pub(crate) fn accept_input(
    shared: &Shared,
    a: &Attached,
    limits: &Limits,
    i: zonekeep_protocol::messages::Input,
) -> Result<(), SessionError> {
    if limits.inputs.check().is_err() {
        a.entry.rate_limited.inc();
        if limits.abuse.check().is_err() {
            return Err(SessionError::RateLimited);
        }
        return Ok(());
    }
    let input = InboxInput {
        player: a.player,
        seq: i.seq,
        view_tick: u32::try_from(i.view_tick).unwrap_or(u32::MAX),
        payload: Bytes::from(i.payload),
    };
    if !offer_input(&a.entry.inbox, shared.config.zone_inbox, input) {
        a.entry.inbox_full.inc();
    }
    Ok(())
}

/// Queue an input for the zone unless its inbox already holds `cap`; false when refused.
///
/// The inbox is an unbounded (linked-block) channel bounded here: a preallocated bounded channel
/// of the default 8,192 slots costs ~460 kB per zone up front, ~9 kB per connection at 50 players
/// per zone. The length check and the send are not atomic, so concurrent senders (one per I/O
/// worker thread) may overshoot `cap` by at most their number.
fn offer_input(
    inbox: &crossbeam_channel::Sender<InboxInput>,
    cap: usize,
    input: InboxInput,
) -> bool {
    inbox.len() < cap && inbox.try_send(input).is_ok()
}

/// Tell the zone a connection's round trip. NetSim (dev) delays messages but not the WebSocket
/// Ping and Pong (nor QUIC's own packets, whose round trip a WebTransport session reports), so
/// what it added is added: per direction the longest delay it applied to this connection since
/// the last report (a simulated loss holds every later message back until the retransmission),
/// or its mean one-way delay when it held nothing that way. Lag compensation then allows for the
/// network the player actually plays over. A full command queue drops it; the next measurement
/// brings another.
pub(crate) fn report_round_trip(shared: &Shared, a: &Attached, measured: Duration) {
    let added = a.netsim.take_added_round_trip();
    let cmd = SimCommand::RoundTrip {
        zone_id: a.entry.zone_id.clone(),
        player: a.player,
        conn_id: a.conn_id,
        rtt: measured + added,
    };
    let _ = shared.pool.send(a.entry.thread, cmd);
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonekeep_core::PlayerId;

    fn input(seq: u32) -> InboxInput {
        InboxInput {
            player: PlayerId(1),
            seq,
            view_tick: 0,
            payload: Bytes::new(),
        }
    }

    #[test]
    fn the_inbox_bound_refuses_the_excess_and_frees_as_the_zone_drains() {
        let (tx, rx) = crossbeam_channel::unbounded();
        assert!(offer_input(&tx, 3, input(1)));
        assert!(offer_input(&tx, 3, input(2)));
        assert!(offer_input(&tx, 3, input(3)));
        assert!(!offer_input(&tx, 3, input(4)));
        assert_eq!(rx.len(), 3);
        assert_eq!(rx.try_recv().map(|i| i.seq).ok(), Some(1));
        assert!(offer_input(&tx, 3, input(5)));
        let seqs: Vec<u32> = rx.try_iter().map(|i| i.seq).collect();
        assert_eq!(seqs, vec![2, 3, 5]);
        drop(rx);
        assert!(
            !offer_input(&tx, 3, input(6)),
            "a stopped zone takes nothing"
        );
    }
}
