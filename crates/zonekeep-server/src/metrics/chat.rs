//! Chat's counters: lines kept and refused (by reason), how many sessions each kept line
//! reached, lines dropped for slow or waiting sessions, reports filed, sanctions written and in
//! force, bans enforced by a kick, and failed store calls.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// Chat's counters. Cheap to clone (each metric is an `Arc`ed atomic).
#[derive(Debug, Clone, Default)]
pub struct ChatMetrics {
    kept: Counter,
    refused: Family<Labels, Counter>,
    delivered: Counter,
    dropped: Family<Labels, Counter>,
    reports: Counter,
    sanctions: Family<Labels, Counter>,
    in_force: Gauge,
    ban_kicks: Counter,
    store_failed: Counter,
}

const REFUSALS: &[&str] = &[
    "invalid",
    "not_allowed",
    "muted",
    "rate_limited",
    "queue_full",
    "busy",
    "store",
    "not_found",
];
const DROPS: &[&str] = &["slow", "waiting"];
const ACTIONS: &[&str] = &["mute", "ban"];

impl ChatMetrics {
    /// Adds every metric to `registry`, each labelled series from the start at 0.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_chat_lines_kept",
            "Chat lines this host's sessions and back end said that the store kept",
            self.kept.clone(),
        );
        registry.register(
            "zonekeep_chat_refused",
            "Chat lines, history reads and reports refused, by reason",
            self.refused.clone(),
        );
        registry.register(
            "zonekeep_chat_delivered",
            "Chat lines handed to sessions of this host (one per session that heard a line)",
            self.delivered.clone(),
        );
        registry.register(
            "zonekeep_chat_dropped",
            "Chat lines not handed to a session: `slow` (its outbox was full or it was gone), \
             `waiting` (more arrived while its history was on its way than it may hold)",
            self.dropped.clone(),
        );
        registry.register(
            "zonekeep_chat_reports",
            "Reports of chat lines filed",
            self.reports.clone(),
        );
        registry.register(
            "zonekeep_chat_sanctions",
            "Mutes and bans written through this host",
            self.sanctions.clone(),
        );
        registry.register(
            "zonekeep_chat_sanctions_in_force",
            "Mutes and bans in force as this host last read them",
            self.in_force.clone(),
        );
        registry.register(
            "zonekeep_chat_ban_kicks",
            "Sessions this host closed because a ban keeps their principal out",
            self.ban_kicks.clone(),
        );
        registry.register(
            "zonekeep_chat_store_failed",
            "Chat store calls that failed or timed out",
            self.store_failed.clone(),
        );
        for (family, labels) in [
            (&self.refused, REFUSALS),
            (&self.dropped, DROPS),
            (&self.sanctions, ACTIONS),
        ] {
            for l in labels {
                let _ = family.get_or_create(&vec![("reason", (*l).to_owned())]);
            }
        }
    }

    fn inc(family: &Family<Labels, Counter>, label: &str) {
        family
            .get_or_create(&vec![("reason", label.to_owned())])
            .inc();
    }

    /// Counts a line the store kept.
    pub fn kept(&self) {
        self.kept.inc();
    }

    /// Counts a refusal.
    pub fn refused(&self, why: &str) {
        Self::inc(&self.refused, why);
    }

    /// Counts sessions a line was handed to.
    pub fn fanned_out(&self, n: usize) {
        self.delivered.inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// Counts a line not handed to a session.
    pub fn dropped(&self, why: &str) {
        Self::inc(&self.dropped, why);
    }

    /// Counts a report filed.
    pub fn reported(&self) {
        self.reports.inc();
    }

    /// Counts a sanction written.
    pub fn sanctioned(&self, action: &str) {
        Self::inc(&self.sanctions, action);
    }

    /// Sets the sanctions in force.
    pub fn set_sanctions(&self, n: usize) {
        self.in_force.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts a session closed by a ban.
    pub fn banned_kick(&self) {
        self.ban_kicks.inc();
    }

    /// Counts a failed store call.
    pub fn store_failed(&self) {
        self.store_failed.inc();
    }
}
