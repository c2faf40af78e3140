//! The store contract (saves, facts, the directory, zone modules, transfers, characters, calls, the lobby, the matchmaker, leaderboards, presence and chat), written once as generic async functions
//! over a [`Db`] and run against SQLite (a temp file) and PostgreSQL (a fresh schema per test, when
//! `ZONEKEEP_TEST_POSTGRES` is set; otherwise those tests print that they were skipped).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

// The boards', the chat's, the presence's, the directory's, the modules', the transfers', the characters' and the calls' parts of the contract, in files of their own (not test targets: cargo
// only builds tests/*.rs).
#[path = "contract/boards.rs"]
mod boards;
#[path = "contract/calls.rs"]
mod calls;
#[path = "contract/characters.rs"]
mod characters;
#[path = "contract/chat.rs"]
mod chat;
#[path = "contract/directory.rs"]
mod directory;
#[path = "contract/directory_zones.rs"]
mod directory_zones;
#[path = "contract/lobby.rs"]
mod lobby;
#[path = "contract/matchmaking.rs"]
mod matchmaking;
#[path = "contract/modules.rs"]
mod modules;
#[path = "contract/presence.rs"]
mod presence;
#[path = "contract/transfers.rs"]
mod transfers;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use boards::*;
use calls::*;
use characters::*;
use chat::*;
use directory::*;
use directory_zones::*;
use lobby::*;
use matchmaking::*;
use modules::*;
use presence::*;
use serde_json::json;
use support::{Db, Model, Rng, Verdict};
use transfers::*;
use zonekeep_store::{FactRecord, StoreError, WriteOutcome};

fn fact(key: &str, principal: Option<&str>, payload: serde_json::Value) -> FactRecord {
    FactRecord {
        key: key.into(),
        zone_id: "arena-1".into(),
        kind: "mob_killed".into(),
        principal: principal.map(str::to_owned),
        payload,
        epoch: None,
    }
}

async fn claim_bumps_epoch(db: &Db) {
    let store = db.open().await;
    let first = store.saves.claim("z").await.unwrap();
    assert_eq!(first.epoch, 1);
    assert_eq!(first.last, None);
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, 2);

    store
        .saves
        .write("z", 2, 1, "arena", b"state-2")
        .await
        .unwrap();
    let third = store.saves.claim("z").await.unwrap();
    assert_eq!(third.epoch, 3);
    let last = third.last.unwrap();
    assert_eq!((last.zone_id.as_str(), last.kind.as_str()), ("z", "arena"));
    assert_eq!((last.epoch, last.seq), (2, 1));
    assert_eq!(last.bytes, b"state-2");
    assert!(last.saved_at_ms > 0);

    // Zones are independent.
    assert_eq!(store.saves.claim("other").await.unwrap().epoch, 1);
}

async fn fencing_refuses_stale_epoch(db: &Db) {
    let store = db.open().await;
    let old = store.saves.claim("z").await.unwrap().epoch;
    assert_eq!(
        store.saves.write("z", old, 1, "k", b"old-1").await,
        Ok(WriteOutcome::Written)
    );

    // A successor claims; the old owner is fenced even before the successor saves anything.
    let new = store.saves.claim("z").await.unwrap().epoch;
    assert_eq!(
        store.saves.write("z", old, 2, "k", b"old-2").await,
        Err(StoreError::Fenced {
            stored_epoch: new,
            attempted: old
        })
    );
    assert_eq!(
        store.saves.load("z").await.unwrap().unwrap().bytes,
        b"old-1"
    );

    assert_eq!(
        store.saves.write("z", new, 1, "k", b"new-1").await,
        Ok(WriteOutcome::Written)
    );
    assert_eq!(
        store.saves.write("z", new, 5, "k", b"new-5").await,
        Ok(WriteOutcome::Written)
    );
    assert_eq!(
        store.saves.write("z", new, 3, "k", b"new-3").await,
        Err(StoreError::Stale {
            epoch: new,
            stored_seq: 5,
            attempted_seq: 3
        })
    );
    assert!(matches!(
        store.saves.write("z", old, 99, "k", b"old-99").await,
        Err(StoreError::Fenced { .. })
    ));
    let saved = store.saves.load("z").await.unwrap().unwrap();
    assert_eq!(
        (saved.epoch, saved.seq, saved.bytes.as_slice()),
        (new, 5, &b"new-5"[..])
    );

    // Deleting the save (admin) keeps the fence: the old owner stays out.
    assert!(store.saves.delete("z").await.unwrap());
    assert!(!store.saves.delete("z").await.unwrap());
    assert_eq!(store.saves.load("z").await.unwrap(), None);
    assert!(matches!(
        store.saves.write("z", old, 100, "k", b"old-100").await,
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, new + 1);
}

async fn idempotent_saves(db: &Db) {
    let store = db.open().await;
    let epoch = store.saves.claim("z").await.unwrap().epoch;
    assert_eq!(
        store.saves.write("z", epoch, 1, "k", b"one").await,
        Ok(WriteOutcome::Written)
    );
    assert_eq!(
        store.saves.write("z", epoch, 1, "k", b"one").await,
        Ok(WriteOutcome::AlreadyDone)
    );
    // Reusing a (epoch, seq) for different content is a writer bug, refused.
    assert_eq!(
        store.saves.write("z", epoch, 1, "k", b"two").await,
        Err(StoreError::Conflict { epoch, seq: 1 })
    );
    assert_eq!(
        store.saves.write("z", epoch, 1, "other-kind", b"one").await,
        Err(StoreError::Conflict { epoch, seq: 1 })
    );
    assert_eq!(store.saves.load("z").await.unwrap().unwrap().bytes, b"one");

    store.saves.claim("z").await.unwrap();
    let listed = store.saves.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    let meta = &listed[0];
    assert_eq!((meta.zone_id.as_str(), meta.kind.as_str()), ("z", "k"));
    assert_eq!(
        (meta.epoch, meta.fence_epoch, meta.seq, meta.size),
        (epoch, epoch + 1, 1, 3)
    );

    // Argument checks happen before the database.
    assert!(matches!(
        store.saves.write("", 1, 1, "k", b"x").await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        store.saves.write("z", u64::MAX, 1, "k", b"x").await,
        Err(StoreError::InvalidArgument(_))
    ));
}

async fn idempotent_facts(db: &Db) {
    let store = db.open().await;
    let kill = fact(
        "arena-1/1/7",
        Some("p1"),
        json!({"add": {"score": 50}, "mob": "wolf"}),
    );
    let first = store.facts.record(&kill).await.unwrap();
    assert!(first.first);
    assert_eq!(first.result, json!({"score": 50}));
    let again = store.facts.record(&kill).await.unwrap();
    assert!(!again.first);
    assert_eq!(again.result, first.result);
    assert_eq!(
        store.facts.totals("p1").await.unwrap(),
        BTreeMap::from([("score".into(), 50)])
    );

    let second = fact(
        "arena-1/1/8",
        Some("p1"),
        json!({"add": {"score": 25, "kills": 1}}),
    );
    assert_eq!(
        store.facts.record(&second).await.unwrap().result,
        json!({"score": 75, "kills": 1})
    );
    // A repeat of the first fact still answers with the first fact's own result.
    assert_eq!(
        store.facts.record(&kill).await.unwrap().result,
        json!({"score": 50})
    );
    assert_eq!(store.facts.count().await.unwrap(), 2);

    let stored = store.facts.get("arena-1/1/7").await.unwrap().unwrap();
    assert_eq!(stored.principal.as_deref(), Some("p1"));
    assert_eq!(stored.payload, kill.payload);
    assert_eq!(stored.result, json!({"score": 50}));
    assert_eq!(store.facts.get("missing").await.unwrap(), None);

    // No built-in effect: recorded, null result, totals untouched.
    let note = fact("arena-1/1/9", None, json!({"chest": 3}));
    assert_eq!(store.facts.record(&note).await.unwrap().result, json!(null));
    assert_eq!(store.facts.count().await.unwrap(), 3);

    // Refused facts record nothing.
    for bad in [
        fact("bad-1", None, json!({"add": {"score": 1}})),
        fact("bad-2", Some("p1"), json!({"add": {"score": "lots"}})),
        fact("bad-3", Some("p1"), json!({"add": {"score": i64::MAX}})),
    ] {
        assert!(matches!(
            store.facts.record(&bad).await,
            Err(StoreError::InvalidFact { .. })
        ));
    }
    assert_eq!(store.facts.count().await.unwrap(), 3);
    assert_eq!(
        store.facts.totals("p1").await.unwrap().get("score"),
        Some(&75)
    );
    assert!(store.facts.totals("nobody").await.unwrap().is_empty());
}

/// A fact from a fenced owner (its epoch is below the zone's fence) is refused in the recording
/// transaction and leaves no trace; the current owner's re-send of a committed key settles once.
async fn fenced_facts_refused(db: &Db) {
    let store = db.open().await;
    let zone = "arena-1";
    let old = store.saves.claim(zone).await.unwrap().epoch;
    let with_epoch = |key: &str, epoch: u64| FactRecord {
        epoch: Some(epoch),
        ..fact(key, Some("ada"), json!({"add": {"score": 10}}))
    };
    let first = store.facts.record(&with_epoch("k1", old)).await.unwrap();
    assert!(first.first);

    // Another host takes the zone over: the old owner's facts are refused from now on, new
    // keys and re-sends of committed ones alike.
    let new = store.saves.claim(zone).await.unwrap().epoch;
    let fenced = Err(StoreError::Fenced {
        stored_epoch: new,
        attempted: old,
    });
    assert_eq!(store.facts.record(&with_epoch("k2", old)).await, fenced);
    assert_eq!(store.facts.record(&with_epoch("k1", old)).await, fenced);
    assert_eq!(store.facts.get("k2").await.unwrap(), None);
    assert_eq!(
        store.facts.totals("ada").await.unwrap().get("score"),
        Some(&10)
    );

    // The new owner restored a save that still had k1 in flight: it settles with the first
    // result and applies nothing; its own new fact commits once.
    let resent = store.facts.record(&with_epoch("k1", new)).await.unwrap();
    assert_eq!((resent.first, &resent.result), (false, &first.result));
    assert!(
        store
            .facts
            .record(&with_epoch("k2", new))
            .await
            .unwrap()
            .first
    );
    assert!(
        !store
            .facts
            .record(&with_epoch("k2", new))
            .await
            .unwrap()
            .first
    );
    assert_eq!(
        store.facts.totals("ada").await.unwrap().get("score"),
        Some(&20)
    );
    assert_eq!(store.facts.count().await.unwrap(), 2);

    // A save written with a newer epoch fences too, even without a claim row of that epoch.
    store
        .saves
        .write(zone, new + 1, 1, "arena", b"s")
        .await
        .unwrap();
    assert!(matches!(
        store.facts.record(&with_epoch("k3", new)).await,
        Err(StoreError::Fenced { .. })
    ));
    // Facts recorded without an owner epoch (tools outside any zone owner) are not checked.
    assert!(
        store
            .facts
            .record(&fact("k4", None, json!(null)))
            .await
            .unwrap()
            .first
    );
}

/// Facts of one owner race another host's claim of the zone: every fact recorded after the claim
/// returned is refused, every recorder ends up fenced, and the ledger holds exactly the accepted
/// ones.
async fn facts_racing_a_claim_are_fenced_from_the_claim_on(db: &Db) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (owner, other) = tokio::join!(db.open(), db.open());
    let epoch = owner.saves.claim("arena-1").await.unwrap().epoch;
    let claimed = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..4 {
        let (store, claimed) = (owner.clone(), Arc::clone(&claimed));
        tasks.push(tokio::spawn(async move {
            let mut accepted = 0u64;
            for i in 0..100_000 {
                let after_claim = claimed.load(Ordering::SeqCst);
                let f = FactRecord {
                    epoch: Some(epoch),
                    ..fact(&format!("race/{t}/{i}"), None, json!(null))
                };
                match store.facts.record(&f).await {
                    Ok(r) => {
                        assert!(r.first);
                        assert!(!after_claim, "a fact recorded after the claim was accepted");
                        accepted += 1;
                    }
                    Err(StoreError::Fenced { .. }) => return accepted,
                    // SQLite's write lock is not fair: a writer may wait out its busy timeout
                    // while the others take turns. Nothing was written; a caller tries again.
                    Err(e) if e.is_retryable() => continue,
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
            panic!("recorder {t} was never fenced");
        }));
    }
    // Let the recorders get going, then claim from the other host.
    while owner.facts.count().await.unwrap() < 8 && !tasks.iter().any(|t| t.is_finished()) {
        tokio::task::yield_now().await;
    }
    // The claim competes with the recorders for the write lock (see above): retried as a
    // caller retries any retryable store error.
    loop {
        match other.saves.claim("arena-1").await {
            Ok(_) => break,
            Err(e) if e.is_retryable() => continue,
            Err(e) => panic!("the claim failed: {e}"),
        }
    }
    claimed.store(true, Ordering::SeqCst);
    let mut accepted = 0;
    for task in tasks {
        accepted += task.await.unwrap();
    }
    assert_eq!(other.facts.count().await.unwrap(), accepted);
}

async fn concurrent_facts_exactly_once(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    const KEYS: usize = 24;
    const RECORDERS_PER_KEY: usize = 4;
    let mut tasks = Vec::new();
    for round in 0..RECORDERS_PER_KEY {
        for k in 0..KEYS {
            let store = if (k + round) % 2 == 0 {
                a.clone()
            } else {
                b.clone()
            };
            let f = fact(
                &format!("race/{k}"),
                Some("racer"),
                json!({"add": {"score": 1}}),
            );
            tasks.push(tokio::spawn(async move {
                let r = store.facts.record(&f).await.unwrap();
                (k, r)
            }));
        }
    }
    let mut firsts = BTreeMap::<usize, usize>::new();
    let mut results = BTreeMap::<usize, BTreeSet<String>>::new();
    for task in tasks {
        let (k, r) = task.await.unwrap();
        *firsts.entry(k).or_default() += usize::from(r.first);
        results.entry(k).or_default().insert(r.result.to_string());
    }
    for k in 0..KEYS {
        assert_eq!(
            firsts.get(&k),
            Some(&1),
            "key {k} must be applied exactly once"
        );
        assert_eq!(
            results[&k].len(),
            1,
            "every recorder of key {k} sees the same result"
        );
    }
    assert_eq!(a.facts.count().await.unwrap(), KEYS as u64);
    assert_eq!(
        b.facts.totals("racer").await.unwrap().get("score"),
        Some(&(KEYS as i64))
    );
}

async fn concurrent_claims_and_writes_fence(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    const OWNERS: u64 = 12;
    let mut tasks = Vec::new();
    for i in 0..OWNERS {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let epoch = store.saves.claim("contested").await.unwrap().epoch;
            let outcome = store
                .saves
                .write("contested", epoch, 1, "k", &epoch.to_be_bytes())
                .await;
            (epoch, outcome)
        }));
    }
    let mut epochs = BTreeSet::new();
    for task in tasks {
        let (epoch, outcome) = task.await.unwrap();
        assert!(epochs.insert(epoch), "epoch {epoch} handed out twice");
        match outcome {
            Ok(WriteOutcome::Written) => {}
            Err(StoreError::Fenced {
                stored_epoch,
                attempted,
            }) => {
                assert_eq!(attempted, epoch);
                assert!(stored_epoch > epoch);
            }
            other => panic!("owner {epoch}: unexpected {other:?}"),
        }
        if epoch == OWNERS {
            // Nobody claims after the last owner, so nothing can fence it.
            assert_eq!(outcome, Ok(WriteOutcome::Written));
        }
    }
    assert_eq!(epochs, (1..=OWNERS).collect::<BTreeSet<_>>());
    let saved = a.saves.load("contested").await.unwrap().unwrap();
    assert_eq!(
        (saved.epoch, saved.bytes),
        (OWNERS, OWNERS.to_be_bytes().to_vec())
    );

    // Two owners streaming saves at once: the older one never lands a single write.
    let old = a.saves.claim("stream").await.unwrap().epoch;
    let new = b.saves.claim("stream").await.unwrap().epoch;
    let (old_results, new_results) = tokio::join!(
        async {
            let mut out = Vec::new();
            for seq in 1..=20u64 {
                out.push(a.saves.write("stream", old, seq, "k", b"old").await);
            }
            out
        },
        async {
            let mut out = Vec::new();
            for seq in 1..=20u64 {
                out.push(b.saves.write("stream", new, seq, "k", b"new").await);
            }
            out
        }
    );
    assert!(old_results
        .iter()
        .all(|r| matches!(r, Err(StoreError::Fenced { .. }))));
    assert!(new_results.iter().all(|r| r == &Ok(WriteOutcome::Written)));
    let saved = b.saves.load("stream").await.unwrap().unwrap();
    assert_eq!(
        (saved.epoch, saved.seq, saved.bytes.as_slice()),
        (new, 20, &b"new"[..])
    );
}

/// A fixed pseudo-random sequence of claims and writes, checked step by step against the model:
/// the same property as the proptest, run here against every backend.
async fn random_writes_match_model(db: &Db) {
    let store = db.open().await;
    let mut rng = Rng::new(0x5eed);
    let mut model = Model::default();
    for step in 0..150 {
        if rng.below(6) == 0 {
            let claimed = store.saves.claim("z").await.unwrap().epoch;
            assert_eq!(claimed, model.claim(), "step {step}: claim");
            continue;
        }
        let epoch = rng.below(model.fence + 3);
        let seq = rng.below(5);
        let bytes = vec![u8::try_from(rng.below(2)).unwrap()];
        let got = Verdict::of(&store.saves.write("z", epoch, seq, "k", &bytes).await);
        let want = model.write(epoch, seq, &bytes);
        assert_eq!(got, want, "step {step}: write epoch {epoch} seq {seq}");
    }
    let stored = store.saves.load("z").await.unwrap();
    let stored = stored.map(|s| (s.epoch, s.seq, s.bytes));
    assert_eq!(stored, model.save);
}

async fn reopen_keeps_data_and_migrates_once(db: &Db) {
    // Several stores opening (and migrating) at once must all succeed.
    let (a, b, c) = tokio::join!(db.open(), db.open(), db.open());
    let epoch = a.saves.claim("z").await.unwrap().epoch;
    b.saves.write("z", epoch, 1, "k", b"kept").await.unwrap();
    c.facts
        .record(&fact("f", Some("p"), json!({"add": {"xp": 5}})))
        .await
        .unwrap();
    drop((a, b, c));

    let again = db.open().await;
    assert_eq!(again.saves.load("z").await.unwrap().unwrap().bytes, b"kept");
    assert_eq!(again.saves.claim("z").await.unwrap().epoch, epoch + 1);
    assert_eq!(again.facts.count().await.unwrap(), 1);
}

/// Hosts sharing one SQLite file start together (a fleet of processes on one machine): every one of
/// them opens the fresh file, even when their switches to WAL collide. Many rounds, because the
/// collision needs two connections to meet inside the switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_stores_opening_a_new_file_at_once_all_open() {
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zonekeep.db");
        let mut opening = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let path = path.clone();
            opening.spawn(async move { zonekeep_store::SqliteStore::open(path).await });
        }
        while let Some(opened) = opening.join_next().await {
            let opened = opened.unwrap();
            assert!(opened.is_ok(), "round {round}: {:?}", opened.err());
        }
    }
}

/// Runs a contract function in its own task and cleans the database up even when it panics (so a
/// failing PostgreSQL test does not leave its schema behind), then re-raises the panic.
async fn run_and_clean_up<F, Fut>(db: Db, body: F)
where
    F: FnOnce(Arc<Db>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let db = Arc::new(db);
    let outcome = tokio::spawn(body(Arc::clone(&db))).await;
    Arc::into_inner(db)
        .expect("the test task has ended, so it holds no reference")
        .cleanup()
        .await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

macro_rules! contract_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::run_and_clean_up(crate::Db::sqlite(), |db| async move {
                        super::$name(&db).await
                    })
                    .await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = crate::Db::postgres(concat!(module_path!(), "::", stringify!($name))) else { return };
                    crate::run_and_clean_up(db, |db| async move { super::$name(&db).await }).await;
                }
            )*
        }
    };
}

contract_tests!(
    claim_bumps_epoch,
    fencing_refuses_stale_epoch,
    idempotent_saves,
    idempotent_facts,
    fenced_facts_refused,
    facts_racing_a_claim_are_fenced_from_the_claim_on,
    concurrent_facts_exactly_once,
    concurrent_claims_and_writes_fence,
    random_writes_match_model,
    reopen_keeps_data_and_migrates_once,
    registration_is_refused_while_the_old_incarnation_is_fresh,
    heartbeat_is_refused_after_being_replaced,
    a_new_zone_is_claimed,
    a_second_host_is_sent_to_the_owner,
    an_assigned_zone_is_loaded_by_its_host_and_others_are_sent_there,
    a_dead_owners_zone_is_taken_and_the_old_owner_is_fenced,
    a_host_whose_lease_lapsed_cannot_claim,
    a_draining_host_is_not_a_usable_target,
    heartbeat_ages_come_from_the_database_clock,
    move_zone_fences_the_old_owner,
    a_released_zone_is_claimed_elsewhere,
    orphans_are_only_zones_of_dead_owners,
    a_forgotten_zone_keeps_its_fence,
    concurrent_claims_of_a_new_zone_grant_exactly_one,
    an_older_database_gains_the_directory,
    a_ticket_id_is_spent_once_across_the_fleet,
    modules_are_kept_by_their_sha256,
    empty_and_oversize_modules_are_refused,
    unknown_or_malformed_digests_are_not_found,
    deploys_raise_each_kinds_version,
    a_deploy_of_an_unknown_module_is_refused_and_changes_nothing,
    module_kinds_are_sorted_by_kind,
    two_hosts_see_each_others_modules_and_deploys,
    concurrent_deploys_of_a_kind_get_distinct_versions,
    a_module_whose_bytes_changed_is_corrupt,
    an_older_database_gains_the_module_tables,
    a_kinds_history_lists_its_deploys_newest_first,
    a_kinds_history_keeps_its_newest_deploys,
    an_older_database_gains_the_deploy_history,
    rooms_are_listed_by_kind_version_and_metadata_and_private_ones_found_by_code,
    join_or_create_fills_the_fullest_room_then_creates_one,
    concurrent_joins_from_two_stores_never_overfill_a_room,
    an_address_holds_at_most_its_seats_in_a_room,
    owners_reports_are_fenced_and_turn_reservations_into_presence,
    lapsed_reservations_free_their_seats_and_idle_rooms_are_forgotten,
    an_older_database_gains_the_lobby,
    a_search_is_queued_only_with_a_probe_its_region_answered_once,
    concurrent_proposals_from_two_stores_take_each_search_once,
    a_match_advances_all_or_none_and_a_leaver_sends_the_others_back,
    settling_connects_arrived_players_and_lapses_waiting_searches,
    an_older_database_gains_the_matchmaker,
    boards_are_declared_once_and_other_settings_are_refused,
    a_follower_board_counts_each_add_fact_exactly_once,
    submitted_values_apply_with_each_boards_operator,
    an_unknown_submitted_board_refuses_the_fact_and_records_nothing,
    a_fenced_fact_changes_no_board,
    ranks_are_exact_with_ties_in_principal_byte_order,
    row_pages_cover_every_row_once_and_the_change_feed_follows_versions,
    periodic_boards_rank_per_period_and_keep_recent_periods,
    a_score_past_the_bound_refuses_the_fact,
    two_stores_recording_facts_for_one_principal_end_with_the_exact_sum,
    an_older_database_gains_the_boards,
    a_join_shows_the_principal_with_its_host_and_since_until_it_leaves,
    a_rejoin_on_another_host_keeps_since_within_the_failover_window,
    a_silent_or_departed_hosts_rows_vanish_and_are_swept_after_the_failover_window,
    a_restarted_host_does_not_revive_its_old_rows,
    a_leave_from_a_host_that_no_longer_holds_the_row_leaves_it_alone,
    malformed_presence_calls_are_refused_and_change_nothing,
    concurrent_batches_of_two_hosts_all_land,
    an_older_database_gains_presence,
    seqs_start_at_one_per_channel_and_follow_input_order,
    keep_prunes_each_written_channel_to_its_newest_lines,
    concurrent_appends_to_one_channel_never_repeat_a_seq,
    sanctions_are_active_until_they_end_or_are_lifted_and_each_is_audited,
    a_report_copies_the_stored_lines_and_refuses_lines_not_kept,
    hostile_chat_input_is_refused_and_writes_nothing,
    an_older_database_gains_chat,
    a_transfer_is_accepted_once_and_then_cannot_return,
    a_returned_transfer_cannot_be_accepted,
    stale_owners_cannot_decide_a_transfer,
    bad_transfers_are_refused_and_store_nothing,
    racing_accepts_and_returns_agree,
    old_resolved_transfers_are_pruned,
    a_returned_transfer_is_reclaimed_once_by_the_source,
    racing_reclaims_hand_the_state_back_once,
    a_first_acquire_creates_an_empty_character_and_commits_raise_its_version,
    a_held_character_answers_held_and_changes_nothing,
    a_released_character_is_acquired_elsewhere_with_its_data,
    a_stale_holder_is_taken_over_and_its_writes_are_fenced,
    the_same_zone_reacquires_under_a_newer_epoch_and_its_older_epoch_is_fenced,
    a_delayed_release_never_frees_the_new_holders_lease,
    bad_character_calls_are_refused_and_change_nothing,
    racing_acquires_grant_exactly_one,
    an_older_database_gains_the_characters_table,
    a_call_starts_once_and_is_answered_from_the_journal,
    a_reused_key_is_refused_and_changes_nothing,
    the_same_key_in_another_zone_is_another_call,
    stale_owners_cannot_begin_or_finish_calls,
    finishing_an_unknown_call_is_refused,
    sweeps_remove_calls_older_than_the_retention,
    bad_calls_are_refused_and_store_nothing,
    racing_begins_start_a_call_exactly_once,
    an_older_database_gains_the_call_journal,
);
