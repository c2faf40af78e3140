//! The directory contract, part one: host registration and heartbeats, and claims of zones.
//!
//! Hosts are made silent, lapsed or dead by backdating their heartbeat with raw SQL, never by
//! sleeping; the timing used has bounds of hours, so the few milliseconds a test takes cannot move
//! a host across one.

use std::time::Duration;

use serde_json::json;
use zonekeep_store::{
    ClaimRequest, FactRecord, HostRecord, HostRegistration, Store, StoreError, Timing,
    WriteOutcome, ZoneClaim, ZoneLocation,
};

use crate::support::{unique, Db};

/// The protocol timing of these tests: a lease holds for an hour, a host is dead after two.
pub const T: Timing = Timing {
    heartbeat_every: Duration::from_secs(60),
    fence_after: Duration::from_secs(3600),
    dead_after: Duration::from_secs(7200),
};
/// A backdate that lapses a lease but leaves the host alive.
pub const LAPSED: Duration = Duration::from_secs(5400);
/// A backdate that makes a host dead (and silent past any registration bound used here).
pub const DEAD: Duration = Duration::from_secs(3 * 3600);

/// A host of this test run, named `name`.
pub fn host(run: &str, name: &str) -> HostRegistration {
    HostRegistration {
        host_id: format!("{run}-{name}"),
        incarnation: format!("{name}-1"),
        url: format!("ws://{name}.fleet.test:7400/ws"),
        capacity: 100,
        region: "local".into(),
    }
}

/// Registers `host` (silence bound: the takeover bound).
pub async fn join(store: &Store, host: &HostRegistration) {
    store
        .directory
        .register_host(host, T.dead_after)
        .await
        .unwrap();
}

/// Moves `host_id`'s last heartbeat `by` into the past, as if it had been silent that long.
pub async fn backdate(db: &Db, host_id: &str, by: Duration) {
    db.execute(&format!(
        "UPDATE fleet_hosts SET heartbeat_ms = heartbeat_ms - {} WHERE host_id = '{host_id}'",
        by.as_millis()
    ))
    .await;
}

/// `by` asks for `to` to own `zone` (kind "arena", params `params`).
pub async fn claim_with(
    store: &Store,
    zone: &str,
    by: &HostRegistration,
    to: &str,
    params: &serde_json::Value,
) -> Result<ZoneClaim, StoreError> {
    store
        .directory
        .claim_zone(&ClaimRequest {
            zone_id: zone,
            kind: "arena",
            params,
            by: &by.host_id,
            by_incarnation: &by.incarnation,
            to,
            timing: T,
        })
        .await
}

/// `by` asks for `to` to own `zone`, with the default params.
pub async fn claim(
    store: &Store,
    zone: &str,
    by: &HostRegistration,
    to: &str,
) -> Result<ZoneClaim, StoreError> {
    claim_with(store, zone, by, to, &json!({"map": "dunes"})).await
}

/// The claim must have been granted; returns (epoch, location).
pub fn claimed(got: Result<ZoneClaim, StoreError>) -> (u64, ZoneLocation) {
    match got {
        Ok(ZoneClaim::Claimed {
            epoch, location, ..
        }) => (epoch, location),
        other => panic!("expected Claimed, got {other:?}"),
    }
}

/// The claim must have changed nothing; returns where the zone is.
pub fn owned(got: Result<ZoneClaim, StoreError>) -> ZoneLocation {
    match got {
        Ok(ZoneClaim::Owned(location)) => location,
        other => panic!("expected Owned, got {other:?}"),
    }
}

/// A fact of `zone` written by the owner holding `epoch`.
pub fn owner_fact(key: &str, zone: &str, epoch: u64) -> FactRecord {
    FactRecord {
        key: key.into(),
        zone_id: zone.into(),
        kind: "mob_killed".into(),
        principal: Some("ada".into()),
        payload: json!({"add": {"score": 1}}),
        epoch: Some(epoch),
    }
}

/// This host's directory row.
pub async fn record_of(store: &Store, host_id: &str) -> HostRecord {
    let hosts = store.directory.hosts().await.unwrap();
    hosts
        .into_iter()
        .find(|h| h.host_id == host_id)
        .unwrap_or_else(|| panic!("no host row for {host_id}"))
}

pub async fn registration_is_refused_while_the_old_incarnation_is_fresh(db: &Db) {
    let store = db.open().await;
    let run = unique("reg");
    let first = host(&run, "a");
    join(&store, &first).await;
    let second = HostRegistration {
        incarnation: "a-2".into(),
        url: "ws://a2.fleet.test:7400/ws".into(),
        ..first.clone()
    };
    match store.directory.register_host(&second, T.dead_after).await {
        Err(StoreError::HostIdInUse {
            host_id,
            heartbeat_age_ms,
        }) => {
            assert_eq!(host_id, first.host_id);
            assert!(heartbeat_age_ms < LAPSED.as_millis() as u64);
        }
        other => panic!("a fresh incarnation must hold its id, got {other:?}"),
    }
    // The same incarnation may register again (e.g. after losing the answer).
    join(&store, &first).await;
    assert_eq!(record_of(&store, &first.host_id).await.incarnation, "a-1");

    // Once the old incarnation left, the id is free at once.
    store
        .directory
        .leave_host(&first.host_id, &first.incarnation)
        .await
        .unwrap();
    join(&store, &second).await;
    let row = record_of(&store, &first.host_id).await;
    assert_eq!(
        (
            row.incarnation.as_str(),
            row.url.as_str(),
            row.left,
            row.draining
        ),
        ("a-2", second.url.as_str(), false, false)
    );

    // An incarnation silent past the bound frees the id too (a crashed process never leaves).
    let third = HostRegistration {
        incarnation: "a-3".into(),
        ..second.clone()
    };
    assert!(matches!(
        store.directory.register_host(&third, T.dead_after).await,
        Err(StoreError::HostIdInUse { .. })
    ));
    backdate(db, &first.host_id, DEAD).await;
    join(&store, &third).await;
    assert_eq!(record_of(&store, &first.host_id).await.incarnation, "a-3");

    // Arguments are checked.
    for bad in [
        HostRegistration {
            url: "x".repeat(513),
            ..host(&run, "b")
        },
        HostRegistration {
            url: "ws://has space".into(),
            ..host(&run, "b")
        },
        HostRegistration {
            host_id: String::new(),
            ..host(&run, "b")
        },
    ] {
        assert!(matches!(
            store.directory.register_host(&bad, T.dead_after).await,
            Err(StoreError::InvalidArgument(_))
        ));
    }
}

pub async fn heartbeat_is_refused_after_being_replaced(db: &Db) {
    let store = db.open().await;
    let run = unique("hb");
    let old = host(&run, "a");
    join(&store, &old).await;
    store
        .directory
        .heartbeat(&old.host_id, &old.incarnation, false, T)
        .await
        .unwrap();

    // The old process hangs long enough to be replaced by a new one under the same id.
    backdate(db, &old.host_id, DEAD).await;
    let new = HostRegistration {
        incarnation: "a-2".into(),
        ..old.clone()
    };
    join(&store, &new).await;
    let lost = Err(StoreError::LeaseLost {
        host_id: old.host_id.clone(),
    });
    assert_eq!(
        store
            .directory
            .heartbeat(&old.host_id, &old.incarnation, false, T)
            .await,
        lost
    );
    store
        .directory
        .heartbeat(&new.host_id, &new.incarnation, false, T)
        .await
        .unwrap();
    // The replaced process leaving on its way out does not mark its successor left.
    store
        .directory
        .leave_host(&old.host_id, &old.incarnation)
        .await
        .unwrap();
    assert!(!record_of(&store, &new.host_id).await.left);

    // A host that left, or never registered, has no lease to renew.
    store
        .directory
        .leave_host(&new.host_id, &new.incarnation)
        .await
        .unwrap();
    assert!(record_of(&store, &new.host_id).await.left);
    assert!(matches!(
        store
            .directory
            .heartbeat(&new.host_id, &new.incarnation, false, T)
            .await,
        Err(StoreError::LeaseLost { .. })
    ));
    let stranger = host(&run, "nobody");
    assert!(matches!(
        store
            .directory
            .heartbeat(&stranger.host_id, &stranger.incarnation, false, T)
            .await,
        Err(StoreError::LeaseLost { .. })
    ));

    // A heartbeat that arrives after the database already counts its host dead (a paused
    // process, a query that hung) does not revive it: other hosts may own its zones by now.
    let late = host(&run, "late");
    join(&store, &late).await;
    backdate(db, &late.host_id, DEAD).await;
    assert_eq!(
        store
            .directory
            .heartbeat(&late.host_id, &late.incarnation, false, T)
            .await,
        Err(StoreError::LeaseLost {
            host_id: late.host_id.clone(),
        })
    );
    assert!(
        record_of(&store, &late.host_id).await.heartbeat_age_ms >= 3 * 3600 * 1000,
        "the dead host's heartbeat was not renewed"
    );
}

pub async fn a_new_zone_is_claimed(db: &Db) {
    let store = db.open().await;
    let run = unique("new");
    let a = host(&run, "a");
    join(&store, &a).await;
    let zone = format!("{run}-z");
    let params = json!({"map": "dunes", "size": 3});
    let got = claim_with(&store, &zone, &a, &a.host_id, &params)
        .await
        .unwrap();
    let expected = ZoneLocation {
        zone_id: zone.clone(),
        kind: "arena".into(),
        params: params.clone(),
        owner: Some(a.host_id.clone()),
        owner_url: Some(a.url.clone()),
        owner_alive: true,
        epoch: 1,
    };
    assert_eq!(
        got,
        ZoneClaim::Claimed {
            epoch: 1,
            last: None,
            location: expected.clone()
        }
    );
    assert_eq!(
        store.directory.locate(&zone, T).await.unwrap(),
        Some(expected)
    );
    assert_eq!(record_of(&store, &a.host_id).await.zones, 1);
    // The epoch is the zone's fence: the owner writes with it.
    assert_eq!(
        store.saves.write(&zone, 1, 1, "arena", b"s").await,
        Ok(WriteOutcome::Written)
    );
    assert_eq!(
        store
            .directory
            .locate(&format!("{run}-never"), T)
            .await
            .unwrap(),
        None
    );
}

pub async fn a_second_host_is_sent_to_the_owner(db: &Db) {
    let (sa, sb) = tokio::join!(db.open(), db.open());
    let run = unique("second");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&sa, &a).await;
    join(&sb, &b).await;
    let zone = format!("{run}-z");
    let (epoch, _) = claimed(claim(&sa, &zone, &a, &a.host_id).await);

    let other_params = json!({"map": "ice"});
    let at = owned(claim_with(&sb, &zone, &b, &b.host_id, &other_params).await);
    assert_eq!(at.owner.as_deref(), Some(a.host_id.as_str()));
    assert_eq!(at.owner_url.as_deref(), Some(a.url.as_str()));
    assert!(at.owner_alive);
    assert_eq!((at.epoch, at.params), (epoch, json!({"map": "dunes"})));
    // Nothing was raised: the owner still writes with its epoch.
    assert_eq!(
        sa.saves.write(&zone, epoch, 1, "arena", b"s").await,
        Ok(WriteOutcome::Written)
    );
}

pub async fn an_assigned_zone_is_loaded_by_its_host_and_others_are_sent_there(db: &Db) {
    let store = db.open().await;
    let run = unique("assign");
    let (a, b, c) = (host(&run, "a"), host(&run, "b"), host(&run, "c"));
    for h in [&a, &b, &c] {
        join(&store, h).await;
    }
    let zone = format!("{run}-z");
    // a places the new zone on b: b owns it (first raise) but has not loaded it yet.
    let (assigned, at) = claimed(claim(&store, &zone, &a, &b.host_id).await);
    assert_eq!(assigned, 1);
    assert_eq!(at.owner.as_deref(), Some(b.host_id.as_str()));
    assert_eq!(at.owner_url.as_deref(), Some(b.url.as_str()));

    // Meanwhile c is sent to b, and a asking again changes nothing.
    assert_eq!(
        owned(claim(&store, &zone, &c, &c.host_id).await).owner,
        Some(b.host_id.clone())
    );
    assert_eq!(owned(claim(&store, &zone, &a, &b.host_id).await).epoch, 1);

    // b loads it: the second raise, which fences anything written under the assignment's epoch.
    let (loaded, at) = claimed(claim(&store, &zone, &b, &b.host_id).await);
    assert_eq!(loaded, 2);
    assert_eq!(at.epoch, 2);
    assert_eq!(
        store.saves.write(&zone, loaded, 1, "arena", b"b").await,
        Ok(WriteOutcome::Written)
    );
    assert!(matches!(
        store.saves.write(&zone, assigned, 2, "arena", b"x").await,
        Err(StoreError::Fenced { .. })
    ));
    let at = owned(claim(&store, &zone, &c, &c.host_id).await);
    assert_eq!(
        (at.owner.as_deref(), at.epoch),
        (Some(b.host_id.as_str()), 2)
    );
}

pub async fn a_dead_owners_zone_is_taken_and_the_old_owner_is_fenced(db: &Db) {
    let (sa, sb) = tokio::join!(db.open(), db.open());
    let run = unique("dead");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&sa, &a).await;
    join(&sb, &b).await;
    let zone = format!("{run}-z");
    let (old, _) = claimed(claim(&sa, &zone, &a, &a.host_id).await);
    sa.saves
        .write(&zone, old, 1, "arena", b"a-state")
        .await
        .unwrap();
    assert!(
        sa.facts
            .record(&owner_fact("f1", &zone, old))
            .await
            .unwrap()
            .first
    );

    // a is alive: b is sent there. Then a goes silent past the takeover bound.
    assert!(owned(claim(&sb, &zone, &b, &b.host_id).await).owner_alive);
    backdate(db, &a.host_id, DEAD).await;
    assert!(
        !sb.directory
            .locate(&zone, T)
            .await
            .unwrap()
            .unwrap()
            .owner_alive
    );

    let got = claim(&sb, &zone, &b, &b.host_id).await.unwrap();
    let ZoneClaim::Claimed {
        epoch: new,
        last,
        location,
    } = got
    else {
        panic!("a dead owner's zone must be taken, got {got:?}");
    };
    assert_eq!(new, old + 1);
    let last = last.unwrap();
    assert_eq!((last.epoch, last.bytes.as_slice()), (old, &b"a-state"[..]));
    assert_eq!(location.owner.as_deref(), Some(b.host_id.as_str()));

    // The old owner, still running somewhere, can neither save nor commit a fact.
    let fenced = StoreError::Fenced {
        stored_epoch: new,
        attempted: old,
    };
    assert_eq!(
        sa.saves.write(&zone, old, 2, "arena", b"late").await,
        Err(fenced.clone())
    );
    assert_eq!(
        sa.facts.record(&owner_fact("f2", &zone, old)).await,
        Err(fenced)
    );
    assert_eq!(sa.facts.get("f2").await.unwrap(), None);
    assert!(
        sb.facts
            .record(&owner_fact("f2", &zone, new))
            .await
            .unwrap()
            .first
    );
}

pub async fn a_host_whose_lease_lapsed_cannot_claim(db: &Db) {
    let store = db.open().await;
    let run = unique("lapsed");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&store, &a).await;
    join(&store, &b).await;
    let (z1, z2) = (format!("{run}-z1"), format!("{run}-z2"));
    claimed(claim(&store, &z1, &a, &a.host_id).await);

    // Past the fence bound but not the takeover bound: a may not act, and is not dead either.
    backdate(db, &a.host_id, LAPSED).await;
    let lost = Err(StoreError::LeaseLost {
        host_id: a.host_id.clone(),
    });
    assert_eq!(claim(&store, &z2, &a, &a.host_id).await, lost);
    assert_eq!(claim(&store, &z2, &a, &b.host_id).await, lost);
    let at = owned(claim(&store, &z1, &b, &b.host_id).await);
    assert!(
        at.owner_alive,
        "a lapsed lease is not death: nobody takes z1 yet"
    );
    assert_eq!(store.directory.locate(&z2, T).await.unwrap(), None);

    // Claiming under another incarnation, or unregistered, is no lease either.
    let impostor = HostRegistration {
        incarnation: "b-0".into(),
        ..b.clone()
    };
    assert!(matches!(
        claim(&store, &z2, &impostor, &b.host_id).await,
        Err(StoreError::LeaseLost { .. })
    ));
    let stranger = host(&run, "nobody");
    assert!(matches!(
        claim(&store, &z2, &stranger, &b.host_id).await,
        Err(StoreError::LeaseLost { .. })
    ));

    // A heartbeat that lands renews the lease.
    store
        .directory
        .heartbeat(&a.host_id, &a.incarnation, false, T)
        .await
        .unwrap();
    claimed(claim(&store, &z2, &a, &a.host_id).await);
}

pub async fn a_draining_host_is_not_a_usable_target(db: &Db) {
    let store = db.open().await;
    let run = unique("drain");
    let (a, b, c) = (host(&run, "a"), host(&run, "b"), host(&run, "c"));
    for h in [&a, &b, &c] {
        join(&store, h).await;
    }
    let (z1, z2) = (format!("{run}-z1"), format!("{run}-z2"));
    claimed(claim(&store, &z1, &b, &b.host_id).await);
    store
        .directory
        .heartbeat(&b.host_id, &b.incarnation, true, T)
        .await
        .unwrap();
    assert!(record_of(&store, &b.host_id).await.draining);

    let unavailable = |id: &str| {
        Err(StoreError::HostUnavailable {
            host_id: id.to_owned(),
        })
    };
    assert_eq!(
        claim(&store, &z2, &a, &b.host_id).await,
        unavailable(&b.host_id)
    );
    assert_eq!(
        claim(&store, &z2, &b, &b.host_id).await,
        unavailable(&b.host_id)
    );
    // Unknown and dead hosts are no targets either.
    let ghost = format!("{run}-ghost");
    assert_eq!(claim(&store, &z2, &a, &ghost).await, unavailable(&ghost));
    backdate(db, &c.host_id, DEAD).await;
    assert_eq!(
        claim(&store, &z2, &a, &c.host_id).await,
        unavailable(&c.host_id)
    );
    assert_eq!(store.directory.locate(&z2, T).await.unwrap(), None);

    // Draining is not death: b keeps the zone it runs until it moves it.
    let at = owned(claim(&store, &z1, &a, &a.host_id).await);
    assert_eq!(
        (at.owner.as_deref(), at.owner_alive),
        (Some(b.host_id.as_str()), true)
    );

    // Back from draining, b is a target again.
    store
        .directory
        .heartbeat(&b.host_id, &b.incarnation, false, T)
        .await
        .unwrap();
    claimed(claim(&store, &z2, &a, &b.host_id).await);
}

pub async fn heartbeat_ages_come_from_the_database_clock(db: &Db) {
    let store = db.open().await;
    let run = unique("clock");
    let a = host(&run, "a");
    join(&store, &a).await;

    let before = db.now_ms().await;
    store
        .directory
        .heartbeat(&a.host_id, &a.incarnation, false, T)
        .await
        .unwrap();
    let after = db.now_ms().await;
    let stamp = db
        .query_i64(&format!(
            "SELECT heartbeat_ms FROM fleet_hosts WHERE host_id = '{}'",
            a.host_id
        ))
        .await;
    assert!(
        (before..=after).contains(&stamp),
        "the stamp {stamp} is not the database's time ({before}..={after})"
    );

    // Ages are the database's now minus the stamp, whatever it holds.
    backdate(db, &a.host_id, Duration::from_secs(3600)).await;
    let stamp = stamp - 3_600_000;
    let t1 = db.now_ms().await;
    let age = record_of(&store, &a.host_id).await.heartbeat_age_ms;
    let t2 = db.now_ms().await;
    let age = i64::try_from(age).unwrap();
    assert!(
        (t1 - stamp..=t2 - stamp).contains(&age),
        "age {age} is not the database's now minus the stamp ({}..={})",
        t1 - stamp,
        t2 - stamp
    );
}

pub async fn a_ticket_id_is_spent_once_across_the_fleet(db: &Db) {
    let store = db.open().await;
    let other_host = db.open().await;
    let run = unique("jti");
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3_600_000;
    let jti = format!("{run}-live");
    assert!(store
        .directory
        .spend_ticket(&jti, in_an_hour)
        .await
        .unwrap());
    assert!(
        !other_host
            .directory
            .spend_ticket(&jti, in_an_hour)
            .await
            .unwrap(),
        "another host of the fleet sees it spent"
    );
    assert!(!store
        .directory
        .spend_ticket(&jti, in_an_hour)
        .await
        .unwrap());
    // Ids long expired are forgotten by later calls (their tickets are refused as expired anyway).
    let old = format!("{run}-old");
    assert!(store.directory.spend_ticket(&old, 1).await.unwrap());
    assert!(store
        .directory
        .spend_ticket(&format!("{run}-next"), in_an_hour)
        .await
        .unwrap());
    assert!(
        store.directory.spend_ticket(&old, 1).await.unwrap(),
        "an expired id was forgotten"
    );
    assert!(matches!(
        store.directory.spend_ticket("", in_an_hour).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        store
            .directory
            .spend_ticket(&"x".repeat(300), in_an_hour)
            .await,
        Err(StoreError::InvalidArgument(_))
    ));
}
