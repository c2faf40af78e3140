//! The directory contract, part two: moving, releasing, forgetting zones, finding orphans, and
//! concurrent claims of one new zone.

use serde_json::json;
use zonekeep_store::{StoreError, WriteOutcome, ZoneClaim};

use crate::directory::{
    backdate, claim, claim_with, claimed, host, join, owned, owner_fact, record_of, DEAD, T,
};
use crate::support::{unique, Db};

pub async fn move_zone_fences_the_old_owner(db: &Db) {
    let store = db.open().await;
    let run = unique("move");
    let (a, b, c) = (host(&run, "a"), host(&run, "b"), host(&run, "c"));
    for h in [&a, &b, &c] {
        join(&store, h).await;
    }
    let zone = format!("{run}-z");
    let (old, _) = claimed(claim(&store, &zone, &a, &a.host_id).await);
    store
        .saves
        .write(&zone, old, 1, "arena", b"a-state")
        .await
        .unwrap();

    // Only the owner, at the current epoch, may move it.
    let not_owner = |host: &str, epoch: u64| {
        Err(StoreError::NotOwner {
            zone_id: zone.clone(),
            host_id: host.to_owned(),
            epoch,
        })
    };
    assert_eq!(
        store
            .directory
            .move_zone(&zone, &b.host_id, old, &c.host_id)
            .await,
        not_owner(&b.host_id, old)
    );
    assert_eq!(
        store
            .directory
            .move_zone(&zone, &a.host_id, old + 1, &b.host_id)
            .await,
        not_owner(&a.host_id, old + 1)
    );

    let moved = store
        .directory
        .move_zone(&zone, &a.host_id, old, &b.host_id)
        .await
        .unwrap();
    assert_eq!(moved, old + 1);
    let fenced = StoreError::Fenced {
        stored_epoch: moved,
        attempted: old,
    };
    assert_eq!(
        store.saves.write(&zone, old, 2, "arena", b"late").await,
        Err(fenced.clone())
    );
    assert_eq!(
        store.facts.record(&owner_fact("f", &zone, old)).await,
        Err(fenced.clone())
    );
    assert_eq!(
        store
            .directory
            .move_zone(&zone, &a.host_id, old, &c.host_id)
            .await,
        Err(fenced)
    );

    let at = store.directory.locate(&zone, T).await.unwrap().unwrap();
    assert_eq!(
        (at.owner.as_deref(), at.epoch),
        (Some(b.host_id.as_str()), moved)
    );
    assert_eq!(
        owned(claim(&store, &zone, &c, &c.host_id).await).owner,
        Some(b.host_id.clone())
    );
    let got = claim(&store, &zone, &b, &b.host_id).await.unwrap();
    let ZoneClaim::Claimed { epoch, last, .. } = got else {
        panic!("the new owner loads the moved zone, got {got:?}");
    };
    assert_eq!(epoch, moved + 1);
    assert_eq!(last.unwrap().bytes, b"a-state");

    // A zone without an entry has no owner to move it.
    assert!(matches!(
        store
            .directory
            .move_zone(&format!("{run}-none"), &a.host_id, 0, &b.host_id)
            .await,
        Err(StoreError::NotOwner { .. })
    ));
}

pub async fn a_released_zone_is_claimed_elsewhere(db: &Db) {
    let store = db.open().await;
    let run = unique("release");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&store, &a).await;
    join(&store, &b).await;
    let zone = format!("{run}-z");
    let (epoch, _) = claimed(claim(&store, &zone, &a, &a.host_id).await);
    store
        .saves
        .write(&zone, epoch, 1, "arena", b"dormant")
        .await
        .unwrap();

    // Only the owner under the current epoch releases.
    assert!(!store
        .directory
        .release_zone(&zone, &b.host_id, epoch)
        .await
        .unwrap());
    assert!(!store
        .directory
        .release_zone(&zone, &a.host_id, epoch + 1)
        .await
        .unwrap());
    assert!(store
        .directory
        .release_zone(&zone, &a.host_id, epoch)
        .await
        .unwrap());
    assert!(!store
        .directory
        .release_zone(&zone, &a.host_id, epoch)
        .await
        .unwrap());

    let at = store.directory.locate(&zone, T).await.unwrap().unwrap();
    assert_eq!(
        (at.owner, at.owner_url, at.owner_alive, at.epoch),
        (None, None, false, epoch)
    );
    assert_eq!(
        (at.kind.as_str(), &at.params),
        ("arena", &json!({"map": "dunes"}))
    );
    assert_eq!(record_of(&store, &a.host_id).await.zones, 0);
    assert!(store.directory.orphans(T, 10).await.unwrap().is_empty());

    // The next join anywhere places it again, with its stored kind and params and its save.
    let got = claim_with(&store, &zone, &b, &b.host_id, &json!({"map": "other"}))
        .await
        .unwrap();
    let ZoneClaim::Claimed {
        epoch: again,
        last,
        location,
    } = got
    else {
        panic!("a released zone is free, got {got:?}");
    };
    assert_eq!(again, epoch + 1);
    assert_eq!(last.unwrap().bytes, b"dormant");
    assert_eq!(location.params, json!({"map": "dunes"}));
    assert_eq!(location.owner.as_deref(), Some(b.host_id.as_str()));
    assert!(matches!(
        store.saves.write(&zone, epoch, 2, "arena", b"late").await,
        Err(StoreError::Fenced { .. })
    ));
}

pub async fn orphans_are_only_zones_of_dead_owners(db: &Db) {
    let store = db.open().await;
    let run = unique("orphans");
    let [alive, dead, gone, vanished] =
        ["alive", "dead", "gone", "vanished"].map(|n| host(&run, n));
    for h in [&alive, &dead, &gone, &vanished] {
        join(&store, h).await;
    }
    let z = |i: u32| format!("{run}-z{i}");
    claimed(claim(&store, &z(1), &alive, &alive.host_id).await);
    claimed(claim(&store, &z(2), &dead, &dead.host_id).await);
    claimed(claim(&store, &z(3), &gone, &gone.host_id).await);
    let (e4, _) = claimed(claim(&store, &z(4), &alive, &alive.host_id).await);
    assert!(store
        .directory
        .release_zone(&z(4), &alive.host_id, e4)
        .await
        .unwrap());
    claimed(claim(&store, &z(5), &vanished, &vanished.host_id).await);

    backdate(db, &dead.host_id, DEAD).await;
    store
        .directory
        .leave_host(&gone.host_id, &gone.incarnation)
        .await
        .unwrap();
    db.execute(&format!(
        "DELETE FROM fleet_hosts WHERE host_id = '{}'",
        vanished.host_id
    ))
    .await;

    let orphans = store.directory.orphans(T, 100).await.unwrap();
    let ids: Vec<&str> = orphans.iter().map(|o| o.zone_id.as_str()).collect();
    assert_eq!(ids, [z(2), z(3), z(5)]);
    assert!(orphans.iter().all(|o| !o.owner_alive));
    assert_eq!(
        (orphans[2].owner.as_deref(), orphans[2].owner_url.as_deref()),
        (Some(vanished.host_id.as_str()), None)
    );
    let first_two = store.directory.orphans(T, 2).await.unwrap();
    assert_eq!(
        first_two.iter().map(|o| &o.zone_id).collect::<Vec<_>>(),
        [&z(2), &z(3)]
    );

    let zones = store.directory.zones(T, 100).await.unwrap();
    assert_eq!(
        zones
            .iter()
            .map(|l| (l.zone_id.clone(), l.owner_alive))
            .collect::<Vec<_>>(),
        [
            (z(1), true),
            (z(2), false),
            (z(3), false),
            (z(4), false),
            (z(5), false)
        ]
    );
    assert_eq!(store.directory.zones(T, 3).await.unwrap().len(), 3);
    let hosts = store.directory.hosts().await.unwrap();
    let counts: Vec<(&str, u32)> = hosts
        .iter()
        .map(|h| (h.host_id.as_str(), h.zones))
        .collect();
    assert_eq!(
        counts,
        [
            (alive.host_id.as_str(), 1),
            (dead.host_id.as_str(), 1),
            (gone.host_id.as_str(), 1)
        ]
    );

    // Taking an orphan over makes it an orphan no more.
    claimed(claim(&store, &z(3), &alive, &alive.host_id).await);
    let ids: Vec<String> = store
        .directory
        .orphans(T, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.zone_id)
        .collect();
    assert_eq!(ids, [z(2), z(5)]);
}

pub async fn a_forgotten_zone_keeps_its_fence(db: &Db) {
    let store = db.open().await;
    let run = unique("forget");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&store, &a).await;
    join(&store, &b).await;
    let zone = format!("{run}-z");
    let (epoch, _) = claimed(claim(&store, &zone, &a, &a.host_id).await);
    assert!(store.directory.forget_zone(&zone).await.unwrap());
    assert!(!store.directory.forget_zone(&zone).await.unwrap());
    assert_eq!(store.directory.locate(&zone, T).await.unwrap(), None);

    // Placed again from scratch (the request's params), but never under an epoch handed out before.
    let (again, at) = claimed(claim_with(&store, &zone, &b, &b.host_id, &json!({"v": 2})).await);
    assert_eq!(again, epoch + 1);
    assert_eq!(at.params, json!({"v": 2}));
    assert!(matches!(
        store.saves.write(&zone, epoch, 1, "arena", b"late").await,
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(
        store.saves.write(&zone, again, 1, "arena", b"b").await,
        Ok(WriteOutcome::Written)
    );
}

/// Two hosts on two stores claim the same new zone at the same moment, many times over: each time
/// exactly one is granted the zone, at epoch 1, and the other is sent to it.
pub async fn concurrent_claims_of_a_new_zone_grant_exactly_one(db: &Db) {
    const ROUNDS: usize = 40;
    let (sa, sb) = tokio::join!(db.open(), db.open());
    let run = unique("race");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&sa, &a).await;
    join(&sb, &b).await;
    for round in 0..ROUNDS {
        let zone = format!("{run}-z{round}");
        let racers = [(sa.clone(), a.clone()), (sb.clone(), b.clone())].map(|(store, h)| {
            let zone = zone.clone();
            tokio::spawn(async move {
                let got = claim(&store, &zone, &h, &h.host_id).await;
                (h.host_id, got)
            })
        });
        let mut winners = Vec::new();
        let mut sent = Vec::new();
        for racer in racers {
            let (id, got) = racer.await.unwrap();
            match got.unwrap() {
                ZoneClaim::Claimed {
                    epoch, location, ..
                } => {
                    assert_eq!(epoch, 1, "round {round}");
                    assert_eq!(location.owner.as_deref(), Some(id.as_str()));
                    winners.push(id);
                }
                ZoneClaim::Owned(location) => sent.push(location.owner),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(sent, [Some(winners[0].clone())], "round {round}");
        let at = sa.directory.locate(&zone, T).await.unwrap().unwrap();
        assert_eq!(
            (at.owner.as_deref(), at.epoch),
            (Some(winners[0].as_str()), 1)
        );
    }
}

/// A database written by the release before the directory (schema version 1) gains the directory
/// when a newer build opens it, and keeps its saves and fences.
pub async fn an_older_database_gains_the_directory(db: &Db) {
    let run = unique("upgrade");
    let zone = format!("{run}-z");
    let store = db.open().await;
    let epoch = store.saves.claim(&zone).await.unwrap().epoch;
    store
        .saves
        .write(&zone, epoch, 1, "arena", b"kept")
        .await
        .unwrap();
    drop(store);
    // Back to version 1: the later migrations only added tables.
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 1",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 2",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; DROP TABLE lobby_seats; DROP TABLE lobby_rooms; DROP TABLE module_deploys; DROP TABLE zone_directory; DROP TABLE fleet_hosts;
         DROP TABLE spent_tickets; DROP TABLE module_kinds; DROP TABLE modules;
         DROP TABLE zone_transfers; DROP TABLE characters; DROP TABLE zone_calls; {rewind};"
    ))
    .await;

    let store = db.open().await;
    let a = host(&run, "a");
    join(&store, &a).await;
    let got = claim(&store, &zone, &a, &a.host_id).await.unwrap();
    let ZoneClaim::Claimed {
        epoch: now, last, ..
    } = got
    else {
        panic!("the upgraded directory places the zone, got {got:?}");
    };
    assert_eq!(now, epoch + 1);
    assert_eq!(last.unwrap().bytes, b"kept");
}
