//! WebTransport through any host of a fleet: a client that enters through a host that does not own
//! its zone is redirected, asks the owner where its WebTransport sessions are, and plays over
//! WebTransport there (PROTOCOL.md §1.1, §5.3.1). Two real hosts in dev mode (WebTransport on,
//! with development certificates) on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Server, StoreSpec, ADMIN_TOKEN};
use zonekeep_client::{connect, ConnectOptions, Event, Transport};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webtransport_client_entering_through_another_host_plays_over_webtransport_at_the_owner()
{
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_webtransport_client_entering_through_another_host_plays_over_webtransport_at_the_owner",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--dev", "--admin-token", ADMIN_TOKEN];
    let entry = Server::start(&store, &args, &dir.path().join("h1.log")).await;
    let owner = Server::start(&store, &args, &dir.path().join("h2.log")).await;
    let zone = "wt-fleet-1";
    let owner_id = owner.host_id().await;
    let created = entry
        .post_admin(
            "/admin/zones",
            &json!({"id": zone, "kind": "ledger-test", "host": owner_id}),
        )
        .await;
    assert_eq!(created["host"], owner_id.as_str(), "{created}");

    let mut opts = ConnectOptions::new(support::ticket(&format!("wt-{run}"), zone));
    opts.transport = Transport::WebTransport;
    let entry_url = format!("ws://{}/zones/{zone}", entry.addr);
    let (mut conn, welcome) = connect(&entry_url, opts).await.unwrap();
    assert_eq!(conn.transport(), Transport::WebTransport);
    assert_eq!(
        conn.counters().redirects,
        1,
        "redirected once, to the owner"
    );
    assert!(
        welcome.version >= 6,
        "a WebTransport session: {}",
        welcome.version
    );
    // Play: inputs go out in datagrams and the owner acknowledges them in its States.
    for i in 0..20u64 {
        conn.send_input(&i.to_le_bytes()).unwrap();
    }
    let acked = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match conn.recv().await {
                Some(Event::Delta(d)) if d.ack >= 20 => return d.ack,
                Some(Event::Closed(r)) => panic!("closed: {r:?}"),
                None => panic!("the connection ended"),
                _ => {}
            }
        }
    })
    .await
    .expect("inputs acknowledged over WebTransport at the owner");
    assert!(acked >= 20);
    assert_eq!(conn.transport(), Transport::WebTransport);
    conn.close().await;
    entry.terminate().await;
    owner.terminate().await;
}
