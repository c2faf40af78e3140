//! The WARN line a zone's refused spawns, facts and events produce: one per zone per interval,
//! carrying how many refusals it stands for, so game code that hits a limit on every call
//! cannot flood the log (each refusal is counted in `/metrics` regardless).

use zonekeep_core::AdvanceReport;

/// Seconds of zone time between two lines of one zone.
pub(crate) const LIMIT_LOG_EVERY_SECONDS: u64 = 10;

/// Refusals since the last line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusals {
    /// Spawns over `max_entities`.
    pub spawns: u64,
    /// Facts over `max_fact_bytes`.
    pub facts_too_large: u64,
    /// Facts over `max_facts_per_second`.
    pub facts_rate: u64,
    /// Facts refused with `max_facts_in_flight` in flight.
    pub facts_in_flight: u64,
    /// Events dropped (queue full, or larger than the protocol carries).
    pub events_dropped: u64,
}

impl Refusals {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn add(&mut self, report: &AdvanceReport) {
        self.spawns += report.spawns_refused;
        self.facts_too_large += report.facts_refused.too_large;
        self.facts_rate += report.facts_refused.rate;
        self.facts_in_flight += report.facts_overflowed;
        self.events_dropped += report.events_dropped;
    }
}

/// One zone's refusal log state.
#[derive(Debug, Default)]
pub(crate) struct LimitLog {
    /// The tick of the last line (`None`: none yet).
    last: Option<u64>,
    pending: Refusals,
}

impl LimitLog {
    /// Adds `report`'s refusals; returns what a line should say when one is due at `tick`: the
    /// first refusal at once, later ones at most once per [`LIMIT_LOG_EVERY_SECONDS`] of zone
    /// time (what came in between is summed into that line).
    pub(crate) fn note(&mut self, report: &AdvanceReport, tick_hz: u32) -> Option<Refusals> {
        self.pending.add(report);
        if self.pending.is_empty() {
            return None;
        }
        let every = LIMIT_LOG_EVERY_SECONDS.saturating_mul(u64::from(tick_hz));
        if self
            .last
            .is_some_and(|last| report.tick.saturating_sub(last) < every)
        {
            return None;
        }
        self.last = Some(report.tick);
        Some(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(tick: u64, rate: u64) -> AdvanceReport {
        let mut r = AdvanceReport {
            tick,
            ..AdvanceReport::default()
        };
        r.facts_refused.rate = rate;
        r
    }

    #[test]
    fn one_line_per_interval_carries_every_refusal_it_stands_for() {
        let mut log = LimitLog::default();
        let first = log.note(&report(1, 5), 30).map(|r| r.facts_rate);
        assert_eq!(first, Some(5), "the first refusal is logged at once");
        // Refusals on each of the next 299 ticks: no line until ten seconds of ticks passed.
        let lines: Vec<u64> = (2..=301)
            .filter_map(|t| log.note(&report(t, 3), 30))
            .map(|r| r.facts_rate)
            .collect();
        assert_eq!(lines, vec![299 * 3 + 3], "one line for ticks 2..=301");
        assert_eq!(log.note(&report(302, 0), 30), None, "nothing refused since");
    }
}
