//! The lobby's counters: requests refused for their credential, seats handed out, and the rooms
//! this host reported (and the reports that failed).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The lobby's counters. Cheap to clone (each metric is an `Arc`ed atomic).
#[derive(Debug, Clone, Default)]
pub struct LobbyMetrics {
    refused: Family<Vec<(&'static str, String)>, Counter>,
    seated: Family<Vec<(&'static str, String)>, Counter>,
    reported: Counter,
    report_failures: Counter,
}

impl LobbyMetrics {
    /// Adds every metric to `registry`, each labelled series from the start at 0.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_lobby_refused",
            "Lobby requests refused for their credential: `missing` (no bearer token) or `wrong` \
             (a bearer token that is not the lobby token)",
            self.refused.clone(),
        );
        registry.register(
            "zonekeep_lobby_seats",
            "Seats the lobby handed out, by where: `joined` (an existing room) or `created` (a \
             room made for it)",
            self.seated.clone(),
        );
        registry.register(
            "zonekeep_lobby_rooms_reported",
            "Room reports this host wrote for the rooms it runs",
            self.reported.clone(),
        );
        registry.register(
            "zonekeep_lobby_report_failures",
            "Rounds of room reports the store refused or did not answer in time",
            self.report_failures.clone(),
        );
        for reason in ["missing", "wrong"] {
            let _ = self
                .refused
                .get_or_create(&vec![("reason", reason.to_owned())]);
        }
        for how in ["joined", "created"] {
            let _ = self.seated.get_or_create(&vec![("how", how.to_owned())]);
        }
    }

    /// Counts a request refused for its credential.
    pub fn refused(&self, reason: &'static str) {
        self.refused
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// Counts a seat handed out.
    pub fn seated(&self, how: &'static str) {
        self.seated
            .get_or_create(&vec![("how", how.to_owned())])
            .inc();
    }

    /// Counts room reports written.
    pub fn reported(&self, rooms: u64) {
        self.reported.inc_by(rooms);
    }

    /// Counts a round of reports that failed.
    pub fn report_failed(&self) {
        self.report_failures.inc();
    }
}
