//! Forming matches from a queue's candidates: pure, so every replica forms the same matches from
//! the same candidates, and it is tested without a store.
//!
//! Oldest first, each candidate goes to a region where its measured round trip is smallest, if
//! that is within the queue's `max_rtt_ms`. Round trips within [`NEAR_MS`] of the smallest count
//! as smallest: a player cannot tell them apart, and on a fast link whole milliseconds and jitter
//! would otherwise split two players sitting between the same two regions, each waiting for a
//! partner in the other. After `widen_secs` in the queue a candidate also accepts any region
//! within twice its best round trip or [`WIDEN_MS`] over it, whichever is more (and within twice
//! `max_rtt_ms`). Among the regions it accepts it joins the one whose forming match is fullest,
//! so a player who waited long fills a match elsewhere rather than waiting for one more player
//! nearby. A region's match forms when it has `size` players; a region nobody can play in (no
//! live host) is never chosen.

use std::collections::{BTreeMap, BTreeSet};

use zonekeep_store::Candidate;

use super::QueueSpec;

/// One match to propose: its region and its searches, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formed {
    /// The region it plays in.
    pub region: String,
    /// Its searches.
    pub search_ids: Vec<String>,
}

/// Round trips this close to a candidate's smallest count as near as it, ms.
pub const NEAR_MS: u32 = 10;
/// After widening, a candidate accepts a region this much over its best round trip even when
/// twice its best is less, ms (twice a few milliseconds would still split players).
pub const WIDEN_MS: u32 = 50;

/// The regions `c` accepts at `now_ms`, nearest first, among `regions`.
fn accepted(
    q: &QueueSpec,
    c: &Candidate,
    regions: &BTreeSet<String>,
    now_ms: u64,
) -> Vec<(u32, String)> {
    let mut rtts: Vec<(u32, String)> = c
        .rtt_ms
        .iter()
        .filter(|(r, _)| regions.contains(*r))
        .map(|(r, ms)| (*ms, r.clone()))
        .collect();
    rtts.sort();
    let Some(&(best, _)) = rtts.first() else {
        return Vec::new();
    };
    let widened = now_ms.saturating_sub(c.queued_at_ms) >= q.widen_secs.saturating_mul(1000);
    let (cap, reach) = if widened {
        let reach = best.saturating_mul(2).max(best.saturating_add(WIDEN_MS));
        (q.max_rtt_ms.saturating_mul(2), reach)
    } else {
        (q.max_rtt_ms, best.saturating_add(NEAR_MS))
    };
    if best > cap {
        return Vec::new();
    }
    let limit = reach.min(cap);
    rtts.into_iter().filter(|(ms, _)| *ms <= limit).collect()
}

/// The matches `candidates` (oldest first) form in `regions` at `now_ms`.
pub fn form(
    q: &QueueSpec,
    candidates: &[Candidate],
    regions: &BTreeSet<String>,
    now_ms: u64,
) -> Vec<Formed> {
    let size = usize::try_from(q.size).unwrap_or(usize::MAX);
    let mut forming: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for c in candidates {
        if !seen.insert(c.search_id.as_str()) {
            continue;
        }
        let options = accepted(q, c, regions, now_ms);
        // The fullest forming match among the accepted regions; ties to the nearest.
        let Some(region) = options
            .iter()
            .enumerate()
            .max_by_key(|(i, (_, r))| (forming.get(r).map_or(0, Vec::len), std::cmp::Reverse(*i)))
            .map(|(_, (_, r))| r.clone())
        else {
            continue;
        };
        let slot = forming.entry(region.clone()).or_default();
        slot.push(c.search_id.clone());
        if slot.len() >= size {
            out.push(Formed {
                region,
                search_ids: std::mem::take(slot),
            });
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn q() -> QueueSpec {
        QueueSpec {
            name: "duel".into(),
            size: 2,
            kind: "arena".into(),
            max_rtt_ms: 150,
            widen_secs: 10,
        }
    }

    fn c(id: &str, queued_at_ms: u64, rtts: &[(&str, u32)]) -> Candidate {
        Candidate {
            search_id: id.into(),
            principal: format!("p-{id}"),
            rtt_ms: rtts.iter().map(|(r, ms)| ((*r).to_owned(), *ms)).collect(),
            queued_at_ms,
        }
    }

    fn regions() -> BTreeSet<String> {
        ["eu", "us"].iter().map(|r| (*r).to_owned()).collect()
    }

    #[test]
    fn players_are_matched_in_the_region_they_measured_nearest() {
        let cs = [
            c("a", 0, &[("eu", 20), ("us", 90)]),
            c("b", 1, &[("eu", 95), ("us", 15)]),
            c("c", 2, &[("eu", 30), ("us", 80)]),
            c("d", 3, &[("eu", 100), ("us", 40)]),
        ];
        let m = form(&q(), &cs, &regions(), 5_000);
        assert_eq!(
            m,
            [
                Formed {
                    region: "eu".into(),
                    search_ids: vec!["a".into(), "c".into()]
                },
                Formed {
                    region: "us".into(),
                    search_ids: vec!["b".into(), "d".into()]
                },
            ]
        );
    }

    #[test]
    fn a_player_waiting_past_widen_joins_a_fuller_match_within_twice_its_best() {
        let cs = [
            c("near-us", 9_000, &[("us", 30)]),
            c("old-eu", 0, &[("eu", 40), ("us", 70)]),
        ];
        // Before widening, the two are in different regions: no match.
        assert!(form(&q(), &cs, &regions(), 9_500).is_empty());
        // After, the old one goes where a partner waits (70 ≤ 2 × 40).
        let m = form(&q(), &cs, &regions(), 10_000);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].region, "us");
        // But never past twice its best or WIDEN_MS over it, whichever is more.
        let far = [
            c("near-us", 9_000, &[("us", 30)]),
            c("old-eu", 0, &[("eu", 20), ("us", 71)]),
        ];
        assert!(form(&q(), &far, &regions(), 10_000).is_empty());
        let reach = [
            c("near-us", 9_000, &[("us", 30)]),
            c("old-eu", 0, &[("eu", 20), ("us", 70)]),
        ];
        assert_eq!(form(&q(), &reach, &regions(), 10_000).len(), 1);
    }

    #[test]
    fn players_between_two_near_regions_are_not_split_by_a_millisecond() {
        // On a fast link each measures the other region a millisecond further: both regions are
        // as near, so the second joins the first's forming match at once.
        let cs = [
            c("a", 0, &[("eu", 0), ("us", 1)]),
            c("b", 1, &[("eu", 1), ("us", 0)]),
        ];
        let m = form(&q(), &cs, &regions(), 1_000);
        assert_eq!(
            m,
            [Formed {
                region: "eu".into(),
                search_ids: vec!["a".into(), "b".into()]
            }]
        );
        // Further apart than NEAR_MS, they wait for widening, which admits a few milliseconds'
        // difference even where twice the best would not.
        let cs = [
            c("a", 0, &[("eu", 1), ("us", 15)]),
            c("b", 1, &[("eu", 15), ("us", 1)]),
        ];
        assert!(form(&q(), &cs, &regions(), 1_000).is_empty());
        assert_eq!(form(&q(), &cs, &regions(), 10_001).len(), 1);
    }

    #[test]
    fn players_over_the_limit_wait_and_regions_without_hosts_are_never_chosen() {
        let cs = [
            c("a", 0, &[("eu", 200)]),
            c("b", 0, &[("eu", 180)]),
            c("c", 0, &[("asia", 5), ("us", 120)]),
            c("d", 0, &[("asia", 5), ("us", 125)]),
        ];
        let m = form(&q(), &cs, &regions(), 1_000);
        assert_eq!(
            m,
            [Formed {
                region: "us".into(),
                search_ids: vec!["c".into(), "d".into()]
            }]
        );
        // Widened, 200 and 180 are within 2 × 150.
        let m = form(&q(), &cs[..2], &regions(), 20_000);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_search_listed_twice_is_taken_once_and_leftovers_wait() {
        let cs = [
            c("a", 0, &[("eu", 10)]),
            c("a", 0, &[("eu", 10)]),
            c("b", 1, &[("eu", 10)]),
            c("c", 2, &[("eu", 10)]),
        ];
        let m = form(&q(), &cs, &regions(), 1_000);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].search_ids, ["a", "b"]);
    }
}
