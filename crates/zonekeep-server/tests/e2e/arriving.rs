//! A join on its way to a running zone keeps that zone loaded: an empty zone that reaches its
//! dormant timeout while a player's join waits on the store (here, for its character's lease) is
//! unloaded only after the join reached it, so the player is let in rather than refused with
//! "zone is not running".

use serde_json::json;

use crate::character_moves::{walkers, Player};
use crate::common::*;
use crate::lasting::{pg, Backend};
use crate::tally::admin_get;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_waiting_on_the_store_keeps_its_empty_zone_from_going_dormant() {
    let test = "a_join_waiting_on_the_store_keeps_its_empty_zone_from_going_dormant";
    let Some(backend) = Backend::postgres(test).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (server, _p) = walkers(&backend, dir.path()).await;
    let body = json!({"id": "walk-a", "kind": "walk"});
    let (status, body) = http(&server, "POST", "/admin/zones", Some(ADMIN), Some(body)).await;
    assert_eq!(status, 201, "{body}");

    // Ann's character row, locked by another transaction: taking her character's lease waits.
    let lock = pg(&backend.store()).await;
    lock.batch_execute(
        "INSERT INTO characters (principal, data, version, holder_zone, holder_epoch, updated_at_ms)
             VALUES ('ann', ''::bytea, 0, NULL, NULL, 0)",
    )
    .await
    .unwrap();
    lock.batch_execute(
        "BEGIN; SELECT principal FROM characters WHERE principal = 'ann' FOR UPDATE",
    )
    .await
    .unwrap();
    let locker: i32 = lock
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let watch = pg(&backend.store()).await;
    let meanwhile = async {
        eventually("ann's join to wait on her character's row", || async {
            let waiting: i64 = watch
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                    &[&locker],
                )
                .await
                .unwrap()
                .get(0);
            waiting > 0
        })
        .await;
        // Meanwhile the zone, empty, reaches its dormant timeout; it stays loaded for the join.
        eventually("the empty zone to go dormant", || async {
            let (_, d) = admin_get(&server, "/admin/zones/walk-a").await;
            d["tier"] == "dormant" || d["running"] == false
        })
        .await;
        let (_, d) = admin_get(&server, "/admin/zones/walk-a").await;
        assert_eq!(d["running"], true, "unloaded with a join on its way: {d}");
        lock.batch_execute("COMMIT").await.unwrap();
    };
    let (ann, ()) = tokio::join!(Player::join(&server, "walk-a", "ann"), meanwhile);
    assert_eq!(ann.gold(), 0, "ann is let in, told her gold");
    let (_, d) = admin_get(&server, "/admin/zones/walk-a").await;
    assert_eq!(d["tier"], "hot", "{d}");

    server.stop().await;
    backend.cleanup().await;
}
