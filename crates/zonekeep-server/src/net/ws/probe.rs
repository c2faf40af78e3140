//! Proof that a WebSocket client reads: the writer's Pings and the reader's Pongs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What the read-progress probe does when its timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProbeStep {
    /// Send a WebSocket Ping carrying this sequence number.
    Send(u64),
    /// The last Ping is unanswered but still within its deadline.
    Wait,
    /// The last Ping went unanswered for the whole timeout: the client does not read.
    Stalled,
}

/// Proof that the client reads, independent of how much the zone sends.
///
/// Kernel buffers hide a client that never reads until hundreds of kilobytes are queued, which
/// takes minutes in a light zone. A WebSocket Pong is written by the client's stack only as it
/// reads, after every frame queued before the Ping, so an unanswered Ping after `timeout` means
/// the client stopped reading. One Ping is outstanding at a time, sent every `timeout / 2` while
/// answers come back: a client that stops reading is kicked within 1.5 × `timeout`.
#[derive(Debug)]
pub(super) struct ReadProbe {
    pub(super) timeout: Duration,
    /// Sequence of the last Ping sent (0 = none yet).
    sent: u64,
    sent_at: tokio::time::Instant,
    /// When the timer fires next.
    pub(super) next: tokio::time::Instant,
}

impl ReadProbe {
    pub(super) fn new(timeout: Duration, now: tokio::time::Instant) -> Self {
        Self {
            timeout,
            sent: 0,
            sent_at: now,
            // The first answer also gives the connection's round trip: asked for early.
            next: now + (timeout / 2).min(FIRST_PROBE),
        }
    }

    /// The timer fired at `now` with Pings up to `answered` answered.
    pub(super) fn step(&mut self, answered: u64, now: tokio::time::Instant) -> ProbeStep {
        if answered >= self.sent {
            self.sent += 1;
            self.sent_at = now;
            self.next = now + self.timeout / 2;
            return ProbeStep::Send(self.sent);
        }
        let deadline = self.sent_at + self.timeout;
        if now >= deadline {
            return ProbeStep::Stalled;
        }
        self.next = deadline;
        ProbeStep::Wait
    }
}

/// When the first read-progress Ping goes out (later ones every half timeout).
const FIRST_PROBE: Duration = Duration::from_secs(1);

/// The read-progress Pings of one connection, shared by its writer (which sends them) and its
/// reader (which sees the Pongs): the highest sequence answered, and the round trip of the
/// latest answered Ping, timed by the host alone (a Pong's payload is only the sequence, so a
/// client cannot claim a longer round trip than it takes).
#[derive(Debug)]
pub(super) struct ReadProgress {
    epoch: std::time::Instant,
    answered: AtomicU64,
    /// The highest sequence sent.
    last_sent: AtomicU64,
    /// The sequence of the Ping in flight and when it went out (µs after `epoch`).
    in_flight: std::sync::Mutex<(u64, u64)>,
    /// A round trip measured and not yet reported, µs (`u64::MAX` = none).
    fresh_rtt_us: AtomicU64,
}

impl ReadProgress {
    pub(super) fn new() -> Self {
        Self {
            epoch: std::time::Instant::now(),
            answered: AtomicU64::new(0),
            last_sent: AtomicU64::new(0),
            in_flight: std::sync::Mutex::new((0, 0)),
            fresh_rtt_us: AtomicU64::new(u64::MAX),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The writer sent Ping `seq`.
    pub(super) fn sent(&self, seq: u64) {
        let now = self.now_us();
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = (seq, now);
        self.last_sent.fetch_max(seq, Ordering::Relaxed);
    }

    /// The reader saw the Pong of `seq`.
    pub(super) fn answered(&self, seq: u64) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        // A Pong for a Ping never sent proves nothing: a client must not answer ahead of the
        // probe and so stay unprobed while it stops reading.
        if seq <= self.last_sent.load(Ordering::Relaxed) {
            self.answered.fetch_max(seq, Ordering::Relaxed);
        }
        // Only the Ping in flight times a round trip, and only once (a repeated Pong is ignored).
        if seq == in_flight.0 && seq != 0 {
            let rtt = self.now_us().saturating_sub(in_flight.1);
            *in_flight = (0, 0);
            self.fresh_rtt_us.store(rtt, Ordering::Relaxed);
        }
    }

    pub(super) fn highest_answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// The round trip measured since the last call, if any.
    pub(super) fn take_round_trip(&self) -> Option<Duration> {
        match self.fresh_rtt_us.swap(u64::MAX, Ordering::Relaxed) {
            u64::MAX => None,
            us => Some(Duration::from_micros(us)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_probe_pings_while_answered_and_stalls_once_a_ping_goes_unanswered() {
        let t0 = tokio::time::Instant::now();
        let timeout = Duration::from_secs(10);
        let mut p = ReadProbe::new(timeout, t0);
        assert_eq!(p.next, t0 + FIRST_PROBE, "the first Ping goes out early");
        assert_eq!(p.step(0, p.next), ProbeStep::Send(1));
        let sent = p.sent_at;
        // Answered by the next firing: the next Ping goes out.
        assert_eq!(p.step(1, p.next), ProbeStep::Send(2));
        // Unanswered half-way: wait until the deadline, then give up.
        let half = p.next;
        assert_eq!(p.step(1, half), ProbeStep::Wait);
        assert_eq!(p.next, half - timeout / 2 + timeout);
        assert_eq!(p.step(1, p.next), ProbeStep::Stalled);
        // A late answer before the deadline keeps the connection.
        let mut q = ReadProbe::new(timeout, sent);
        assert_eq!(q.step(0, q.next), ProbeStep::Send(1));
        assert_eq!(q.step(0, q.next), ProbeStep::Wait);
        assert_eq!(
            q.step(1, q.next - Duration::from_millis(1)),
            ProbeStep::Send(2)
        );
    }

    #[test]
    fn a_round_trip_is_timed_by_the_host_from_the_ping_in_flight_once() {
        let p = ReadProgress::new();
        assert_eq!(p.take_round_trip(), None, "nothing measured before a Ping");
        p.sent(1);
        p.answered(1);
        assert_eq!(p.highest_answered(), 1);
        assert!(p.take_round_trip().is_some());
        assert_eq!(p.take_round_trip(), None, "reported once");
        p.answered(1);
        assert_eq!(p.take_round_trip(), None, "a repeated Pong times nothing");
        p.sent(2);
        p.answered(7);
        assert_eq!(
            p.highest_answered(),
            1,
            "a Pong for a Ping never sent is not an answer"
        );
        assert_eq!(
            p.take_round_trip(),
            None,
            "a Pong for another sequence than the Ping in flight times nothing"
        );
        p.answered(2);
        assert_eq!(p.highest_answered(), 2);
        assert!(p.take_round_trip().is_some());
    }
}
