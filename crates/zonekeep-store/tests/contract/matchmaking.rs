//! The matchmaker contract: a search is probed, queued and taken into one match at most (also
//! when two stores form matches at once), a match advances all or none, a partner who leaves
//! sends the others back to the queue, and time and the lobby's seats settle the rest.

use serde_json::json;
use zonekeep_store::{
    Lapses, NewRoom, NewSearch, Probe, ProbeAnswer, Proposal, RoomReport, SearchChange,
    SearchState, SeatRequest, SeatRole, Store, StoreError,
};

use crate::support::Db;

fn new_search(id: &str, principal: &str) -> NewSearch {
    NewSearch {
        search_id: id.into(),
        queue: "duel".into(),
        principal: principal.into(),
        name: Some(principal.into()),
        token_hash: "ab".repeat(32),
        probes: ["eu", "us"]
            .iter()
            .map(|r| Probe {
                challenge: format!("{id}.{r}-c"),
                region: (*r).into(),
                url: format!("http://{r}.test:7350"),
                rtt_ms: None,
            })
            .collect(),
    }
}

/// Creates, probes (eu only) and queues a search.
async fn queued(store: &Store, id: &str, principal: &str) {
    store
        .matches
        .create_search(&new_search(id, principal))
        .await
        .unwrap();
    let a = store
        .matches
        .answer_probe(&format!("{id}.eu-c"), "eu", 12, 30_000)
        .await
        .unwrap();
    assert_eq!(a, ProbeAnswer::Recorded);
    assert!(matches!(
        store.matches.queue_search(id).await.unwrap(),
        SearchChange::Changed(_)
    ));
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn state_of(change: SearchChange) -> SearchState {
    match change {
        SearchChange::Changed(r) | SearchChange::WrongState(r) | SearchChange::NoProbeResult(r) => {
            r.state
        }
        SearchChange::NoSearch => panic!("no search"),
    }
}

const NEVER: Lapses = Lapses {
    probing_ms: 3_600_000,
    heartbeat_ms: 3_600_000,
    stuck_ms: 3_600_000,
    no_show_ms: 3_600_000,
    forget_ms: 3_600_000,
};

pub async fn a_search_is_queued_only_with_a_probe_its_region_answered_once(db: &Db) {
    let store = db.open().await;
    let s = store
        .matches
        .create_search(&new_search("s1", "ann"))
        .await
        .unwrap();
    assert_eq!(s.state, SearchState::Probing);
    assert!(matches!(
        store.matches.create_search(&new_search("s1", "ann")).await,
        Err(StoreError::InvalidArgument(_))
    ));
    // Nothing answered yet: queueing is refused.
    assert!(matches!(
        store.matches.queue_search("s1").await.unwrap(),
        SearchChange::NoProbeResult(_)
    ));
    let m = &store.matches;
    assert_eq!(
        m.answer_probe("s1.eu-c", "us", 5, 30_000).await.unwrap(),
        ProbeAnswer::WrongRegion("eu".into())
    );
    assert_eq!(
        m.answer_probe("s1.nope", "eu", 5, 30_000).await.unwrap(),
        ProbeAnswer::Unknown
    );
    assert_eq!(
        m.answer_probe("nobody.eu-c", "eu", 5, 30_000)
            .await
            .unwrap(),
        ProbeAnswer::Unknown
    );
    assert_eq!(
        m.answer_probe("s1.eu-c", "eu", 21, 30_000).await.unwrap(),
        ProbeAnswer::Recorded
    );
    assert_eq!(
        m.answer_probe("s1.eu-c", "eu", 1, 30_000).await.unwrap(),
        ProbeAnswer::Spent,
        "a challenge is answered once"
    );
    assert_eq!(
        m.answer_probe("s1.us-c", "us", 80, 0).await.unwrap(),
        ProbeAnswer::Lapsed
    );
    let SearchChange::Changed(q) = m.queue_search("s1").await.unwrap() else {
        panic!("not queued")
    };
    assert_eq!(q.state, SearchState::Queued);
    assert_eq!(q.rtt_ms.get("eu"), Some(&21));
    assert_eq!(q.rtt_ms.get("us"), None);
    assert_eq!(
        m.answer_probe("s1.us-c", "us", 80, 30_000).await.unwrap(),
        ProbeAnswer::Spent,
        "a queued search takes no more answers"
    );
    assert_eq!(
        state_of(m.queue_search("s1").await.unwrap()),
        SearchState::Queued
    );
    assert!(matches!(
        m.queue_search("s1").await.unwrap(),
        SearchChange::WrongState(_)
    ));
    let c = m.queued("duel", 10).await.unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].principal, "ann");
    assert!(matches!(
        m.heartbeat("nope").await.unwrap(),
        SearchChange::NoSearch
    ));
    assert_eq!(
        state_of(m.cancel_search("s1").await.unwrap()),
        SearchState::Cancelled
    );
    assert!(m.queued("duel", 10).await.unwrap().is_empty());
    assert!(matches!(
        m.cancel_search("s1").await.unwrap(),
        SearchChange::WrongState(_)
    ));
    // Malformed ids are refused before any query.
    assert!(matches!(
        m.search("").await,
        Err(StoreError::InvalidArgument(_))
    ));
}

pub async fn concurrent_proposals_from_two_stores_take_each_search_once(db: &Db) {
    let (a, b) = (db.open().await, db.open().await);
    let ids: Vec<String> = (0..12).map(|i| format!("s{i:02}")).collect();
    for id in &ids {
        queued(&a, id, &format!("p-{id}")).await;
    }
    // Each store proposes overlapping pairs at once.
    let pairs = |prefix: &str, offset: usize| -> Vec<Proposal> {
        (0..6)
            .map(|i| Proposal {
                match_id: format!("{prefix}{i}"),
                region: "eu".into(),
                search_ids: vec![
                    ids[(2 * i + offset) % 12].clone(),
                    ids[(2 * i + 1 + offset) % 12].clone(),
                ],
            })
            .collect()
    };
    let (pa, pb) = (pairs("ma", 0), pairs("mb", 1));
    let (ra, rb) = tokio::join!(
        a.matches.propose("duel", &pa),
        b.matches.propose("duel", &pb)
    );
    let made = ra.unwrap().len() + rb.unwrap().len();
    let mut taken = 0;
    for id in &ids {
        let s = a.matches.search(id).await.unwrap().unwrap();
        if s.state == SearchState::Proposed {
            taken += 1;
            let m = s.match_id.unwrap();
            let mates = pa.iter().chain(&pb).find(|p| p.match_id == m).unwrap();
            assert!(
                mates.search_ids.contains(id),
                "{id} is in the match it was taken into"
            );
        } else {
            assert_eq!(s.state, SearchState::Queued);
            assert_eq!(s.match_id, None);
        }
    }
    assert_eq!(
        taken,
        2 * made,
        "every search taken is in exactly one match"
    );
    assert!(
        made >= 6,
        "one store's proposals all succeed when it goes first"
    );
}

pub async fn a_match_advances_all_or_none_and_a_leaver_sends_the_others_back(db: &Db) {
    let store = db.open().await;
    let m = &store.matches;
    for (id, who) in [("s1", "ann"), ("s2", "bob"), ("s3", "cy"), ("s4", "dee")] {
        queued(&store, id, who).await;
    }
    let first_queued = m.search("s1").await.unwrap().unwrap().queued_at_ms;
    let made = m
        .propose(
            "duel",
            &[
                Proposal {
                    match_id: "m1".into(),
                    region: "eu".into(),
                    search_ids: vec!["s1".into(), "s2".into()],
                },
                Proposal {
                    match_id: "m2".into(),
                    region: "eu".into(),
                    search_ids: vec!["s3".into(), "s4".into()],
                },
                Proposal {
                    match_id: "m3".into(),
                    region: "eu".into(),
                    search_ids: vec!["s1".into(), "gone".into()],
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(made, ["m1", "m2"]);

    // m1 is placed and assigned.
    assert!(m
        .allocate("m1", "duel-1", &ids(&["s1", "s2"]))
        .await
        .unwrap());
    let assigned = vec![
        ("s1".to_owned(), json!({"zone": "duel-1", "ticket": "t1"})),
        ("s2".to_owned(), json!({"zone": "duel-1", "ticket": "t2"})),
    ];
    assert!(m.assign("m1", "k1", &assigned).await.unwrap());
    let s1 = m.search("s1").await.unwrap().unwrap();
    assert_eq!(s1.state, SearchState::Assigned);
    assert_eq!(s1.zone_id.as_deref(), Some("duel-1"));
    assert_eq!(s1.kid.as_deref(), Some("k1"));
    assert_eq!(
        s1.assignment,
        Some(json!({"zone": "duel-1", "ticket": "t1"}))
    );
    assert_eq!(m.live_keys().await.unwrap(), [("k1".to_owned(), 1)]);
    assert!(
        !m.allocate("m1", "again", &ids(&["s1", "s2"]))
            .await
            .unwrap(),
        "an assigned match is not placed twice"
    );

    // In m2, dee cancels after the proposal: cy goes back to the queue, keeping her place.
    assert_eq!(
        state_of(m.cancel_search("s4").await.unwrap()),
        SearchState::Cancelled
    );
    assert!(!m
        .allocate("m2", "duel-2", &ids(&["s3", "s4"]))
        .await
        .unwrap());
    let s3 = m.search("s3").await.unwrap().unwrap();
    assert_eq!(s3.state, SearchState::Queued);
    assert_eq!(s3.reason.as_deref(), Some("partner_left"));
    assert_eq!(s3.match_id, None);
    assert!(s3.queued_at_ms >= first_queued);
    assert_eq!(
        m.queued("duel", 10)
            .await
            .unwrap()
            .iter()
            .map(|c| c.search_id.as_str())
            .collect::<Vec<_>>(),
        ["s3"]
    );

    // A match that could not be placed goes back to the queue whole.
    queued(&store, "s5", "eve").await;
    let made = m
        .propose(
            "duel",
            &[Proposal {
                match_id: "m4".into(),
                region: "us".into(),
                search_ids: vec!["s3".into(), "s5".into()],
            }],
        )
        .await
        .unwrap();
    assert_eq!(made, ["m4"]);
    assert_eq!(m.requeue("m4", "no_capacity").await.unwrap(), 2);
    assert_eq!(m.queued("duel", 10).await.unwrap().len(), 2);

    // An oversized assignment is refused.
    assert!(matches!(
        m.assign(
            "m1",
            "k1",
            &[("s1".to_owned(), json!({"x": "y".repeat(9000)}))]
        )
        .await,
        Err(StoreError::InvalidArgument(_))
    ));
    let (changed, now) = m.changed_since(0).await.unwrap();
    assert!(changed.len() >= 5 && now > 0);
}

pub async fn settling_connects_arrived_players_and_lapses_waiting_searches(db: &Db) {
    let store = db.open().await;
    let m = &store.matches;
    for (id, who) in [("s1", "ann"), ("s2", "bob")] {
        queued(&store, id, who).await;
    }
    m.propose(
        "duel",
        &[Proposal {
            match_id: "m1".into(),
            region: "eu".into(),
            search_ids: vec!["s1".into(), "s2".into()],
        }],
    )
    .await
    .unwrap();
    let epoch = store.saves.claim("duel-1").await.unwrap().epoch;
    let seat = |p: &str| SeatRequest {
        principal: p.into(),
        role: SeatRole::Player,
        address: None,
        max_per_address: 0,
        hold_ms: 60_000,
    };
    store
        .lobby
        .create_room(
            &NewRoom {
                zone_id: "duel-1".into(),
                kind: "arena".into(),
                content_version: String::new(),
                code: Some("MATCH001".into()),
                max_players: 2,
                max_observers: 0,
                metadata: json!({}),
            },
            Some(&seat("ann")),
        )
        .await
        .unwrap();
    store.lobby.take_seat("duel-1", &seat("bob")).await.unwrap();
    assert!(m
        .allocate("m1", "duel-1", &ids(&["s1", "s2"]))
        .await
        .unwrap());
    let a = [
        ("s1".to_owned(), json!({"zone": "duel-1"})),
        ("s2".to_owned(), json!({"zone": "duel-1"})),
    ];
    assert!(m.assign("m1", "k1", &a).await.unwrap());
    // Nobody arrived yet: nothing changes.
    assert_eq!(m.settle(&NEVER).await.unwrap().connected, 0);
    // Ann arrives.
    store
        .lobby
        .report_rooms(&[RoomReport {
            zone_id: "duel-1".into(),
            epoch,
            players: 1,
            observers: 0,
            present: vec!["ann".into()],
            open: None,
            metadata: None,
        }])
        .await
        .unwrap();
    let out = m.settle(&NEVER).await.unwrap();
    assert_eq!(out.connected, 1);
    assert_eq!(
        m.search("s1").await.unwrap().unwrap().state,
        SearchState::Connected
    );
    assert_eq!(
        m.search("s2").await.unwrap().unwrap().state,
        SearchState::Assigned
    );
    // Bob never shows.
    let out = m
        .settle(&Lapses {
            no_show_ms: 0,
            ..NEVER
        })
        .await
        .unwrap();
    assert_eq!(out.expired, 1);
    let s2 = m.search("s2").await.unwrap().unwrap();
    assert_eq!(
        (s2.state, s2.reason.as_deref()),
        (SearchState::Expired, Some("no_show"))
    );
    assert!(
        m.live_keys().await.unwrap().is_empty(),
        "no live match holds k1 now"
    );

    // A search never queued, and one queued without heartbeats, lapse.
    m.create_search(&new_search("s3", "cy")).await.unwrap();
    queued(&store, "s4", "dee").await;
    let out = m
        .settle(&Lapses {
            probing_ms: 0,
            heartbeat_ms: 0,
            ..NEVER
        })
        .await
        .unwrap();
    assert_eq!(out.expired, 2);
    let s3 = m.search("s3").await.unwrap().unwrap();
    assert_eq!(s3.reason.as_deref(), Some("no_probe_result"));
    let s4 = m.search("s4").await.unwrap().unwrap();
    assert_eq!(s4.reason.as_deref(), Some("no_heartbeat"));

    // A match stuck mid-way (its replica died) goes back to the queue.
    queued(&store, "s5", "eve").await;
    queued(&store, "s6", "fay").await;
    m.propose(
        "duel",
        &[Proposal {
            match_id: "m2".into(),
            region: "eu".into(),
            search_ids: vec!["s5".into(), "s6".into()],
        }],
    )
    .await
    .unwrap();
    let out = m
        .settle(&Lapses {
            stuck_ms: 0,
            ..NEVER
        })
        .await
        .unwrap();
    assert_eq!(out.requeued, 2);
    assert_eq!(m.queued("duel", 10).await.unwrap().len(), 2);

    // A match whose search was sent back to the queue while it was being placed (stuck) is not
    // allocated without it: its partner goes back too, and no player ends up in two matches.
    queued(&store, "s7", "gus").await;
    queued(&store, "s8", "hal").await;
    m.propose(
        "duel",
        &[Proposal {
            match_id: "m3".into(),
            region: "eu".into(),
            search_ids: ids(&["s7", "s8"]),
        }],
    )
    .await
    .unwrap();
    assert!(m
        .allocate("m3", "duel-3", &ids(&["s7", "s8"]))
        .await
        .unwrap());
    // A settle sent s7 back to the queue as stuck but skipped s8 (another transaction held it:
    // PostgreSQL's settle skips locked rows), written here as that settle's effect on s7 alone.
    db.execute(
        "UPDATE match_searches SET state = 'queued', match_id = NULL, zone_id = NULL \
         WHERE search_id = 's7'",
    )
    .await;
    let a = [
        ("s7".to_owned(), json!({"zone": "duel-3"})),
        ("s8".to_owned(), json!({"zone": "duel-3"})),
    ];
    assert!(
        !m.assign("m3", "k1", &a).await.unwrap(),
        "not assigned without s7"
    );
    let s8 = m.search("s8").await.unwrap().unwrap();
    assert_eq!(
        (s8.state, s8.reason.as_deref()),
        (SearchState::Queued, Some("partner_left"))
    );
    assert!(s8.assignment.is_none());

    // Final searches are forgotten.
    let out = m
        .settle(&Lapses {
            forget_ms: 0,
            ..NEVER
        })
        .await
        .unwrap();
    assert_eq!(out.forgotten, 4);
    assert!(m.search("s1").await.unwrap().is_none());
}

pub async fn an_older_database_gains_the_matchmaker(db: &Db) {
    let store = db.open().await;
    store.saves.claim("z").await.unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 9",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 10",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; ALTER TABLE fleet_hosts DROP COLUMN region; {rewind};"
    ))
    .await;
    let store = db.open().await;
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, 2);
    queued(&store, "s1", "ann").await;
    assert_eq!(store.matches.queued("duel", 5).await.unwrap().len(), 1);
}
