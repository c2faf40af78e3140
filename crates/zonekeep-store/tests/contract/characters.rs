//! The character contract: a player's character is held by at most one zone at a time, written
//! only by that zone under its current owner epoch, and handed on with its last committed data
//! when the holder releases it or its zone is claimed by a new owner.

use zonekeep_store::{
    CharacterAcquire, Store, StoreError, StoredCharacter, MAX_CHARACTER_BYTES,
    MAX_CHARACTER_PRINCIPAL,
};

use crate::support::Db;

const A: &str = "cell-0-0";
const B: &str = "cell-1-0";

/// A new owner claims `zone`; answers its epoch.
async fn claim(store: &Store, zone: &str) -> u64 {
    store.saves.claim(zone).await.unwrap().epoch
}

async fn acquire(store: &Store, principal: &str, zone: &str, epoch: u64) -> CharacterAcquire {
    store
        .characters
        .acquire_character(principal, zone, epoch)
        .await
        .unwrap()
}

/// Acquires and expects a grant; answers the character and whose stale lease was taken.
async fn granted(
    store: &Store,
    principal: &str,
    zone: &str,
    epoch: u64,
) -> (StoredCharacter, Option<(String, u64)>) {
    match acquire(store, principal, zone, epoch).await {
        CharacterAcquire::Granted { character, from } => {
            assert_eq!(character.holder, Some((zone.to_owned(), epoch)));
            (character, from)
        }
        held => panic!("{zone} under epoch {epoch} was not granted {principal:?}: {held:?}"),
    }
}

async fn load(store: &Store, principal: &str) -> StoredCharacter {
    store
        .characters
        .load_character(principal)
        .await
        .unwrap()
        .unwrap()
}

fn holder(zone: &str, epoch: u64) -> Option<(String, u64)> {
    Some((zone.to_owned(), epoch))
}

fn lost(principal: &str, holder: Option<(String, u64)>) -> Result<u64, StoreError> {
    Err(StoreError::CharacterLeaseLost {
        principal: principal.to_owned(),
        holder,
    })
}

/// A player's first visit creates an empty character the zone holds; every commit raises the
/// version; a reconnect to the same zone finds the last commit.
pub async fn a_first_acquire_creates_an_empty_character_and_commits_raise_its_version(db: &Db) {
    let store = db.open().await;
    let a = claim(&store, A).await;
    assert_eq!(store.characters.load_character("ada").await.unwrap(), None);

    let (fresh, from) = granted(&store, "ada", A, a).await;
    assert_eq!(from, None);
    assert_eq!((fresh.principal.as_str(), fresh.version), ("ada", 0));
    assert!(fresh.data.is_empty());
    assert!(fresh.updated_at_ms > 0);
    assert_eq!(load(&store, "ada").await, fresh);

    let commit = |data: &'static [u8]| store.characters.commit_character("ada", A, a, data);
    assert_eq!(commit(b"level 1").await, Ok(1));
    assert_eq!(commit(b"level 2, 40 gold").await, Ok(2));
    let stored = load(&store, "ada").await;
    assert_eq!(stored.data, b"level 2, 40 gold");
    assert_eq!(stored.version, 2);
    assert_eq!(stored.holder, holder(A, a));

    // The player reconnects to the same zone: the zone still holds the character, as committed.
    let (again, from) = granted(&store, "ada", A, a).await;
    assert_eq!(from, None);
    assert_eq!(
        (again.data.as_slice(), again.version),
        (&stored.data[..], 2)
    );
    // Characters are per principal.
    assert_eq!(granted(&store, "bob", A, a).await.0.version, 0);
    assert_eq!(load(&store, "ada").await.version, 2);
}

/// While one zone holds a character, another zone is told where it is and changes nothing, and
/// cannot write it either.
pub async fn a_held_character_answers_held_and_changes_nothing(db: &Db) {
    let store = db.open().await;
    let (a, b) = (claim(&store, A).await, claim(&store, B).await);
    granted(&store, "ada", A, a).await;
    store
        .characters
        .commit_character("ada", A, a, b"sword")
        .await
        .unwrap();
    let before = load(&store, "ada").await;

    assert_eq!(
        acquire(&store, "ada", B, b).await,
        CharacterAcquire::Held {
            zone: A.into(),
            epoch: a
        }
    );
    assert_eq!(
        store
            .characters
            .commit_character("ada", B, b, b"stolen")
            .await,
        lost("ada", holder(A, a))
    );
    assert_eq!(
        store.characters.release_character("ada", B, b, None).await,
        lost("ada", holder(A, a))
    );
    assert_eq!(load(&store, "ada").await, before);
}

/// A released character is free: the next zone acquires it with the data the release committed.
pub async fn a_released_character_is_acquired_elsewhere_with_its_data(db: &Db) {
    let store = db.open().await;
    let (a, b) = (claim(&store, A).await, claim(&store, B).await);
    granted(&store, "ada", A, a).await;
    let chars = &store.characters;
    assert_eq!(chars.commit_character("ada", A, a, b"one").await, Ok(1));
    assert_eq!(
        chars.release_character("ada", A, a, Some(b"two")).await,
        Ok(2)
    );
    let free = load(&store, "ada").await;
    assert_eq!(
        (free.holder, free.data.as_slice(), free.version),
        (None, &b"two"[..], 2)
    );

    let (moved, from) = granted(&store, "ada", B, b).await;
    assert_eq!(from, None);
    assert_eq!((moved.data.as_slice(), moved.version), (&b"two"[..], 2));
    // A release without data frees the lease and keeps the data and version.
    assert_eq!(chars.release_character("ada", B, b, None).await, Ok(2));
    let free = load(&store, "ada").await;
    assert_eq!(
        (free.holder, free.data.as_slice(), free.version),
        (None, &b"two"[..], 2)
    );
}

/// The holder zone is claimed by a new owner: its lease is stale, another zone takes the character
/// over with the last committed data, and the old owner's writes are fenced.
pub async fn a_stale_holder_is_taken_over_and_its_writes_are_fenced(db: &Db) {
    let store = db.open().await;
    let (a, b) = (claim(&store, A).await, claim(&store, B).await);
    granted(&store, "ada", A, a).await;
    let chars = &store.characters;
    assert_eq!(chars.commit_character("ada", A, a, b"last").await, Ok(1));

    // Another host claims the holder zone (its old owner crashed or was cut off).
    let a2 = claim(&store, A).await;
    let (taken, from) = granted(&store, "ada", B, b).await;
    assert_eq!(from, holder(A, a));
    assert_eq!((taken.data.as_slice(), taken.version), (&b"last"[..], 1));

    let fenced = Err(StoreError::Fenced {
        stored_epoch: a2,
        attempted: a,
    });
    assert_eq!(chars.commit_character("ada", A, a, b"late").await, fenced);
    assert_eq!(
        chars.release_character("ada", A, a, Some(b"late")).await,
        fenced
    );
    assert_eq!(chars.release_character("ada", A, a, None).await, fenced);
    let stored = load(&store, "ada").await;
    assert_eq!(
        (stored.holder, stored.data.as_slice(), stored.version),
        (holder(B, b), &b"last"[..], 1)
    );
    // The zone's new owner finds the character where it went.
    assert_eq!(
        acquire(&store, "ada", A, a2).await,
        CharacterAcquire::Held {
            zone: B.into(),
            epoch: b
        }
    );
}

/// A zone that restarts under a newer epoch gets its characters back; the epoch it ran under
/// before is fenced for acquiring and writing alike.
pub async fn the_same_zone_reacquires_under_a_newer_epoch_and_its_older_epoch_is_fenced(db: &Db) {
    let store = db.open().await;
    let a = claim(&store, A).await;
    granted(&store, "ada", A, a).await;
    let chars = &store.characters;
    assert_eq!(chars.commit_character("ada", A, a, b"v1").await, Ok(1));

    let a2 = claim(&store, A).await;
    let (back, from) = granted(&store, "ada", A, a2).await;
    assert_eq!(from, None, "the same zone takes nothing from anyone");
    assert_eq!((back.data.as_slice(), back.version), (&b"v1"[..], 1));

    let fenced = Err(StoreError::Fenced {
        stored_epoch: a2,
        attempted: a,
    });
    assert_eq!(chars.commit_character("ada", A, a, b"old").await, fenced);
    assert_eq!(chars.release_character("ada", A, a, None).await, fenced);
    assert_eq!(
        chars.acquire_character("ada", A, a).await,
        Err(StoreError::Fenced {
            stored_epoch: a2,
            attempted: a
        })
    );
    assert_eq!(chars.commit_character("ada", A, a2, b"v2").await, Ok(2));
    let stored = load(&store, "ada").await;
    assert_eq!(
        (stored.holder, stored.data.as_slice()),
        (holder(A, a2), &b"v2"[..])
    );
}

/// A release (or commit) that arrives after the lease has moved on is refused and never frees
/// or overwrites the new holder's character.
pub async fn a_delayed_release_never_frees_the_new_holders_lease(db: &Db) {
    let store = db.open().await;
    let (a, b) = (claim(&store, A).await, claim(&store, B).await);
    let chars = &store.characters;
    granted(&store, "ada", A, a).await;
    assert_eq!(
        chars
            .release_character("ada", A, a, Some(b"handed on"))
            .await,
        Ok(1)
    );
    // Released already: a retry of the release learns the lease is gone.
    assert_eq!(
        chars.release_character("ada", A, a, None).await,
        lost("ada", None)
    );
    granted(&store, "ada", B, b).await;

    // A's first release is delivered again late, with and without data, and a late commit too.
    assert_eq!(
        chars.release_character("ada", A, a, Some(b"stale")).await,
        lost("ada", holder(B, b))
    );
    assert_eq!(
        chars.release_character("ada", A, a, None).await,
        lost("ada", holder(B, b))
    );
    assert_eq!(
        chars.commit_character("ada", A, a, b"stale").await,
        lost("ada", holder(B, b))
    );
    let stored = load(&store, "ada").await;
    assert_eq!(
        (stored.holder, stored.data.as_slice(), stored.version),
        (holder(B, b), &b"handed on"[..], 1)
    );

    // The lease moves on through a takeover; the old holder's delayed release is fenced.
    let b2 = claim(&store, B).await;
    let a_again = claim(&store, A).await;
    let (_, from) = granted(&store, "ada", A, a_again).await;
    assert_eq!(from, holder(B, b));
    assert_eq!(
        chars.release_character("ada", B, b, None).await,
        Err(StoreError::Fenced {
            stored_epoch: b2,
            attempted: b
        })
    );
    assert_eq!(load(&store, "ada").await.holder, holder(A, a_again));
    // Nor may the holder zone's new owner release what it never acquired.
    assert_eq!(
        chars.release_character("ada", B, b2, None).await,
        lost("ada", holder(A, a_again))
    );
    assert_eq!(load(&store, "ada").await.holder, holder(A, a_again));
}

/// Oversize data, bad ids, epochs the database cannot hold and zones not run under the given epoch
/// are refused, and nothing stored changes.
pub async fn bad_character_calls_are_refused_and_change_nothing(db: &Db) {
    let store = db.open().await;
    let a = claim(&store, A).await;
    let chars = &store.characters;
    granted(&store, "ada", A, a).await;
    assert_eq!(chars.commit_character("ada", A, a, b"kept").await, Ok(1));
    let before = load(&store, "ada").await;

    let big = vec![7u8; MAX_CHARACTER_BYTES + 1];
    let long = "p".repeat(MAX_CHARACTER_PRINCIPAL + 1);
    let invalid = |r: Result<u64, StoreError>| matches!(r, Err(StoreError::InvalidArgument(_)));
    assert!(invalid(chars.commit_character("ada", A, a, &big).await));
    assert!(invalid(
        chars.release_character("ada", A, a, Some(&big)).await
    ));
    assert!(invalid(chars.commit_character("", A, a, b"x").await));
    assert!(invalid(chars.commit_character(&long, A, a, b"x").await));
    assert!(invalid(chars.commit_character("ada", "", a, b"x").await));
    assert!(invalid(
        chars.commit_character("ada", A, u64::MAX, b"x").await
    ));
    assert!(invalid(chars.release_character("ada", "", a, None).await));
    for (principal, zone, epoch) in [("", A, a), (long.as_str(), A, a), ("bob", "", a)] {
        assert!(
            matches!(
                chars.acquire_character(principal, zone, epoch).await,
                Err(StoreError::InvalidArgument(_))
            ),
            "{principal:?} {zone:?}"
        );
    }
    assert!(matches!(
        chars.acquire_character("bob", A, u64::MAX).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        chars.load_character("").await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        chars.load_character(&long).await,
        Err(StoreError::InvalidArgument(_))
    ));
    // The largest character fits.
    let max = vec![9u8; MAX_CHARACTER_BYTES];
    assert_eq!(chars.commit_character("ada", A, a, &max).await, Ok(2));
    assert_eq!(load(&store, "ada").await.data, max);
    assert_eq!(
        chars.commit_character("ada", A, a, &before.data).await,
        Ok(3)
    );

    // A zone never claimed has no owner, and an epoch the zone does not run under is not its
    // owner's: neither creates a character.
    assert_eq!(
        chars.acquire_character("bob", "nowhere", 1).await,
        Err(StoreError::Fenced {
            stored_epoch: 0,
            attempted: 1
        })
    );
    assert_eq!(
        chars.acquire_character("bob", A, a + 1).await,
        Err(StoreError::Fenced {
            stored_epoch: a,
            attempted: a + 1
        })
    );
    assert_eq!(chars.load_character("bob").await.unwrap(), None);
    assert_eq!(db.query_i64("SELECT count(*) FROM characters").await, 1);
    let after = load(&store, "ada").await;
    assert_eq!(
        (after.data, after.holder, after.version),
        (before.data, before.holder, 3)
    );
}

/// Two hosts (two stores on one database) ask for the same characters at once, new ones and
/// released ones: each time exactly one zone is granted, and the other is told it is held there.
pub async fn racing_acquires_grant_exactly_one(db: &Db) {
    let (one, two) = tokio::join!(db.open(), db.open());
    let (a, b) = (claim(&one, A).await, claim(&two, B).await);
    for round in 0..16 {
        let principal = format!("racer-{round}");
        let version = if round % 2 == 0 {
            0
        } else {
            // A character that exists and is free, as after its player logged out.
            granted(&one, &principal, A, a).await;
            one.characters
                .release_character(&principal, A, a, Some(b"logged out"))
                .await
                .unwrap()
        };
        let (x, y) = tokio::join!(
            one.characters.acquire_character(&principal, A, a),
            two.characters.acquire_character(&principal, B, b)
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        let winner = match (&x, &y) {
            (
                CharacterAcquire::Granted { from: None, .. },
                CharacterAcquire::Held { zone, epoch },
            ) => {
                assert_eq!((zone.as_str(), *epoch), (A, a), "round {round}");
                holder(A, a)
            }
            (
                CharacterAcquire::Held { zone, epoch },
                CharacterAcquire::Granted { from: None, .. },
            ) => {
                assert_eq!((zone.as_str(), *epoch), (B, b), "round {round}");
                holder(B, b)
            }
            other => panic!("round {round}: not exactly one grant: {other:?}"),
        };
        let stored = load(&one, &principal).await;
        assert_eq!(
            (stored.holder, stored.version),
            (winner, version),
            "round {round}"
        );
    }
}

/// A database written before characters (schema version 5) gains them when a newer build opens
/// it, and keeps what it held.
pub async fn an_older_database_gains_the_characters_table(db: &Db) {
    let store = db.open().await;
    let a = claim(&store, A).await;
    store.saves.write(A, a, 1, "arena", b"kept").await.unwrap();
    drop(store);
    let rewind = match db {
        Db::Sqlite { .. } => "PRAGMA user_version = 5",
        Db::Postgres { .. } => "DELETE FROM zonekeep_migrations WHERE version >= 6",
    };
    db.execute(&format!(
        "DROP TABLE chat_audit; DROP TABLE chat_reports; DROP TABLE chat_sanctions; DROP TABLE chat_lines; DROP TABLE chat_channels; DROP TABLE presence; DROP TABLE board_entries; DROP TABLE boards; DROP TABLE match_searches; ALTER TABLE fleet_hosts DROP COLUMN region; DROP TABLE lobby_seats; DROP TABLE lobby_rooms; DROP TABLE module_deploys; DROP TABLE zone_calls; DROP TABLE characters; {rewind};"
    ))
    .await;

    let store = db.open().await;
    assert_eq!(store.saves.load(A).await.unwrap().unwrap().bytes, b"kept");
    let (character, _) = granted(&store, "ada", A, a).await;
    assert_eq!(character.version, 0);
}
