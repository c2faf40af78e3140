//! Probes: a player's round trip to a region, measured by a host of that region.
//!
//! The matchmaker issues one single-use challenge per region when a search is created, naming a
//! live host of the region. The client calls that host with the challenge; the host answers an
//! `echo` and notes the time on its own monotonic clock; the client sends the echo straight back,
//! and the host measures the round trip from its answer to the echo's arrival. After
//! [`ROUNDS`] round trips it records the smallest in the store, once. The client never reports a
//! time: it can only make its round trip longer, never shorter.
//!
//! The host's NetSim setting (`POST /admin/netsim`) delays each probe answer and each echo as it
//! delays a connection's messages, so a test or a demo can set a region's distance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio::time::Instant;
use zonekeep_store::{search_of, ProbeAnswer, SearchState};

use super::{refuse, valid_label, Answer, MatchFailure, PROBE_WINDOW_MS};
use crate::host::Shared;

/// Round trips measured per probe.
pub const ROUNDS: u32 = 3;
/// Most probes being measured on one host at once.
pub const MAX_PENDING: usize = 50_000;
/// Longest challenge accepted, in bytes.
const MAX_CHALLENGE: usize = 160;

/// A probe being measured.
struct Pending {
    echo: String,
    /// When the last answer was sent (NetSim's delay towards the client comes after).
    sent: Instant,
    samples: Vec<u32>,
    started: Instant,
}

/// The probes this host is measuring, and the regions' probe targets as last read.
#[derive(Default)]
pub(crate) struct Probes {
    pending: Mutex<HashMap<String, Pending>>,
    targets: Mutex<Option<(Instant, Targets)>>,
}

/// Each region's live hosts' HTTP bases.
type Targets = std::collections::BTreeMap<String, Vec<String>>;

/// How long the regions' probe targets are reused before the directory is read again.
const TARGETS_FOR: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProbeQuery {
    challenge: String,
    #[serde(default)]
    echo: Option<String>,
}

/// One way of NetSim's host-wide setting: its latency and a draw of its jitter.
fn one_way(shared: &Shared) -> Duration {
    let cfg = shared.netsim.get();
    let mut jitter = 0u64;
    if cfg.jitter_ms > 0 {
        let mut b = [0u8; 4];
        if getrandom::fill(&mut b).is_ok() {
            jitter = u64::from(u32::from_le_bytes(b)) % (u64::from(cfg.jitter_ms) + 1);
        }
    }
    Duration::from_millis(u64::from(cfg.latency_ms) + jitter)
}

/// `POST /match/probe?challenge=C[&echo=E]`.
pub(crate) async fn answer(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<ProbeQuery>,
) -> Answer {
    let refuse = refuse(&shared);
    let out = measure(&shared, &q).await;
    shared
        .metrics
        .matchmaker()
        .probe(if out.is_ok() { "measured" } else { "refused" });
    out.map(|v| Json(v).into_response()).map_err(refuse)
}

async fn measure(shared: &Arc<Shared>, q: &ProbeQuery) -> Result<serde_json::Value, MatchFailure> {
    let store = shared
        .sim
        .persist
        .as_ref()
        .map(|p| p.store().clone())
        .ok_or_else(|| {
            MatchFailure::ProbeUnavailable("this host keeps no store: it answers no probes".into())
        })?;
    let search = search_of(&q.challenge)
        .filter(|s| q.challenge.len() <= MAX_CHALLENGE && valid_label(s))
        .ok_or_else(|| MatchFailure::ChallengeSpent("no such challenge".into()))?;
    let region = shared.config.region.clone();
    let probes = &shared.probes;
    let Some(echo) = &q.echo else {
        // The first call: check the challenge is this region's and unanswered, then start.
        let rec = super::stored(store.matches.search(search))
            .await?
            .ok_or_else(|| MatchFailure::ChallengeSpent("no such challenge".into()))?;
        let p = rec
            .probes
            .iter()
            .find(|p| p.challenge == q.challenge)
            .ok_or_else(|| MatchFailure::ChallengeSpent("no such challenge".into()))?;
        if p.region != region {
            return Err(MatchFailure::WrongRegion {
                mine: region,
                theirs: p.region.clone(),
            });
        }
        if p.rtt_ms.is_some() || rec.state != SearchState::Probing {
            return Err(MatchFailure::ChallengeSpent(
                "the challenge was answered already".into(),
            ));
        }
        let echo = super::hex(12)?;
        let delay = one_way(shared);
        probes.start(&q.challenge, &echo)?;
        tokio::time::sleep(delay).await;
        return Ok(json!({"echo": echo, "rounds_left": ROUNDS}));
    };
    // An echo: NetSim's delay from the client first, then the round trip is read.
    tokio::time::sleep(one_way(shared)).await;
    let arrived = Instant::now();
    let next = super::hex(12)?;
    match probes.echoed(&q.challenge, echo, arrived, &next)? {
        Some(best) => {
            let answer = super::stored(store.matches.answer_probe(
                &q.challenge,
                &region,
                best,
                PROBE_WINDOW_MS,
            ))
            .await?;
            match answer {
                ProbeAnswer::Recorded => Ok(json!({"rtt_ms": best})),
                ProbeAnswer::WrongRegion(theirs) => Err(MatchFailure::WrongRegion {
                    mine: region,
                    theirs,
                }),
                ProbeAnswer::Unknown => {
                    Err(MatchFailure::ChallengeSpent("no such challenge".into()))
                }
                ProbeAnswer::Spent => Err(MatchFailure::ChallengeSpent(
                    "the challenge was answered already".into(),
                )),
                ProbeAnswer::Lapsed => Err(MatchFailure::ChallengeSpent(
                    "the challenge lapsed: create a new search".into(),
                )),
            }
        }
        None => {
            let left = probes.rounds_left(&q.challenge);
            // Sent now; NetSim holds it on its way to the client, as the network would.
            probes.sent(&q.challenge, Instant::now());
            tokio::time::sleep(one_way(shared)).await;
            Ok(json!({"echo": next, "rounds_left": left}))
        }
    }
}

impl Probes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts measuring `challenge`, its first answer leaving now.
    fn start(&self, challenge: &str, echo: &str) -> Result<(), MatchFailure> {
        let mut map = self.lock();
        let now = Instant::now();
        if map.len() >= MAX_PENDING {
            let window = Duration::from_millis(PROBE_WINDOW_MS);
            map.retain(|_, p| now.saturating_duration_since(p.started) < window);
            if map.len() >= MAX_PENDING {
                return Err(MatchFailure::ProbeUnavailable(
                    "this host measures as many probes as it may; try again".into(),
                ));
            }
        }
        map.insert(
            challenge.to_owned(),
            Pending {
                echo: echo.to_owned(),
                sent: now,
                samples: Vec::new(),
                started: now,
            },
        );
        Ok(())
    }

    /// Takes an echo that arrived at `arrived`: its round trip is a sample. Answers the smallest
    /// sample once every round was measured (the probe is then over), else `None` with `next`
    /// as the echo expected next.
    fn echoed(
        &self,
        challenge: &str,
        echo: &str,
        arrived: Instant,
        next: &str,
    ) -> Result<Option<u32>, MatchFailure> {
        let mut map = self.lock();
        let restart = || {
            MatchFailure::ChallengeSpent(
                "no probe of this challenge is being measured here with that echo".into(),
            )
        };
        let p = map.get_mut(challenge).ok_or_else(restart)?;
        if !bool::from(p.echo.as_bytes().ct_eq(echo.as_bytes())) {
            return Err(restart());
        }
        let rtt = arrived.saturating_duration_since(p.sent).as_millis();
        p.samples.push(u32::try_from(rtt).unwrap_or(u32::MAX));
        if u32::try_from(p.samples.len()).unwrap_or(u32::MAX) >= ROUNDS {
            let best = p.samples.iter().copied().min().unwrap_or(u32::MAX);
            map.remove(challenge);
            return Ok(Some(best));
        }
        p.echo = next.to_owned();
        Ok(None)
    }

    fn rounds_left(&self, challenge: &str) -> u32 {
        self.lock().get(challenge).map_or(0, |p| {
            ROUNDS.saturating_sub(u32::try_from(p.samples.len()).unwrap_or(ROUNDS))
        })
    }

    /// Notes when the next answer of `challenge` leaves.
    fn sent(&self, challenge: &str, at: Instant) {
        if let Some(p) = self.lock().get_mut(challenge) {
            p.sent = at;
        }
    }
}

/// One probe target per region with a live host: the region and that host's HTTP base URL. A
/// search's regions are spread over each region's hosts by its id. The directory is read at most
/// once per [`TARGETS_FOR`], not once per search.
pub(crate) async fn regions(
    shared: &Shared,
    search_id: &str,
) -> Result<Vec<(String, String)>, MatchFailure> {
    let by_region = targets(shared).await?;
    if by_region.is_empty() {
        return Err(MatchFailure::ProbeUnavailable(
            "no live host answers probes in any region".into(),
        ));
    }
    let spread = search_id.bytes().fold(0usize, |a, b| {
        a.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    Ok(by_region
        .into_iter()
        .filter_map(|(region, urls)| {
            let url = urls.get(spread % urls.len().max(1))?.clone();
            Some((region, url))
        })
        .collect())
}

/// The regions' live, non-draining hosts, from the directory (or as read within [`TARGETS_FOR`]).
async fn targets(shared: &Shared) -> Result<Targets, MatchFailure> {
    {
        let cached = shared
            .probes
            .targets
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((at, t)) = cached.as_ref() {
            if at.elapsed() < TARGETS_FOR {
                return Ok(t.clone());
            }
        }
    }
    let fleet = shared.fleet().ok_or_else(|| {
        MatchFailure::ProbeUnavailable("this host is not a fleet member yet".into())
    })?;
    let hosts = crate::fleet::query(&fleet.metrics, "hosts", fleet.directory.hosts())
        .await
        .map_err(|e| MatchFailure::Unavailable(format!("fleet directory: {e}")))?;
    let mut by_region = Targets::new();
    for h in hosts {
        let alive = fleet
            .timing
            .is_alive(Duration::from_millis(h.heartbeat_age_ms), h.left);
        if alive && !h.draining {
            by_region
                .entry(h.region)
                .or_default()
                .push(http_base(&h.url));
        }
    }
    *shared
        .probes
        .targets
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), by_region.clone()));
    Ok(by_region)
}

/// A host's advertised `ws://`/`wss://` base as the `http://`/`https://` base probes go to.
pub(crate) fn http_base(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("ws://") {
        format!("http://{rest}")
    } else if let Some(rest) = url.strip_prefix("wss://") {
        format!("https://{rest}")
    } else {
        url.to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_takes_its_rounds_and_answers_the_smallest() {
        let p = Probes::default();
        p.start("s.c", "e0").unwrap_or_else(|e| panic!("{e}"));
        let t0 = Instant::now();
        p.sent("s.c", t0);
        assert!(p.echoed("s.c", "wrong", t0, "e1").is_err(), "a wrong echo");
        assert_eq!(
            p.echoed("s.c", "e0", t0 + Duration::from_millis(30), "e1")
                .ok(),
            Some(None)
        );
        p.sent("s.c", t0 + Duration::from_millis(30));
        assert_eq!(p.rounds_left("s.c"), 2);
        assert_eq!(
            p.echoed("s.c", "e1", t0 + Duration::from_millis(50), "e2")
                .ok(),
            Some(None)
        );
        p.sent("s.c", t0 + Duration::from_millis(50));
        assert_eq!(
            p.echoed("s.c", "e2", t0 + Duration::from_millis(90), "e3")
                .ok(),
            Some(Some(20))
        );
        assert!(
            p.echoed("s.c", "e3", t0, "e4").is_err(),
            "over: nothing pending"
        );
    }

    #[test]
    fn advertised_urls_become_http_bases() {
        assert_eq!(http_base("ws://127.0.0.1:7350"), "http://127.0.0.1:7350");
        assert_eq!(http_base("wss://eu.example"), "https://eu.example");
    }
}
