//! Facts and calls, the zone's durable requests to the world outside: drained to their sinks,
//! kept in flight (and in snapshots) until settled or answered, and delivered back to the zone
//! at the start of its next tick.

use super::ZoneHost;
use crate::call::{Call, CallAnswer};
use crate::fact::{Fact, Settlement};

impl ZoneHost {
    /// The owner epoch this host was created or restored with.
    pub fn boot_epoch(&self) -> u64 {
        self.core.facts.boot_epoch()
    }

    /// Facts emitted since the last call, to hand to a fact sink. They stay
    /// in flight (and in snapshots) until settled with
    /// [`handle_settlement`](ZoneHost::handle_settlement).
    pub fn drain_facts(&mut self) -> Vec<Fact> {
        self.tap_call(|| crate::recording::Record::DrainFacts);
        let facts = self.core.facts.take_unsent();
        if self.recording() {
            self.tap_effect(crate::recording::facts_digest(&facts));
        }
        facts
    }

    /// How many facts are in flight (emitted, not yet settled and delivered).
    pub fn facts_in_flight(&self) -> usize {
        self.core.facts.in_flight_len()
    }

    /// Calls made since the last call, to journal and hand to a call sink. They stay in flight
    /// (and in snapshots) until answered with
    /// [`handle_call_result`](ZoneHost::handle_call_result).
    pub fn drain_calls(&mut self) -> Vec<Call> {
        self.tap_call(|| crate::recording::Record::DrainCalls);
        let calls = self.core.calls.take_unsent();
        if self.recording() {
            self.tap_effect(crate::recording::calls_digest(&calls));
        }
        calls
    }

    /// How many calls are in flight (made, result not yet delivered).
    pub fn calls_in_flight(&self) -> usize {
        self.core.calls.in_flight_len()
    }

    /// Queue a call's result; the zone receives it through
    /// [`Zone::on_call_result`](crate::Zone::on_call_result) at the start of its next tick. A
    /// result for a key not in flight is dropped and counted.
    pub fn handle_call_result(&mut self, answer: CallAnswer) {
        self.tap_call(|| crate::recording::Record::CallResult(answer.clone()));
        self.core.calls.queue_result(answer);
    }

    /// Queue a fact sink's answer; the zone receives it through
    /// [`Zone::on_fact_settled`](crate::Zone::on_fact_settled) at the start of its next tick. A settlement
    /// for a key not in flight is dropped and counted.
    pub fn handle_settlement(&mut self, settlement: Settlement) {
        self.tap_call(|| crate::recording::Record::Settle(settlement.clone()));
        self.core.facts.queue_settlement(settlement);
    }
}
