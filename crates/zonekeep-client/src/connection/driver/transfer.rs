//! Following a Transfer (PROTOCOL.md §5.3.2): the source connection stays open and the
//! application keeps its world while a new connection is made to the zone the player was moved
//! to; the new zone's Welcome and BASELINE reach the application together, and only then is the
//! source connection closed.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::sync::mpsc;
use zonekeep_protocol::messages::{Hello, Kick, KickCode, Transfer, ENTRIES_PROTOCOL};
use zonekeep_protocol::mirror::Mirror;

use super::{Driver, Flow};
use crate::clock::ClockSync;
use crate::connection::counters::add;
use crate::connection::link::Link;
use crate::connection::socket;
use crate::connection::{CloseReason, Event, Outgoing, TransferEvent};
use crate::error::ClientError;
use crate::patch::Patch;

/// How long a credential whose `exp` cannot be read is taken to be valid (its documented lifetime).
const DEFAULT_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(600);

/// A move under way.
pub(super) struct Moving {
    from: String,
    to: String,
    url: String,
    credential: String,
    deadline: Instant,
    /// The source connection, open until the new zone's BASELINE arrives.
    origin: Option<Link>,
    /// The next attempt starts at the Transfer's URL (the first one does).
    direct: bool,
    /// The new zone's reconnect token, once one of its Welcomes gave it (empty = none).
    token: Vec<u8>,
    /// The new zone's connection is installed; its first Delta is the arrival.
    welcomed: bool,
    failures: u32,
}

/// Kick codes after which the same credential cannot land on another attempt, or must not:
/// CHARACTER_MOVED says the player's character went into another zone (another game or device)
/// meanwhile, and the session ends with the move.
fn final_for_transfer(code: KickCode) -> bool {
    matches!(
        code,
        KickCode::VERSION_MISMATCH
            | KickCode::BAD_TICKET
            | KickCode::TICKET_EXPIRED
            | KickCode::TICKET_UNKNOWN_KEY
            | KickCode::TICKET_RETIRED_KEY
            | KickCode::TICKET_BAD_ALGORITHM
            | KickCode::TICKET_WRONG_ZONE
            | KickCode::CONTENT_OUTDATED
            | KickCode::CHARACTER_MOVED
    )
}

/// How long the credential stays valid, by its `exp` claim (read, not verified: the host checks).
fn credential_lifetime(ticket: &str) -> Duration {
    let exp = ticket
        .split('.')
        .nth(1)
        .and_then(|c| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .ok()
        })
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("exp").and_then(serde_json::Value::as_u64));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    exp.map_or(DEFAULT_CREDENTIAL_LIFETIME, |e| {
        Duration::from_secs(e.saturating_sub(now))
    })
}

/// `url` naming `zone` in place of the zone its `/zones/{zone}` path names (unchanged otherwise).
pub(super) fn with_zone(url: &str, zone: &str) -> String {
    let Some(at) = url.find("/zones/") else {
        return url.to_owned();
    };
    let start = at + "/zones/".len();
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    if url[end..].starts_with('/') {
        return url.to_owned();
    }
    format!("{}{zone}{}", &url[..start], &url[end..])
}

impl Driver {
    /// A Transfer on the open session: checks its URL, keeps the source connection aside, tells
    /// the application the move started, and has the loop connect to the new zone.
    pub(super) async fn on_transfer(&mut self, t: Transfer) -> Flow {
        let Some(url) = t.websocket_url().map(str::to_owned) else {
            let reason = format!("a Transfer to a URL that is not ws:// or wss://: {}", t.url);
            return self
                .emit(Event::Transfer(TransferEvent::Failed {
                    reason,
                    retrying: true,
                }))
                .await;
        };
        let from = self.welcome.zone_id.clone();
        self.end_move().await;
        self.moving = Some(Moving {
            from: from.clone(),
            to: t.zone_id.clone(),
            url,
            deadline: Instant::now() + credential_lifetime(&t.ticket),
            credential: t.ticket,
            origin: self.link.take(),
            direct: true,
            token: Vec::new(),
            welcomed: false,
            failures: 0,
        });
        self.in_delay.clear();
        // From now on the session's zone is the new one, at every entry URL.
        self.url = with_zone(&self.url, &t.zone_id);
        self.entries = self
            .entries
            .iter()
            .map(|u| with_zone(u, &t.zone_id))
            .collect();
        let started = Event::Transfer(TransferEvent::Started {
            from,
            to: t.zone_id,
        });
        match self.emit(started).await {
            Flow::Stop(r) => Flow::Stop(r),
            _ => Flow::Moving,
        }
    }

    /// Attempts at the new zone until one is welcomed (installed; its BASELINE is the arrival),
    /// with backoff while the credential is valid.
    pub(super) async fn transfer_connect(
        &mut self,
        out_rx: &mut mpsc::Receiver<Outgoing>,
    ) -> Result<(), CloseReason> {
        loop {
            let Some(m) = self.moving.as_ref() else {
                return Ok(());
            };
            let hello = Hello {
                versions: self.opts.versions.clone(),
                ticket: m.credential.clone(),
                reconnect_token: m.token.clone(),
                content_version: self.opts.content_version.clone(),
                resume_from: None,
            };
            let r = if m.direct {
                let url = m.url.clone();
                match socket::open(
                    &url,
                    &hello,
                    self.opts.handshake_timeout,
                    &self.shared.counters,
                    self.opts.transport,
                )
                .await
                {
                    Err(e) if reconnect_unreachable(&e) => self.open_somewhere(&hello).await,
                    other => other,
                }
            } else {
                self.open_somewhere(&hello).await
            };
            match r {
                Ok((link, welcome)) => {
                    self.install_arrival(link, welcome, out_rx);
                    return Ok(());
                }
                Err(e) => {
                    let kick = match &e {
                        ClientError::Kicked(k) | ClientError::ContentOutdated(k) => Some(k.clone()),
                        _ => None,
                    };
                    if let Flow::Stop(r) = self.transfer_failed(e.to_string(), kick.as_ref()).await
                    {
                        return Err(r);
                    }
                }
            }
        }
    }

    /// An attempt at the new zone failed: tells the application and waits out the backoff, or
    /// ends the connection when no attempt can land any more.
    pub(super) async fn transfer_failed(&mut self, reason: String, kick: Option<&Kick>) -> Flow {
        let Some(m) = self.moving.as_mut() else {
            return Flow::Continue;
        };
        m.direct = false;
        m.welcomed = false;
        m.failures = m.failures.saturating_add(1);
        let failures = m.failures;
        let deadline = m.deadline;
        let has_token = !m.token.is_empty();
        let backoff = self.backoff(failures);
        let (reason, retrying) = match kick {
            Some(k) if k.code == KickCode::TICKET_REPLAYED && !has_token => {
                ("the transfer credential was already used".to_owned(), false)
            }
            Some(k) if final_for_transfer(k.code) => (reason, false),
            _ if Instant::now() + backoff >= deadline => {
                ("the transfer credential expired".to_owned(), false)
            }
            _ => (reason, true),
        };
        let failed = Event::Transfer(TransferEvent::Failed {
            reason: reason.clone(),
            retrying,
        });
        if let Flow::Stop(r) = self.emit(failed).await {
            return Flow::Stop(r);
        }
        if !retrying {
            return Flow::Stop(match kick {
                Some(k) => super::final_kick(k.clone()),
                None => CloseReason::Lost(reason),
            });
        }
        tokio::time::sleep(backoff).await;
        Flow::Moving
    }

    /// Installs the new zone's connection as a new player's, without telling the application:
    /// its Welcome reaches it with the BASELINE ([`Self::deliver`]).
    fn install_arrival(
        &mut self,
        link: Link,
        welcome: zonekeep_protocol::messages::Welcome,
        out_rx: &mut mpsc::Receiver<Outgoing>,
    ) {
        let c = &self.shared.counters;
        // Inputs queued or unacknowledged for the old zone's player mean nothing here.
        while out_rx.try_recv().is_ok() {
            add(&c.inputs_discarded, 1);
        }
        self.unacked.clear();
        self.sent_unacked.clear();
        self.shared.next_seq.store(1, Ordering::Relaxed);
        self.shared
            .player_id
            .store(welcome.player_id, Ordering::Relaxed);
        self.shared.last_tick.store(welcome.tick, Ordering::Relaxed);
        {
            let mut clock = self.shared.clock();
            *clock = ClockSync::new(welcome.tick_hz);
            clock.on_welcome(welcome.tick, self.shared.now_us());
        }
        self.link = Some(link);
        self.states.clear();
        self.acked_sent = 0;
        self.ack_due = None;
        self.mirror = Mirror::new();
        self.awaiting_baseline = false;
        if welcome.version >= ENTRIES_PROTOCOL {
            self.entries = welcome.websocket_entries().map(str::to_owned).collect();
        }
        if let Some(m) = self.moving.as_mut() {
            m.token = welcome.reconnect_token.clone();
            m.welcomed = true;
        }
        self.welcome = welcome;
    }

    /// Hands a patch to the application: as the arrival of a move when it is the new zone's
    /// first (its Welcome with it, then the source connection closes), else as a Delta.
    pub(super) async fn deliver(&mut self, patch: Patch) -> Flow {
        let arriving = self.moving.as_ref().is_some_and(|m| m.welcomed);
        if !arriving {
            return self.emit(Event::Delta(patch)).await;
        }
        let Some(mut m) = self.moving.take() else {
            return Flow::Continue;
        };
        add(&self.shared.counters.fresh_joins, 1);
        if let Some(origin) = m.origin.take() {
            close_origin(origin).await;
        }
        let arrived = TransferEvent::Arrived {
            from: m.from,
            welcome: Box::new(self.welcome.clone()),
            baseline: patch,
        };
        tracing::debug!(zone = %m.to, "transfer arrived");
        self.emit(Event::Transfer(arrived)).await
    }

    /// Forgets a move under way (if any), closing its source connection.
    pub(super) async fn end_move(&mut self) {
        if let Some(origin) = self.moving.take().and_then(|mut m| m.origin.take()) {
            close_origin(origin).await;
        }
    }
}

/// Closes the source connection normally, within a bound.
async fn close_origin(origin: Link) {
    let _ = tokio::time::timeout(Duration::from_secs(1), origin.close()).await;
}

/// Whether nobody answered the attempt (the listed entries may).
fn reconnect_unreachable(e: &ClientError) -> bool {
    match e {
        ClientError::WebSocket(_)
        | ClientError::ClosedDuringHandshake
        | ClientError::HandshakeTimeout
        | ClientError::WebTransport(_) => true,
        ClientError::Kicked(k) => k.code == KickCode::SHUTTING_DOWN,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::with_zone;

    #[test]
    fn entry_urls_name_the_new_zone() {
        assert_eq!(
            with_zone("ws://h:7350/zones/a?room=1", "lobby"),
            "ws://h:7350/zones/lobby?room=1"
        );
        assert_eq!(with_zone("wss://h/zones/a", "b"), "wss://h/zones/b");
        assert_eq!(with_zone("ws://h/other", "b"), "ws://h/other");
        assert_eq!(with_zone("ws://h/zones/a/x", "b"), "ws://h/zones/a/x");
    }
}
