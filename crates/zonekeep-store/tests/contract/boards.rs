//! The leaderboards contract: boards are declared once, scores change only through facts and
//! count each fact exactly once (also when two stores record at once), ranks are exact with ties
//! in principal byte order, pages and the change feed cover every row, and periodic boards keep
//! one ranking per period until pruned.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use zonekeep_store::{
    BoardDef, BoardDefined, BoardEntry, BoardOp, BoardOrder, BoardPeriod, BoardRow, FactRecord,
    Store, StoreError, MAX_BOARD_PAGE, MAX_KEEP_PERIODS, MAX_SCORE,
};

use crate::support::Db;

const DAY_MS: u64 = 86_400_000;

fn board(name: &str, order: BoardOrder, op: BoardOp) -> BoardDef {
    BoardDef {
        name: name.into(),
        order,
        op,
        period: BoardPeriod::All,
        total: None,
        keep_periods: 8,
    }
}

/// A board following the fact total `total` (adds every amount facts add to it).
fn follower(name: &str, total: &str) -> BoardDef {
    BoardDef {
        total: Some(total.into()),
        ..board(name, BoardOrder::Desc, BoardOp::Incr)
    }
}

fn fact(key: &str, principal: &str, payload: Value) -> FactRecord {
    FactRecord {
        key: key.into(),
        zone_id: "arena-1".into(),
        kind: "round_won".into(),
        principal: Some(principal.into()),
        payload,
        epoch: None,
    }
}

async fn define(store: &Store, def: &BoardDef) {
    assert_eq!(
        store.boards.define_board(def).await.unwrap(),
        BoardDefined::Created
    );
}

/// Records a fact that must be accepted.
async fn record(store: &Store, key: &str, principal: &str, payload: Value) -> Value {
    store
        .facts
        .record(&fact(key, principal, payload))
        .await
        .unwrap()
        .result
}

/// `(principal, score)` of the whole ranking, best first, checking the ranks run 1, 2, ...
async fn ranking(store: &Store, name: &str, period: u64) -> Vec<(String, i64)> {
    let top = store
        .boards
        .board_top(name, period, 0, MAX_BOARD_PAGE)
        .await
        .unwrap();
    for (i, e) in top.iter().enumerate() {
        assert_eq!(e.rank, i as u64 + 1, "{name}: ranks run 1, 2, ...");
    }
    top.into_iter().map(|e| (e.principal, e.score)).collect()
}

/// The stored row of `principal` on a board's period.
async fn row(store: &Store, name: &str, period: u64, who: &str) -> Option<BoardRow> {
    let rows = store.boards.board_rows(name, period, None, MAX_BOARD_PAGE);
    rows.await.unwrap().into_iter().find(|r| r.principal == who)
}

fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(p, s)| ((*p).to_owned(), *s)).collect()
}

fn invalid_argument<T: std::fmt::Debug>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::InvalidArgument(_)))
}

pub async fn boards_are_declared_once_and_other_settings_are_refused(db: &Db) {
    let store = db.open().await;
    let b = &store.boards;
    let laps = board("laps", BoardOrder::Asc, BoardOp::Best);
    define(&store, &laps).await;
    assert_eq!(
        b.define_board(&laps).await.unwrap(),
        BoardDefined::Unchanged
    );
    let other = BoardDef {
        order: BoardOrder::Desc,
        ..laps.clone()
    };
    assert!(matches!(
        b.define_board(&other).await,
        Err(StoreError::BoardConflict(_))
    ));
    assert_eq!(b.board("laps").await.unwrap(), Some(laps.clone()));

    // Malformed settings are refused and store nothing.
    for bad in [
        board("a b", BoardOrder::Desc, BoardOp::Set),
        board("", BoardOrder::Desc, BoardOp::Set),
        BoardDef {
            total: Some("score".into()),
            ..board("best-total", BoardOrder::Desc, BoardOp::Best)
        },
        BoardDef {
            period: BoardPeriod::Daily,
            keep_periods: MAX_KEEP_PERIODS + 1,
            ..board("keeps-too-much", BoardOrder::Desc, BoardOp::Incr)
        },
    ] {
        assert!(invalid_argument(b.define_board(&bad).await), "{bad:?}");
    }
    assert!(invalid_argument(b.board("a b").await));

    let score = follower("score", "score");
    let weekly = BoardDef {
        period: BoardPeriod::Weekly,
        keep_periods: 4,
        ..board("kills.weekly", BoardOrder::Desc, BoardOp::Incr)
    };
    define(&store, &score).await;
    define(&store, &weekly).await;
    assert_eq!(
        b.boards().await.unwrap(),
        vec![weekly.clone(), laps.clone(), score.clone()],
        "boards are listed by name"
    );

    // Deleting a board deletes its scores: declared again, it starts empty.
    record(&store, "f1", "ada", json!({"add": {"score": 5}})).await;
    assert_eq!(b.board_size("score", 0).await.unwrap(), 1);
    assert!(b.delete_board("score").await.unwrap());
    assert!(!b.delete_board("score").await.unwrap());
    assert_eq!(b.board("score").await.unwrap(), None);
    assert_eq!(b.board_size("score", 0).await.unwrap(), 0);
    define(&store, &score).await;
    assert!(ranking(&store, "score", 0).await.is_empty());
    // Another store sees the same boards.
    let again = db.open().await;
    assert_eq!(again.boards.boards().await.unwrap().len(), 3);
}

pub async fn a_follower_board_counts_each_add_fact_exactly_once(db: &Db) {
    let store = db.open().await;
    define(&store, &follower("score", "score")).await;
    let kill = json!({"add": {"score": 50, "kills": 1}});
    for _ in 0..3 {
        assert_eq!(
            record(&store, "arena-1/1/7", "ada", kill.clone()).await,
            json!({"score": 50, "kills": 1}),
            "the fact's result is its totals"
        );
    }
    let ada = row(&store, "score", 0, "ada").await.unwrap();
    assert_eq!((ada.score, ada.version), (50, 1));
    assert_eq!(ada.sort_key, -50);

    let mut sums = BTreeMap::<String, i64>::new();
    for i in 0..30i64 {
        let who = ["ada", "bob", "cy"][i as usize % 3];
        let amount = i * 7 - 40;
        *sums.entry(who.into()).or_default() += amount;
        record(
            &store,
            &format!("many/{i}"),
            who,
            json!({"add": {"score": amount}}),
        )
        .await;
    }
    *sums.entry("ada".into()).or_default() += 50;
    // Facts adding other totals do not touch the board.
    record(&store, "other", "dee", json!({"add": {"gold": 9}})).await;
    let mut want: Vec<(String, i64)> = sums.into_iter().collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    assert_eq!(ranking(&store, "score", 0).await, want);
    for (who, sum) in &want {
        assert_eq!(store.facts.totals(who).await.unwrap()["score"], *sum);
    }
}

pub async fn submitted_values_apply_with_each_boards_operator(db: &Db) {
    let store = db.open().await;
    define(&store, &board("kills", BoardOrder::Desc, BoardOp::Best)).await;
    define(&store, &board("laps", BoardOrder::Asc, BoardOp::Best)).await;
    define(&store, &board("level", BoardOrder::Desc, BoardOp::Set)).await;
    define(&store, &board("coins", BoardOrder::Desc, BoardOp::Incr)).await;
    let submit = |key: &'static str, who: &'static str, v: Value| {
        let store = store.clone();
        async move { record(&store, key, who, json!({ "boards": v })).await }
    };
    let of = |name: &'static str| {
        let store = store.clone();
        async move {
            let r = row(&store, name, 0, "ada").await.unwrap();
            (r.score, r.version, r.sort_key)
        }
    };
    // A fact submitting to boards and adding nothing keeps a null result.
    let all = json!({"kills": 7, "laps": 8123, "level": 3, "coins": 10});
    assert_eq!(submit("s1", "ada", all).await, Value::Null);
    submit("s2", "ada", json!({"kills": 5, "laps": 9000})).await;
    assert_eq!(
        of("kills").await,
        (7, 1, -7),
        "a worse best changes nothing"
    );
    assert_eq!(
        of("laps").await,
        (8123, 1, 8123),
        "nor on an ascending board"
    );
    submit("s3", "ada", json!({"kills": 9, "laps": 7990})).await;
    submit("s4", "ada", json!({"level": 2, "coins": -4})).await;
    submit("s5", "ada", json!({"coins": 4})).await;
    assert_eq!(of("kills").await, (9, 2, -9));
    assert_eq!(of("laps").await, (7990, 2, 7990));
    assert_eq!(of("level").await, (2, 2, -2), "set keeps the newest");
    assert_eq!(of("coins").await, (10, 3, -10), "incr adds");
    // An ascending board ranks the lowest first.
    submit("s6", "bob", json!({"laps": 7000})).await;
    let laps = pairs(&[("bob", 7000), ("ada", 7990)]);
    assert_eq!(ranking(&store, "laps", 0).await, laps);
    // Repeating a key changes nothing.
    submit("s6", "bob", json!({"laps": 1})).await;
    assert_eq!(ranking(&store, "laps", 0).await, laps);
}

pub async fn an_unknown_submitted_board_refuses_the_fact_and_records_nothing(db: &Db) {
    let store = db.open().await;
    define(&store, &follower("score", "score")).await;
    record(&store, "ok", "ada", json!({"add": {"score": 5}})).await;
    let bad = fact(
        "bad",
        "ada",
        json!({"add": {"score": 5}, "boards": {"nope": 1}}),
    );
    assert!(matches!(
        store.facts.record(&bad).await,
        Err(StoreError::InvalidFact { .. })
    ));
    assert_eq!(store.facts.get("bad").await.unwrap(), None);
    assert_eq!(store.facts.count().await.unwrap(), 1);
    assert_eq!(store.facts.totals("ada").await.unwrap()["score"], 5);
    assert_eq!(ranking(&store, "score", 0).await, pairs(&[("ada", 5)]));
    // Malformed submissions are refused too.
    let malformed = fact("bad2", "ada", json!({"boards": {"score": 1.5}}));
    assert!(matches!(
        store.facts.record(&malformed).await,
        Err(StoreError::InvalidFact { .. })
    ));
    assert_eq!(store.facts.count().await.unwrap(), 1);
}

pub async fn a_fenced_fact_changes_no_board(db: &Db) {
    let store = db.open().await;
    define(&store, &follower("score", "score")).await;
    define(&store, &board("kills", BoardOrder::Desc, BoardOp::Best)).await;
    let old = store.saves.claim("arena-1").await.unwrap().epoch;
    let new = store.saves.claim("arena-1").await.unwrap().epoch;
    let fenced = FactRecord {
        epoch: Some(old),
        ..fact(
            "f",
            "ada",
            json!({"add": {"score": 5}, "boards": {"kills": 3}}),
        )
    };
    assert!(matches!(
        store.facts.record(&fenced).await,
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(store.boards.board_size("score", 0).await.unwrap(), 0);
    assert_eq!(store.boards.board_size("kills", 0).await.unwrap(), 0);
    let current = FactRecord {
        epoch: Some(new),
        ..fenced
    };
    assert!(store.facts.record(&current).await.unwrap().first);
    assert_eq!(ranking(&store, "kills", 0).await, pairs(&[("ada", 3)]));
}

pub async fn ranks_are_exact_with_ties_in_principal_byte_order(db: &Db) {
    let store = db.open().await;
    let b = &store.boards;
    define(&store, &board("pts", BoardOrder::Desc, BoardOp::Set)).await;
    // "B" < "a" < "b" in bytes (a case-insensitive collation would put "a" first).
    let scores = [
        ("a", 10),
        ("B", 10),
        ("c", 20),
        ("D", 5),
        ("b", 10),
        ("e", 1),
        ("f", -3),
    ];
    for (i, (who, s)) in scores.iter().enumerate() {
        record(&store, &format!("p{i}"), who, json!({"boards": {"pts": s}})).await;
    }
    let want = pairs(&[
        ("c", 20),
        ("B", 10),
        ("a", 10),
        ("b", 10),
        ("D", 5),
        ("e", 1),
        ("f", -3),
    ]);
    assert_eq!(ranking(&store, "pts", 0).await, want);
    let entry = |rank: u64, who: &str, score: i64| BoardEntry {
        rank,
        principal: who.into(),
        score,
    };
    assert_eq!(
        b.board_top("pts", 0, 1, 2).await.unwrap(),
        vec![entry(2, "B", 10), entry(3, "a", 10)]
    );
    assert!(b.board_top("pts", 0, 7, 5).await.unwrap().is_empty());
    assert_eq!(
        b.board_top("pts", 0, 6, 5).await.unwrap(),
        vec![entry(7, "f", -3)]
    );
    assert_eq!(
        b.board_rank("pts", 0, "a").await.unwrap(),
        Some(entry(3, "a", 10))
    );
    assert_eq!(b.board_rank("pts", 0, "nobody").await.unwrap(), None);
    let ranks = |v: Vec<BoardEntry>| v.into_iter().map(|e| e.rank).collect::<Vec<_>>();
    assert_eq!(
        ranks(b.board_around("pts", 0, "c", 2).await.unwrap()),
        [1, 2, 3]
    );
    assert_eq!(
        ranks(b.board_around("pts", 0, "b", 2).await.unwrap()),
        [2, 3, 4, 5, 6]
    );
    assert_eq!(
        b.board_around("pts", 0, "e", 1).await.unwrap(),
        vec![entry(5, "D", 5), entry(6, "e", 1), entry(7, "f", -3)]
    );
    assert_eq!(
        ranks(b.board_around("pts", 0, "f", 3).await.unwrap()),
        [4, 5, 6, 7]
    );
    assert_eq!(ranks(b.board_around("pts", 0, "a", 0).await.unwrap()), [3]);
    assert!(b
        .board_around("pts", 0, "nobody", 2)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(b.board_size("pts", 0).await.unwrap(), 7);
    // Unknown boards and other periods read as empty.
    assert_eq!(b.board_size("missing", 0).await.unwrap(), 0);
    assert!(b.board_top("missing", 0, 0, 10).await.unwrap().is_empty());
    assert!(b.board_top("pts", 1, 0, 10).await.unwrap().is_empty());
    // Bounds are refused.
    const PAGE: usize = MAX_BOARD_PAGE;
    let refused = [
        invalid_argument(b.board_top("pts", 0, 0, 0).await),
        invalid_argument(b.board_top("pts", 0, 0, PAGE + 1).await),
        invalid_argument(b.board_around("pts", 0, "a", PAGE / 2 + 1).await),
        invalid_argument(b.board_rows("pts", 0, None, 0).await),
        invalid_argument(b.board_changes(0, PAGE + 1).await),
        invalid_argument(b.board_rank("pts", 0, "").await),
        invalid_argument(b.board_top("bad name", 0, 0, 1).await),
        invalid_argument(b.board_top("pts", u64::MAX, 0, 1).await),
    ];
    assert_eq!(refused, [true; 8]);
}

pub async fn row_pages_cover_every_row_once_and_the_change_feed_follows_versions(db: &Db) {
    let store = db.open().await;
    let b = &store.boards;
    define(&store, &follower("score", "score")).await;
    let mut names = BTreeSet::new();
    for i in 0..25 {
        let who = if i % 2 == 0 {
            format!("P{i:02}")
        } else {
            format!("p{i:02}")
        };
        record(&store, &format!("r{i}"), &who, json!({"add": {"score": i}})).await;
        names.insert(who);
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = b.board_rows("score", 0, after.as_deref(), 7).await.unwrap();
        assert!(page.len() <= 7);
        let Some(last) = page.last() else { break };
        after = Some(last.principal.clone());
        seen.extend(page.into_iter().map(|r| r.principal));
    }
    assert_eq!(seen.len(), 25, "every row once");
    assert_eq!(
        seen,
        names.into_iter().collect::<Vec<_>>(),
        "by principal bytes"
    );

    let (rows, now) = b.board_changes(0, MAX_BOARD_PAGE).await.unwrap();
    assert_eq!(rows.len(), 25);
    assert!(rows
        .windows(2)
        .all(|w| w[0].updated_at_ms <= w[1].updated_at_ms));
    assert!(rows
        .iter()
        .all(|r| r.version == 1 && r.updated_at_ms <= now));
    let (first, _) = b.board_changes(0, 3).await.unwrap();
    assert_eq!(first, rows[..3].to_vec());
    // One row by key, and the feed's "now" asked from the far future (nothing changed there).
    let one = b.board_row("score", 0, "p03").await.unwrap().unwrap();
    assert_eq!((one.score, one.version, one.sort_key), (3, 1, -3));
    assert_eq!(b.board_row("score", 0, "nobody").await.unwrap(), None);
    assert!(b.board_row("bad name", 0, "p03").await.is_err());
    let (none, later) = b.board_changes(i64::MAX as u64, 1).await.unwrap();
    assert!(none.is_empty() && later >= now);

    record(&store, "again", "p01", json!({"add": {"score": 100}})).await;
    let (changed, later) = b.board_changes(now, MAX_BOARD_PAGE).await.unwrap();
    assert!(later >= now);
    let p01 = changed.iter().find(|r| r.principal == "p01").unwrap();
    assert_eq!((p01.score, p01.version, p01.sort_key), (101, 2, -101));
    assert!(p01.updated_at_ms >= now);
}

pub async fn periodic_boards_rank_per_period_and_keep_recent_periods(db: &Db) {
    let store = db.open().await;
    let b = &store.boards;
    let daily = BoardDef {
        period: BoardPeriod::Daily,
        keep_periods: 2,
        ..follower("score.daily", "score")
    };
    let today_only = BoardDef {
        period: BoardPeriod::Daily,
        keep_periods: 0,
        ..board("kills.daily", BoardOrder::Desc, BoardOp::Incr)
    };
    define(&store, &daily).await;
    define(&store, &today_only).await;
    let before = BoardPeriod::Daily.start_of(db.now_ms().await as u64);
    record(
        &store,
        "d1",
        "ada",
        json!({"add": {"score": 5}, "boards": {"kills.daily": 2}}),
    )
    .await;
    let after = BoardPeriod::Daily.start_of(db.now_ms().await as u64);
    let (rows, _) = b.board_changes(0, MAX_BOARD_PAGE).await.unwrap();
    let period = rows[0].period;
    assert!(
        period == before || period == after,
        "{period} not in [{before}, {after}]"
    );
    assert!(rows.iter().all(|r| r.period == period));
    assert_eq!(
        ranking(&store, "score.daily", period).await,
        pairs(&[("ada", 5)])
    );
    assert_eq!(b.board_size("score.daily", 0).await.unwrap(), 0);

    // Rows of older days (written directly: facts only ever write the current day).
    for (board, days) in [
        ("score.daily", 1),
        ("score.daily", 2),
        ("score.daily", 3),
        ("kills.daily", 1),
    ] {
        let old = period - days * DAY_MS;
        db.execute(&format!(
            "INSERT INTO board_entries
                 (board, period, principal, score, sort_key, version, updated_at_ms)
             VALUES ('{board}', {old}, 'old', 1, -1, 1, 0)"
        ))
        .await;
    }
    // The sizes of a board's periods 0, 1, 2 and 3 days back.
    let sizes = |name: &'static str| {
        let store = store.clone();
        async move {
            let mut out = Vec::new();
            for days in 0..4 {
                let day = period - days * DAY_MS;
                out.push(store.boards.board_size(name, day).await.unwrap());
            }
            out
        }
    };
    assert_eq!(sizes("score.daily").await, [1, 1, 1, 1]);
    let pruned = b.prune_boards().await.unwrap();
    if BoardPeriod::Daily.start_of(db.now_ms().await as u64) != period {
        return; // The day turned during the test: what the prune kept is another day's choice.
    }
    assert_eq!(
        pruned, 2,
        "3 days back, and yesterday on a board keeping none"
    );
    assert_eq!(sizes("score.daily").await, [1, 1, 1, 0]);
    assert_eq!(sizes("kills.daily").await, [1, 0, 0, 0]);
    assert_eq!(b.prune_boards().await.unwrap(), 0);

    // An operator's reset empties one period.
    assert_eq!(b.reset_board("score.daily", period).await.unwrap(), 1);
    assert_eq!(sizes("score.daily").await, [0, 1, 1, 0]);
    assert_eq!(b.reset_board("score.daily", period).await.unwrap(), 0);
    record(&store, "d2", "ada", json!({"add": {"score": 1}})).await;
    let fresh = row(&store, "score.daily", period, "ada").await;
    assert_eq!(fresh.map(|r| (r.score, r.version)), Some((1, 1)));
}

pub async fn a_score_past_the_bound_refuses_the_fact(db: &Db) {
    let store = db.open().await;
    define(&store, &board("coins", BoardOrder::Desc, BoardOp::Incr)).await;
    define(&store, &follower("score", "score")).await;
    record(&store, "c1", "ada", json!({"boards": {"coins": MAX_SCORE}})).await;
    let over = fact("c2", "ada", json!({"boards": {"coins": 1}}));
    assert!(matches!(
        store.facts.record(&over).await,
        Err(StoreError::InvalidFact { .. })
    ));
    assert_eq!(store.facts.get("c2").await.unwrap(), None);
    assert_eq!(
        row(&store, "coins", 0, "ada").await.unwrap().score,
        MAX_SCORE
    );

    // The total would fit an i64, the board's score would not: the whole fact is refused.
    record(&store, "t1", "bob", json!({"add": {"score": MAX_SCORE}})).await;
    let over = fact("t2", "bob", json!({"add": {"score": 1}}));
    assert!(matches!(
        store.facts.record(&over).await,
        Err(StoreError::InvalidFact { .. })
    ));
    assert_eq!(store.facts.totals("bob").await.unwrap()["score"], MAX_SCORE);
    assert_eq!(row(&store, "score", 0, "bob").await.unwrap().version, 1);
}

pub async fn two_stores_recording_facts_for_one_principal_end_with_the_exact_sum(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    define(&a, &follower("alpha", "score")).await;
    define(&a, &board("beta", BoardOrder::Desc, BoardOp::Incr)).await;
    const FACTS: i64 = 80;
    let mut tasks = Vec::new();
    for i in 0..FACTS {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        // Every fact changes both rows, alpha by i + 1 and beta by 2i + 2. Most only submit,
        // so nothing but the board rows orders them (an `add` also locks the principal's
        // totals); the first ones race to create the rows.
        let payload = if i % 4 == 0 {
            json!({"add": {"score": i + 1}, "boards": {"beta": 2 * i + 2}})
        } else {
            json!({"boards": {"beta": 2 * i + 2, "alpha": i + 1}})
        };
        tasks.push(tokio::spawn(async move {
            let f = fact(&format!("race/{i}"), "racer", payload);
            loop {
                match store.facts.record(&f).await {
                    Ok(r) => return r.first,
                    // SQLite's write lock is not fair: a recorder may wait out its busy timeout.
                    Err(e) if e.is_retryable() => continue,
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
        }));
    }
    for task in tasks {
        assert!(task.await.unwrap());
    }
    let sum: i64 = (1..=FACTS).sum();
    let alpha = row(&b, "alpha", 0, "racer").await.unwrap();
    assert_eq!((alpha.score, alpha.version), (sum, FACTS as u64));
    let beta = row(&a, "beta", 0, "racer").await.unwrap();
    assert_eq!((beta.score, beta.version), (2 * sum, FACTS as u64));
    let added: i64 = (0..FACTS).filter(|i| i % 4 == 0).map(|i| i + 1).sum();
    assert_eq!(a.facts.totals("racer").await.unwrap()["score"], added);
}

pub async fn an_older_database_gains_the_boards(db: &Db) {
    let store = db.open().await;
    store.saves.claim("z").await.unwrap();
    record(&store, "before", "ada", json!({"add": {"score": 3}})).await;
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 10",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 11",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; {rewind};"
    ))
    .await;
    let store = db.open().await;
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, 2);
    define(&store, &follower("score", "score")).await;
    record(&store, "after", "ada", json!({"add": {"score": 4}})).await;
    assert_eq!(store.facts.totals("ada").await.unwrap()["score"], 7);
    assert_eq!(ranking(&store, "score", 0).await, pairs(&[("ada", 4)]));
}
