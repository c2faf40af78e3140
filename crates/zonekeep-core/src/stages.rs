//! Where a zone's time goes: each tick split into its stages, each timed when the host is handed
//! a stage clock, and kept as windowed histograms an operator reads as p50/p95/max per stage.
//!
//! Stage times are diagnostics, never simulation input: they are read from their own clock
//! ([`ZoneHost::set_stage_clock`](crate::ZoneHost::set_stage_clock)), not the zone's recorded
//! one, so turning them on changes no recording and no replay. Without a stage clock nothing is
//! read and nothing is kept. Recording a duration is a few integer operations and allocates
//! nothing; the histograms are bounded (two windows of [`BUCKETS`] 16-bit counts per stage).

use std::time::Duration;

/// The clock stage timings are read from ([`crate::ZoneHost::set_stage_clock`]): a newtype so
/// the replicator's buffers stay `Debug`.
#[derive(Clone)]
pub struct StageClock(pub std::sync::Arc<dyn crate::clock::Clock>);

impl StageClock {
    /// The clock's reading.
    pub fn now(&self) -> std::time::Duration {
        self.0.now()
    }
}

impl std::fmt::Debug for StageClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StageClock")
    }
}

/// One stage of a zone's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Settlements, call results and zone messages delivered at the start of a tick.
    Inbox,
    /// Inputs checked and sanitized as they arrive (between ticks).
    Sanitize,
    /// Buffered inputs applied to the zone.
    Inputs,
    /// The zone's own `tick`.
    Tick,
    /// Due timers fired, then kicks and transfers applied.
    Timers,
    /// Each subscriber's view found (interest).
    Interest,
    /// Each subscriber's Delta diffed and encoded.
    Encode,
    /// Updates chosen under a subscriber's byte budget (datagram sessions).
    Budget,
    /// A patch's frames handed to the connections (the host's part).
    Handoff,
    /// A save written by the store (off the tick).
    Save,
    /// Facts committed by the store (off the tick).
    Facts,
}

impl Stage {
    /// Every stage, in the order a tick meets them.
    pub const ALL: [Stage; 11] = [
        Stage::Inbox,
        Stage::Sanitize,
        Stage::Inputs,
        Stage::Tick,
        Stage::Timers,
        Stage::Interest,
        Stage::Encode,
        Stage::Budget,
        Stage::Handoff,
        Stage::Save,
        Stage::Facts,
    ];

    /// Its name in the admin API and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Inbox => "inbox",
            Stage::Sanitize => "sanitize",
            Stage::Inputs => "inputs",
            Stage::Tick => "tick",
            Stage::Timers => "timers",
            Stage::Interest => "interest",
            Stage::Encode => "encode",
            Stage::Budget => "budget",
            Stage::Handoff => "handoff",
            Stage::Save => "save",
            Stage::Facts => "facts",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Histogram buckets per stage and window: four per power of two of nanoseconds, from 64 ns to
/// about nine minutes (longer durations count in the last bucket; the max is exact).
pub const BUCKETS: usize = 128;

/// How long a window lasts, in the stage clock's time: percentiles cover the current window and
/// the one before it, so the last 30 to 60 seconds.
pub const WINDOW: Duration = Duration::from_secs(30);

fn bucket_of(ns: u64) -> usize {
    let v = ns >> 6;
    if v < 4 {
        return v as usize;
    }
    let octave = 63 - u64::from(v.leading_zeros());
    let sub = (v >> (octave - 2)) & 3;
    let i = (octave as usize - 1) * 4 + sub as usize;
    i.min(BUCKETS - 1)
}

/// The largest duration bucket `i` holds (what a percentile in it reports).
fn bucket_top(i: usize) -> Duration {
    if i < 4 {
        return Duration::from_nanos(((i as u64) + 1) << 6);
    }
    let octave = (i / 4 + 1) as u32;
    let sub = (i % 4) as u64;
    let low = (4 + sub) << (octave - 2);
    let high = low + (1 << (octave - 2));
    Duration::from_nanos(high.saturating_mul(64))
}

#[derive(Debug, Clone)]
struct Window {
    counts: [u16; BUCKETS],
    total: u32,
    max: Duration,
}

impl Default for Window {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
            total: 0,
            max: Duration::ZERO,
        }
    }
}

impl Window {
    fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(bucket_of(ns)) {
            *c = c.saturating_add(1);
        }
        self.total = self.total.saturating_add(1);
        self.max = self.max.max(d);
    }
}

/// What an operator reads of one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSummary {
    /// Which stage.
    pub stage: Stage,
    /// Durations recorded in the last 30 to 60 seconds.
    pub count: u64,
    /// Median (the top of its histogram bucket: within 19 % above the true value).
    pub p50: Duration,
    /// 95th percentile, as `p50`.
    pub p95: Duration,
    /// Longest, exact.
    pub max: Duration,
    /// Durations recorded since the zone was created.
    pub lifetime_count: u64,
}

/// Every stage's recent durations for one zone.
#[derive(Debug, Clone)]
pub struct StageTimes {
    current: Vec<Window>,
    previous: Vec<Window>,
    window_started: Duration,
    lifetime: [u64; Stage::ALL.len()],
}

impl Default for StageTimes {
    fn default() -> Self {
        Self {
            current: vec![Window::default(); Stage::ALL.len()],
            previous: vec![Window::default(); Stage::ALL.len()],
            window_started: Duration::ZERO,
            lifetime: [0; Stage::ALL.len()],
        }
    }
}

impl StageTimes {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `stage` took `took`, ending at `now` (on the stage clock): a window older
    /// than [`WINDOW`] becomes the previous one first.
    pub fn record(&mut self, stage: Stage, took: Duration, now: Duration) {
        if now.saturating_sub(self.window_started) >= WINDOW {
            std::mem::swap(&mut self.current, &mut self.previous);
            for w in &mut self.current {
                *w = Window::default();
            }
            self.window_started = now;
        }
        let i = stage.index();
        if let Some(w) = self.current.get_mut(i) {
            w.record(took);
        }
        if let Some(n) = self.lifetime.get_mut(i) {
            *n = n.saturating_add(1);
        }
    }

    /// `stage`'s p50, p95 and max over the current and the previous window.
    pub fn summary(&self, stage: Stage) -> StageSummary {
        let i = stage.index();
        let mut counts = [0u32; BUCKETS];
        let mut total = 0u64;
        let mut max = Duration::ZERO;
        for w in [self.current.get(i), self.previous.get(i)]
            .into_iter()
            .flatten()
        {
            for (sum, c) in counts.iter_mut().zip(w.counts.iter()) {
                *sum += u32::from(*c);
            }
            total += u64::from(w.total);
            max = max.max(w.max);
        }
        let at = |q: f64| -> Duration {
            if total == 0 {
                return Duration::ZERO;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0u64;
            for (b, c) in counts.iter().enumerate() {
                seen += u64::from(*c);
                if seen >= rank {
                    return bucket_top(b).min(max);
                }
            }
            max
        };
        StageSummary {
            stage,
            count: total,
            p50: at(0.50),
            p95: at(0.95),
            max,
            lifetime_count: self.lifetime.get(i).copied().unwrap_or(0),
        }
    }

    /// Every stage's summary, in [`Stage::ALL`] order.
    pub fn summaries(&self) -> Vec<StageSummary> {
        Stage::ALL.iter().map(|s| self.summary(*s)).collect()
    }
}

/// The durations of one `advance` (or one frame build) per stage, summed, for a host that
/// exports them as metrics. Indexed by [`Stage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageDurations {
    took: [Option<Duration>; Stage::ALL.len()],
}

impl StageDurations {
    /// Adds `took` to `stage`.
    pub fn add(&mut self, stage: Stage, took: Duration) {
        if let Some(slot) = self.took.get_mut(stage.index()) {
            *slot = Some(slot.unwrap_or_default().saturating_add(took));
        }
    }

    /// `stage`'s summed duration, if it ran.
    pub fn get(&self, stage: Stage) -> Option<Duration> {
        self.took.get(stage.index()).copied().flatten()
    }

    /// Every stage that ran, with its summed duration.
    pub fn iter(&self) -> impl Iterator<Item = (Stage, Duration)> + '_ {
        Stage::ALL
            .iter()
            .filter_map(|s| self.get(*s).map(|d| (*s, d)))
    }

    /// Whether no stage ran.
    pub fn is_empty(&self) -> bool {
        self.took.iter().all(Option::is_none)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn buckets_grow_by_quarter_octaves_and_hold_what_they_report() {
        let mut last = 0;
        for ns in [
            0u64,
            63,
            64,
            255,
            256,
            300,
            1_000,
            65_536,
            1_000_000,
            1 << 40,
        ] {
            let b = bucket_of(ns);
            assert!(b >= last, "{ns}");
            last = b;
            assert!(
                bucket_top(b) >= Duration::from_nanos(ns) || b == BUCKETS - 1,
                "{ns}"
            );
        }
        for b in 4..BUCKETS - 1 {
            // A bucket's top is at most a quarter octave above its bottom.
            let top = bucket_top(b).as_nanos() as f64;
            let below = bucket_top(b - 1).as_nanos() as f64;
            assert!(top / below <= 1.26, "{b}: {below} → {top}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_come_from_the_last_two_windows_only() {
        let mut t = StageTimes::new();
        let ms = Duration::from_millis;
        for i in 0..100u64 {
            t.record(Stage::Tick, ms(if i < 95 { 1 } else { 40 }), ms(i));
        }
        let s = t.summary(Stage::Tick);
        assert_eq!(s.count, 100);
        assert!(s.p50 >= ms(1) && s.p50 <= ms(1) * 5 / 4, "{s:?}");
        assert!(s.p95 >= ms(1) && s.p95 <= ms(2), "{s:?}");
        assert_eq!(s.max, ms(40));
        assert_eq!(t.summary(Stage::Inbox).count, 0);
        // Two windows later the old durations are gone; the lifetime count keeps them.
        t.record(Stage::Tick, ms(2), WINDOW + ms(1));
        t.record(Stage::Tick, ms(2), WINDOW * 2 + ms(2));
        let s = t.summary(Stage::Tick);
        assert_eq!((s.count, s.max, s.lifetime_count), (2, ms(2), 102));
    }

    #[test]
    fn summed_durations_name_only_the_stages_that_ran() {
        let mut d = StageDurations::default();
        assert!(d.is_empty());
        d.add(Stage::Tick, Duration::from_micros(5));
        d.add(Stage::Tick, Duration::from_micros(7));
        assert_eq!(
            d.iter().collect::<Vec<_>>(),
            vec![(Stage::Tick, Duration::from_micros(12))]
        );
    }
}
