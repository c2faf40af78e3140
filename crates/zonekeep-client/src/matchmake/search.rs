//! What a matchmaker answers, as this client reads it: a [`Search`] and its [`Assignment`], the
//! [`SearchState`]s it goes through, the [`MatchError`]s a search can end in, and the
//! [`SearchTracker`] that moves only forward and hands an assignment out once.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::error::ClientError;

/// Refusal codes after which searching again may succeed: a matchmaker or store in trouble, a
/// region without a live host to probe, a search queued before any probe was recorded.
pub(super) const RETRYABLE_CODES: &[&str] =
    &["unavailable", "probe_unavailable", "no_probe_result"];

/// Why no match was had.
#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    /// The matchmaker refused a request (docs/MATCHMAKING.md, "Refusals").
    #[error("the matchmaker refused ({code}, {status}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The refusal code (`bad_request`, `unauthorized`, `unknown_queue`, `no_search`,
        /// `wrong_state`, `unavailable`, ...); `unavailable` for a 5xx without one.
        code: String,
        /// What the matchmaker said.
        message: String,
        /// Whether searching again may succeed (a 5xx, `unavailable`, `probe_unavailable`,
        /// `no_probe_result`).
        retryable: bool,
    },
    /// HTTP 426 `client_outdated`: this game (its protocol or content version) is below the
    /// matchmaker's floor. The game must be updated; retrying will not help.
    #[error("the game is outdated, update it to keep playing: {message}")]
    Outdated {
        /// What the matchmaker said.
        message: String,
    },
    /// The matchmaker could not be reached, or did not answer in time.
    #[error("matchmaker unreachable: {0}")]
    Network(String),
    /// An answer (or a URL) that does not follow the contract: bad JSON, a missing field, a URL of
    /// another scheme than this client speaks.
    #[error("malformed matchmaker answer: {0}")]
    Malformed(String),
    /// The matchmaker ended the search without a match: it expired (no heartbeat, not queued in
    /// time, a seat not taken), failed or was cancelled on the server's side.
    #[error("the search ended {state}{}", .reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Ended {
        /// The final state (`expired`, `failed` or `cancelled`).
        state: SearchState,
        /// The matchmaker's reason (`no_heartbeat`, `no_probe_result`, `no_show`, ...), if any.
        reason: Option<String>,
    },
    /// No region's probe was answered, so the search could not be queued; it was cancelled.
    #[error("no region answered its probe")]
    NoProbeResult,
    /// The game cancelled the search ([`MatchCancel::cancel`](super::MatchCancel::cancel)).
    #[error("the search was cancelled")]
    Cancelled,
    /// A match was had but its zone could not be joined ([`matchmake_and_connect`](super::matchmake_and_connect)).
    #[error("could not join the match's zone: {0}")]
    Connect(#[source] ClientError),
}

impl MatchError {
    /// Whether searching again may succeed: network failures, a busy or failing matchmaker, no
    /// probe answered, a search the matchmaker ended, a zone that could not be joined (its ticket
    /// is single use: a new search gets a new one). Never for [`MatchError::Outdated`].
    pub fn retryable(&self) -> bool {
        match self {
            Self::Refused { retryable, .. } => *retryable,
            Self::Network(_) | Self::Ended { .. } | Self::NoProbeResult => true,
            Self::Connect(e) => !matches!(e, ClientError::ContentOutdated(_)),
            Self::Outdated { .. } | Self::Malformed(_) | Self::Cancelled => false,
        }
    }

    /// Whether the game must be updated to play: the matchmaker's 426 `client_outdated`, or the
    /// match's zone refusing the game's content version. Show "update to keep playing" and offer
    /// no retry.
    pub fn is_outdated(&self) -> bool {
        matches!(
            self,
            Self::Outdated { .. } | Self::Connect(ClientError::ContentOutdated(_))
        )
    }

    /// A failure the wait retries (with backoff) rather than ends on.
    pub(super) fn transient(&self) -> bool {
        match self {
            Self::Network(_) => true,
            Self::Refused { status, code, .. } => *status >= 500 || code == "unavailable",
            _ => false,
        }
    }
}

pub use zonekeep_protocol::matchmaking::SearchState;

/// A state as the API names it; an unknown name is refused (a newer matchmaker's state this
/// client cannot follow).
fn state_name<'de, D: Deserializer<'de>>(d: D) -> Result<SearchState, D::Error> {
    let name = String::deserialize(d)?;
    SearchState::parse(&name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown search state {name:?}")))
}

/// One region to probe: a host of the region and the single-use challenge for this search.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Probe {
    /// The region's name.
    pub region: String,
    /// The `http://` base URL of a host of that region.
    pub url: String,
    /// The challenge the host answers once, within 30 s of the search's creation.
    pub challenge: String,
}

/// Where to play a match: a zone and a ticket for it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Assignment {
    /// The match's id.
    #[serde(rename = "match")]
    pub match_id: String,
    /// The match's zone.
    pub zone: String,
    /// The zone's kind.
    pub kind: String,
    /// WebSocket URL of the zone (`ws://` or `wss://`).
    pub url: String,
    /// The host the zone was placed on, when known.
    #[serde(default)]
    pub host: Option<String>,
    /// A single-use ticket for this player and zone.
    pub ticket: String,
    /// When the ticket and the held seat lapse, in UNIX seconds.
    pub expires_at: u64,
    /// The names of the match's players.
    #[serde(default, deserialize_with = "null_default")]
    pub players: Vec<String>,
}

impl std::fmt::Debug for Assignment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The ticket is a credential: never printed.
        f.debug_struct("Assignment")
            .field("match_id", &self.match_id)
            .field("zone", &self.zone)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("host", &self.host)
            .field("expires_at", &self.expires_at)
            .field("players", &self.players)
            .finish_non_exhaustive()
    }
}

/// A search as the matchmaker answers it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Search {
    /// The search's id.
    pub search: String,
    /// Its queue.
    #[serde(default, deserialize_with = "null_default")]
    pub queue: String,
    /// Its state.
    #[serde(deserialize_with = "state_name")]
    pub state: SearchState,
    /// Why it ended (`no_heartbeat`, `no_probe_result`, `no_show`, ...), when it did.
    #[serde(default)]
    pub reason: Option<String>,
    /// The round trip measured to each region, in milliseconds.
    #[serde(default, deserialize_with = "rtt_map")]
    pub rtt_ms: BTreeMap<String, u32>,
    /// The region it is matched in, once known.
    #[serde(default)]
    pub region: Option<String>,
    /// How often the search must be heartbeated, in seconds (10 when the answer does not say);
    /// without one for three times this long it expires.
    #[serde(default = "default_heartbeat_secs")]
    pub heartbeat_secs: u32,
    /// The bearer secret of every later call on the search; only in the answer that created it.
    #[serde(default)]
    pub token: Option<String>,
    /// The regions to probe.
    #[serde(default, deserialize_with = "null_default")]
    pub probes: Vec<Probe>,
    /// The match's zone and ticket, from `assigned` on.
    #[serde(default)]
    pub assignment: Option<Assignment>,
}

impl std::fmt::Debug for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a credential: never printed.
        f.debug_struct("Search")
            .field("search", &self.search)
            .field("queue", &self.queue)
            .field("state", &self.state)
            .field("reason", &self.reason)
            .field("rtt_ms", &self.rtt_ms)
            .field("region", &self.region)
            .field("heartbeat_secs", &self.heartbeat_secs)
            .field("token", &self.token.is_some())
            .field("probes", &self.probes)
            .field("assignment", &self.assignment)
            .finish()
    }
}

impl Search {
    /// Reads and checks a `Search` answer (JSON bytes): an id, a known state, and from `assigned`
    /// on an assignment with a WebSocket URL and a ticket.
    pub fn from_json(body: &[u8]) -> Result<Self, MatchError> {
        let s: Self = serde_json::from_slice(body)
            .map_err(|e| MatchError::Malformed(format!("not a search: {e}")))?;
        if s.search.is_empty() {
            return Err(MatchError::Malformed("a search without an id".into()));
        }
        match (&s.assignment, s.state) {
            (None, SearchState::Assigned | SearchState::Connected) => {
                return Err(MatchError::Malformed(format!(
                    "a search {} without an assignment",
                    s.state
                )));
            }
            (Some(a), _) => {
                if !(a.url.starts_with("ws://") || a.url.starts_with("wss://")) {
                    return Err(MatchError::Malformed(format!(
                        "assignment url {} is not a WebSocket URL",
                        a.url
                    )));
                }
                if a.ticket.is_empty() {
                    return Err(MatchError::Malformed(
                        "an assignment without a ticket".into(),
                    ));
                }
            }
            (None, _) => {}
        }
        Ok(s)
    }
}

fn default_heartbeat_secs() -> u32 {
    10
}

/// A field that may be `null`, read as its default then.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Round trips per region: whole or fractional milliseconds (rounded), `null` for none.
fn rtt_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u32>, D::Error> {
    let raw = Option::<BTreeMap<String, f64>>::deserialize(d)?.unwrap_or_default();
    raw.into_iter()
        .map(|(region, ms)| {
            rtt_from_f64(ms)
                .map(|ms| (region, ms))
                .ok_or_else(|| serde::de::Error::custom(format!("rtt_ms {ms}")))
        })
        .collect()
}

/// A round trip in milliseconds, if it is one (a number, not negative, below a day).
pub(super) fn rtt_from_f64(ms: f64) -> Option<u32> {
    // Rounded, then converted: a checked range keeps the cast exact.
    let ms = ms.round();
    (0.0..86_400_000.0).contains(&ms).then_some(ms as u32)
}

/// Follows a search's answers in whatever order they arrive and says when to connect.
///
/// Its state only moves forward ([`SearchState::rank`]): an answer of a lower rank than one seen
/// is older news and ignored, and once a final state is seen nothing changes it. The first answer
/// that carries an assignment (state `assigned`, or `connected` if `assigned` was missed) hands it
/// out; every later answer, the same assignment again or another, hands out nothing. So a game
/// that connects to what [`observe`](Self::observe) returns connects once per search.
///
/// (The matchmaker may move a search from `proposed` or `allocated` back to `queued` when a match
/// falls apart; the tracker keeps the furthest state, which is right for deciding what to do, and
/// [`matchmake`](super::matchmake) keeps long polling against the state of the latest answer it read.)
#[derive(Debug, Clone, Default)]
pub struct SearchTracker {
    state: Option<SearchState>,
    handed_out: bool,
}

impl SearchTracker {
    /// A tracker that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one answer; returns the assignment to connect to now, at most once per tracker.
    pub fn observe(&mut self, search: &Search) -> Option<Assignment> {
        let next = search.state;
        match self.state {
            Some(cur) if cur.is_final() || next.rank() < cur.rank() => return None,
            _ => {}
        }
        self.state = Some(next);
        if self.handed_out || !matches!(next, SearchState::Assigned | SearchState::Connected) {
            return None;
        }
        let assignment = search.assignment.clone()?;
        self.handed_out = true;
        Some(assignment)
    }

    /// The furthest state seen, if any.
    pub fn state(&self) -> Option<SearchState> {
        self.state
    }

    /// Whether the assignment was handed out.
    pub fn handed_out(&self) -> bool {
        self.handed_out
    }
}
