//! Inputs and acknowledgements. Over WebTransport (PROTOCOL.md §4.5, §5.8): States applied
//! onto the ring of States, each input repeated in every Inputs datagram until a State
//! acknowledges it, and a State's acknowledgement held for the next input, or sent alone once
//! the hold ends. Over WebSocket: the inputs written that no Delta acknowledged yet, which a
//! resume sends again.

use tokio_tungstenite::tungstenite::Bytes;
use zonekeep_protocol::limits::MAX_DATAGRAM_INPUTS;
use zonekeep_protocol::messages::{ClientMessage, Input, Inputs};
use zonekeep_protocol::states::Applied;

use super::{lost, reconnect, Driver, Flow};
use crate::connection::counters::add;
use crate::connection::link::Link;
use crate::connection::CloseReason;

impl Driver {
    /// Over WebTransport, an input goes at once in an Inputs datagram with the unacknowledged
    /// ones before it (the oldest is forgotten past [`MAX_DATAGRAM_INPUTS`]).
    pub(super) fn send_input(&mut self, input: Input) -> Flow {
        if self.unacked.len() >= MAX_DATAGRAM_INPUTS {
            self.unacked.pop_front();
        }
        self.unacked.push_back(input);
        add(&self.shared.counters.inputs_sent, 1);
        self.send_inputs()
    }

    /// No input carried the newest State's acknowledgement within the hold: it goes alone.
    pub(super) fn ack_hold_ended(&mut self) -> Flow {
        self.ack_due = None;
        if self.states.newest() > self.acked_sent {
            add(&self.shared.counters.acks_alone, 1);
            self.send_inputs()
        } else {
            Flow::Continue
        }
    }

    /// Remembers a WebSocket Input message until a Delta acknowledges it (the oldest is forgotten
    /// past [`reconnect::UNACKED_KEPT`]).
    pub(super) fn keep_unacked(&mut self, bytes: Vec<u8>) {
        let Ok(ClientMessage::Input(input)) = ClientMessage::decode(&bytes) else {
            return;
        };
        if self.sent_unacked.len() >= reconnect::UNACKED_KEPT {
            self.sent_unacked.pop_front();
        }
        self.sent_unacked.push_back((input.seq, bytes));
    }

    /// The zone consumed every input up to `ack`: none of them is sent again.
    pub(super) fn acknowledged(&mut self, ack: u32) {
        while self.unacked.front().is_some_and(|i| i.seq <= ack) {
            self.unacked.pop_front();
        }
        while self
            .sent_unacked
            .front()
            .is_some_and(|(seq, _)| *seq <= ack)
        {
            self.sent_unacked.pop_front();
        }
    }

    /// Sends an Inputs datagram (PROTOCOL.md §4.5): the newest State applied and the inputs no
    /// State has acknowledged. A datagram the path refuses is simply lost, as it could be anyway.
    pub(super) fn send_inputs(&mut self) -> Flow {
        let Some(Link::WebTransport(wt)) = self.link.as_ref() else {
            return Flow::Continue;
        };
        let ack = self.states.newest();
        let msg = ClientMessage::Inputs(Inputs {
            state_ack: ack,
            inputs: self.unacked.iter().cloned().collect(),
        });
        match msg.to_bytes() {
            Ok(bytes) => {
                self.acked_sent = ack;
                self.ack_due = None;
                if !self.out_sim.config().is_off() {
                    // Lost, or held until due like other delayed messages (sent as a datagram
                    // then: `write` knows an Inputs message by its tag).
                    let now = self.shared.now_us();
                    if let Some(due) = self.out_sim.schedule_datagram(now) {
                        let at = self.out_delay.partition_point(|d| d.0 <= due);
                        self.out_delay.insert(at, (due, bytes, false));
                    }
                    return Flow::Continue;
                }
                let len = bytes.len();
                if wt.conn.send_datagram(bytes).is_ok() {
                    self.shared.counters.sent(len);
                }
                Flow::Continue
            }
            Err(e) => Flow::Stop(CloseReason::Lost(format!("cannot encode Inputs: {e}"))),
        }
    }

    /// A State (PROTOCOL.md §5.8), or a Delta on a WebTransport session: applied onto the state
    /// it names; the application is shown the change from what it last saw.
    pub(super) async fn process_state(&mut self, bytes: Bytes) -> Flow {
        let now = self.shared.now_us();
        let delta = match self.states.apply(&bytes, &self.welcome.schema) {
            Ok(Applied::Newer(d)) => d,
            Ok(Applied::Stale) => {
                add(&self.shared.counters.states_stale, 1);
                return Flow::Continue;
            }
            Ok(Applied::NoBase { .. }) => {
                add(&self.shared.counters.states_without_base, 1);
                return Flow::Continue;
            }
            Err(e) => return lost(format!("a State does not apply: {e}")),
        };
        self.counted_delta(delta.tick, bytes.len(), now);
        let next = self.states.current().clone();
        let patch = crate::patch::between(
            &self.mirror,
            &next,
            delta.tick,
            delta.ack,
            self.welcome.schema.pos_step,
            bytes.len(),
        );
        self.mirror = next;
        self.acknowledged(delta.ack);
        if let Flow::Stop(r) = self.deliver(patch).await {
            return Flow::Stop(r);
        }
        // Acknowledge the newest State with the next input, or alone once the hold ends (§4.5).
        if self.states.newest() > self.acked_sent && self.ack_due.is_none() {
            self.ack_due =
                Some(tokio::time::Instant::now() + crate::connection::webtransport::STATE_ACK_HOLD);
        }
        Flow::Continue
    }
}
