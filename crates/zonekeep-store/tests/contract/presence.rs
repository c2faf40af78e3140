//! The presence contract: a join shows a principal in a zone with its host and `since` until a
//! leave; a row lives only while its host is alive in the directory under the incarnation that
//! wrote it (so a dead, departed or restarted host's rows vanish without a write, and are swept);
//! a principal resuming on another host keeps its `since` within the failover window; a leave
//! touches only the row its host holds.
//!
//! Hosts are made dead by backdating their heartbeat with raw SQL, as the directory's tests do,
//! under the directory tests' timing (bounds of hours), never by sleeping.

use std::time::Duration;

use zonekeep_store::{
    HostRegistration, PresenceChange, PresenceEvent, PresenceRow, Store, StoreError,
    MAX_PRESENCE_BATCH, MAX_PRESENCE_QUERY,
};

use crate::directory::{backdate, host, join, DEAD, LAPSED, T};
use crate::support::{unique, Db};

/// The takeover bound the tests pass: the directory tests' `dead_after`, two hours.
fn dead_after_ms() -> u64 {
    u64::try_from(T.dead_after.as_millis()).unwrap()
}

/// A backdate past the failover window (three takeover bounds, six hours).
const PAST_WINDOW: Duration = Duration::from_secs(7 * 3600);

fn joined(principal: &str, zone_id: &str) -> PresenceChange {
    PresenceChange {
        principal: principal.into(),
        zone_id: zone_id.into(),
        event: PresenceEvent::Joined,
    }
}

fn left(principal: &str, zone_id: &str) -> PresenceChange {
    PresenceChange {
        event: PresenceEvent::Left,
        ..joined(principal, zone_id)
    }
}

/// `by` writes `changes`, which must be accepted.
async fn apply(store: &Store, by: &HostRegistration, changes: &[PresenceChange]) {
    store
        .presence
        .apply_presence(&by.host_id, &by.incarnation, changes, dead_after_ms())
        .await
        .unwrap();
}

/// The live rows of `principals`.
async fn rows(store: &Store, principals: &[&str]) -> Vec<PresenceRow> {
    let principals: Vec<String> = principals.iter().map(|p| (*p).to_owned()).collect();
    store
        .presence
        .presence_of(&principals, dead_after_ms())
        .await
        .unwrap()
}

/// `(principal, zone, host)` of the live rows of `principals`, in the order read.
async fn where_are(store: &Store, principals: &[&str]) -> Vec<(String, String, String)> {
    rows(store, principals)
        .await
        .into_iter()
        .map(|r| (r.principal, r.zone_id, r.host_id))
        .collect()
}

fn at(principal: &str, zone: &str, host: &HostRegistration) -> (String, String, String) {
    (principal.into(), zone.into(), host.host_id.clone())
}

/// The `since` of `principal`'s live row in `zone`.
async fn since(store: &Store, principal: &str, zone: &str) -> u64 {
    rows(store, &[principal])
        .await
        .into_iter()
        .find(|r| r.zone_id == zone)
        .unwrap_or_else(|| panic!("{principal} is not present in {zone}"))
        .since_ms
}

/// Moves the `since` of every row of `principal` an hour into the past, so a kept `since`
/// cannot be mistaken for a fresh one.
async fn age_rows(db: &Db, principal: &str) {
    db.execute(&format!(
        "UPDATE presence SET since_ms = since_ms - 3600000 WHERE principal = '{principal}'"
    ))
    .await;
}

/// Whether the store refused the call as malformed.
fn refused<T>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::InvalidArgument(_)))
}

/// How many rows the table holds, live or not.
async fn stored(db: &Db) -> i64 {
    db.query_i64("SELECT count(*) FROM presence").await
}

pub async fn a_join_shows_the_principal_with_its_host_and_since_until_it_leaves(db: &Db) {
    let store = db.open().await;
    let run = unique("presence");
    let a = host(&run, "a");
    join(&store, &a).await;

    let before = u64::try_from(db.now_ms().await).unwrap();
    apply(&store, &a, &[joined("ann", "arena-1")]).await;
    let after = u64::try_from(db.now_ms().await).unwrap();
    let got = rows(&store, &["ann", "bob"]).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].principal.as_str(), got[0].zone_id.as_str()),
        ("ann", "arena-1")
    );
    assert_eq!(got[0].host_id, a.host_id);
    assert!(
        (before..=after).contains(&got[0].since_ms),
        "since {} is the database's now ({before}..={after})",
        got[0].since_ms
    );

    // A repeated join changes nothing but the stamp: the principal keeps its `since`.
    age_rows(db, "ann").await;
    let kept = since(&store, "ann", "arena-1").await;
    apply(&store, &a, &[joined("ann", "arena-1")]).await;
    assert_eq!(since(&store, "ann", "arena-1").await, kept);

    // One row per zone; reads list by principal, then zone, in byte order ("B" < "a").
    apply(
        &store,
        &a,
        &[
            joined("ann", "Lobby"),
            joined("bob", "arena-2"),
            joined("B", "arena-1"),
        ],
    )
    .await;
    assert_eq!(
        where_are(&store, &["bob", "ann", "B", "nobody"]).await,
        [
            at("B", "arena-1", &a),
            at("ann", "Lobby", &a),
            at("ann", "arena-1", &a),
            at("bob", "arena-2", &a),
        ]
    );

    // A leave removes that zone's row only.
    apply(&store, &a, &[left("ann", "arena-1")]).await;
    assert_eq!(where_are(&store, &["ann"]).await, [at("ann", "Lobby", &a)]);
    // Changes apply in the order given: a join then a leave of one row leaves nothing, a leave
    // then a join leaves the row.
    apply(
        &store,
        &a,
        &[
            joined("cat", "arena-3"),
            left("cat", "arena-3"),
            left("bob", "arena-2"),
            joined("bob", "arena-2"),
        ],
    )
    .await;
    assert_eq!(
        where_are(&store, &["bob", "cat"]).await,
        [at("bob", "arena-2", &a)]
    );
    // Leaving where one is not present changes nothing; an empty batch is fine.
    apply(&store, &a, &[left("dan", "arena-1")]).await;
    apply(&store, &a, &[]).await;
    assert_eq!(stored(db).await, 3);
    assert!(rows(&store, &[]).await.is_empty());
    // Another store on the same database sees the same.
    let other = db.open().await;
    assert_eq!(
        where_are(&other, &["ann", "B", "bob"]).await,
        where_are(&store, &["ann", "B", "bob"]).await
    );
}

pub async fn a_rejoin_on_another_host_keeps_since_within_the_failover_window(db: &Db) {
    let store = db.open().await;
    let run = unique("presence");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&store, &a).await;
    join(&store, &b).await;

    // The old row is live: the principal resumes on b with its `since`.
    apply(&store, &a, &[joined("ann", "arena-1")]).await;
    age_rows(db, "ann").await;
    let first = since(&store, "ann", "arena-1").await;
    apply(&store, &b, &[joined("ann", "arena-1")]).await;
    assert_eq!(
        where_are(&store, &["ann"]).await,
        [at("ann", "arena-1", &b)]
    );
    assert_eq!(since(&store, "ann", "arena-1").await, first);

    // b dies (its row is no longer live) and the zone moves back to a within three takeover
    // bounds: the principal keeps its `since` again.
    backdate(db, &b.host_id, DEAD).await;
    assert!(rows(&store, &["ann"]).await.is_empty());
    apply(&store, &a, &[joined("ann", "arena-1")]).await;
    assert_eq!(
        where_are(&store, &["ann"]).await,
        [at("ann", "arena-1", &a)]
    );
    assert_eq!(since(&store, "ann", "arena-1").await, first);

    // A host that left (a drained deploy) lends its rows' `since` as well.
    let c = host(&run, "c");
    join(&store, &c).await;
    apply(&store, &c, &[joined("bob", "arena-2")]).await;
    age_rows(db, "bob").await;
    let bobs = since(&store, "bob", "arena-2").await;
    store
        .directory
        .leave_host(&c.host_id, &c.incarnation)
        .await
        .unwrap();
    assert!(rows(&store, &["bob"]).await.is_empty());
    apply(&store, &a, &[joined("bob", "arena-2")]).await;
    assert_eq!(since(&store, "bob", "arena-2").await, bobs);

    // Past the window, a join starts afresh.
    let d = host(&run, "d");
    join(&store, &d).await;
    apply(&store, &d, &[joined("cat", "arena-3")]).await;
    age_rows(db, "cat").await;
    let old = since(&store, "cat", "arena-3").await;
    backdate(db, &d.host_id, PAST_WINDOW).await;
    let before = u64::try_from(db.now_ms().await).unwrap();
    apply(&store, &a, &[joined("cat", "arena-3")]).await;
    let fresh = since(&store, "cat", "arena-3").await;
    assert!(fresh >= before && fresh > old, "{fresh} vs {before}, {old}");

    // A row whose host has no directory row at all lends nothing either.
    apply(&store, &a, &[joined("dan", "arena-4")]).await;
    db.execute(&format!(
        "UPDATE presence SET host_id = '{run}-gone', since_ms = 1 WHERE principal = 'dan'"
    ))
    .await;
    apply(&store, &a, &[joined("dan", "arena-4")]).await;
    assert!(since(&store, "dan", "arena-4").await >= before);
}

pub async fn a_silent_or_departed_hosts_rows_vanish_and_are_swept_after_the_failover_window(
    db: &Db,
) {
    let store = db.open().await;
    let run = unique("presence");
    let (a, b, c) = (host(&run, "a"), host(&run, "b"), host(&run, "c"));
    for h in [&a, &b, &c] {
        join(&store, h).await;
    }
    apply(
        &store,
        &a,
        &[joined("ann", "arena-1"), joined("ann", "lobby")],
    )
    .await;
    apply(&store, &b, &[joined("bob", "arena-2")]).await;
    apply(&store, &c, &[joined("cat", "arena-3")]).await;
    let everyone = ["ann", "bob", "cat"];
    assert_eq!(rows(&store, &everyone).await.len(), 4);

    // A lapsed lease is not death: the host is alive until the takeover bound.
    backdate(db, &a.host_id, LAPSED).await;
    assert_eq!(rows(&store, &everyone).await.len(), 4);
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(0));

    // Past the takeover bound its rows no longer count, without anyone writing; with a longer
    // bound passed by the caller they would.
    backdate(db, &a.host_id, DEAD - LAPSED).await;
    assert_eq!(
        where_are(&store, &everyone).await,
        [at("bob", "arena-2", &b), at("cat", "arena-3", &c)]
    );
    let longer = store
        .presence
        .presence_of(&["ann".to_owned()], 4 * dead_after_ms())
        .await
        .unwrap();
    assert_eq!(longer.len(), 2);

    // A host that left takes its rows with it at once.
    store
        .directory
        .leave_host(&b.host_id, &b.incarnation)
        .await
        .unwrap();
    assert_eq!(
        where_are(&store, &everyone).await,
        [at("cat", "arena-3", &c)]
    );

    // The sweep keeps the rows of hosts gone within the failover window (they still lend their
    // `since` to their players' resumes elsewhere), and deletes them once it has passed.
    assert_eq!(stored(db).await, 4);
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(0));
    backdate(db, &a.host_id, PAST_WINDOW).await;
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(2));
    backdate(db, &b.host_id, PAST_WINDOW).await;
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(1));
    assert_eq!(stored(db).await, 1);
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(0));
    assert_eq!(
        where_are(&store, &everyone).await,
        [at("cat", "arena-3", &c)]
    );

    // A row whose host has no directory row is not live either.
    db.execute(&format!(
        "UPDATE presence SET host_id = '{run}-unknown' WHERE principal = 'cat'"
    ))
    .await;
    assert!(rows(&store, &everyone).await.is_empty());
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(1));
    assert_eq!(stored(db).await, 0);
}

pub async fn a_restarted_host_does_not_revive_its_old_rows(db: &Db) {
    let store = db.open().await;
    let run = unique("presence");
    let old = host(&run, "a");
    join(&store, &old).await;
    apply(
        &store,
        &old,
        &[joined("ann", "arena-1"), joined("bob", "arena-2")],
    )
    .await;
    age_rows(db, "ann").await;
    let anns = u64::try_from(
        db.query_i64("SELECT since_ms FROM presence WHERE principal = 'ann'")
            .await,
    )
    .unwrap();

    // The process crashed; the same host id starts again under a new incarnation.
    backdate(db, &old.host_id, DEAD).await;
    let new = HostRegistration {
        incarnation: "a-2".into(),
        ..old.clone()
    };
    join(&store, &new).await;
    assert!(rows(&store, &["ann", "bob"]).await.is_empty());

    // Its zones' players come back to it: they are present again, keeping their `since` (the
    // host heartbeated within the failover window).
    apply(&store, &new, &[joined("ann", "arena-1")]).await;
    assert_eq!(
        where_are(&store, &["ann", "bob"]).await,
        [at("ann", "arena-1", &new)]
    );
    assert_eq!(since(&store, "ann", "arena-1").await, anns);

    // A late leave from the old process does not remove the new incarnation's row.
    apply(&store, &old, &[left("ann", "arena-1")]).await;
    assert_eq!(
        where_are(&store, &["ann"]).await,
        [at("ann", "arena-1", &new)]
    );

    // The old incarnation's other row stays invisible and is swept.
    assert_eq!(store.presence.sweep_presence(dead_after_ms()).await, Ok(1));
    assert_eq!(stored(db).await, 1);
    assert_eq!(
        where_are(&store, &["ann", "bob"]).await,
        [at("ann", "arena-1", &new)]
    );
}

pub async fn a_leave_from_a_host_that_no_longer_holds_the_row_leaves_it_alone(db: &Db) {
    let store = db.open().await;
    let run = unique("presence");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&store, &a).await;
    join(&store, &b).await;
    apply(&store, &a, &[joined("ann", "arena-1")]).await;
    // The zone moved to b and ann resumed there; a learns late that ann left its session.
    apply(&store, &b, &[joined("ann", "arena-1")]).await;
    apply(&store, &a, &[left("ann", "arena-1")]).await;
    assert_eq!(
        where_are(&store, &["ann"]).await,
        [at("ann", "arena-1", &b)]
    );
    // The holder's leave removes it.
    apply(&store, &b, &[left("ann", "arena-1")]).await;
    assert!(rows(&store, &["ann"]).await.is_empty());
    assert_eq!(stored(db).await, 0);
}

pub async fn malformed_presence_calls_are_refused_and_change_nothing(db: &Db) {
    let store = db.open().await;
    let run = unique("presence");
    let a = host(&run, "a");
    join(&store, &a).await;
    let p = &store.presence;
    let ms = dead_after_ms();
    let ok = [joined("ann", "arena-1")];

    assert!(refused(p.apply_presence("", &a.incarnation, &ok, ms).await));
    assert!(refused(p.apply_presence(&a.host_id, "", &ok, ms).await));
    for bad in [
        joined("", "arena-1"),
        joined("ann", ""),
        left("", "arena-1"),
    ] {
        // A batch with one bad change is refused whole.
        let batch = [ok[0].clone(), bad];
        assert!(refused(
            p.apply_presence(&a.host_id, &a.incarnation, &batch, ms)
                .await
        ));
    }
    let long = "x".repeat(513);
    assert!(refused(
        p.apply_presence(&a.host_id, &a.incarnation, &[joined(&long, "z")], ms)
            .await
    ));
    let too_many: Vec<PresenceChange> = (0..=MAX_PRESENCE_BATCH)
        .map(|i| joined(&format!("p{i}"), "arena-1"))
        .collect();
    assert!(refused(
        p.apply_presence(&a.host_id, &a.incarnation, &too_many, ms)
            .await
    ));
    assert_eq!(stored(db).await, 0);

    let many: Vec<String> = (0..=MAX_PRESENCE_QUERY).map(|i| format!("p{i}")).collect();
    assert!(refused(p.presence_of(&many, ms).await));
    assert!(refused(
        p.presence_of(&["ann".to_owned(), String::new()], ms).await
    ));

    // The largest batch and read are accepted.
    apply(&store, &a, &too_many[..MAX_PRESENCE_BATCH]).await;
    let got = p
        .presence_of(&many[..MAX_PRESENCE_QUERY], ms)
        .await
        .unwrap();
    assert_eq!(got.len(), MAX_PRESENCE_QUERY);
    let mut sorted = got.clone();
    sorted.sort_by(|x, y| x.principal.cmp(&y.principal));
    assert_eq!(got, sorted);
}

/// Two hosts write overlapping batches at once, each in its own order: every write lands (rows
/// are taken in one order, so neither waits on the other in a cycle), and each row ends with
/// one of them.
pub async fn concurrent_batches_of_two_hosts_all_land(db: &Db) {
    let (sa, sb) = tokio::join!(db.open(), db.open());
    let run = unique("presence");
    let (a, b) = (host(&run, "a"), host(&run, "b"));
    join(&sa, &a).await;
    join(&sb, &b).await;
    let principals: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
    let forward: Vec<PresenceChange> = principals.iter().map(|p| joined(p, "arena-1")).collect();
    let backward: Vec<PresenceChange> = forward.iter().rev().cloned().collect();
    let mut tasks = Vec::new();
    for round in 0..10 {
        for (store, by, changes) in [(&sa, &a, &forward), (&sb, &b, &backward)] {
            let (store, by, changes) = (store.clone(), by.clone(), changes.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..50 {
                    match store
                        .presence
                        .apply_presence(&by.host_id, &by.incarnation, &changes, dead_after_ms())
                        .await
                    {
                        Ok(()) => return,
                        // SQLite's write lock is not fair (see the facts race): a busy
                        // timeout is retried as a caller retries. A deadlock is not.
                        Err(e) if e.is_retryable() && !e.to_string().contains("40P01") => continue,
                        Err(e) => panic!("round {round}: {e}"),
                    }
                }
                panic!("round {round}: the write never landed");
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let got = sa
        .presence
        .presence_of(&principals, dead_after_ms())
        .await
        .unwrap();
    assert_eq!(got.len(), principals.len());
    for r in &got {
        assert!(r.host_id == a.host_id || r.host_id == b.host_id, "{r:?}");
    }
}

pub async fn an_older_database_gains_presence(db: &Db) {
    let store = db.open().await;
    store.saves.claim("z").await.unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 11",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 12",
    };
    db.execute(&format!("DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; {rewind};")).await;
    let store = db.open().await;
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, 2);
    let a = host(&unique("presence"), "a");
    join(&store, &a).await;
    apply(&store, &a, &[joined("ann", "arena-1")]).await;
    assert_eq!(
        where_are(&store, &["ann"]).await,
        [at("ann", "arena-1", &a)]
    );
}
