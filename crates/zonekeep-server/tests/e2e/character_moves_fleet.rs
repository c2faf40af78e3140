//! Moves that carry characters between two hosts of a fleet (PostgreSQL for the store and the
//! directory, NATS for the hosts' notes), both in this process: a character changed on one host
//! arrives in the other host's zone with the change and comes back with the changes made there,
//! the store's lease naming the zone the player is in after each move; and a move the other
//! host's zone refuses leaves the character with the source, unchanged.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use zonekeep_core::ZoneConfig;
use zonekeep_server::persist::Persistence;
use zonekeep_server::{Host, ServerConfig};

use crate::character_moves::{held_in, walker_kinds, walkers_store, Player};
use crate::common::*;
use crate::lasting::{service, Backend};

/// A walkers' host of the fleet named `id` on `backend`, its own files in `dir`, its notes on
/// `nats`.
async fn fleet_host(
    id: &str,
    backend: &Backend,
    dir: &Path,
    nats: &str,
) -> (TestServer, Arc<Persistence>) {
    let p = Persistence::open(walkers_store(backend, dir))
        .await
        .unwrap();
    let tally = ZoneConfig {
        idle_after: Duration::from_millis(100),
        dormant_after: Duration::from_millis(300),
        ..ZoneConfig::default()
    };
    let host = Host::builder().config(ServerConfig {
        data_dir: dir.to_path_buf(),
        host_id: Some(id.to_owned()),
        bus: Some(nats.to_owned()),
        ..base_config()
    });
    let host = walker_kinds(host, tally)
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    (TestServer::serve(host).await, p)
}

/// Creates zone `id` of kind `walk` on the host named `host` (asking `server`).
async fn walk_zone_on(server: &TestServer, host: &str, id: &str) {
    let body = json!({"id": id, "kind": "walk", "host": host});
    let (status, body) = http(server, "POST", "/admin/zones", Some(ADMIN), Some(body)).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_moves_between_hosts_and_back() {
    let test = "a_character_moves_between_hosts_and_back";
    let Some(nats) = service::service_url("ZONEKEEP_TEST_NATS", test) else {
        return;
    };
    let Some(backend) = Backend::postgres(test).await else {
        return;
    };
    let (dir1, dir2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (h1, p1) = fleet_host("h1", &backend, dir1.path(), &nats).await;
    let (h2, p2) = fleet_host("h2", &backend, dir2.path(), &nats).await;
    // walk-a runs on the first host, walk-b and shut-b on the second; a player in each keeps it
    // there.
    walk_zone_on(&h1, "h1", "walk-a").await;
    walk_zone_on(&h2, "h2", "walk-b").await;
    walk_zone_on(&h2, "h2", "shut-b").await;
    let _kai = Player::join(&h1, "walk-a", "kai").await;
    let _bea = Player::join(&h2, "walk-b", "bea").await;
    let _sue = Player::join(&h2, "shut-b", "sue").await;
    let mut version = 0;

    // Ann earns 2 gold on the first host, has them written, and earns a third.
    let mut ann = Player::join(&h1, "walk-a", "ann").await;
    ann.earn(2).await;
    ann.input(b"c").await;
    ann.earn(1).await;

    // To the second host's zone, with all three.
    let mut ann = ann.go("walk-b", None).await;
    assert!(ann.url.contains(&h2.addr.to_string()), "{}", ann.url);
    assert_eq!(ann.gold(), 3, "the change not yet written came along");
    assert_eq!(held_in(&p1, "ann", Some("walk-b"), &mut version).await, 3);

    // Changed there, and back to the first host, which sees the change.
    ann.earn(2).await;
    let mut ann = ann.go("walk-a", None).await;
    assert!(ann.url.contains(&h1.addr.to_string()), "{}", ann.url);
    assert_eq!(ann.gold(), 5, "the other host's change came back");
    assert_eq!(held_in(&p2, "ann", Some("walk-a"), &mut version).await, 5);

    // A move the other host's zone refuses: ann stays, with her character as it was.
    let why = ann.go_and_come_back("shut-b", None).await;
    assert!(why.contains("takes no one in"), "{why}");
    assert_eq!(ann.gold(), 5);
    assert_eq!(held_in(&p1, "ann", Some("walk-a"), &mut version).await, 5);

    h1.stop().await;
    h2.stop().await;
    drop((p1, p2));
    backend.cleanup().await;
}
