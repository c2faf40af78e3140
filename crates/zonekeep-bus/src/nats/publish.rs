//! Publishing: the host's outgoing queue into NATS, a zone's envelopes batched per round,
//! and the acknowledgements waited for apart.

use std::sync::Arc;

use async_nats::jetstream::{self};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::handle::{envelope_for, expand, Backend, Outgoing, Shared};
use crate::{BusError, Envelope, OutMessage, Undeliverable};

use super::finish_publish;

/// One publish waiting for its acknowledgement, and whom to tell if it fails: the sender and
/// the notice of each envelope it carries.
pub(super) struct InFlight {
    ack: jetstream::context::PublishAckFuture,
    deadline: Instant,
    carried: Vec<(String, Undeliverable)>,
}

/// Zone messages the publisher takes off the outgoing queue at once (each may expand to a
/// group's members): those for the same zone go out as one batch.
const TAKE_AT_ONCE: usize = 512;

/// The envelopes of one publish, for one zone, in order, with their senders' notices.
struct Pending {
    zone: String,
    envelopes: Vec<Envelope>,
    carried: Vec<(String, Undeliverable)>,
    bytes: usize,
}

pub(super) async fn publisher(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Outgoing>,
    acks: mpsc::Sender<InFlight>,
) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let mut taken = Vec::with_capacity(TAKE_AT_ONCE);
    loop {
        let item = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            item = rx.recv() => item,
        };
        let Some(Outgoing::Message(msg)) = item else {
            return;
        };
        // Whatever else is queued now joins this round: under load, sends for the same zone
        // leave as one batch; alone, a send leaves at once, as itself.
        taken.push(msg);
        while taken.len() < TAKE_AT_ONCE {
            match rx.try_recv() {
                Ok(Outgoing::Message(m)) => taken.push(m),
                Err(_) => break,
            }
        }
        for p in gather(&shared, taken.drain(..)) {
            let deadline = Instant::now() + shared.config.publish_timeout;
            let started = match p.envelopes.as_slice() {
                [one] => nats.start_publish(&shared.config, one).await,
                many => {
                    let id = nats.batch_id(&shared.config.host);
                    let payload = crate::batch::encode_batch(many);
                    nats.start_publish_bytes(&shared.config, &p.zone, id, payload)
                        .await
                }
            };
            match started {
                Ok(ack) => {
                    shared.stats.note_published();
                    let inflight = InFlight {
                        ack,
                        deadline,
                        carried: p.carried,
                    };
                    if acks.send(inflight).await.is_err() {
                        return;
                    }
                }
                Err(reason) => {
                    for (from, notice) in p.carried {
                        let notice = Undeliverable {
                            reason: reason.clone(),
                            ..notice
                        };
                        shared.registry.notify(&from, notice);
                    }
                }
            }
        }
    }
}

/// The envelopes of `messages` grouped by receiving zone (in order within each zone, zones in
/// the order they first appear), each group cut to what one batch holds.
fn gather(shared: &Shared, messages: impl Iterator<Item = OutMessage>) -> Vec<Pending> {
    let mut out: Vec<Pending> = Vec::new();
    let mut open: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for msg in messages {
        for to_zone in expand(shared, &msg.to) {
            let envelope = envelope_for(&msg, to_zone);
            let size = envelope.encoded_len() + 4;
            let notice = Undeliverable {
                id: msg.id.clone(),
                to: msg.to.clone(),
                topic: msg.topic,
                reason: BusError::Closed,
            };
            let slot = open.get(&envelope.to_zone).copied().filter(|&i| {
                out[i].envelopes.len() < crate::batch::MAX_BATCH
                    && out[i].bytes + size <= crate::batch::MAX_BATCH_BYTES
            });
            let i = match slot {
                Some(i) => i,
                None => {
                    open.insert(envelope.to_zone.clone(), out.len());
                    out.push(Pending {
                        zone: envelope.to_zone.clone(),
                        envelopes: Vec::new(),
                        carried: Vec::new(),
                        bytes: 3,
                    });
                    out.len() - 1
                }
            };
            out[i].bytes += size;
            out[i].envelopes.push(envelope);
            out[i].carried.push((msg.from.clone(), notice));
        }
    }
    out
}

pub(super) async fn ack_waiter(shared: Arc<Shared>, mut rx: mpsc::Receiver<InFlight>) {
    while let Some(inflight) = rx.recv().await {
        match finish_publish(inflight.ack, inflight.deadline, &shared.stats).await {
            Ok(()) => {
                for _ in &inflight.carried {
                    shared.stats.note_sent();
                }
            }
            Err(reason) => {
                for (from, notice) in inflight.carried {
                    let notice = Undeliverable {
                        reason: reason.clone(),
                        ..notice
                    };
                    shared.registry.notify(&from, notice);
                }
            }
        }
    }
}
