//! Reconnecting: backoff, the token within the grace window, the fresh-ticket fallback, and
//! installing the new socket. Every attempt starts at the entry URL (`Driver::url`) and follows
//! Redirects to the zone's current owner; when the entry host cannot be reached, the attempt goes
//! on through the entry URLs the last Welcome listed (PROTOCOL.md §5.3.1), in order.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::RngCore;
use tokio::sync::mpsc;
use zonekeep_protocol::messages::{
    ClientMessage, Hello, KickCode, ResumeFrom, Welcome, ENTRIES_PROTOCOL, RESUME_FROM_VERSION,
};
use zonekeep_protocol::mirror::Mirror;

use super::{final_kick, invites_reconnect, ticket_expired, ticket_key_refused, Driver, Flow};
use crate::clock::ClockSync;
use crate::connection::counters::add;
use crate::connection::link::Link;
use crate::connection::socket;
use crate::connection::{CloseReason, Event, Outgoing};
use crate::error::ClientError;

/// Inputs queued during an outage that are still sent after a resume (the newest ones), at most.
const RESUME_BACKLOG: usize = 16;

/// Unacknowledged inputs a connection keeps to send again after a resume, at most.
pub(super) const UNACKED_KEPT: usize = 24;

/// Inputs sent at once after a resume — the unacknowledged ones first, then the newest of those
/// queued during the outage — at most: under the host's default input burst of 30 (PROTOCOL.md
/// §4.6), so none is dropped for its rate.
const RESUME_BURST: usize = 28;

impl Driver {
    pub(super) fn backoff(&mut self, attempt: u32) -> Duration {
        let p = &self.opts.reconnect;
        let base = p
            .backoff_min
            .saturating_mul(2u32.saturating_pow(attempt.min(30)))
            .min(p.backoff_max);
        let unit = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        base.mul_f64(0.5 + 0.5 * unit)
    }

    /// Reconnects: with the token while the grace window lasts and the host accepts it, else with a
    /// fresh ticket as a new player. A ticket refused on the way (expired, replayed, or signed with a
    /// key the host no longer has, as after a restart with a new key) is replaced by a fresh one
    /// while the token is still tried; a fresh ticket refused for its signature ends the connection,
    /// and so does a Redirect to a URL that is not a WebSocket URL. `moved`: the zone moved (a
    /// Kick ZONE_MOVED or HOST_FENCED; PROTOCOL.md §5.3), so the first attempt waits for no
    /// backoff, and the `Disconnected` event (with this reason) is emitted only if that attempt
    /// does not land.
    pub(super) async fn reconnect(
        &mut self,
        out_rx: &mut mpsc::Receiver<Outgoing>,
        mut moved: Option<String>,
    ) -> Result<(), CloseReason> {
        let at_once = moved.is_some();
        let lost_at = Instant::now();
        let mut policy = self.opts.reconnect.clone();
        // The host announces its grace window in Welcome; past it the token is refused anyway.
        let announced = Duration::from_millis(u64::from(self.welcome.reconnect_grace_ms));
        if !announced.is_zero() {
            policy.grace = policy.grace.min(announced);
        }
        let mut token_refused = false;
        // A host that refused a Hello carrying resume_from as a protocol error speaks no version
        // 4 (a fleet part way through an upgrade): resume without it.
        let mut resume_from_refused = false;
        let mut ticket_stale = false;
        let mut last_err = String::from("no attempt made");
        // A refused token is not a failed attempt: the host answered, and the fresh join it calls
        // for goes at once, on a budget of its own (a failover's new owner may not know a player
        // that joined after the zone's last save).
        let mut budget = policy.max_attempts;
        let mut at_once = at_once;
        let mut attempt = 0;
        while attempt < budget {
            if attempt > 0 {
                if let Some(reason) = moved.take() {
                    if let Flow::Stop(r) = self.emit(Event::Disconnected { reason }).await {
                        return Err(r);
                    }
                }
            }
            if !std::mem::take(&mut at_once) {
                tokio::time::sleep(self.backoff(attempt)).await;
            }
            attempt += 1;
            let use_token = !token_refused
                && !self.welcome.reconnect_token.is_empty()
                && lost_at.elapsed() < policy.grace;
            // A new player needs a new ticket: tickets are single-use.
            let fetched = !use_token || ticket_stale;
            if fetched {
                let Some(source) = self.opts.fresh_ticket.clone() else {
                    return Err(CloseReason::Lost(format!(
                        "cannot rejoin without a fresh ticket (last error: {last_err})"
                    )));
                };
                match source().await {
                    Ok(t) => {
                        self.ticket = t;
                        ticket_stale = false;
                    }
                    Err(e) => {
                        last_err = ClientError::Ticket(e).to_string();
                        continue;
                    }
                }
            }
            let resume_from = if use_token && !resume_from_refused {
                self.resume_from()
            } else {
                None
            };
            let hello = Hello {
                versions: self.opts.versions.clone(),
                ticket: self.ticket.clone(),
                reconnect_token: if use_token {
                    self.welcome.reconnect_token.clone()
                } else {
                    Vec::new()
                },
                content_version: self.opts.content_version.clone(),
                resume_from,
            };
            match self.open_somewhere(&hello).await {
                Ok((link, welcome)) => {
                    return self
                        .install(link, welcome, use_token, resume_from.is_some(), out_rx)
                        .await;
                }
                Err(ClientError::Kicked(k))
                    if k.code == KickCode::PROTOCOL_ERROR && resume_from.is_some() =>
                {
                    last_err = format!("kicked: {} ({})", k.code, k.reason);
                    resume_from_refused = true;
                    budget = budget.saturating_add(1);
                    at_once = true;
                }
                Err(ClientError::Kicked(k)) => {
                    last_err = format!("kicked: {} ({})", k.code, k.reason);
                    let renewable =
                        ticket_expired(k.code) || (ticket_key_refused(k.code) && !fetched);
                    if k.code == KickCode::RECONNECT_REFUSED {
                        if !token_refused {
                            token_refused = true;
                            budget = budget.saturating_add(1);
                            at_once = true;
                        }
                    } else if renewable && self.opts.fresh_ticket.is_some() {
                        ticket_stale = true;
                    } else if !invites_reconnect(k.code) {
                        return Err(final_kick(k));
                    }
                }
                // The game was updated while this client was away: no attempt can succeed.
                Err(ClientError::ContentOutdated(k)) => {
                    return Err(CloseReason::ContentOutdated(k));
                }
                // A host handing out such URLs would hand out the same on the next attempt.
                Err(e @ ClientError::RedirectScheme(_)) => {
                    return Err(CloseReason::Lost(e.to_string()));
                }
                Err(e) => last_err = e.to_string(),
            }
        }
        Err(CloseReason::Lost(format!(
            "gave up after {} reconnect attempts (last error: {last_err})",
            policy.max_attempts
        )))
    }

    /// One connection attempt: at the entry URL, and while the host there cannot be reached (or
    /// is shutting down), at each entry URL the last Welcome listed that differs from it. The
    /// answer of the first host that answers, or the entry URL's own failure when none did.
    pub(super) async fn open_somewhere(
        &self,
        hello: &Hello,
    ) -> Result<(Link, Welcome), ClientError> {
        let others = self.entries.iter().filter(|u| **u != self.url);
        let mut first_err = None;
        for url in std::iter::once(&self.url).chain(others) {
            let r = socket::open(
                url,
                hello,
                self.opts.handshake_timeout,
                &self.shared.counters,
                self.opts.transport,
            )
            .await;
            match r {
                Err(e) if unreachable(&e) => {
                    tracing::debug!(%url, error = %e, "entry unreachable; trying the next");
                    first_err.get_or_insert(e);
                }
                other => {
                    if other.is_ok() && *url != self.url {
                        add(&self.shared.counters.entry_fallbacks, 1);
                    }
                    return other;
                }
            }
        }
        Err(first_err.unwrap_or(ClientError::ClosedDuringHandshake))
    }

    /// What a resuming Hello says the mirror holds (PROTOCOL.md §4.1.1): only when the session's
    /// Welcome negotiated version 4 or later (a host that never spoke it would refuse the field)
    /// and the mirror is sound (a Delta applied, and no Resync waiting for its BASELINE).
    fn resume_from(&self) -> Option<ResumeFrom> {
        if self.welcome.version < RESUME_FROM_VERSION
            || !self.opts.versions.iter().any(|v| *v >= RESUME_FROM_VERSION)
            || self.awaiting_baseline
        {
            return None;
        }
        self.mirror.resume_from()
    }

    /// The inputs no Delta or State acknowledged, from either transport (a resume may change it),
    /// oldest first, as Input messages; both lists are emptied (writing them refills the one of
    /// the new transport).
    fn unacked_to_resend(&mut self) -> Vec<Vec<u8>> {
        let mut by_seq: std::collections::BTreeMap<u32, Vec<u8>> =
            std::mem::take(&mut self.sent_unacked).into_iter().collect();
        for input in std::mem::take(&mut self.unacked) {
            let seq = input.seq;
            if let Ok(bytes) = ClientMessage::Input(input).to_bytes() {
                by_seq.entry(seq).or_insert(bytes);
            }
        }
        let skip = by_seq.len().saturating_sub(UNACKED_KEPT);
        add(&self.shared.counters.inputs_discarded, skip as u64);
        by_seq.into_values().skip(skip).collect()
    }

    async fn install(
        &mut self,
        link: Link,
        welcome: Welcome,
        used_token: bool,
        sent_resume_from: bool,
        out_rx: &mut mpsc::Receiver<Outgoing>,
    ) -> Result<(), CloseReason> {
        let resumed = used_token && welcome.player_id == self.welcome.player_id;
        let c = Arc::clone(&self.shared);
        let c = &c.counters;
        add(&c.reconnects, 1);
        if resumed {
            add(&c.resumes, 1);
            // Inputs sent before the drop that no Delta acknowledged go again, in order and with
            // their numbers: the host drops those it already has (PROTOCOL.md §4.2), and a zone
            // handed over in a drain has only those it consumed.
            let again = self.unacked_to_resend();
            let again_len = again.len();
            for bytes in again {
                self.out_delay.push_back((0, bytes, true));
            }
            // Inputs queued while the transport was down: the newest few still matter (the
            // player's latest intent); a long outage's backlog would only reach the host as one
            // burst over its input rate, and be refused, so it is dropped.
            let mut queued = Vec::new();
            while let Ok(o) = out_rx.try_recv() {
                queued.push(o);
            }
            let room = RESUME_BACKLOG.min(RESUME_BURST.saturating_sub(again_len));
            let stale = queued.len().saturating_sub(room);
            add(&c.inputs_discarded, stale as u64);
            for o in queued.into_iter().skip(stale) {
                self.out_delay.push_back((0, o.bytes, o.is_input));
            }
        } else {
            add(&c.fresh_joins, 1);
            // A new player: its sequence starts again at 1, and inputs queued or unacknowledged
            // for the old player mean nothing to it.
            while out_rx.try_recv().is_ok() {
                add(&c.inputs_discarded, 1);
            }
            self.unacked.clear();
            self.sent_unacked.clear();
            self.shared.next_seq.store(1, Ordering::Relaxed);
        }
        self.shared
            .player_id
            .store(welcome.player_id, Ordering::Relaxed);
        self.shared.last_tick.store(welcome.tick, Ordering::Relaxed);
        {
            // The host (and its clock) may have changed: start the estimate over.
            let mut clock = self.shared.clock();
            *clock = ClockSync::new(welcome.tick_hz);
            clock.on_welcome(welcome.tick, self.shared.now_us());
        }
        self.link = Some(link);
        // A new session's first State is a BASELINE; inputs it has not seen are repeated.
        self.states.clear();
        self.acked_sent = 0;
        self.ack_due = None;
        // A resume from the mirror keeps it until the first Delta: a BASELINE replaces it, an
        // ordinary Delta continues from it. Anything else starts from nothing.
        if !(resumed && sent_resume_from && welcome.version >= RESUME_FROM_VERSION) {
            self.mirror = Mirror::new();
        }
        self.awaiting_baseline = false;
        // A Welcome of an older version lists no entries: what an earlier one listed still holds.
        if welcome.version >= ENTRIES_PROTOCOL {
            self.entries = welcome.websocket_entries().map(str::to_owned).collect();
        }
        self.welcome = welcome.clone();
        tracing::debug!(zone = %welcome.zone_id, player = welcome.player_id, resumed, "reconnected");
        match self.emit(Event::Welcome { welcome, resumed }).await {
            Flow::Stop(r) => Err(r),
            _ => Ok(()),
        }
    }
}

/// Whether an attempt failed without any host answering it (or at a host on its way out), so the
/// next entry URL may answer instead. A Kick or a Redirect refused by the client is an answer.
fn unreachable(e: &ClientError) -> bool {
    match e {
        ClientError::WebSocket(_)
        | ClientError::ClosedDuringHandshake
        | ClientError::HandshakeTimeout
        | ClientError::WebTransport(_) => true,
        ClientError::Kicked(k) => k.code == KickCode::SHUTTING_DOWN,
        _ => false,
    }
}
