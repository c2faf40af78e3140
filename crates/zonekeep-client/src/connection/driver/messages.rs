//! The server's messages on the driver's side: what each does to the mirror (or the ring of
//! States), the clock, the inputs awaiting acknowledgement and the application's events, and
//! the Resync that asks for a BASELINE when the known set can no longer be trusted.

use std::sync::atomic::Ordering;

use tokio_tungstenite::tungstenite::Bytes;
use zonekeep_protocol::delta::{Delta, TAG_DELTA, TAG_STATE};
use zonekeep_protocol::messages::{peek_tag, ClientMessage, KnownSetCheck, Resync, ServerMessage};
use zonekeep_protocol::quant::pos_decode;

use super::{lost, Driver, Flow};
use crate::clock::PongSample;
use crate::connection::counters::add;
use crate::connection::link::Link;
use crate::connection::{CloseReason, Event, Outgoing};
use crate::patch::{Patch, SpawnedEntity, UpdatedEntity};

impl Driver {
    /// Handles one server message.
    pub(super) async fn process(&mut self, bytes: Bytes) -> Flow {
        let now = self.shared.now_us();
        let tag = peek_tag(&bytes);
        let wt = matches!(self.link, Some(Link::WebTransport(_)));
        if tag == Ok(TAG_STATE) || (wt && tag == Ok(TAG_DELTA)) {
            return self.process_state(bytes).await;
        }
        if tag == Ok(TAG_DELTA) {
            if self.awaiting_baseline {
                if !is_baseline(&bytes) {
                    add(&self.shared.counters.deltas_skipped, 1);
                    return Flow::Continue;
                }
                self.awaiting_baseline = false;
            }
            let delta = match self.mirror.decode_apply(&bytes, &self.welcome.schema) {
                Ok(d) => d,
                // The known set can no longer be trusted: ask for a fresh baseline.
                Err(e) => {
                    tracing::debug!(zone = %self.welcome.zone_id, error = %e, "bad Delta; asking for a BASELINE");
                    return self.resync().await;
                }
            };
            self.counted_delta(delta.tick, bytes.len(), now);
            self.acknowledged(delta.ack);
            let tick = delta.tick;
            let (patch, events) = self.patch_of(delta, bytes.len());
            if let Flow::Stop(r) = self.deliver(patch).await {
                return Flow::Stop(r);
            }
            for e in events {
                let ev = Event::Event {
                    tick,
                    topic: e.topic,
                    payload: e.payload,
                };
                if let Flow::Stop(r) = self.emit(ev).await {
                    return Flow::Stop(r);
                }
            }
            return Flow::Continue;
        }
        match ServerMessage::decode(&bytes, None) {
            Err(e) => lost(format!("undecodable server message: {e}")),
            Ok(ServerMessage::Pong(p)) => {
                add(&self.shared.counters.pongs, 1);
                self.shared.clock().on_pong(PongSample {
                    sent_us: p.client_time,
                    recv_us: now,
                    server_time_us: p.server_time_us,
                    server_tick: p.tick,
                });
                Flow::Continue
            }
            Ok(ServerMessage::Kick(k)) => {
                tracing::debug!(code = %k.code, reason = %k.reason, "kicked");
                if let Flow::Stop(r) = self.emit(Event::Kick(k.clone())).await {
                    return Flow::Stop(r);
                }
                Flow::Lost {
                    reason: format!("kicked: {} ({})", k.code, k.reason),
                    kick: Some(k),
                }
            }
            Ok(ServerMessage::InputRefused(r)) => {
                add(&self.shared.counters.inputs_refused, 1);
                self.emit(Event::InputRefused(r)).await
            }
            Ok(ServerMessage::KnownSetCheck(c)) => self.check_known_set(&c).await,
            // A Transfer exists from version 8 on (PROTOCOL.md §5.3.2): on an older session it is
            // out of place, as a Redirect mid-session is.
            Ok(ServerMessage::Transfer(_))
                if self.welcome.version < zonekeep_protocol::messages::TRANSFER_PROTOCOL =>
            {
                lost("Transfer on a session below protocol version 8")
            }
            Ok(ServerMessage::Transfer(t)) => self.on_transfer(t).await,
            // A Redirect answers a Hello only (PROTOCOL.md §5.3.1).
            Ok(ServerMessage::Redirect(_)) => lost("Redirect in the middle of a session"),
            Ok(ServerMessage::Welcome(_)) => lost("Welcome in the middle of a session"),
            Ok(ServerMessage::Delta(_)) => lost("Delta decoded without context"),
            // Events apart from the state (PROTOCOL.md §5.9) reach the application as a
            // Delta's events do.
            // The fleet changed since the Welcome: where else to enter now (PROTOCOL.md §5.3.1).
            Ok(ServerMessage::Entries(e)) => {
                self.entries = e.websocket_entries().map(str::to_owned).collect();
                Flow::Continue
            }
            // Chat exists from version 11 on (PROTOCOL.md §5.11–§5.12), which this client does
            // not offer yet: on an older session it is out of place, as a Transfer below 8 is.
            Ok(ServerMessage::ChatLines(_) | ServerMessage::ChatReply(_))
                if self.welcome.version < zonekeep_protocol::messages::CHAT_PROTOCOL =>
            {
                lost("chat message on a session below protocol version 11")
            }
            // This client has no chat API yet: a version 11 session ignores chat.
            Ok(ServerMessage::ChatLines(_) | ServerMessage::ChatReply(_)) => Flow::Continue,
            Ok(ServerMessage::Events(batch)) => {
                for e in batch.events {
                    let ev = Event::Event {
                        tick: batch.tick,
                        topic: e.topic,
                        payload: e.payload,
                    };
                    if let Flow::Stop(r) = self.emit(ev).await {
                        return Flow::Stop(r);
                    }
                }
                Flow::Continue
            }
        }
    }

    /// Compares the host's KnownSetCheck with the mirror (PROTOCOL.md §5.7); a mismatch, or a check
    /// arriving while a BASELINE is still awaited (the host may have dropped the first request),
    /// sends a Resync.
    pub(super) async fn check_known_set(&mut self, c: &KnownSetCheck) -> Flow {
        if !self.awaiting_baseline && self.mirror.matches(c) {
            return Flow::Continue;
        }
        if !self.awaiting_baseline {
            tracing::debug!(zone = %self.welcome.zone_id, tick = c.tick, "known set differs from the host's; asking for a BASELINE");
        }
        self.resync().await
    }

    /// Sends Resync and skips Deltas until the BASELINE that answers it.
    pub(super) async fn resync(&mut self) -> Flow {
        self.awaiting_baseline = true;
        add(&self.shared.counters.resyncs, 1);
        let tick = self.mirror.tick();
        match ClientMessage::Resync(Resync { tick }).to_bytes() {
            Ok(bytes) => {
                let queued_us = self.shared.now_us();
                self.queue_out(Outgoing {
                    bytes,
                    queued_us,
                    is_input: false,
                })
                .await
            }
            Err(e) => Flow::Stop(CloseReason::Lost(format!("cannot encode Resync: {e}"))),
        }
    }

    /// A Delta (or a State) of `len` bytes for `tick` arrived at `now` and applied: counted,
    /// and shown to the clock.
    pub(super) fn counted_delta(&self, tick: u64, len: usize, now: u64) {
        let c = &self.shared.counters;
        add(&c.deltas, 1);
        add(&c.delta_bytes, len as u64);
        self.shared.last_tick.fetch_max(tick, Ordering::Relaxed);
        self.shared.clock().on_delta(tick, now);
    }

    /// Resolves a Delta (already applied to the mirror) to absolute positions.
    pub(super) fn patch_of(
        &self,
        delta: Delta,
        bytes: usize,
    ) -> (Patch, Vec<zonekeep_protocol::delta::Event>) {
        let step = self.welcome.schema.pos_step;
        let spawns = delta
            .spawns
            .into_iter()
            .map(|s| SpawnedEntity {
                id: s.id,
                kind: s.kind,
                x: pos_decode(s.qx, step),
                y: pos_decode(s.qy, step),
                fields: s.fields,
            })
            .collect();
        let updates = delta
            .updates
            .into_iter()
            .map(|u| UpdatedEntity {
                id: u.id,
                pos: u
                    .pos
                    .and_then(|_| self.mirror.get(u.id))
                    .map(|e| (pos_decode(e.qx, step), pos_decode(e.qy, step))),
                fields: u.fields,
            })
            .collect();
        let patch = Patch {
            tick: delta.tick,
            ack: delta.ack,
            baseline: delta.baseline,
            control: delta.control,
            despawns: delta.despawns,
            updates,
            spawns,
            bytes,
        };
        (patch, delta.events.unwrap_or_default())
    }
}

/// Whether a Delta's flags say BASELINE (a header that does not parse is not one).
fn is_baseline(bytes: &[u8]) -> bool {
    let mut r = zonekeep_protocol::wire::Reader::new(bytes);
    matches!(
        (r.u8(), r.varint_u64(), r.varint_u32(), r.u8()),
        (Ok(TAG_DELTA), Ok(_), Ok(_), Ok(flags)) if flags & zonekeep_protocol::delta::FLAG_BASELINE != 0
    )
}
