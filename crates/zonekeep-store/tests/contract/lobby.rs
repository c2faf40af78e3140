//! The lobby contract: rooms listed and found by code, seats handed out fullest room first and
//! never past a room's capacity (also under concurrent calls from two stores), per-address caps,
//! owners' reports fenced by epoch, and reservations that lapse.

use std::collections::BTreeMap;

use serde_json::json;
use zonekeep_store::{
    NewRoom, RoomFilter, RoomReport, SeatOutcome, SeatRequest, SeatRole, Store, StoreError,
};

use crate::support::Db;

fn new_room(id: &str, max_players: u32) -> NewRoom {
    NewRoom {
        zone_id: id.into(),
        kind: "arena".into(),
        content_version: "v1".into(),
        code: None,
        max_players,
        max_observers: 1,
        metadata: json!({"map": "dunes"}),
    }
}

fn seat(principal: &str) -> SeatRequest {
    SeatRequest {
        principal: principal.into(),
        role: SeatRole::Player,
        address: None,
        max_per_address: 0,
        hold_ms: 60_000,
    }
}

fn arena() -> RoomFilter {
    RoomFilter {
        kind: "arena".into(),
        limit: 100,
        ..RoomFilter::default()
    }
}

fn listed(rooms: &[zonekeep_store::Room]) -> Vec<&str> {
    rooms.iter().map(|r| r.zone_id.as_str()).collect()
}

pub async fn rooms_are_listed_by_kind_version_and_metadata_and_private_ones_found_by_code(db: &Db) {
    let store = db.open().await;
    store
        .lobby
        .create_room(&new_room("a-1", 4), None)
        .await
        .unwrap();
    let ice = NewRoom {
        metadata: json!({"map": "ice", "ranked": true}),
        content_version: "v2".into(),
        ..new_room("a-2", 4)
    };
    store
        .lobby
        .create_room(&ice, Some(&seat("ann")))
        .await
        .unwrap();
    let private = NewRoom {
        code: Some("KEY-42".into()),
        ..new_room("a-3", 4)
    };
    let made = store.lobby.create_room(&private, None).await.unwrap();
    assert!(made.private);
    let other_kind = NewRoom {
        kind: "race".into(),
        ..new_room("r-1", 4)
    };
    store.lobby.create_room(&other_kind, None).await.unwrap();

    // Fullest first; the private room and other kinds never listed.
    let all = store.lobby.list_rooms(&arena()).await.unwrap();
    assert_eq!(listed(&all), ["a-2", "a-1"]);
    assert_eq!(
        (all[0].reserved_players, all[0].free(SeatRole::Player)),
        (1, 3)
    );
    let v1 = RoomFilter {
        content_version: Some("v1".into()),
        ..arena()
    };
    assert_eq!(listed(&store.lobby.list_rooms(&v1).await.unwrap()), ["a-1"]);
    let ranked = RoomFilter {
        metadata: vec![
            ("ranked".into(), "true".into()),
            ("map".into(), "ice".into()),
        ],
        ..arena()
    };
    assert_eq!(
        listed(&store.lobby.list_rooms(&ranked).await.unwrap()),
        ["a-2"]
    );
    let roomy = RoomFilter {
        min_free: 4,
        ..arena()
    };
    assert_eq!(
        listed(&store.lobby.list_rooms(&roomy).await.unwrap()),
        ["a-1"]
    );

    let found = store.lobby.room_by_code("KEY-42").await.unwrap().unwrap();
    assert_eq!(found.zone_id, "a-3");
    assert_eq!(store.lobby.room_by_code("NOPE").await.unwrap(), None);
    assert!(matches!(
        store.lobby.room_by_code("bad code").await,
        Err(StoreError::InvalidArgument(_))
    ));

    // An id, or a code, is one room's.
    assert!(matches!(
        store.lobby.create_room(&new_room("a-1", 2), None).await,
        Err(StoreError::RoomExists(_))
    ));
    let same_code = NewRoom {
        code: Some("KEY-42".into()),
        ..new_room("a-9", 2)
    };
    assert!(matches!(
        store.lobby.create_room(&same_code, None).await,
        Err(StoreError::RoomExists(_))
    ));
    assert!(store.lobby.room("a-9").await.unwrap().is_none());
}

pub async fn join_or_create_fills_the_fullest_room_then_creates_one(db: &Db) {
    let store = db.open().await;
    let mut n = 0;
    let mut next_room = || {
        n += 1;
        new_room(&format!("duel-{n}"), 2)
    };
    let (r1, created) = store
        .lobby
        .join_or_create(&arena(), &seat("ann"), &next_room())
        .await
        .unwrap();
    assert!(created);
    let (r2, created) = store
        .lobby
        .join_or_create(&arena(), &seat("bob"), &next_room())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(r2.zone_id, r1.zone_id);
    assert_eq!(r2.free(SeatRole::Player), 0);
    // Asking again keeps one's seat, in a full room too.
    let (again, created) = store
        .lobby
        .join_or_create(&arena(), &seat("bob"), &next_room())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(
        (again.zone_id.as_str(), again.reserved_players),
        (r1.zone_id.as_str(), 2)
    );
    let (r3, created) = store
        .lobby
        .join_or_create(&arena(), &seat("cy"), &next_room())
        .await
        .unwrap();
    assert!(created);
    assert_ne!(r3.zone_id, r1.zone_id);
    // A full room refuses a seat by id; a free one gives it.
    assert!(matches!(
        store
            .lobby
            .take_seat(&r1.zone_id, &seat("dee"))
            .await
            .unwrap(),
        SeatOutcome::Full(_)
    ));
    assert!(matches!(
        store.lobby.take_seat(&r3.zone_id, &seat("dee")).await.unwrap(),
        SeatOutcome::Seated(r) if r.reserved_players == 2
    ));
    assert_eq!(
        store
            .lobby
            .take_seat("no-such-room", &seat("dee"))
            .await
            .unwrap(),
        SeatOutcome::NoRoom
    );
}

pub async fn concurrent_joins_from_two_stores_never_overfill_a_room(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    const JOINS: usize = 30;
    const SEATS: u32 = 4;
    let mut tasks = Vec::new();
    for i in 0..JOINS {
        let store: Store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let (room, _) = store
                .lobby
                .join_or_create(
                    &arena(),
                    &seat(&format!("p{i}")),
                    &new_room(&format!("room-{i}"), SEATS),
                )
                .await
                .unwrap();
            room.zone_id
        }));
    }
    let mut per_room: BTreeMap<String, u32> = BTreeMap::new();
    for t in tasks {
        *per_room.entry(t.await.unwrap()).or_default() += 1;
    }
    assert_eq!(per_room.values().sum::<u32>(), JOINS as u32);
    assert!(
        per_room.values().all(|&n| n <= SEATS),
        "a room seated more than {SEATS}: {per_room:?}"
    );
    // Joins fill rooms before making new ones: the fewest rooms that seat everyone.
    assert_eq!(
        per_room.len(),
        JOINS.div_ceil(SEATS as usize),
        "{per_room:?}"
    );
    for (zone, n) in &per_room {
        let room = a.lobby.room(zone).await.unwrap().unwrap();
        assert_eq!(room.reserved_players, *n, "{zone}");
    }
}

pub async fn an_address_holds_at_most_its_seats_in_a_room(db: &Db) {
    let store = db.open().await;
    let from = |who: &str, address: &str| SeatRequest {
        address: Some(address.into()),
        max_per_address: 2,
        ..seat(who)
    };
    store
        .lobby
        .create_room(&new_room("lan", 8), Some(&from("a", "10.0.0.1")))
        .await
        .unwrap();
    assert!(matches!(
        store
            .lobby
            .take_seat("lan", &from("b", "10.0.0.1"))
            .await
            .unwrap(),
        SeatOutcome::Seated(_)
    ));
    assert!(matches!(
        store
            .lobby
            .take_seat("lan", &from("c", "10.0.0.1"))
            .await
            .unwrap(),
        SeatOutcome::AddressFull(_)
    ));
    // Another address still sits; join_or_create takes the capped address elsewhere.
    assert!(matches!(
        store
            .lobby
            .take_seat("lan", &from("d", "10.0.0.2"))
            .await
            .unwrap(),
        SeatOutcome::Seated(_)
    ));
    let (room, created) = store
        .lobby
        .join_or_create(&arena(), &from("c", "10.0.0.1"), &new_room("lan-2", 8))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(room.zone_id, "lan-2");
    // Observers have seats of their own: the cap counts them apart.
    let watcher = SeatRequest {
        role: SeatRole::Observer,
        ..from("e", "10.0.0.1")
    };
    assert!(matches!(
        store.lobby.take_seat("lan", &watcher).await.unwrap(),
        SeatOutcome::Seated(r) if r.reserved_observers == 1
    ));
    assert!(matches!(
        store
            .lobby
            .take_seat(
                "lan",
                &SeatRequest {
                    principal: "f".into(),
                    ..watcher.clone()
                }
            )
            .await
            .unwrap(),
        SeatOutcome::Full(_)
    ));
}

pub async fn owners_reports_are_fenced_and_turn_reservations_into_presence(db: &Db) {
    let store = db.open().await;
    let epoch = store.saves.claim("match-1").await.unwrap().epoch;
    store
        .lobby
        .create_room(&new_room("match-1", 3), Some(&seat("ann")))
        .await
        .unwrap();
    store
        .lobby
        .take_seat("match-1", &seat("bob"))
        .await
        .unwrap();
    let report = |players: u32, present: &[&str]| RoomReport {
        zone_id: "match-1".into(),
        epoch,
        players,
        observers: 0,
        present: present.iter().map(|p| (*p).to_owned()).collect(),
        open: None,
        metadata: None,
    };
    // Ann arrived (and one player the lobby never seated): her seat is present, Bob's reserved.
    let out = store
        .lobby
        .report_rooms(&[
            report(2, &["ann", "zed"]),
            RoomReport {
                zone_id: "not-a-room".into(),
                ..report(1, &[])
            },
        ])
        .await
        .unwrap();
    assert_eq!(out.rooms, ["match-1"]);
    assert_eq!(out.fenced, ["not-a-room"]);
    let room = store.lobby.room("match-1").await.unwrap().unwrap();
    assert_eq!((room.players, room.reserved_players), (2, 1));
    assert_eq!(room.free(SeatRole::Player), 0);
    assert!(matches!(
        store.lobby.take_seat("match-1", &seat("cy")).await.unwrap(),
        SeatOutcome::Full(_)
    ));
    // Ann is seated already: asking again changes nothing.
    assert!(matches!(
        store.lobby.take_seat("match-1", &seat("ann")).await.unwrap(),
        SeatOutcome::Seated(r) if r.reserved_players == 1
    ));

    // Another host claims the zone: the old owner's reports change nothing.
    let newer = store.saves.claim("match-1").await.unwrap().epoch;
    let out = store.lobby.report_rooms(&[report(0, &[])]).await.unwrap();
    assert_eq!(out.fenced, ["match-1"]);
    assert_eq!(
        store.lobby.room("match-1").await.unwrap().unwrap().players,
        2
    );

    // The new owner reports Ann gone and the room closed, with new metadata.
    store
        .lobby
        .report_rooms(&[RoomReport {
            epoch: newer,
            open: Some(false),
            metadata: Some(json!({"map": "ice", "round": 2})),
            ..report(1, &["zed"])
        }])
        .await
        .unwrap();
    let room = store.lobby.room("match-1").await.unwrap().unwrap();
    assert_eq!(
        (room.players, room.reserved_players, room.open),
        (1, 1, false)
    );
    assert_eq!(room.metadata, json!({"map": "ice", "round": 2}));
    assert!(store.lobby.list_rooms(&arena()).await.unwrap().is_empty());
    assert!(matches!(
        store
            .lobby
            .take_seat("match-1", &seat("dee"))
            .await
            .unwrap(),
        SeatOutcome::Closed(_)
    ));
    // A report of malformed metadata is refused whole.
    assert!(matches!(
        store
            .lobby
            .report_rooms(&[RoomReport {
                epoch: newer,
                metadata: Some(json!("not an object")),
                ..report(1, &[])
            }])
            .await,
        Err(StoreError::InvalidArgument(_))
    ));
}

pub async fn lapsed_reservations_free_their_seats_and_idle_rooms_are_forgotten(db: &Db) {
    let store = db.open().await;
    store
        .lobby
        .create_room(&new_room("quiet", 1), Some(&seat("ann")))
        .await
        .unwrap();
    store
        .lobby
        .create_room(&new_room("busy", 1), None)
        .await
        .unwrap();
    store.lobby.take_seat("busy", &seat("bob")).await.unwrap();
    assert!(matches!(
        store.lobby.take_seat("quiet", &seat("cy")).await.unwrap(),
        SeatOutcome::Full(_)
    ));
    // An hour passes for Ann's reservation, and for both rooms' activity.
    db.execute(
        "UPDATE lobby_seats SET expires_ms = expires_ms - 3600000 WHERE principal = 'ann';
         UPDATE lobby_rooms SET active_at_ms = active_at_ms - 3600000;",
    )
    .await;
    // The sweep frees the lapsed seat: the quiet room, empty with no seat held, is forgotten;
    // the busy one holds Bob's seat.
    assert_eq!(store.lobby.forget_idle_rooms(60_000).await.unwrap(), 1);
    assert!(store.lobby.room("quiet").await.unwrap().is_none());
    assert!(store.lobby.room("busy").await.unwrap().is_some());
    // A lapsed seat in a room still active is swept and recounted: the seat is free again.
    store
        .lobby
        .create_room(&new_room("live", 1), Some(&seat("cy")))
        .await
        .unwrap();
    db.execute("UPDATE lobby_seats SET expires_ms = expires_ms - 3600000 WHERE principal = 'cy'")
        .await;
    assert_eq!(
        store
            .lobby
            .room("live")
            .await
            .unwrap()
            .unwrap()
            .reserved_players,
        1
    );
    assert_eq!(store.lobby.forget_idle_rooms(600_000).await.unwrap(), 0);
    let live = store.lobby.room("live").await.unwrap().unwrap();
    assert_eq!(live.reserved_players, 0, "the lapsed seat is free");
    assert!(matches!(
        store.lobby.take_seat("live", &seat("dee")).await.unwrap(),
        SeatOutcome::Seated(_)
    ));
}

/// A database written before the lobby (schema version 8) gains it when a newer build opens it.
pub async fn an_older_database_gains_the_lobby(db: &Db) {
    let store = db.open().await;
    let epoch = store.saves.claim("z").await.unwrap().epoch;
    store
        .saves
        .write("z", epoch, 1, "arena", b"kept")
        .await
        .unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 8",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 9",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; ALTER TABLE fleet_hosts DROP COLUMN region; DROP TABLE lobby_seats; DROP TABLE lobby_rooms; {rewind};"
    ))
    .await;
    let store = db.open().await;
    assert_eq!(store.saves.load("z").await.unwrap().unwrap().bytes, b"kept");
    store
        .lobby
        .create_room(&new_room("r", 2), None)
        .await
        .unwrap();
    assert_eq!(store.lobby.list_rooms(&arena()).await.unwrap().len(), 1);
}
