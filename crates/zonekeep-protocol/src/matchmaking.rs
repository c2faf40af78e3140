//! The matchmaker's search states, as its HTTP API names them (docs/MATCHMAKING.md), shared by
//! the store that keeps searches and the clients that follow them.

use std::fmt;

/// Where a search is in its life: `probing → queued → proposed → allocated → assigned →
/// connected`, or over as `cancelled`, `expired` or `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SearchState {
    /// Created; its probes are being answered.
    Probing,
    /// Waiting in its queue for a match.
    Queued,
    /// Taken into a forming match.
    Proposed,
    /// Its match's zone is claimed for a host of the match's region.
    Allocated,
    /// Its player has a ticket for the match's zone.
    Assigned,
    /// The zone's host reported its player present (final).
    Connected,
    /// Cancelled by its player (final).
    Cancelled,
    /// Lapsed: no probe answered in time, no heartbeat, or the seat not taken (final).
    Expired,
    /// Could not be served (final).
    Failed,
}

impl SearchState {
    /// Every state, in the order a search goes through them.
    pub const ALL: [SearchState; 9] = [
        Self::Probing,
        Self::Queued,
        Self::Proposed,
        Self::Allocated,
        Self::Assigned,
        Self::Connected,
        Self::Cancelled,
        Self::Expired,
        Self::Failed,
    ];

    /// The state's name in the API and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Probing => "probing",
            Self::Queued => "queued",
            Self::Proposed => "proposed",
            Self::Allocated => "allocated",
            Self::Assigned => "assigned",
            Self::Connected => "connected",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Failed => "failed",
        }
    }

    /// The state named `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether nothing more happens to the search: `connected`, `cancelled`, `expired` or
    /// `failed`.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Connected | Self::Cancelled | Self::Expired | Self::Failed
        )
    }

    /// How far along a search is: probing < queued < proposed < allocated < assigned <
    /// connected, and the other final states after all of them. A client that saw a state of a
    /// higher rank reads an answer of a lower one as older news.
    pub fn rank(self) -> u8 {
        match self {
            Self::Probing => 0,
            Self::Queued => 1,
            Self::Proposed => 2,
            Self::Allocated => 3,
            Self::Assigned => 4,
            Self::Connected => 5,
            Self::Cancelled | Self::Expired | Self::Failed => 6,
        }
    }
}

impl fmt::Display for SearchState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_parses_back_from_its_name_and_only_the_last_four_are_final() {
        for s in SearchState::ALL {
            assert_eq!(SearchState::parse(s.as_str()), Some(s));
        }
        assert_eq!(SearchState::parse("dancing"), None);
        let finals: Vec<_> = SearchState::ALL
            .into_iter()
            .filter(|s| s.is_final())
            .collect();
        assert_eq!(finals, SearchState::ALL[5..]);
        assert!(SearchState::Assigned.rank() > SearchState::Queued.rank());
    }
}
