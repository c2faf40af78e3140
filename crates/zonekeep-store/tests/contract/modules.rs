//! The module contract: zone modules kept by content address, and the module each kind runs.
//!
//! Digests are checked against `sha2` computed here, not against the store's own helper, and a
//! deploy's stamp against the database's clock read directly.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};
use zonekeep_store::{
    DeployCause, ModuleDeploy, Store, StoreError, MAX_DEPLOY_HISTORY, MAX_MODULE_BYTES,
};

use crate::support::Db;

/// A small stand-in module: the WebAssembly magic and version, then `tag`.
fn module(tag: &str) -> Vec<u8> {
    let mut bytes = b"\0asm\x01\0\0\0".to_vec();
    bytes.extend_from_slice(tag.as_bytes());
    bytes
}

/// The SHA-256 of `bytes` in lowercase hex.
fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How many modules the database holds, read directly.
async fn stored_modules(db: &Db) -> i64 {
    db.query_i64("SELECT count(*) FROM modules").await
}

/// Deploys and returns the answer, failing the test on a refusal.
async fn deploy(store: &Store, kind: &str, sha256: &str) -> ModuleDeploy {
    store
        .modules
        .deploy_module(kind, sha256, DeployCause::Push)
        .await
        .unwrap()
}

pub async fn modules_are_kept_by_their_sha256(db: &Db) {
    let store = db.open().await;
    let bytes = module("tag");
    let sha = store.modules.put_module(&bytes).await.unwrap();
    assert_eq!(sha, sha256_hex(&bytes));
    assert_eq!(sha.len(), 64);
    assert_eq!(
        store.modules.get_module(&sha).await.unwrap(),
        Some(bytes.clone())
    );

    // Storing the same bytes again answers the same digest and keeps one copy.
    assert_eq!(store.modules.put_module(&bytes).await.unwrap(), sha);
    assert_eq!(stored_modules(db).await, 1);

    // Other bytes, another address; both are kept.
    let other = module("arena");
    let other_sha = store.modules.put_module(&other).await.unwrap();
    assert_eq!(other_sha, sha256_hex(&other));
    assert_ne!(other_sha, sha);
    assert_eq!(
        store.modules.get_module(&other_sha).await.unwrap(),
        Some(other)
    );
    assert_eq!(store.modules.get_module(&sha).await.unwrap(), Some(bytes));
    assert_eq!(stored_modules(db).await, 2);
}

pub async fn empty_and_oversize_modules_are_refused(db: &Db) {
    let store = db.open().await;
    assert!(matches!(
        store.modules.put_module(b"").await,
        Err(StoreError::InvalidModule(_))
    ));
    let oversize = vec![0x2a; MAX_MODULE_BYTES + 1];
    assert!(matches!(
        store.modules.put_module(&oversize).await,
        Err(StoreError::InvalidModule(_))
    ));
    assert_eq!(stored_modules(db).await, 0);
    // Neither is an address anything was stored under.
    for refused in [&b""[..], &oversize] {
        assert_eq!(
            store
                .modules
                .get_module(&sha256_hex(refused))
                .await
                .unwrap(),
            None
        );
    }

    // The limit itself is accepted, and comes back whole.
    let largest = vec![0x2a; MAX_MODULE_BYTES];
    let sha = store.modules.put_module(&largest).await.unwrap();
    assert_eq!(sha, sha256_hex(&largest));
    let back = store.modules.get_module(&sha).await.unwrap().unwrap();
    assert!(back == largest, "the largest module comes back whole");
    assert_eq!(
        deploy(&store, "big", &sha).await.size,
        MAX_MODULE_BYTES as u64
    );
}

pub async fn unknown_or_malformed_digests_are_not_found(db: &Db) {
    let store = db.open().await;
    let sha = store.modules.put_module(&module("tag")).await.unwrap();
    let unknown = sha256_hex(b"never stored");
    for digest in [
        unknown.as_str(),
        "",
        "tag",
        &sha[..63],
        &format!("{sha}0"),
        &sha.to_uppercase(),
        &format!("{}g", &sha[..63]),
        "' OR '1'='1",
    ] {
        assert_eq!(
            store.modules.get_module(digest).await.unwrap(),
            None,
            "{digest:?} is not found"
        );
    }
}

pub async fn deploys_raise_each_kinds_version(db: &Db) {
    let store = db.open().await;
    let (one, two) = (module("one"), module("two"));
    let sha1 = store.modules.put_module(&one).await.unwrap();
    let sha2 = store.modules.put_module(&two).await.unwrap();
    assert!(store.modules.module_kinds().await.unwrap().is_empty());

    let before = db.now_ms().await;
    let first = deploy(&store, "tag", &sha1).await;
    let after = db.now_ms().await;
    assert_eq!(
        (
            first.kind.as_str(),
            first.sha256.as_str(),
            first.version,
            first.size
        ),
        ("tag", sha1.as_str(), 1, one.len() as u64)
    );
    // Stamped by the database's clock (a millisecond of rounding either way).
    let stamp = i64::try_from(first.deployed_at_ms).unwrap();
    assert!(
        (before - 1..=after + 1).contains(&stamp),
        "the stamp {stamp} is not the database's time ({before}..={after})"
    );

    // Kinds count their deploys apart; a new module, or the same one again, raises the version.
    assert_eq!(deploy(&store, "arena", &sha2).await.version, 1);
    let second = deploy(&store, "tag", &sha2).await;
    assert_eq!((second.version, second.sha256.as_str()), (2, sha2.as_str()));
    assert_eq!(second.size, two.len() as u64);
    let third = deploy(&store, "tag", &sha2).await;
    assert_eq!((third.version, third.sha256.as_str()), (3, sha2.as_str()));
    assert!(third.deployed_at_ms >= first.deployed_at_ms);
    let arena = deploy(&store, "arena", &sha1).await;
    assert_eq!((arena.version, arena.sha256.as_str()), (2, sha1.as_str()));

    assert_eq!(
        store.modules.module_kinds().await.unwrap(),
        vec![arena, third]
    );

    // Kind names are 1..=64 bytes.
    let longest = "k".repeat(64);
    assert_eq!(deploy(&store, &longest, &sha1).await.version, 1);
    for bad in [String::new(), "k".repeat(65)] {
        assert!(matches!(
            store
                .modules
                .deploy_module(&bad, &sha1, DeployCause::Push)
                .await,
            Err(StoreError::InvalidArgument(_))
        ));
    }
    assert_eq!(store.modules.module_kinds().await.unwrap().len(), 3);
}

pub async fn a_deploy_of_an_unknown_module_is_refused_and_changes_nothing(db: &Db) {
    let store = db.open().await;
    let sha = store.modules.put_module(&module("tag")).await.unwrap();
    deploy(&store, "tag", &sha).await;
    let kinds = store.modules.module_kinds().await.unwrap();

    let unknown = sha256_hex(b"never stored");
    for (kind, digest) in [
        ("tag", unknown.as_str()),
        ("new-kind", unknown.as_str()),
        ("tag", ""),
        ("tag", &sha.to_uppercase()),
        ("new-kind", "not a digest"),
    ] {
        assert!(
            matches!(
                store
                    .modules
                    .deploy_module(kind, digest, DeployCause::Push)
                    .await,
                Err(StoreError::InvalidModule(_))
            ),
            "deploying {digest:?} as {kind:?} is refused"
        );
    }
    assert_eq!(store.modules.module_kinds().await.unwrap(), kinds);
    assert_eq!(stored_modules(db).await, 1);
    // The refusals took no version: the next deploy is the kind's second.
    assert_eq!(deploy(&store, "tag", &sha).await.version, 2);
}

pub async fn module_kinds_are_sorted_by_kind(db: &Db) {
    let store = db.open().await;
    let sha = store.modules.put_module(&module("tag")).await.unwrap();
    // Sorted by bytes, whatever the database's collation: upper case before lower, "ä" last.
    let kinds = ["b", "ä", "a-2", "B", "a", "arena_10", "arena_9"];
    for kind in kinds {
        deploy(&store, kind, &sha).await;
    }
    let listed: Vec<String> = store
        .modules
        .module_kinds()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.kind)
        .collect();
    let mut want: Vec<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(listed.first().map(String::as_str), Some("B"));
    assert_eq!(listed.last().map(String::as_str), Some("ä"));
}

pub async fn two_hosts_see_each_others_modules_and_deploys(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    let one = module("one");
    let sha1 = a.modules.put_module(&one).await.unwrap();
    let first = deploy(&a, "tag", &sha1).await;

    // The other host finds the deploy and loads its module.
    assert_eq!(b.modules.module_kinds().await.unwrap(), vec![first.clone()]);
    assert_eq!(b.modules.get_module(&sha1).await.unwrap(), Some(one));

    // It deploys a module of its own; the first host sees the new version.
    let two = module("two");
    let sha2 = b.modules.put_module(&two).await.unwrap();
    let second = deploy(&b, "tag", &sha2).await;
    assert_eq!(second.version, 2);
    assert_eq!(a.modules.module_kinds().await.unwrap(), vec![second]);
    assert_eq!(a.modules.get_module(&sha2).await.unwrap(), Some(two));
    // Storing a module the other host stored is a no-op here too.
    assert_eq!(a.modules.put_module(&module("two")).await.unwrap(), sha2);
    assert_eq!(stored_modules(db).await, 2);
}

pub async fn concurrent_deploys_of_a_kind_get_distinct_versions(db: &Db) {
    let (a, b) = tokio::join!(db.open(), db.open());
    // Both hosts store the same new module at once: both succeed, one copy is kept.
    let bytes = module("shared");
    let (put_a, put_b) = tokio::join!(a.modules.put_module(&bytes), b.modules.put_module(&bytes));
    assert_eq!(put_a.unwrap(), put_b.unwrap());
    assert_eq!(stored_modules(db).await, 1);

    let one = a.modules.put_module(&module("one")).await.unwrap();
    let two = b.modules.put_module(&module("two")).await.unwrap();
    const PER_TASK: u64 = 25;
    let mut tasks = Vec::new();
    for (store, sha) in [(a.clone(), one.clone()), (b.clone(), two.clone())] {
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..PER_TASK {
                let d = store
                    .modules
                    .deploy_module("contested", &sha, DeployCause::Push)
                    .await
                    .unwrap();
                assert_eq!(d.sha256, sha);
                got.push(d.version);
            }
            got
        }));
    }
    let mut versions = Vec::new();
    let mut by_task = Vec::new();
    for task in tasks {
        let got = task.await.unwrap();
        // One task's own deploys are in order.
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
        by_task.push(got.clone());
        versions.extend(got);
    }
    let distinct: BTreeSet<u64> = versions.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        versions.len(),
        "a version was handed out twice"
    );
    assert_eq!(distinct, (1..=2 * PER_TASK).collect::<BTreeSet<_>>());

    // The history holds every one of them once, newest first, each with its own module.
    let history = b
        .modules
        .module_history("contested", MAX_DEPLOY_HISTORY)
        .await
        .unwrap();
    let listed: Vec<u64> = history.iter().map(|d| d.version).collect();
    assert_eq!(listed, (1..=2 * PER_TASK).rev().collect::<Vec<_>>());
    for d in &history {
        let sha = if by_task[0].contains(&d.version) {
            &one
        } else {
            &two
        };
        assert_eq!(&d.sha256, sha, "version {}", d.version);
    }

    // The kind runs the module of whichever deploy took the last version.
    let last = a.modules.module_kinds().await.unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].version, 2 * PER_TASK);
    let winner = if by_task[0].contains(&(2 * PER_TASK)) {
        &one
    } else {
        &two
    };
    assert_eq!(&last[0].sha256, winner);
}

pub async fn a_module_whose_bytes_changed_is_corrupt(db: &Db) {
    let store = db.open().await;
    let sha = store.modules.put_module(&module("tag")).await.unwrap();
    let tamper = match db {
        Db::Sqlite { .. } => "UPDATE modules SET bytes = X'00'",
        Db::Postgres { .. } => "UPDATE modules SET bytes = '\\x00'::bytea",
    };
    db.execute(tamper).await;
    assert!(matches!(
        store.modules.get_module(&sha).await,
        Err(StoreError::Corrupt(_))
    ));
}

/// A database written before zone modules (schema version 3) gains them when a newer build opens
/// it, and keeps what it held.
pub async fn an_older_database_gains_the_module_tables(db: &Db) {
    let store = db.open().await;
    let epoch = store.saves.claim("z").await.unwrap().epoch;
    store
        .saves
        .write("z", epoch, 1, "arena", b"kept")
        .await
        .unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 3",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 4",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; ALTER TABLE fleet_hosts DROP COLUMN region; DROP TABLE lobby_seats; DROP TABLE lobby_rooms; DROP TABLE module_deploys; DROP TABLE zone_calls; DROP TABLE characters;
         DROP TABLE zone_transfers; DROP TABLE module_kinds; DROP TABLE modules; {rewind};"
    ))
    .await;

    let store = db.open().await;
    assert_eq!(store.saves.load("z").await.unwrap().unwrap().bytes, b"kept");
    let sha = store.modules.put_module(&module("tag")).await.unwrap();
    assert_eq!(deploy(&store, "tag", &sha).await.version, 1);
}

/// The history of `kind`'s deploys, newest first, as many as it keeps.
async fn history(store: &Store, kind: &str) -> Vec<ModuleDeploy> {
    store
        .modules
        .module_history(kind, MAX_DEPLOY_HISTORY)
        .await
        .unwrap()
}

pub async fn a_kinds_history_lists_its_deploys_newest_first(db: &Db) {
    let store = db.open().await;
    let (one, two) = (module("one"), module("two"));
    let sha1 = store.modules.put_module(&one).await.unwrap();
    let sha2 = store.modules.put_module(&two).await.unwrap();
    assert!(history(&store, "tag").await.is_empty());

    let first = deploy(&store, "tag", &sha1).await;
    let second = deploy(&store, "tag", &sha2).await;
    deploy(&store, "arena", &sha2).await;
    let back = store
        .modules
        .deploy_module("tag", &sha1, DeployCause::Rollback)
        .await
        .unwrap();
    assert_eq!(
        (back.version, back.cause, back.size),
        (3, DeployCause::Rollback, one.len() as u64)
    );
    assert_eq!(first.cause, DeployCause::Push);

    // Each kind keeps its own, newest first, exactly as each deploy answered.
    assert_eq!(
        history(&store, "tag").await,
        vec![back.clone(), second.clone(), first]
    );
    assert_eq!(history(&store, "arena").await.len(), 1);
    // The current deploy says why it was made.
    let kinds = store.modules.module_kinds().await.unwrap();
    assert_eq!(kinds[1], back);

    // A limit keeps the newest; none asked for is one.
    assert_eq!(
        store.modules.module_history("tag", 2).await.unwrap(),
        vec![back.clone(), second]
    );
    assert_eq!(
        store.modules.module_history("tag", 0).await.unwrap(),
        vec![back]
    );
    assert!(store
        .modules
        .module_history("never-deployed", 10)
        .await
        .unwrap()
        .is_empty());
    for bad in [String::new(), "k".repeat(65)] {
        assert!(matches!(
            store.modules.module_history(&bad, 10).await,
            Err(StoreError::InvalidArgument(_))
        ));
    }
}

pub async fn a_kinds_history_keeps_its_newest_deploys(db: &Db) {
    let store = db.open().await;
    let sha = store.modules.put_module(&module("tag")).await.unwrap();
    let deploys = MAX_DEPLOY_HISTORY as u64 + 6;
    for _ in 0..deploys {
        deploy(&store, "tag", &sha).await;
    }
    deploy(&store, "other", &sha).await;
    let kept: Vec<u64> = history(&store, "tag")
        .await
        .into_iter()
        .map(|d| d.version)
        .collect();
    assert_eq!(
        kept,
        (deploys - MAX_DEPLOY_HISTORY as u64 + 1..=deploys)
            .rev()
            .collect::<Vec<_>>()
    );
    // Forgotten, not hidden: the table holds no more than the bound, and the other kind's one.
    assert_eq!(
        db.query_i64("SELECT count(*) FROM module_deploys").await,
        MAX_DEPLOY_HISTORY as i64 + 1
    );
    // A query past the bound is the bound.
    assert_eq!(
        store
            .modules
            .module_history("tag", usize::MAX)
            .await
            .unwrap()
            .len(),
        MAX_DEPLOY_HISTORY
    );
}

/// A database written before deploy histories (schema version 7) gains one when a newer build
/// opens it: each kind's current deploy is its first entry, counted as a push.
pub async fn an_older_database_gains_the_deploy_history(db: &Db) {
    let store = db.open().await;
    let sha1 = store.modules.put_module(&module("one")).await.unwrap();
    let sha2 = store.modules.put_module(&module("two")).await.unwrap();
    deploy(&store, "tag", &sha1).await;
    store
        .modules
        .deploy_module("tag", &sha2, DeployCause::Rollback)
        .await
        .unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 7",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 8",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; ALTER TABLE fleet_hosts DROP COLUMN region; DROP TABLE lobby_seats; DROP TABLE lobby_rooms; DROP TABLE module_deploys; {rewind};"
    ))
    .await;

    let store = db.open().await;
    let current = store.modules.module_kinds().await.unwrap();
    assert_eq!(current.len(), 1);
    assert_eq!(
        (
            current[0].version,
            current[0].cause,
            current[0].sha256.as_str()
        ),
        (2, DeployCause::Push, sha2.as_str())
    );
    assert_eq!(history(&store, "tag").await, current);
    let third = deploy(&store, "tag", &sha1).await;
    assert_eq!(third.version, 3);
    assert_eq!(
        history(&store, "tag").await,
        vec![third, current[0].clone()]
    );
}
