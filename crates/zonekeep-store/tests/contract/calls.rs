//! The call journal contract: a zone's external call is journaled once per (zone, key), answered
//! from the journal once it has an answer, refused when its key is reused for another call, fenced
//! by the zone owner's epoch, and kept until swept.

use std::time::Duration;

use zonekeep_store::{
    CallAnswer, CallBegin, CallFinish, CallRecord, Store, StoreError, StoredCall,
    DEFAULT_CALL_RETENTION, MAX_CALL_ANSWER, MAX_CALL_ARGS, MAX_CALL_CODE, MAX_CALL_FUNCTION,
    MAX_CALL_KEY,
};

use crate::support::Db;

const Z: &str = "arena-1";
const ARGS: &str = r#"{"gold":5,"to":"ada"}"#;

fn call(zone: &str, key: &str, epoch: Option<u64>, function: &str, args: &str) -> CallRecord {
    CallRecord {
        zone_id: zone.into(),
        key: key.into(),
        epoch,
        function: function.into(),
        args: args.into(),
    }
}

/// The call `key` of zone [`Z`]: `pay` with [`ARGS`], unfenced.
fn pay(key: &str) -> CallRecord {
    call(Z, key, None, "pay", ARGS)
}

fn ok(text: &str) -> CallAnswer {
    CallAnswer::Ok(text.into())
}

fn failed(code: &str, message: &str) -> CallAnswer {
    CallAnswer::Failed {
        code: code.into(),
        message: message.into(),
    }
}

async fn begin(store: &Store, call: &CallRecord) -> CallBegin {
    store.calls.begin_call(call).await.unwrap()
}

async fn finish(
    store: &Store,
    zone: &str,
    key: &str,
    epoch: Option<u64>,
    answer: &CallAnswer,
) -> CallFinish {
    store
        .calls
        .finish_call(zone, key, epoch, answer)
        .await
        .unwrap()
}

async fn get(store: &Store, zone: &str, key: &str) -> Option<StoredCall> {
    store.calls.get_call(zone, key).await.unwrap()
}

async fn count(store: &Store) -> u64 {
    store.calls.count_calls().await.unwrap()
}

/// A new call starts, a repeat before its answer is pending, and once answered every repeat is
/// answered from the journal; a second answer loses to the first.
pub async fn a_call_starts_once_and_is_answered_from_the_journal(db: &Db) {
    let store = db.open().await;
    assert_eq!(get(&store, Z, "pay-1").await, None);
    assert_eq!(begin(&store, &pay("pay-1")).await, CallBegin::Started);
    assert_eq!(begin(&store, &pay("pay-1")).await, CallBegin::Pending);
    let pending = get(&store, Z, "pay-1").await.unwrap();
    assert_eq!(
        (
            pending.zone_id.as_str(),
            pending.key.as_str(),
            pending.function.as_str(),
            pending.args.as_str()
        ),
        (Z, "pay-1", "pay", ARGS)
    );
    assert_eq!((pending.answer, pending.settled_at_ms), (None, None));
    assert!(pending.created_at_ms > 0);

    let answer = ok(r#"{"receipt":"r-77"}"#);
    assert_eq!(
        finish(&store, Z, "pay-1", None, &answer).await,
        CallFinish::Recorded
    );
    assert_eq!(
        begin(&store, &pay("pay-1")).await,
        CallBegin::Done(answer.clone())
    );
    assert_eq!(
        finish(&store, Z, "pay-1", None, &failed("late", "a retry")).await,
        CallFinish::AlreadyDone(answer.clone())
    );
    let done = get(&store, Z, "pay-1").await.unwrap();
    assert_eq!(done.answer, Some(answer.clone()));
    assert_eq!(done.created_at_ms, pending.created_at_ms);
    assert!(done.settled_at_ms.unwrap() >= done.created_at_ms);

    // A failure is an answer like any other, and a second handle sees what the first wrote.
    let other = db.open().await;
    assert_eq!(begin(&other, &pay("pay-2")).await, CallBegin::Started);
    let refused = failed("insufficient_funds", "ada has 3 gold");
    assert_eq!(
        finish(&store, Z, "pay-2", None, &refused).await,
        CallFinish::Recorded
    );
    assert_eq!(begin(&other, &pay("pay-2")).await, CallBegin::Done(refused));
    assert_eq!(begin(&other, &pay("pay-1")).await, CallBegin::Done(answer));
    assert_eq!(count(&store).await, 2);
}

/// A key journaled for one call is refused to any other function or args (compared as exact JSON
/// text), pending or answered, and the journaled call stays as it was.
pub async fn a_reused_key_is_refused_and_changes_nothing(db: &Db) {
    let store = db.open().await;
    assert_eq!(begin(&store, &pay("k")).await, CallBegin::Started);
    let reused = CallBegin::KeyReused {
        function: "pay".into(),
    };
    let others = [
        call(Z, "k", None, "refund", ARGS),
        call(Z, "k", None, "pay", r#"{"gold":6,"to":"ada"}"#),
        // The same value as other text is another call: the host serializes args one way.
        call(Z, "k", None, "pay", r#"{"to":"ada","gold":5}"#),
        call(Z, "k", None, "pay", r#"{"gold": 5, "to": "ada"}"#),
    ];
    let before = get(&store, Z, "k").await.unwrap();
    for other in &others {
        assert_eq!(begin(&store, other).await, reused, "{other:?}");
    }
    assert_eq!(get(&store, Z, "k").await.unwrap(), before);

    finish(&store, Z, "k", None, &ok("1")).await;
    let answered = get(&store, Z, "k").await.unwrap();
    for other in &others {
        assert_eq!(begin(&store, other).await, reused, "{other:?}");
    }
    assert_eq!(get(&store, Z, "k").await.unwrap(), answered);
    assert_eq!(begin(&store, &pay("k")).await, CallBegin::Done(ok("1")));
    assert_eq!(count(&store).await, 1);
}

/// Keys are per zone: the same key in another zone is a call of its own.
pub async fn the_same_key_in_another_zone_is_another_call(db: &Db) {
    let store = db.open().await;
    assert_eq!(begin(&store, &pay("k")).await, CallBegin::Started);
    let elsewhere = call("arena-2", "k", None, "refund", "[1,2]");
    assert_eq!(begin(&store, &elsewhere).await, CallBegin::Started);
    finish(&store, "arena-2", "k", None, &ok("\"refunded\"")).await;

    assert_eq!(begin(&store, &pay("k")).await, CallBegin::Pending);
    assert_eq!(
        begin(&store, &elsewhere).await,
        CallBegin::Done(ok("\"refunded\""))
    );
    let here = get(&store, Z, "k").await.unwrap();
    assert_eq!((here.function.as_str(), here.answer), ("pay", None));
    assert_eq!(count(&store).await, 2);
}

/// Once a new owner has claimed the zone, the old owner's begins and finishes are fenced and change
/// nothing; the new owner re-sends the call from its restored save and finds it in the journal.
pub async fn stale_owners_cannot_begin_or_finish_calls(db: &Db) {
    let store = db.open().await;
    let old = store.saves.claim(Z).await.unwrap().epoch;
    let under = |key: &str, epoch: u64| call(Z, key, Some(epoch), "pay", ARGS);
    assert_eq!(begin(&store, &under("a", old)).await, CallBegin::Started);
    assert_eq!(begin(&store, &under("b", old)).await, CallBegin::Started);
    assert_eq!(
        finish(&store, Z, "b", Some(old), &ok("2")).await,
        CallFinish::Recorded
    );

    let new = store.saves.claim(Z).await.unwrap().epoch;
    let fenced = StoreError::Fenced {
        stored_epoch: new,
        attempted: old,
    };
    let (a, b) = (
        get(&store, Z, "a").await.unwrap(),
        get(&store, Z, "b").await.unwrap(),
    );
    for key in ["a", "b", "c"] {
        assert_eq!(
            store.calls.begin_call(&under(key, old)).await,
            Err(fenced.clone()),
            "begin {key}"
        );
        assert_eq!(
            store
                .calls
                .finish_call(Z, key, Some(old), &ok("\"late\""))
                .await,
            Err(fenced.clone()),
            "finish {key}"
        );
    }
    assert_eq!(get(&store, Z, "a").await.unwrap(), a);
    assert_eq!(get(&store, Z, "b").await.unwrap(), b);
    assert_eq!(get(&store, Z, "c").await, None);
    assert_eq!(count(&store).await, 2);

    // The new owner: the pending call is invoked again, the answered one is answered.
    assert_eq!(begin(&store, &under("a", new)).await, CallBegin::Pending);
    assert_eq!(
        begin(&store, &under("b", new)).await,
        CallBegin::Done(ok("2"))
    );
    assert_eq!(
        finish(&store, Z, "a", Some(new), &ok("1")).await,
        CallFinish::Recorded
    );
    assert_eq!(
        begin(&store, &under("a", new)).await,
        CallBegin::Done(ok("1"))
    );
    // Without an epoch nothing is checked, as for facts.
    assert_eq!(begin(&store, &pay("d")).await, CallBegin::Started);
}

/// An answer for a call the journal does not hold (never begun, or swept) is refused and stores
/// nothing.
pub async fn finishing_an_unknown_call_is_refused(db: &Db) {
    let store = db.open().await;
    let unknown = |key: &str| StoreError::CallUnknown {
        zone_id: Z.into(),
        key: key.into(),
    };
    assert_eq!(
        store.calls.finish_call(Z, "never", None, &ok("1")).await,
        Err(unknown("never"))
    );
    let epoch = store.saves.claim(Z).await.unwrap().epoch;
    assert_eq!(
        store
            .calls
            .finish_call(Z, "never", Some(epoch), &failed("x", "y"))
            .await,
        Err(unknown("never"))
    );
    assert_eq!(get(&store, Z, "never").await, None);
    assert_eq!(count(&store).await, 0);

    // A swept call is unknown too, and begun again it starts anew.
    assert_eq!(begin(&store, &pay("gone")).await, CallBegin::Started);
    assert_eq!(store.calls.sweep_calls(Duration::ZERO).await, Ok(1));
    assert_eq!(
        store.calls.finish_call(Z, "gone", None, &ok("1")).await,
        Err(unknown("gone"))
    );
    assert_eq!(begin(&store, &pay("gone")).await, CallBegin::Started);
}

/// The sweep removes answered calls by the age of their answer and pending calls by the age of
/// their begin, by the database's clock, and keeps younger ones. Ages are made by backdating the
/// stamps in SQL, not by waiting.
pub async fn sweeps_remove_calls_older_than_the_retention(db: &Db) {
    let store = db.open().await;
    for key in [
        "old-done",
        "new-done",
        "long-pending-then-done",
        "old-pending",
        "new-pending",
    ] {
        assert_eq!(begin(&store, &pay(key)).await, CallBegin::Started);
    }
    for key in ["old-done", "new-done"] {
        finish(&store, Z, key, None, &ok("true")).await;
    }
    const HOUR: i64 = 3_600_000;
    db.execute(&format!(
        "UPDATE zone_calls SET created_at_ms = created_at_ms - {c}, settled_at_ms = settled_at_ms - {s}
             WHERE call_key = 'old-done';
         UPDATE zone_calls SET created_at_ms = created_at_ms - {c}
             WHERE call_key IN ('long-pending-then-done', 'old-pending');",
        c = 3 * HOUR,
        s = 2 * HOUR,
    ))
    .await;
    // Answered just now, though begun hours ago: its answer is young.
    finish(&store, Z, "long-pending-then-done", None, &ok("1")).await;

    assert_eq!(store.calls.sweep_calls(DEFAULT_CALL_RETENTION).await, Ok(0));
    assert_eq!(count(&store).await, 5);
    assert_eq!(
        store.calls.sweep_calls(Duration::from_secs(3600)).await,
        Ok(2)
    );
    for (key, kept) in [
        ("old-done", false),
        ("old-pending", false),
        ("new-done", true),
        ("long-pending-then-done", true),
        ("new-pending", true),
    ] {
        assert_eq!(get(&store, Z, key).await.is_some(), kept, "{key}");
    }
    // A retention of zero keeps nothing that is already stamped.
    assert_eq!(store.calls.sweep_calls(Duration::MAX).await, Ok(0));
    assert_eq!(store.calls.sweep_calls(Duration::ZERO).await, Ok(3));
    assert_eq!(count(&store).await, 0);
}

/// Out-of-bounds calls and answers are refused as invalid arguments and store nothing; the bounds
/// themselves are accepted.
pub async fn bad_calls_are_refused_and_store_nothing(db: &Db) {
    let store = db.open().await;
    let long_args = format!("\"{}\"", "x".repeat(MAX_CALL_ARGS - 1));
    let bad_calls = [
        call("", "k", None, "pay", ARGS),
        call(&"z".repeat(513), "k", None, "pay", ARGS),
        call(Z, "", None, "pay", ARGS),
        call(Z, &"k".repeat(MAX_CALL_KEY + 1), None, "pay", ARGS),
        call(Z, "k", None, "", ARGS),
        call(Z, "k", None, &"f".repeat(MAX_CALL_FUNCTION + 1), ARGS),
        call(Z, "k", None, "pay", ""),
        call(Z, "k", None, "pay", "{\"gold\":"),
        call(Z, "k", None, "pay", "not json"),
        call(Z, "k", None, "pay", &long_args),
        call(Z, "k", Some(u64::MAX), "pay", ARGS),
    ];
    for bad in &bad_calls {
        let got = store.calls.begin_call(bad).await;
        assert!(
            matches!(got, Err(StoreError::InvalidArgument(_))),
            "{got:?} for key {:?} function {:?}",
            bad.key.len(),
            bad.function.len()
        );
    }
    assert_eq!(count(&store).await, 0);

    assert_eq!(begin(&store, &pay("k")).await, CallBegin::Started);
    let stored = get(&store, Z, "k").await.unwrap();
    let bad_answers = [
        ok(""),
        ok("{oops"),
        ok(&format!("\"{}\"", "x".repeat(MAX_CALL_ANSWER - 1))),
        failed("", "no code"),
        failed(&"c".repeat(MAX_CALL_CODE + 1), "m"),
        failed("c", &"m".repeat(MAX_CALL_ANSWER)),
    ];
    for bad in &bad_answers {
        let got = store.calls.finish_call(Z, "k", None, bad).await;
        assert!(
            matches!(got, Err(StoreError::InvalidArgument(_))),
            "{got:?}"
        );
    }
    for (zone, key, epoch) in [("", "k", None), (Z, "", None), (Z, "k", Some(u64::MAX))] {
        let got = store.calls.finish_call(zone, key, epoch, &ok("1")).await;
        assert!(
            matches!(got, Err(StoreError::InvalidArgument(_))),
            "{got:?}"
        );
    }
    assert!(matches!(
        store.calls.get_call(Z, "").await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(get(&store, Z, "k").await.unwrap(), stored);
    assert_eq!(count(&store).await, 1);

    // Every bound itself is accepted, and stored exactly.
    let key = "k".repeat(MAX_CALL_KEY);
    let function = "f".repeat(MAX_CALL_FUNCTION);
    let args = format!("\"{}\"", "x".repeat(MAX_CALL_ARGS - 2));
    let largest = call(Z, &key, None, &function, &args);
    assert_eq!(begin(&store, &largest).await, CallBegin::Started);
    let answer = failed(
        &"c".repeat(MAX_CALL_CODE),
        &"m".repeat(MAX_CALL_ANSWER - MAX_CALL_CODE),
    );
    finish(&store, Z, &key, None, &answer).await;
    let stored = get(&store, Z, &key).await.unwrap();
    assert_eq!((stored.function, stored.args), (function, args));
    assert_eq!(begin(&store, &largest).await, CallBegin::Done(answer));
}

/// Two hosts (two stores on one database) begin the same new call at once, then answer it at
/// once: each time exactly one starts it and exactly one answer is recorded.
pub async fn racing_begins_start_a_call_exactly_once(db: &Db) {
    let (one, two) = tokio::join!(db.open(), db.open());
    let epoch = one.saves.claim(Z).await.unwrap().epoch;
    for round in 0..16 {
        let key = format!("race-{round}");
        let c = call(Z, &key, Some(epoch), "pay", ARGS);
        let (x, y) = tokio::join!(one.calls.begin_call(&c), two.calls.begin_call(&c));
        let mut begins = [x.unwrap(), y.unwrap()];
        begins.sort_by_key(|b| format!("{b:?}"));
        assert_eq!(
            begins,
            [CallBegin::Pending, CallBegin::Started],
            "round {round}"
        );

        let (a1, a2) = (ok("1"), ok("2"));
        let (x, y) = tokio::join!(
            one.calls.finish_call(Z, &key, Some(epoch), &a1),
            two.calls.finish_call(Z, &key, Some(epoch), &a2)
        );
        let winner = match (x.unwrap(), y.unwrap()) {
            (CallFinish::Recorded, CallFinish::AlreadyDone(first)) => {
                assert_eq!(first, a1, "round {round}");
                a1
            }
            (CallFinish::AlreadyDone(first), CallFinish::Recorded) => {
                assert_eq!(first, a2, "round {round}");
                a2
            }
            other => panic!("round {round}: not exactly one answer recorded: {other:?}"),
        };
        assert_eq!(
            get(&one, Z, &key).await.unwrap().answer,
            Some(winner),
            "round {round}"
        );
    }
    assert_eq!(count(&one).await, 16);
}

/// A database written before the call journal (schema version 6) gains it when a newer build
/// opens it, and keeps what it held.
pub async fn an_older_database_gains_the_call_journal(db: &Db) {
    let store = db.open().await;
    let epoch = store.saves.claim(Z).await.unwrap().epoch;
    store
        .saves
        .write(Z, epoch, 1, "arena", b"kept")
        .await
        .unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 6",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 7",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; ALTER TABLE fleet_hosts DROP COLUMN region; DROP TABLE lobby_seats; DROP TABLE lobby_rooms; DROP TABLE module_deploys; DROP TABLE zone_calls; {rewind};"
    ))
    .await;

    let store = db.open().await;
    assert_eq!(store.saves.load(Z).await.unwrap().unwrap().bytes, b"kept");
    let c = call(Z, "k", Some(epoch), "pay", ARGS);
    assert_eq!(begin(&store, &c).await, CallBegin::Started);
}
