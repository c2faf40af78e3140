//! The chat contract: seqs start at 1 per channel and grow by one per line in input order (also
//! when two stores append to one channel at once), ids grow, reads are bounded and ordered, `keep`
//! prunes only the channels written; sanctions are active until they end or are lifted; reports
//! copy the store's own lines and refuse lines it does not keep; every sanction, lift and report
//! writes one audit row; malformed input is refused with a typed error and writes nothing.
//!
//! Times are the callers' (the store takes them as given), so the tests use small fixed ones.

use std::collections::{BTreeMap, BTreeSet};
use std::slice;

use serde_json::{json, Value};
use zonekeep_store::{
    dm_channel, AuditEntry, ChatScope, NewLine, NewReport, NewSanction, Sanction, SanctionAction,
    Store, StoreError, StoredLine, MAX_ACTIVE_SANCTIONS, MAX_CHAT_BATCH, MAX_CHAT_BODY,
    MAX_CHAT_CHANNEL, MAX_CHAT_KEEP, MAX_CHAT_NAME, MAX_CHAT_PAGE, MAX_CHAT_PRINCIPAL,
    MAX_CHAT_REASON, MAX_REPORT_LINES,
};

use crate::support::Db;
use SanctionAction::{Ban, Mute};

const Z: &str = "zone:arena-1";
const G: &str = "group:world-1";
/// A keep no test reaches.
const ALL: u32 = 10_000;
const PAGE: u32 = MAX_CHAT_PAGE;

fn said(channel: &str, sender: &str, body: &str, at: u64) -> NewLine {
    NewLine {
        channel: channel.into(),
        sender: sender.into(),
        body: body.into(),
        sent_at_ms: at,
        host_id: Some("host-a".into()),
    }
}

/// Appends lines that must be accepted.
async fn append(store: &Store, lines: &[NewLine], keep: u32) -> Vec<StoredLine> {
    store.chat.append_lines(lines, keep).await.unwrap()
}

/// The seqs of a page of `channel`, in the order read.
async fn seqs(store: &Store, channel: &str, before: Option<u64>, limit: u32) -> Vec<u64> {
    let page = store.chat.lines(channel, before, limit).await.unwrap();
    page.into_iter().map(|l| l.seq).collect()
}

/// A sanction by `backend` for spam, at `span.0` until `span.1`.
fn sanction(who: &str, action: SanctionAction, scope: &str, span: (u64, u64)) -> NewSanction {
    NewSanction {
        principal: who.into(),
        action,
        scope: scope.parse().unwrap(),
        until_ms: span.1,
        reason: "spam".into(),
        actor: "backend".into(),
        created_ms: span.0,
    }
}

/// What a stored sanction was added as.
fn as_added(s: &Sanction) -> NewSanction {
    NewSanction {
        principal: s.principal.clone(),
        action: s.action,
        scope: s.scope.clone(),
        until_ms: s.until_ms,
        reason: s.reason.clone(),
        actor: s.actor.clone(),
        created_ms: s.created_ms,
    }
}

fn report(channel: &str, seqs: &[u64]) -> NewReport {
    NewReport {
        reporter: "ann".into(),
        channel: channel.into(),
        seqs: seqs.to_vec(),
        reason: "insults".into(),
        created_ms: 7_000,
    }
}

fn refused<T: std::fmt::Debug>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::InvalidArgument(_)))
}

/// A copy of `base` changed by `edit`.
fn edited<T: Clone>(base: &T, edit: impl FnOnce(&mut T)) -> T {
    let mut value = base.clone();
    edit(&mut value);
    value
}

/// An audit row as `at actor action target scope`, and its detail.
fn audited(a: &AuditEntry) -> (String, Value) {
    let (action, scope) = (a.action.as_str(), &a.scope);
    let row = format!("{} {} {action} {} {scope}", a.at_ms, a.actor, a.target);
    (row, a.detail.clone())
}

/// The chat tables, in the order their migration creates them.
const TABLES: [&str; 5] = [
    "chat_channels",
    "chat_lines",
    "chat_sanctions",
    "chat_reports",
    "chat_audit",
];

/// How many rows each chat table holds.
async fn stored(db: &Db) -> Vec<i64> {
    let mut out = Vec::new();
    for table in TABLES {
        out.push(db.query_i64(&format!("SELECT count(*) FROM {table}")).await);
    }
    out
}

fn ids(lines: &[StoredLine]) -> Vec<u64> {
    lines.iter().map(|l| l.id).collect()
}

fn strictly_growing(v: &[u64]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

pub async fn seqs_start_at_one_per_channel_and_follow_input_order(db: &Db) {
    let store = db.open().await;
    assert_eq!(store.chat.last_line_id().await.unwrap(), 0);
    let dm = dm_channel("bob", "ann").unwrap();
    let first = append(
        &store,
        &[
            said(Z, "ann", "one", 1),
            said(G, "bob", "g-one", 2),
            said(Z, "bob", "two", 3),
            said(&dm, "ann", "psst", 4),
            said(Z, "cy", "three", 5),
            said(G, "ann", "g-two", 6),
        ],
        ALL,
    )
    .await;
    let got: Vec<(&str, u64, &str)> = first
        .iter()
        .map(|l| (l.channel.as_str(), l.seq, l.body.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (Z, 1, "one"),
            (G, 1, "g-one"),
            (Z, 2, "two"),
            (dm.as_str(), 1, "psst"),
            (Z, 3, "three"),
            (G, 2, "g-two"),
        ]
    );
    assert!(strictly_growing(&ids(&first)), "{first:?}");
    assert_eq!(
        (
            first[1].sender.as_str(),
            first[1].sent_at_ms,
            first[1].host_id.as_deref()
        ),
        ("bob", 2, Some("host-a"))
    );

    let second = append(
        &store,
        &[said(G, "cy", "g-three", 7), said(Z, "ann", "four", 8)],
        ALL,
    )
    .await;
    assert_eq!(second.iter().map(|l| l.seq).collect::<Vec<_>>(), [3, 4]);
    let all: Vec<StoredLine> = first.iter().chain(&second).cloned().collect();
    assert!(strictly_growing(&ids(&all)), "ids grow across appends");
    assert!(append(&store, &[], ALL).await.is_empty());

    // A channel's page: its newest `limit` lines below `before`, oldest first.
    let zone: Vec<StoredLine> = all.iter().filter(|l| l.channel == Z).cloned().collect();
    assert_eq!(store.chat.lines(Z, None, PAGE).await.unwrap(), zone);
    assert_eq!(seqs(&store, Z, None, 2).await, [3, 4]);
    assert_eq!(seqs(&store, Z, Some(4), 2).await, [2, 3]);
    assert_eq!(seqs(&store, Z, Some(2), PAGE).await, [1]);
    assert!(seqs(&store, Z, Some(1), PAGE).await.is_empty());
    assert!(seqs(&store, Z, Some(0), PAGE).await.is_empty());
    assert_eq!(seqs(&store, Z, Some(u64::MAX), PAGE).await, [1, 2, 3, 4]);
    assert_eq!(seqs(&store, &dm, None, PAGE).await, [1]);
    assert_eq!(seqs(&store, G, None, PAGE).await, [1, 2, 3]);
    assert!(seqs(&store, "zone:quiet", None, PAGE).await.is_empty());

    // The fleet feed: every channel's lines by id, after a cursor.
    let c = &store.chat;
    assert_eq!(c.lines_after(0, PAGE).await.unwrap(), all);
    assert_eq!(c.lines_after(all[2].id, 2).await.unwrap(), all[3..5]);
    assert!(c.lines_after(all[7].id, PAGE).await.unwrap().is_empty());
    assert!(c.lines_after(u64::MAX, PAGE).await.unwrap().is_empty());
    assert_eq!(c.last_line_id().await.unwrap(), all[7].id);
}

pub async fn keep_prunes_each_written_channel_to_its_newest_lines(db: &Db) {
    let store = db.open().await;
    let five = |channel: &str| -> Vec<NewLine> {
        (1..=5)
            .map(|i| said(channel, "ann", &format!("l{i}"), i))
            .collect()
    };
    append(&store, &five(Z), ALL).await;
    append(&store, &five(G), ALL).await;

    // Z is written with keep 3: it keeps its newest three. G, not written, keeps all five.
    append(
        &store,
        &[said(Z, "bob", "six", 6), said(Z, "bob", "seven", 7)],
        3,
    )
    .await;
    assert_eq!(seqs(&store, Z, None, PAGE).await, [5, 6, 7]);
    assert_eq!(seqs(&store, G, None, PAGE).await, [1, 2, 3, 4, 5]);
    append(&store, &[said(G, "bob", "six", 8)], 2).await;
    assert_eq!(seqs(&store, G, None, PAGE).await, [5, 6]);
    assert_eq!(seqs(&store, Z, None, PAGE).await, [5, 6, 7]);

    // Seqs go on after a prune.
    let next = append(&store, &[said(Z, "cy", "eight", 9)], 3).await;
    assert_eq!(next[0].seq, 8);
    assert_eq!(seqs(&store, Z, None, PAGE).await, [6, 7, 8]);

    // A batch longer than `keep` answers every line, and keeps only the newest.
    let burst: Vec<NewLine> = (1..=4).map(|i| said("zone:burst", "ann", "b", i)).collect();
    let answered = append(&store, &burst, 2).await;
    assert_eq!(
        answered.iter().map(|l| l.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(seqs(&store, "zone:burst", None, PAGE).await, [3, 4]);

    // The feed holds only kept lines, by id.
    let feed = store.chat.lines_after(0, PAGE).await.unwrap();
    assert_eq!(feed.len(), 3 + 2 + 2);
    assert!(strictly_growing(&ids(&feed)));
    let last = feed.last().map(|l| l.id);
    assert_eq!(store.chat.last_line_id().await.ok(), last);
}

/// Two stores append to one busy channel at once, with batches naming it among other channels
/// in either order: no seq is handed out twice or skipped, and a channel's seqs follow its ids
/// (commit order).
pub async fn concurrent_appends_to_one_channel_never_repeat_a_seq(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    let sqlite = matches!(db, Db::Sqlite { .. });
    const BUSY: &str = "zone:busy";
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let store = if t % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let other = if t % 3 == 0 { "group:g" } else { "zone:other" };
            let mut got = Vec::new();
            for round in 0..10u64 {
                let mut batch = vec![
                    said(BUSY, "ann", &format!("{t}/{round}/a"), round),
                    said(other, "bob", &format!("{t}/{round}/b"), round),
                    said(BUSY, "cy", &format!("{t}/{round}/c"), round),
                ];
                if round % 2 == 1 {
                    batch.reverse();
                }
                let mut tries = 0;
                let lines = loop {
                    match store.chat.append_lines(&batch, ALL).await {
                        Ok(lines) => break lines,
                        // SQLite's write lock is not fair (see the facts race): a busy timeout
                        // is retried as a caller retries. On PostgreSQL nothing may fail: not a
                        // deadlock, nor a seq taken twice (refused by the unique index).
                        Err(e) if sqlite && e.is_retryable() => {
                            tries += 1;
                            assert!(tries < 50, "task {t}: the append never landed");
                        }
                        Err(e) => panic!("task {t}: {e}"),
                    }
                };
                // Within a batch, a channel's lines take consecutive seqs in input order.
                let busy: Vec<u64> = lines
                    .iter()
                    .filter(|l| l.channel == BUSY)
                    .map(|l| l.seq)
                    .collect();
                assert_eq!(busy[1], busy[0] + 1, "{lines:?}");
                got.extend(lines);
            }
            got
        }));
    }
    let mut per_channel: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut all_ids = BTreeSet::new();
    for task in tasks {
        for line in task.await.unwrap() {
            assert!(all_ids.insert(line.id), "id {} handed out twice", line.id);
            per_channel.entry(line.channel).or_default().push(line.seq);
        }
    }
    for (channel, mut seqs) in per_channel {
        seqs.sort_unstable();
        let n = seqs.len() as u64;
        assert_eq!(
            seqs,
            (1..=n).collect::<Vec<_>>(),
            "{channel}: every seq once"
        );
        let stored = a.chat.lines(&channel, None, PAGE).await.unwrap();
        assert_eq!(stored.len() as u64, n);
        assert!(
            strictly_growing(&ids(&stored)),
            "{channel}: ids follow seqs"
        );
    }
}

pub async fn sanctions_are_active_until_they_end_or_are_lifted_and_each_is_audited(db: &Db) {
    let store = db.open().await;
    let c = &store.chat;
    let mute = sanction("ann", Mute, "fleet", (1_000, 2_000));
    let mut ban = sanction("ann", Ban, "zone:arena-1", (1_100, 5_000));
    (ban.actor, ban.reason) = ("mod-1".into(), "abuse".into());
    let mut other = sanction("bob", Mute, "group:world-1", (1_200, 9_000));
    other.reason = String::new();
    let m = c.add_sanction(&mute).await.unwrap();
    let b = c.add_sanction(&ban).await.unwrap();
    let o = c.add_sanction(&other).await.unwrap();
    assert!(m.id < b.id && b.id < o.id);
    assert_eq!(as_added(&b), ban);
    assert_eq!((b.lifted_ms, b.lifted_by.as_deref()), (None, None));

    let active =
        |now: u64, limit: u32| async move { c.active_sanctions(now, limit).await.unwrap() };
    assert_eq!(active(1_500, PAGE).await, [m.clone(), b.clone(), o.clone()]);
    assert_eq!(active(1_500, 2).await, [m.clone(), b.clone()]);
    assert_eq!(active(1_500, MAX_ACTIVE_SANCTIONS).await.len(), 3);
    // A sanction ends at its `until_ms`.
    assert_eq!(active(2_000, PAGE).await, [b.clone(), o.clone()]);
    assert_eq!(active(5_000, PAGE).await, slice::from_ref(&o));
    assert!(active(9_000, PAGE).await.is_empty());
    assert_eq!(
        c.sanctions_of("ann", 1_500).await.unwrap(),
        [m.clone(), b.clone()]
    );
    assert_eq!(
        c.sanctions_of("ann", 2_500).await.unwrap(),
        slice::from_ref(&b)
    );
    assert!(c.sanctions_of("cy", 1_500).await.unwrap().is_empty());

    // A lift ends it at once; a second lift, or one of no sanction, finds nothing.
    let lifted = c
        .lift_sanction(b.id, "mod-2", 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        lifted,
        Sanction {
            lifted_ms: Some(3_000),
            lifted_by: Some("mod-2".into()),
            ..b.clone()
        }
    );
    assert!(!lifted.is_active(3_000));
    for (id, by) in [(b.id, "mod-3"), (o.id + 100, "mod-2"), (u64::MAX, "mod-2")] {
        assert_eq!(c.lift_sanction(id, by, 3_100).await.unwrap(), None);
    }
    assert!(c.sanctions_of("ann", 2_500).await.unwrap().is_empty());
    assert_eq!(active(2_500, PAGE).await, slice::from_ref(&o));
    // An expired sanction may still be lifted (on the record).
    assert!(c
        .lift_sanction(m.id, "backend", 3_200)
        .await
        .unwrap()
        .is_some());

    let audit = c.audit(0, PAGE).await.unwrap();
    let (rows, details): (Vec<String>, Vec<Value>) = audit.iter().map(audited).unzip();
    assert_eq!(
        rows,
        [
            "1000 backend mute ann fleet",
            "1100 mod-1 ban ann zone:arena-1",
            "1200 backend mute bob group:world-1",
            "3000 mod-2 lift ann zone:arena-1",
            "3200 backend lift ann fleet",
        ]
    );
    assert_eq!(
        details,
        [
            json!({"sanction": m.id, "until_ms": 2_000, "reason": "spam"}),
            json!({"sanction": b.id, "until_ms": 5_000, "reason": "abuse"}),
            json!({"sanction": o.id, "until_ms": 9_000, "reason": ""}),
            json!({"sanction": b.id, "action": "ban"}),
            json!({"sanction": m.id, "action": "mute"}),
        ]
    );
    assert!(strictly_growing(
        &audit.iter().map(|a| a.id).collect::<Vec<_>>()
    ));
    assert_eq!(c.audit(audit[0].id, 2).await.unwrap(), audit[1..3]);
    assert!(c.audit(audit[4].id, PAGE).await.unwrap().is_empty());
}

pub async fn a_report_copies_the_stored_lines_and_refuses_lines_not_kept(db: &Db) {
    let store = db.open().await;
    let c = &store.chat;
    let lines = append(
        &store,
        &[
            said(Z, "ann", "hello", 10),
            said(Z, "bob", "you are bad", 11),
            said(Z, "bob", "really bad", 12),
        ],
        3,
    )
    .await;
    // Seqs repeat and come in any order; the report holds each line once, by seq, as stored.
    let filed = c.file_report(&report(Z, &[3, 2, 3])).await.unwrap();
    let copied: Vec<(u64, &str, u64, &str)> = filed
        .lines
        .iter()
        .map(|l| (l.seq, l.sender.as_str(), l.sent_at_ms, l.body.as_str()))
        .collect();
    assert_eq!(
        copied,
        [(2, "bob", 11, "you are bad"), (3, "bob", 12, "really bad")]
    );
    assert_eq!(
        (
            filed.reporter.as_str(),
            filed.channel.as_str(),
            filed.reason.as_str(),
            filed.created_ms
        ),
        ("ann", Z, "insults", 7_000)
    );
    let dm = dm_channel("ann", "bob").unwrap();
    append(&store, &[said(&dm, "bob", "psst", 13)], 3).await;
    let private = c.file_report(&report(&dm, &[1])).await.unwrap();
    assert!(filed.id < private.id);
    assert_eq!(
        c.reports(0, PAGE).await.unwrap(),
        [filed.clone(), private.clone()]
    );
    assert_eq!(
        c.reports(filed.id, 1).await.unwrap(),
        slice::from_ref(&private)
    );

    let audit: Vec<(String, Value)> = c
        .audit(0, PAGE)
        .await
        .unwrap()
        .iter()
        .map(audited)
        .collect();
    let dm_row = format!("7000 ann report {dm} fleet");
    assert_eq!(
        audit,
        [
            (
                "7000 ann report zone:arena-1 zone:arena-1".to_owned(),
                json!({"report": filed.id, "seqs": [2, 3], "reason": "insults"})
            ),
            (
                dm_row,
                json!({"report": private.id, "seqs": [1], "reason": "insults"})
            ),
        ]
    );

    // Two more lines push seqs 1 and 2 out: they can no longer be reported, nor can lines never
    // written, and a refused report files nothing.
    append(
        &store,
        &[said(Z, "cy", "four", 14), said(Z, "cy", "five", 15)],
        3,
    )
    .await;
    let before = stored(db).await;
    let missing = |channel: &str, seqs: &[u64]| StoreError::ChatLinesMissing {
        channel: channel.into(),
        seqs: seqs.to_vec(),
    };
    for (channel, named, absent) in [
        (Z, vec![2, 3], vec![2]),
        (Z, vec![6, 1, 5], vec![1, 6]),
        (Z, vec![0], vec![0]),
        ("zone:quiet", vec![1], vec![1]),
    ] {
        assert_eq!(
            c.file_report(&report(channel, &named)).await,
            Err(missing(channel, &absent))
        );
    }
    assert_eq!(stored(db).await, before);
    // The filed copy outlives the lines it copied.
    assert_eq!(c.reports(0, 1).await.unwrap(), [filed]);
    assert_eq!(lines[1].body, "you are bad");
}

pub async fn hostile_chat_input_is_refused_and_writes_nothing(db: &Db) {
    let store = db.open().await;
    let c = &store.chat;
    let ok = said(Z, "ann", "hi", 1);
    let long_name = "z".repeat(MAX_CHAT_NAME + 1);
    let bad_channels = [
        String::new(),
        "x".repeat(MAX_CHAT_CHANNEL + 1),
        "zone:".into(),
        "group:".into(),
        "arena-1".into(),
        "dm:bob".into(),
        "dm:bob\u{1f}ann".into(),
        "dm:a\u{1f}b\u{1f}c".into(),
        format!("zone:{long_name}"),
        format!("group:{long_name}"),
    ];
    for channel in &bad_channels {
        let line = edited(&ok, |l| l.channel = channel.clone());
        assert!(
            refused(c.append_lines(&[ok.clone(), line], ALL).await),
            "{channel:?}"
        );
        assert!(refused(c.lines(channel, None, 10).await), "{channel:?}");
        assert!(
            refused(c.file_report(&report(channel, &[1])).await),
            "{channel:?}"
        );
    }
    let long_principal = "p".repeat(MAX_CHAT_PRINCIPAL + 1);
    let bad_lines = [
        edited(&ok, |l| l.sender = String::new()),
        edited(&ok, |l| l.sender = long_principal.clone()),
        edited(&ok, |l| l.body = String::new()),
        edited(&ok, |l| l.body = "b".repeat(MAX_CHAT_BODY + 1)),
        edited(&ok, |l| l.body = "two\nlines".into()),
        edited(&ok, |l| l.body = "bell\u{7}".into()),
        edited(&ok, |l| l.sent_at_ms = u64::MAX),
        edited(&ok, |l| l.host_id = Some(String::new())),
    ];
    for line in bad_lines {
        assert!(
            refused(c.append_lines(&[ok.clone(), line.clone()], ALL).await),
            "{line:?}"
        );
    }
    for keep in [0, MAX_CHAT_KEEP + 1, u32::MAX] {
        assert!(
            refused(c.append_lines(slice::from_ref(&ok), keep).await),
            "keep {keep}"
        );
    }
    assert!(refused(
        c.append_lines(&vec![ok.clone(); MAX_CHAT_BATCH + 1], ALL)
            .await
    ));
    for limit in [0, PAGE + 1, u32::MAX] {
        assert!(refused(c.lines(Z, None, limit).await), "limit {limit}");
        assert!(refused(c.lines_after(0, limit).await), "limit {limit}");
        assert!(refused(c.reports(0, limit).await), "limit {limit}");
        assert!(refused(c.audit(0, limit).await), "limit {limit}");
    }

    for limit in [0, MAX_ACTIVE_SANCTIONS + 1, u32::MAX] {
        assert!(refused(c.active_sanctions(1, limit).await), "limit {limit}");
    }

    // Sanctions: scopes and actions are typed, and their text is parsed by the same rules.
    for text in ["", "nope", "Fleet", "zone:", "group:", "world:w"] {
        assert!(refused(text.parse::<ChatScope>()), "{text:?}");
    }
    assert!(refused(format!("zone:{long_name}").parse::<ChatScope>()));
    for text in ["", "kick", "Mute"] {
        assert!(refused(text.parse::<SanctionAction>()), "{text:?}");
    }
    let good = sanction("ann", Ban, "fleet", (1_000, 2_000));
    let bad_sanctions = [
        edited(&good, |s| s.principal = String::new()),
        edited(&good, |s| s.principal = long_principal.clone()),
        edited(&good, |s| s.scope = ChatScope::Zone(String::new())),
        edited(&good, |s| s.scope = ChatScope::Group(long_name.clone())),
        edited(&good, |s| s.reason = "r".repeat(MAX_CHAT_REASON + 1)),
        edited(&good, |s| s.actor = String::new()),
        edited(&good, |s| s.until_ms = s.created_ms),
        edited(&good, |s| s.until_ms = u64::MAX),
    ];
    for s in bad_sanctions {
        assert!(refused(c.add_sanction(&s).await), "{s:?}");
    }
    assert!(refused(c.lift_sanction(1, "", 5).await));
    assert!(refused(c.lift_sanction(1, "mod", u64::MAX).await));
    assert!(refused(c.sanctions_of("", 5).await));
    assert!(refused(c.sanctions_of(&long_principal, 5).await));

    let one = report(Z, &[1]);
    let bad_reports = [
        edited(&one, |r| r.reporter = String::new()),
        edited(&one, |r| r.seqs = Vec::new()),
        edited(&one, |r| {
            r.seqs = (1..=MAX_REPORT_LINES as u64 + 1).collect()
        }),
        edited(&one, |r| r.seqs = vec![u64::MAX]),
        edited(&one, |r| r.reason = "r".repeat(MAX_CHAT_REASON + 1)),
    ];
    for r in bad_reports {
        assert!(refused(c.file_report(&r).await), "{r:?}");
    }
    assert_eq!(stored(db).await, [0, 0, 0, 0, 0], "nothing was written");

    // The largest values are accepted.
    let longest = "p".repeat(MAX_CHAT_PRINCIPAL);
    let widest = dm_channel(&longest, &longest).unwrap();
    assert_eq!(widest.len(), MAX_CHAT_CHANNEL);
    let line = NewLine {
        channel: widest.clone(),
        sender: longest.clone(),
        body: "b".repeat(MAX_CHAT_BODY),
        ..ok.clone()
    };
    append(&store, &vec![line; MAX_CHAT_BATCH], MAX_CHAT_KEEP).await;
    assert_eq!(
        c.lines(&widest, None, PAGE).await.unwrap().len(),
        PAGE as usize
    );
    let seqs: Vec<u64> = (1..=MAX_REPORT_LINES as u64).collect();
    let filed = c
        .file_report(&NewReport {
            reason: "r".repeat(MAX_CHAT_REASON),
            ..report(&widest, &seqs)
        })
        .await
        .unwrap();
    assert_eq!(filed.lines.len(), MAX_REPORT_LINES);
}

pub async fn an_older_database_gains_chat(db: &Db) {
    let store = db.open().await;
    store.saves.claim("z").await.unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 12",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 13",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; {rewind};"
    ))
    .await;
    let store = db.open().await;
    assert_eq!(store.saves.claim("z").await.unwrap().epoch, 2);
    let stored = append(&store, &[said(Z, "ann", "hi", 1)], ALL).await;
    assert_eq!((stored[0].seq, stored[0].id), (1, 1));
    let mute = sanction("ann", Mute, "fleet", (1, 2));
    let s = store.chat.add_sanction(&mute).await.unwrap();
    assert_eq!(store.chat.active_sanctions(1, PAGE).await.unwrap(), [s]);
}
