//! Clock sync: estimating the server's tick from Ping/Pong round trips and Delta arrivals.
//!
//! Pure: every time is a caller-supplied local monotonic time in microseconds, so tests drive it
//! exactly. The estimate is a line `tick(local_us)` anchored on the round trip with the smallest RTT in
//! a recent window (the sample least distorted by queueing), the same filter NTP and most game clients
//! use. Arrival jitter of Deltas (RFC 3550 style) feeds the replica's adaptive interpolation delay.

use std::collections::VecDeque;

/// How many recent Pong samples the min-RTT filter looks at. At one Ping a second this forgets a
/// stale low-RTT sample (e.g. after a route change) within half a minute.
pub const DEFAULT_WINDOW: usize = 32;

/// One Ping/Pong round trip, as measured by the client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PongSample {
    /// Local time the Ping was sent (µs).
    pub sent_us: u64,
    /// Local time the Pong arrived (µs).
    pub recv_us: u64,
    /// The server's monotonic clock when it answered (µs).
    pub server_time_us: u64,
    /// The zone tick when it answered.
    pub server_tick: u64,
}

impl PongSample {
    /// Round-trip time in microseconds (0 if the clock went backwards, which a monotonic clock never does).
    pub fn rtt_us(&self) -> u64 {
        self.recv_us.saturating_sub(self.sent_us)
    }
}

/// Server tick estimation, RTT and jitter.
#[derive(Debug, Clone)]
pub struct ClockSync {
    tick_hz: f64,
    window: usize,
    samples: VecDeque<PongSample>,
    /// Smoothed RTT (µs), EWMA with gain 1/8 (RFC 6298).
    srtt_us: Option<f64>,
    /// Mean deviation of RTT (µs), EWMA with gain 1/4 (RFC 6298).
    rttvar_us: f64,
    /// Line anchor: at local time `anchor_local_us` the server was at (fractional) tick `anchor_tick`.
    anchor: Option<(f64, f64)>,
    /// Delta arrival jitter (µs), RFC 3550 §6.4.1 estimator.
    jitter_us: f64,
    last_transit_us: Option<f64>,
    pongs: u64,
}

impl ClockSync {
    /// A clock for a zone ticking at `tick_hz` (from Welcome), with the default min-RTT window.
    pub fn new(tick_hz: u32) -> Self {
        Self::with_window(tick_hz, DEFAULT_WINDOW)
    }

    /// A clock with an explicit min-RTT window size (at least 1).
    pub fn with_window(tick_hz: u32, window: usize) -> Self {
        Self {
            tick_hz: f64::from(tick_hz.max(1)),
            window: window.max(1),
            samples: VecDeque::with_capacity(window.max(1)),
            srtt_us: None,
            rttvar_us: 0.0,
            anchor: None,
            jitter_us: 0.0,
            last_transit_us: None,
            pongs: 0,
        }
    }

    /// Ticks per second of the zone.
    pub fn tick_hz(&self) -> f64 {
        self.tick_hz
    }

    /// Seeds the estimate from Welcome: the zone was at `tick` when the message left the server.
    /// Used until the first Pong; half a tick is added because the server's tick counter is a floor.
    pub fn on_welcome(&mut self, tick: u64, recv_us: u64) {
        if self.pongs == 0 {
            self.anchor = Some((recv_us as f64, tick as f64 + 0.5));
        }
    }

    /// Feeds one Pong round trip.
    pub fn on_pong(&mut self, sample: PongSample) {
        if sample.recv_us < sample.sent_us {
            return;
        }
        self.pongs += 1;
        let rtt = sample.rtt_us() as f64;
        match self.srtt_us {
            None => {
                self.srtt_us = Some(rtt);
                self.rttvar_us = rtt / 2.0;
            }
            Some(srtt) => {
                self.rttvar_us = 0.75 * self.rttvar_us + 0.25 * (srtt - rtt).abs();
                self.srtt_us = Some(0.875 * srtt + 0.125 * rtt);
            }
        }
        if self.samples.len() == self.window {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
        self.refit();
    }

    /// Re-anchors the line on the min-RTT sample of the window.
    ///
    /// The server's clock offset comes from that sample alone (the server answered at the midpoint
    /// of the round trip, give or take half the RTT; the least-RTT sample bounds that error best).
    /// The tick phase uses every sample: `tick = floor(base + server_time·hz)`, so each sample's
    /// `tick − server_time·hz` lies in `(base − 1, base]` and their maximum converges on `base`.
    fn refit(&mut self) {
        let Some(best) = self.samples.iter().min_by_key(|s| s.rtt_us()) else {
            return;
        };
        let mid_local = (best.sent_us as f64 + best.recv_us as f64) / 2.0;
        let offset_us = best.server_time_us as f64 - mid_local;
        let per_us = self.tick_hz / 1e6;
        let base = self
            .samples
            .iter()
            .map(|s| s.server_tick as f64 - s.server_time_us as f64 * per_us)
            .fold(f64::NEG_INFINITY, f64::max);
        // Anchor at the best sample's midpoint, in local time.
        let server_time_at_mid = mid_local + offset_us;
        self.anchor = Some((mid_local, base + server_time_at_mid * per_us));
    }

    /// Feeds the arrival of a Delta for `tick` at local time `recv_us`; updates arrival jitter.
    pub fn on_delta(&mut self, tick: u64, recv_us: u64) {
        // Transit = arrival − the local time the tick happened on the estimated server timeline.
        // Its constant part is irrelevant; only the variation between consecutive Deltas counts.
        let sent_local = tick as f64 * 1e6 / self.tick_hz;
        let transit = recv_us as f64 - sent_local;
        if let Some(prev) = self.last_transit_us {
            let d = (transit - prev).abs();
            self.jitter_us += (d - self.jitter_us) / 16.0;
        }
        self.last_transit_us = Some(transit);
    }

    /// Whether any estimate exists yet (after Welcome or a Pong).
    pub fn is_synced(&self) -> bool {
        self.anchor.is_some()
    }

    /// Number of Pongs received.
    pub fn pongs(&self) -> u64 {
        self.pongs
    }

    /// Estimated (fractional) server tick at local time `now_us`, or `None` before any sample.
    pub fn server_tick_at(&self, now_us: u64) -> Option<f64> {
        let (local, tick) = self.anchor?;
        Some(tick + (now_us as f64 - local) * self.tick_hz / 1e6)
    }

    /// Smoothed RTT in microseconds, if any Pong arrived.
    pub fn rtt_us(&self) -> Option<f64> {
        self.srtt_us
    }

    /// Smallest RTT in the current window (µs).
    pub fn min_rtt_us(&self) -> Option<u64> {
        self.samples.iter().map(PongSample::rtt_us).min()
    }

    /// RTT mean deviation (µs): the jitter of the round trip.
    pub fn rtt_jitter_us(&self) -> f64 {
        self.rttvar_us
    }

    /// Delta arrival jitter (µs).
    pub fn delta_jitter_us(&self) -> f64 {
        self.jitter_us
    }

    /// The larger of the two jitters, in ticks: what the replica must absorb.
    pub fn jitter_ticks(&self) -> f64 {
        self.jitter_us.max(self.rttvar_us / 2.0) * self.tick_hz / 1e6
    }

    /// Forgets RTT and tick samples (after a reconnect, when the route or the host may have changed).
    pub fn reset(&mut self) {
        *self = Self::with_window(self.tick_hz as u32, self.window);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A simulated server whose monotonic clock is `local + offset` and whose tick counter is
    /// `floor(phase + server_time * hz)`.
    struct Server {
        offset_us: i64,
        hz: f64,
        phase: f64,
    }

    impl Server {
        fn answer(&self, sent: u64, up_us: u64, down_us: u64) -> PongSample {
            let at_local = sent + up_us;
            let server_time = (at_local as i64 + self.offset_us) as u64;
            let tick = (self.phase + server_time as f64 * self.hz / 1e6).floor() as u64;
            PongSample {
                sent_us: sent,
                recv_us: at_local + down_us,
                server_time_us: server_time,
                server_tick: tick,
            }
        }
        fn true_tick(&self, local: u64) -> f64 {
            self.phase + (local as i64 + self.offset_us) as f64 * self.hz / 1e6
        }
    }

    #[test]
    fn converges_to_offset_with_symmetric_paths() {
        let server = Server {
            offset_us: 5_000_000_000,
            hz: 30.0,
            phase: 0.37,
        };
        let mut c = ClockSync::new(30);
        assert!(c.server_tick_at(0).is_none());
        let mut t = 1_000_000u64;
        for i in 0..20u64 {
            // Queueing delay varies; the 7th sample is the clean one (20 ms each way).
            let q = if i == 7 {
                0
            } else {
                3_000 + (i * 7_919) % 40_000
            };
            c.on_pong(server.answer(t, 20_000 + q, 20_000 + q / 3));
            t += 1_000_003;
        }
        let now = t + 123_456;
        let est = c.server_tick_at(now).unwrap();
        let truth = server.true_tick(now);
        // The floor-phase filter converges within the spread of tick phases seen: well under a tick.
        assert!((est - truth).abs() < 0.25, "est {est} truth {truth}");
        assert_eq!(c.min_rtt_us(), Some(40_000));
        assert_eq!(c.pongs(), 20);
    }

    #[test]
    fn min_rtt_filter_ignores_queued_samples() {
        let server = Server {
            offset_us: -300_000,
            hz: 60.0,
            phase: 0.9,
        };
        let mut good = ClockSync::new(60);
        let mut t = 10_000_000u64;
        // One clean sample, then many with asymmetric queueing on the way back (which biases the
        // midpoint). The filter must keep the clean sample's offset.
        good.on_pong(server.answer(t, 10_000, 10_000));
        for _ in 0..10 {
            t += 1_000_000;
            good.on_pong(server.answer(t, 10_000, 150_000));
        }
        let est = good.server_tick_at(t).unwrap();
        let truth = server.true_tick(t);
        assert!((est - truth).abs() < 1.0, "est {est} truth {truth}");
        // An estimator using the latest sample would be off by 70 ms = 4.2 ticks.
        let mut naive = ClockSync::with_window(60, 1);
        naive.on_pong(server.answer(t, 10_000, 150_000));
        let off = (naive.server_tick_at(t).unwrap() - truth).abs();
        assert!(off > 3.0, "naive offset {off}");
    }

    #[test]
    fn welcome_seeds_then_pong_overrides() {
        let mut c = ClockSync::new(20);
        c.on_welcome(100, 1_000_000);
        // 1 s later at 20 Hz: 20 ticks on.
        assert_eq!(c.server_tick_at(2_000_000), Some(120.5));
        c.on_pong(PongSample {
            sent_us: 2_000_000,
            recv_us: 2_100_000,
            server_time_us: 50_000_000,
            server_tick: 1_000,
        });
        // Anchored at the midpoint: tick 1000 at server time 50 s (phase 0).
        let at_mid = c.server_tick_at(2_050_000).unwrap();
        assert!((at_mid - 1_000.0).abs() < 1e-9, "{at_mid}");
        // A later Welcome (a reconnect without reset) does not override Pong data.
        c.on_welcome(5, 2_050_000);
        assert!((c.server_tick_at(2_050_000).unwrap() - 1_000.0).abs() < 1e-9);
    }

    #[test]
    fn rtt_ewma_and_jitter() {
        let mut c = ClockSync::new(30);
        for i in 0..50u64 {
            let rtt = if i % 2 == 0 { 80_000 } else { 120_000 };
            c.on_pong(PongSample {
                sent_us: i * 1_000_000,
                recv_us: i * 1_000_000 + rtt,
                server_time_us: i * 1_000_000,
                server_tick: i * 30,
            });
        }
        let srtt = c.rtt_us().unwrap();
        assert!((srtt - 100_000.0).abs() < 5_000.0, "{srtt}");
        let var = c.rtt_jitter_us();
        assert!(var > 15_000.0 && var < 25_000.0, "{var}");
    }

    #[test]
    fn delta_jitter_zero_when_regular_positive_when_not() {
        let mut c = ClockSync::new(30);
        // Patches every 2 ticks at exactly 1/15 s intervals.
        for i in 0..40u64 {
            c.on_delta(i * 2, 5_000_000 + i * 2 * 1_000_000 / 30);
        }
        assert!(c.delta_jitter_us() < 1.0, "{}", c.delta_jitter_us());
        for i in 40..200u64 {
            let wobble = if i % 2 == 0 { 0 } else { 30_000 };
            c.on_delta(i * 2, 5_000_000 + i * 2 * 1_000_000 / 30 + wobble);
        }
        let j = c.delta_jitter_us();
        assert!(j > 25_000.0 && j < 31_000.0, "{j}");
        assert!(c.jitter_ticks() > 0.75 && c.jitter_ticks() < 0.95);
        c.reset();
        assert!(!c.is_synced());
        assert_eq!(c.delta_jitter_us(), 0.0);
    }
}
