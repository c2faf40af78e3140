//! The rules' tests: a probe is answered once, queueing needs an answered probe, a match
//! advances all or none, a proposal takes only searches still queued, and lapses expire waiting
//! searches and connect arrived ones.

use super::rules::answer;
use super::*;

fn rec(state: SearchState) -> SearchRecord {
    let mut r = fresh(
        &NewSearch {
            search_id: "s1".into(),
            queue: "duel".into(),
            principal: "ada".into(),
            name: None,
            token_hash: "0".repeat(64),
            probes: vec![
                Probe {
                    challenge: "s1.a".into(),
                    region: "eu".into(),
                    url: "http://eu".into(),
                    rtt_ms: None,
                },
                Probe {
                    challenge: "s1.b".into(),
                    region: "us".into(),
                    url: "http://us".into(),
                    rtt_ms: None,
                },
            ],
        },
        1_000,
    );
    r.state = state;
    r
}

#[test]
fn a_probe_is_answered_once_by_its_own_region_within_its_window() {
    let mut r = rec(SearchState::Probing);
    assert_eq!(
        answer(&mut r, "s1.x", "eu", 5, 1_100, 30_000),
        ProbeAnswer::Unknown
    );
    assert_eq!(
        answer(&mut r, "s1.a", "us", 5, 1_100, 30_000),
        ProbeAnswer::WrongRegion("eu".into())
    );
    assert_eq!(
        answer(&mut r, "s1.a", "eu", 5, 1_100, 30_000),
        ProbeAnswer::Recorded
    );
    assert_eq!(
        answer(&mut r, "s1.a", "eu", 1, 1_200, 30_000),
        ProbeAnswer::Spent
    );
    assert_eq!(r.probes[0].rtt_ms, Some(5));
    assert_eq!(
        answer(&mut r, "s1.b", "us", 9, 40_000, 30_000),
        ProbeAnswer::Lapsed
    );
}

#[test]
fn queueing_needs_an_answered_probe_and_keeps_only_answered_regions() {
    let r = rec(SearchState::Probing);
    assert!(matches!(
        enqueue(r.clone(), 2_000),
        SearchChange::NoProbeResult(_)
    ));
    let mut r = r;
    r.probes[1].rtt_ms = Some(40);
    let SearchChange::Changed(q) = enqueue(r, 2_000) else {
        panic!("not queued")
    };
    assert_eq!(q.state, SearchState::Queued);
    assert_eq!(q.rtt_ms, BTreeMap::from([("us".to_owned(), 40)]));
    assert_eq!(q.queued_at_ms, Some(2_000));
    assert!(matches!(enqueue(q, 3_000), SearchChange::WrongState(_)));
}

#[test]
fn a_match_advances_all_or_none_and_partners_of_a_leaver_queue_again() {
    let mut members = vec![rec(SearchState::Proposed), rec(SearchState::Proposed)];
    members[1].search_id = "s2".into();
    members[0].queued_at_ms = Some(5);
    let ids = ["s1".to_owned(), "s2".to_owned()];
    // Without one of the searches it was formed with, a match does not advance.
    let mut alone = vec![members[0].clone()];
    assert!(!advance(
        &mut alone,
        &ids,
        SearchState::Proposed,
        |m| m.state = SearchState::Allocated,
        9
    ));
    assert_eq!(alone[0].state, SearchState::Queued);
    assert!(advance(
        &mut members,
        &ids,
        SearchState::Proposed,
        |m| m.state = SearchState::Allocated,
        9
    ));
    assert!(members.iter().all(|m| m.state == SearchState::Allocated));
    members[1].state = SearchState::Cancelled;
    assert!(!advance(
        &mut members,
        &ids,
        SearchState::Allocated,
        |m| m.state = SearchState::Assigned,
        10
    ));
    assert_eq!(members[0].state, SearchState::Queued);
    assert_eq!(members[0].reason.as_deref(), Some("partner_left"));
    assert_eq!(members[0].match_id, None);
    assert_eq!(
        members[0].queued_at_ms,
        Some(5),
        "keeps its place in the queue"
    );
    assert_eq!(members[1].state, SearchState::Cancelled);
}

#[test]
fn a_proposal_takes_only_searches_still_queued_in_its_queue() {
    let p = Proposal {
        match_id: "m1".into(),
        region: "eu".into(),
        search_ids: vec!["s1".into(), "s2".into()],
    };
    let mut members = vec![rec(SearchState::Queued), rec(SearchState::Cancelled)];
    assert!(!take_into(&mut members, "duel", &p, 5));
    assert_eq!(members[0].state, SearchState::Queued);
    let mut members = vec![rec(SearchState::Queued), rec(SearchState::Queued)];
    assert!(!take_into(&mut members, "other", &p, 5));
    assert!(take_into(&mut members, "duel", &p, 5));
    assert!(members
        .iter()
        .all(|m| m.state == SearchState::Proposed && m.match_id.as_deref() == Some("m1")));
    let mut short = vec![rec(SearchState::Queued)];
    assert!(
        !take_into(&mut short, "duel", &p, 5),
        "a search that vanished"
    );
}

#[test]
fn lapses_expire_waiting_searches_and_connect_arrived_ones() {
    let l = Lapses {
        probing_ms: 60_000,
        heartbeat_ms: 30_000,
        stuck_ms: 15_000,
        no_show_ms: 60_000,
        forget_ms: 3_600_000,
    };
    let probing = rec(SearchState::Probing);
    assert_eq!(lapse(&probing, SeatSeen::Gone, &l, 30_000), None);
    assert_eq!(
        lapse(&probing, SeatSeen::Gone, &l, 70_000),
        Some((SearchState::Expired, Some("no_probe_result")))
    );
    let queued = rec(SearchState::Queued);
    assert_eq!(
        lapse(&queued, SeatSeen::Gone, &l, 40_000),
        Some((SearchState::Expired, Some("no_heartbeat")))
    );
    let proposed = rec(SearchState::Proposed);
    assert_eq!(
        lapse(&proposed, SeatSeen::Gone, &l, 20_000),
        Some((SearchState::Queued, Some("stuck")))
    );
    let assigned = rec(SearchState::Assigned);
    assert_eq!(
        lapse(&assigned, SeatSeen::Present, &l, 2_000),
        Some((SearchState::Connected, None))
    );
    assert_eq!(lapse(&assigned, SeatSeen::Reserved, &l, 2_000), None);
    assert_eq!(
        lapse(&assigned, SeatSeen::Gone, &l, 70_000),
        Some((SearchState::Expired, Some("no_show")))
    );
}
