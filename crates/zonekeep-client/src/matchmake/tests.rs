//! The matchmaking flow's tests: a matchmaker's answers read (or refused as malformed) as the
//! contract has them, states that only move forward, an assignment handed out once, progress and
//! endings reported, which outcomes are worth a new search, and the backoff's bounds.

use std::sync::Arc;
use std::time::Duration;

use super::backoff::Backoff;
use super::flow::Flow;
use super::*;

fn answer(state: &str, assignment: Option<(&str, &str)>) -> Search {
    let assignment = assignment.map(|(m, ticket)| {
        serde_json::json!({
            "match": m, "zone": format!("duel-{m}"), "kind": "arena",
            "url": format!("ws://127.0.0.1:1/zones/duel-{m}"), "host": "h1",
            "ticket": ticket, "expires_at": 1_790_000_000u64, "players": ["alice", "bob"]
        })
    });
    let json = serde_json::json!({
        "search": "s-1", "queue": "duel", "state": state, "reason": null,
        "rtt_ms": {"eu": 12, "us": 81.4}, "region": "eu", "heartbeat_secs": 10,
        "probes": [], "assignment": assignment,
    });
    Search::from_json(json.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_doc_search_is_read() {
    let body = br#"{
      "search": "s-9", "queue": "duel", "state": "assigned", "reason": null,
      "rtt_ms": {"eu": 12, "us": 81}, "region": "eu",
      "heartbeat_secs": 10, "token": "tok",
      "probes": [{"region": "eu", "url": "http://eu.example:7350", "challenge": "c1"}],
      "assignment": {
        "match": "m-1", "zone": "duel-1", "kind": "arena", "url": "ws://h/zones/duel-1",
        "host": "h", "ticket": "t.k.s", "expires_at": 1790000000, "players": ["alice", "bob"]
      }
    }"#;
    let s = Search::from_json(body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((s.search.as_str(), s.state), ("s-9", SearchState::Assigned));
    assert_eq!(s.rtt_ms.get("us"), Some(&81));
    assert_eq!(s.probes[0].challenge, "c1");
    assert_eq!(s.token.as_deref(), Some("tok"));
    let a = s
        .assignment
        .as_ref()
        .unwrap_or_else(|| panic!("no assignment"));
    assert_eq!((a.match_id.as_str(), a.ticket.as_str()), ("m-1", "t.k.s"));
    assert_eq!(a.players, ["alice", "bob"]);
    // Credentials stay out of logs.
    let printed = format!("{s:?}");
    assert!(
        !printed.contains("t.k.s") && !printed.contains("\"tok\""),
        "{printed}"
    );

    let probing = Search::from_json(br#"{"search":"s-1","state":"probing","rtt_ms":null}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(probing.heartbeat_secs, 10);
    assert!(probing.rtt_ms.is_empty() && probing.assignment.is_none());
    assert_eq!(answer("queued", None).rtt_ms.get("us"), Some(&81));
}

#[test]
fn answers_off_the_contract_are_malformed() {
    for bad in [
        &b""[..],
        b"[]",
        b"{\"search\":\"s-1\"}",
        b"{\"search\":\"\",\"state\":\"queued\"}",
        b"{\"search\":\"s-1\",\"state\":\"dancing\"}",
        b"{\"search\":\"s-1\",\"state\":\"assigned\"}",
        b"{\"search\":\"s-1\",\"state\":\"queued\",\"rtt_ms\":{\"eu\":-1}}",
        br#"{"search":"s-1","state":"assigned","assignment":{"match":"m","zone":"z","kind":"k",
            "url":"http://h/zones/z","ticket":"t","expires_at":1}}"#,
        br#"{"search":"s-1","state":"assigned","assignment":{"match":"m","zone":"z","kind":"k",
            "url":"ws://h/zones/z","ticket":"","expires_at":1}}"#,
    ] {
        let r = Search::from_json(bad);
        assert!(
            matches!(r, Err(MatchError::Malformed(_))),
            "{}: {r:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn states_rank_in_the_order_of_the_flow() {
    use SearchState::*;
    let flow = [Probing, Queued, Proposed, Allocated, Assigned, Connected];
    assert!(flow.windows(2).all(|w| w[0].rank() < w[1].rank()));
    for end in [Cancelled, Expired, Failed] {
        assert!(end.is_final() && end.rank() > Connected.rank());
    }
    assert!(Connected.is_final() && !Assigned.is_final());
    assert_eq!(Allocated.to_string(), "allocated");
}

#[test]
fn the_assignment_is_handed_out_once() {
    let mut t = SearchTracker::new();
    assert_eq!(t.observe(&answer("probing", None)), None);
    assert_eq!(t.observe(&answer("queued", None)), None);
    let a = t.observe(&answer("assigned", Some(("m-1", "t1"))));
    assert_eq!(a.map(|a| a.ticket), Some("t1".to_owned()));
    assert!(t.handed_out());
    // The same assignment again (a heartbeat and a poll both answered it)...
    assert_eq!(t.observe(&answer("assigned", Some(("m-1", "t1")))), None);
    // ...another one, and the player arriving: nothing more to connect to.
    assert_eq!(t.observe(&answer("assigned", Some(("m-2", "t2")))), None);
    assert_eq!(t.observe(&answer("connected", Some(("m-1", "t1")))), None);
    assert_eq!(t.state(), Some(SearchState::Connected));
}

#[test]
fn older_answers_never_move_the_state_back() {
    let mut t = SearchTracker::new();
    assert_eq!(t.observe(&answer("allocated", None)), None);
    assert_eq!(t.observe(&answer("queued", None)), None);
    assert_eq!(t.state(), Some(SearchState::Allocated));
    assert!(t
        .observe(&answer("assigned", Some(("m-1", "t1"))))
        .is_some());
    for older in ["probing", "queued", "proposed", "allocated"] {
        assert_eq!(t.observe(&answer(older, None)), None);
        assert_eq!(t.state(), Some(SearchState::Assigned), "{older}");
    }
}

#[test]
fn a_missed_assigned_answer_is_handed_out_from_connected() {
    let mut t = SearchTracker::new();
    t.observe(&answer("queued", None));
    let a = t.observe(&answer("connected", Some(("m-1", "t1"))));
    assert_eq!(a.map(|a| a.match_id), Some("m-1".to_owned()));
    assert_eq!(t.observe(&answer("assigned", Some(("m-1", "t1")))), None);
}

#[test]
fn a_final_state_is_final() {
    let mut t = SearchTracker::new();
    t.observe(&answer("queued", None));
    assert_eq!(t.observe(&answer("expired", None)), None);
    // An assignment read after the search expired (an older answer) is not handed out.
    assert_eq!(t.observe(&answer("assigned", Some(("m-1", "t1")))), None);
    assert_eq!(t.observe(&answer("cancelled", None)), None);
    assert_eq!(t.state(), Some(SearchState::Expired));
    assert!(!t.handed_out());
}

#[test]
fn the_flow_reports_progress_and_endings() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let mut flow = Flow {
        tracker: SearchTracker::new(),
        on_state: Some(Arc::new(move |s: &Search| {
            log.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(s.state);
        })),
    };
    for state in ["probing", "queued", "queued", "proposed", "queued"] {
        assert!(matches!(flow.observe(&answer(state, None)), Ok(None)));
    }
    let mut expired = answer("expired", None);
    expired.reason = Some("no_heartbeat".into());
    let ended = flow.observe(&expired);
    assert!(
        matches!(&ended, Err(MatchError::Ended { state: SearchState::Expired, reason: Some(r) }) if r == "no_heartbeat"),
        "{ended:?}"
    );
    assert!(ended.is_err_and(|e| e.retryable() && !e.is_outdated()));
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    use SearchState::*;
    assert_eq!(seen, [Probing, Queued, Proposed, Expired]);
}

#[test]
fn which_outcomes_are_worth_a_new_search() {
    let refused = |code: &str, status: u16, retryable| MatchError::Refused {
        status,
        code: code.into(),
        message: String::new(),
        retryable,
    };
    assert!(MatchError::Network("down".into()).retryable());
    assert!(MatchError::NoProbeResult.retryable());
    assert!(refused("unavailable", 503, true).retryable());
    assert!(!refused("unauthorized", 401, false).retryable());
    assert!(!MatchError::Outdated {
        message: String::new()
    }
    .retryable());
    assert!(!MatchError::Malformed(String::new()).retryable());
    assert!(!MatchError::Cancelled.retryable());
    // Only network failures and a busy matchmaker are retried within a search.
    assert!(MatchError::Network(String::new()).transient());
    assert!(refused("unavailable", 503, true).transient());
    assert!(!refused("no_search", 404, false).transient());
    assert!(!MatchError::Outdated {
        message: String::new()
    }
    .transient());
}

#[test]
fn backoff_grows_within_its_bounds() {
    let mut opts = MatchOptions::new("http://h:1", "t", "q");
    opts.backoff_min = Duration::from_millis(100);
    opts.backoff_max = Duration::from_millis(400);
    let mut b = Backoff::new(&opts, 10);
    let pauses: Vec<Duration> = (0..5)
        .map(|_| {
            b.pause(MatchError::Network(String::new()))
                .unwrap_or_default()
        })
        .collect();
    for (p, nominal) in pauses.iter().zip([100, 200, 400, 400, 400]) {
        let nominal = Duration::from_millis(nominal);
        assert!(*p >= nominal / 2 && *p <= nominal, "{p:?} for {nominal:?}");
    }
    b.reset();
    let p = b
        .pause(MatchError::Network(String::new()))
        .unwrap_or_default();
    assert!(p <= Duration::from_millis(100));
}
