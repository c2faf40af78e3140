//! The transfer contract: a player's move between zones is decided once, by whichever zone's
//! fenced write lands first, and never leaves the player in two zones or in none.

use std::sync::Arc;

use zonekeep_store::{NewTransfer, Store, StoreError, TransferStatus};

use crate::support::Db;

fn transfer(id: &str, source_epoch: u64) -> NewTransfer {
    NewTransfer {
        id: id.into(),
        principal: "ada".into(),
        player: 7,
        source_zone: "cell-0-0".into(),
        source_epoch,
        target_zone: "cell-1-0".into(),
        claims: r#"{"door":"east"}"#.into(),
        player_claims: r#"{"name":"ada"}"#.into(),
        state: vec![1, 2, 3, 4],
    }
}

/// Claims both zones once and answers (source epoch, target epoch).
async fn owners(store: &Store) -> (u64, u64) {
    let source = store.saves.claim("cell-0-0").await.unwrap().epoch;
    let target = store.saves.claim("cell-1-0").await.unwrap().epoch;
    (source, target)
}

pub async fn a_transfer_is_accepted_once_and_then_cannot_return(db: &Db) {
    let store = db.open().await;
    let (source, target) = owners(&store).await;
    let begun = store
        .transfers
        .begin_transfer(&transfer("t1", source))
        .await
        .unwrap();
    assert_eq!(begun.status, TransferStatus::Pending);
    assert_eq!(begun.transfer, transfer("t1", source));
    // A retried begin answers the stored row.
    let again = store
        .transfers
        .begin_transfer(&transfer("t1", source))
        .await
        .unwrap();
    assert_eq!(again, begun);

    let accepted = store.transfers.accept_transfer("t1", target).await.unwrap();
    assert_eq!(accepted.status, TransferStatus::Accepted);
    assert_eq!(accepted.target_epoch, Some(target));
    // The source's timeout loses: the answer says the target has the player.
    let late = store
        .transfers
        .return_transfer("t1", "cell-0-0", source, "no answer in time")
        .await
        .unwrap();
    assert_eq!(late.status, TransferStatus::Accepted);
    assert_eq!(late.reason, None);

    assert!(!accepted.arrived);
    let open = store.transfers.open_transfers("cell-1-0").await.unwrap();
    assert_eq!(
        open.len(),
        1,
        "an accepted player who has not arrived is open"
    );
    let arrived = store.transfers.arrive_transfer("t1", target).await.unwrap();
    assert!(arrived.arrived);
    assert!(store
        .transfers
        .open_transfers("cell-1-0")
        .await
        .unwrap()
        .is_empty());
    let resent = store
        .transfers
        .latest_transfer_from("cell-0-0", "ada", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resent.transfer.id, "t1");
}

pub async fn a_returned_transfer_cannot_be_accepted(db: &Db) {
    let store = db.open().await;
    let (source, target) = owners(&store).await;
    store
        .transfers
        .begin_transfer(&transfer("t2", source))
        .await
        .unwrap();
    let returned = store
        .transfers
        .return_transfer("t2", "cell-1-0", target, "the cell is full")
        .await
        .unwrap();
    assert_eq!(returned.status, TransferStatus::Returned);
    assert_eq!(returned.reason.as_deref(), Some("the cell is full"));
    let late = store.transfers.accept_transfer("t2", target).await.unwrap();
    assert_eq!(late.status, TransferStatus::Returned);
    assert!(matches!(
        store.transfers.arrive_transfer("t2", target).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(store
        .transfers
        .latest_transfer_from("cell-0-0", "ada", 0)
        .await
        .unwrap()
        .is_none());
    assert!(store
        .transfers
        .open_transfers("cell-0-0")
        .await
        .unwrap()
        .is_empty());
}

pub async fn stale_owners_cannot_decide_a_transfer(db: &Db) {
    let store = db.open().await;
    let (source, target) = owners(&store).await;
    store
        .transfers
        .begin_transfer(&transfer("t3", source))
        .await
        .unwrap();
    // Both zones move to new owners.
    let new_source = store.saves.claim("cell-0-0").await.unwrap().epoch;
    store.saves.claim("cell-1-0").await.unwrap();
    assert!(matches!(
        store.transfers.accept_transfer("t3", target).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(matches!(
        store
            .transfers
            .return_transfer("t3", "cell-0-0", source, "timeout")
            .await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(matches!(
        store
            .transfers
            .begin_transfer(&transfer("t4", source))
            .await,
        Err(StoreError::Fenced { .. })
    ));
    // Still pending, so the new source owner finds it open and settles it.
    let open = store.transfers.open_transfers("cell-0-0").await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].status, TransferStatus::Pending);
    let settled = store
        .transfers
        .return_transfer("t3", "cell-0-0", new_source, "the source restarted")
        .await
        .unwrap();
    assert_eq!(settled.status, TransferStatus::Returned);
    assert!(matches!(
        store
            .transfers
            .return_transfer("t3", "elsewhere", 1, "?")
            .await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        store.transfers.accept_transfer("nope", 1).await,
        Err(StoreError::UnknownTransfer(_))
    ));
}

pub async fn bad_transfers_are_refused_and_store_nothing(db: &Db) {
    let store = db.open().await;
    let (source, _) = owners(&store).await;
    let mut same = transfer("t5", source);
    same.target_zone = same.source_zone.clone();
    let mut claims = transfer("t5", source);
    claims.claims = "not json".into();
    let mut big = transfer("t5", source);
    big.state = vec![0; zonekeep_store::MAX_TRANSFER_STATE + 1];
    for bad in [same, claims, big] {
        assert!(matches!(
            store.transfers.begin_transfer(&bad).await,
            Err(StoreError::InvalidArgument(_))
        ));
    }
    store
        .transfers
        .begin_transfer(&transfer("t5", source))
        .await
        .unwrap();
    let mut other = transfer("t5", source);
    other.principal = "bob".into();
    assert!(matches!(
        store.transfers.begin_transfer(&other).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(db.query_i64("SELECT count(*) FROM zone_transfers").await, 1);
}

/// An accept and a return racing on each of many transfers: each ends decided exactly once, and
/// both racers agree on how.
pub async fn racing_accepts_and_returns_agree(db: &Db) {
    let store = Arc::new(db.open().await);
    let (source, target) = owners(&store).await;
    for i in 0..24 {
        let id = format!("race-{i}");
        store
            .transfers
            .begin_transfer(&transfer(&id, source))
            .await
            .unwrap();
        let (a, r) = {
            let (s1, s2) = (Arc::clone(&store), Arc::clone(&store));
            let (id1, id2) = (id.clone(), id.clone());
            let accept =
                tokio::spawn(async move { s1.transfers.accept_transfer(&id1, target).await });
            let give_back = tokio::spawn(async move {
                s2.transfers
                    .return_transfer(&id2, "cell-0-0", source, "timeout")
                    .await
            });
            (
                accept.await.unwrap().unwrap(),
                give_back.await.unwrap().unwrap(),
            )
        };
        assert_eq!(a.status, r.status, "both racers see one outcome for {id}");
        assert_ne!(a.status, TransferStatus::Pending);
    }
    let decided = db
        .query_i64("SELECT count(*) FROM zone_transfers WHERE status IN ('accepted', 'returned')")
        .await;
    assert_eq!(decided, 24);
}

pub async fn old_resolved_transfers_are_pruned(db: &Db) {
    let store = db.open().await;
    let (source, target) = owners(&store).await;
    for id in ["p1", "p2", "p3"] {
        store
            .transfers
            .begin_transfer(&transfer(id, source))
            .await
            .unwrap();
    }
    store.transfers.accept_transfer("p1", target).await.unwrap();
    store
        .transfers
        .return_transfer("p2", "cell-0-0", source, "refused")
        .await
        .unwrap();
    let pruned = store
        .transfers
        .prune_transfers(u64::try_from(db.now_ms().await).unwrap() + 60_000)
        .await
        .unwrap();
    assert_eq!(pruned, 2, "resolved transfers go, the pending one stays");
    assert!(store.transfers.transfer("p3").await.unwrap().is_some());
}

pub async fn a_returned_transfer_is_reclaimed_once_by_the_source(db: &Db) {
    let store = db.open().await;
    let (source, target) = owners(&store).await;
    let ledger = &store.transfers;
    ledger
        .begin_transfer(&transfer("t1", source))
        .await
        .unwrap();
    // A pending or accepted move holds no state to take back, nor to give up.
    assert!(matches!(
        ledger.reclaim_transfer("t1", source).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        ledger.release_reclaim("t1", source).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(
        ledger.unclaimed_return("cell-0-0", "ada", 0).await.unwrap(),
        None
    );
    // The source's previous run crashed: its new owner returns the move.
    let source = store.saves.claim("cell-0-0").await.unwrap().epoch;
    ledger
        .return_transfer("t1", "cell-0-0", source, "the source zone restarted")
        .await
        .unwrap();
    let found = ledger
        .unclaimed_return("cell-0-0", "ada", 0)
        .await
        .unwrap()
        .expect("the returned move is unclaimed");
    assert_eq!(found.transfer.state, vec![1, 2, 3, 4]);
    assert!(!found.arrived);
    // Another principal, another zone, or a window that starts later find nothing.
    assert_eq!(
        ledger.unclaimed_return("cell-0-0", "bob", 0).await.unwrap(),
        None
    );
    assert_eq!(
        ledger.unclaimed_return("cell-1-0", "ada", 0).await.unwrap(),
        None
    );
    assert_eq!(
        ledger
            .unclaimed_return("cell-0-0", "ada", found.created_at_ms + 1)
            .await
            .unwrap(),
        None
    );
    // Only the source's current owner reclaims: the target and a stale epoch are fenced.
    assert!(matches!(
        ledger.reclaim_transfer("t1", source - 1).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(matches!(
        ledger.reclaim_transfer("t1", target).await,
        Err(StoreError::Fenced { .. })
    ));
    let first = ledger.reclaim_transfer("t1", source).await.unwrap();
    assert!(first.by_this_call);
    assert!(first.transfer.arrived);
    assert_eq!(first.transfer.status, TransferStatus::Returned);
    // A second reclaim answers the stored row and says the state went back already.
    let second = ledger.reclaim_transfer("t1", source).await.unwrap();
    assert!(!second.by_this_call);
    assert_eq!(second.transfer, first.transfer);
    assert_eq!(
        ledger.unclaimed_return("cell-0-0", "ada", 0).await.unwrap(),
        None
    );
    // A join that reclaimed the state but was not admitted gives it up again, fenced like the
    // reclaim: the player's next join finds it and reclaims it once more; giving up twice
    // changes nothing.
    assert!(matches!(
        ledger.release_reclaim("t1", target).await,
        Err(StoreError::Fenced { .. })
    ));
    let released = ledger.release_reclaim("t1", source).await.unwrap();
    assert!(!released.arrived);
    assert_eq!(
        ledger.release_reclaim("t1", source).await.unwrap(),
        released
    );
    let found = ledger.unclaimed_return("cell-0-0", "ada", 0).await.unwrap();
    assert_eq!(found.map(|f| f.transfer.id), Some("t1".to_string()));
    let again = ledger.reclaim_transfer("t1", source).await.unwrap();
    assert!(again.by_this_call);
    assert_eq!(again.transfer.transfer.state, vec![1, 2, 3, 4]);
    // A reclaimed return is not open for anyone, and an unknown id is told.
    assert!(ledger.open_transfers("cell-0-0").await.unwrap().is_empty());
    assert!(matches!(
        ledger.reclaim_transfer("nope", source).await,
        Err(StoreError::UnknownTransfer(_))
    ));
    assert!(matches!(
        ledger.release_reclaim("nope", source).await,
        Err(StoreError::UnknownTransfer(_))
    ));
}

pub async fn racing_reclaims_hand_the_state_back_once(db: &Db) {
    let store = db.open().await;
    let (source, _) = owners(&store).await;
    store
        .transfers
        .begin_transfer(&transfer("t1", source))
        .await
        .unwrap();
    store
        .transfers
        .return_transfer("t1", "cell-0-0", source, "refused")
        .await
        .unwrap();
    let ledger = Arc::clone(&store.transfers);
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let ledger = Arc::clone(&ledger);
            tokio::spawn(async move { ledger.reclaim_transfer("t1", source).await })
        })
        .collect();
    let mut winners = 0;
    for r in racers {
        if r.await.unwrap().unwrap().by_this_call {
            winners += 1;
        }
    }
    assert_eq!(winners, 1, "exactly one reclaim hands the state back");
}
