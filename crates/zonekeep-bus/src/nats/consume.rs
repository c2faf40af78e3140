//! Receiving: a zone's consumer pulled into its inbox, and the transfer notes on this host's
//! own subject.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self};
use futures_util::StreamExt;

use super::MAX_BACKOFF;
use crate::handle::{Backend, Shared, TransferDelivery};
use crate::inbox::{next_token, AckToken, PendingAck};
use crate::{Body, BusError, Delivered, Envelope};

/// Hands the transfer notes sent to this host's subject to its transfer channel. The
/// subscription outlives reconnections (the client subscribes again by itself); a note that
/// is no transfer envelope is dropped and counted, and one that finds the channel full is
/// counted as `receiver_full` (its move is decided by the record all the same).
pub(super) async fn host_notes(shared: Arc<Shared>) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let Some(mut notes) = nats.notes.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    loop {
        let msg = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            msg = notes.next() => match msg { Some(m) => m, None => return },
        };
        let (to_zone, from, bytes) = match Envelope::decode(&msg.payload) {
            Ok(Envelope {
                to_zone,
                from,
                body: Body::Transfer(bytes),
                ..
            }) => (to_zone, from, bytes),
            other => {
                if let Err(e) = &other {
                    tracing::warn!(error = %e, "bus: dropped a host note that is no envelope");
                }
                shared.stats.note_decode_error();
                continue;
            }
        };
        let delivery = TransferDelivery {
            to_zone: to_zone.clone(),
            from,
            bytes,
        };
        if shared.transfers_tx.try_send(delivery).is_err() {
            tracing::warn!(zone = %to_zone, "bus: this host's transfer channel is full; a note was dropped");
            shared
                .stats
                .note_undeliverable(&BusError::ReceiverFull(to_zone));
        }
    }
}

/// Binds `zone`'s durable consumer on this host and delivers what it pulls into the zone's
/// inbox until the zone unbinds. Re-binds by itself after NATS comes back.
pub(crate) fn consume(shared: Arc<Shared>, zone: String) {
    let Some((tx, pending, counter, cancel)) = shared.registry.consumer_parts(&zone) else {
        return;
    };
    let rt = shared.rt.clone();
    rt.spawn(async move {
        let Backend::Nats(nats) = &shared.backend else {
            return;
        };
        let mut backoff = Duration::from_millis(50);
        loop {
            let messages = tokio::select! {
                _ = cancel.cancelled() => return,
                m = async {
                    let consumer = nats.consumer(&shared.config, &zone).await?;
                    consumer
                        .messages()
                        .await
                        .map_err(|e| BusError::Unavailable(e.to_string()))
                } => m,
            };
            match messages {
                Ok(mut messages) => loop {
                    let next = tokio::select! {
                        _ = cancel.cancelled() => return,
                        next = messages.next() => next,
                    };
                    match next {
                        Some(Ok(msg)) => {
                            backoff = Duration::from_millis(50);
                            let delivered = deliver(&shared, &zone, msg, &pending, &counter);
                            for d in delivered.await {
                                tokio::select! {
                                    _ = cancel.cancelled() => return,
                                    sent = tx.send(d) => if sent.is_err() { return },
                                }
                            }
                        }
                        Some(Err(e)) => {
                            tracing::debug!(zone = %zone, error = %e, "bus: consumer broke; binding again");
                            break;
                        }
                        None => break,
                    }
                },
                Err(e) => tracing::debug!(zone = %zone, error = %e, "bus: cannot bind consumer yet"),
            }
            let wait = backoff;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    });
}

/// Turns one pulled message into deliveries for the zone (one envelope, or a batch's, in
/// order), remembering its acknowledgement under the last one's token, so it is acknowledged
/// once the zone applied all of them; or handles it here: a transfer goes to the host's
/// transfer channel and is acknowledged at once; bytes that are no envelope for this zone are
/// terminated and counted.
async fn deliver(
    shared: &Shared,
    zone: &str,
    msg: jetstream::Message,
    pending: &Mutex<VecDeque<(AckToken, PendingAck)>>,
    counter: &std::sync::atomic::AtomicU64,
) -> Vec<Delivered> {
    let envelopes = match crate::batch::decode_any(&msg.payload) {
        Ok(envelopes) if envelopes.iter().all(|e| e.to_zone == zone) => envelopes,
        other => {
            if let Err(e) = &other {
                tracing::warn!(zone = %zone, error = %e, "bus: dropped bytes that are no envelope");
            }
            shared.stats.note_decode_error();
            let _ = msg.ack_with(jetstream::AckKind::Term).await;
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(envelopes.len());
    for envelope in envelopes {
        match envelope.body {
            Body::Transfer(bytes) => {
                // Only ever alone (a batch carries zone messages only).
                let delivery = TransferDelivery {
                    to_zone: envelope.to_zone,
                    from: envelope.from,
                    bytes,
                };
                if shared.transfers_tx.send(delivery).await.is_ok() {
                    let _ = msg.ack().await;
                }
                return Vec::new();
            }
            Body::Message { .. } => out.push(Delivered {
                envelope,
                token: next_token(counter),
            }),
        }
    }
    if let Some(last) = out.last() {
        let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        // Redeliveries of envelopes still waiting for a save add entries; past four times
        // the inbox the oldest are forgotten (NATS redelivers them again if need be).
        while pending.len() >= 4 * shared.config.inbox_capacity.max(1) {
            pending.pop_front();
        }
        pending.push_back((last.token, msg));
    }
    out
}
