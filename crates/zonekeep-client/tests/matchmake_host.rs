//! A native game finding a match on a real host: two players run `matchmake_and_connect` at once
//! against a host with a duel queue; the host measures their round trips, matches them, places
//! the zone, and each is welcomed into the same zone with its own ticket. A game below the host's
//! version floor learns it must update, and that searching again will not help.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use zonekeep_client::{matchmake_and_connect, ConnectOptions, MatchOptions};
use zonekeep_core::ZoneConfig;
use zonekeep_server::config::Secret;
use zonekeep_server::examples::Dots;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

const SECRET: &str = "matchmake-host-test-secret-0123456789abcdef";

/// A ticket for the matchmaker, signed as the game's back end would.
fn match_ticket(sub: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    zonekeep_server::ticket::sign_parts(
        SECRET.as_bytes(),
        &json!({"alg": "HS256", "kid": "default"}),
        &json!({"sub": sub, "zone": "@match", "name": sub, "exp": now + 60, "jti": format!("mm-{sub}")}),
    )
}

/// Serves a host with a duel queue of two `dots` players until the returned sender is used.
async fn host(
    dir: &std::path::Path,
    min_content_version: Option<&str>,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let p = Persistence::open(PersistConfig {
        data_dir: dir.to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    let host = Host::builder()
        .config(ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            sim_threads: 1,
            data_dir: dir.to_path_buf(),
            ticket_secret: Some(Secret::new(SECRET)),
            match_queues: vec!["duel:size=2:kind=dots".into()],
            min_content_version: min_content_version.map(str::to_owned),
            content_version: min_content_version.unwrap_or_default().to_owned(),
            ..ServerConfig::default()
        })
        .zone_with::<Dots>("dots", ZoneConfig::default(), serde_json::Value::Null)
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        host.serve(listener, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });
    (addr, stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_native_games_are_matched_and_welcomed_into_one_zone() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, task) = host(dir.path(), None).await;
    let base = format!("http://{addr}");
    let play = |who: &'static str| {
        let base = base.clone();
        async move {
            matchmake_and_connect(
                MatchOptions::new(base, match_ticket(who), "duel"),
                ConnectOptions::new(""),
            )
            .await
        }
    };
    let (a, b) = tokio::join!(play("ada"), play("bo"));
    let (ma, conn_a, wa) = a.unwrap();
    let (mb, conn_b, wb) = b.unwrap();
    assert_eq!(
        ma.assignment.zone, mb.assignment.zone,
        "one match, one zone"
    );
    assert_eq!(
        ma.assignment.url,
        format!("ws://{addr}/zones/{}", ma.assignment.zone)
    );
    assert_ne!(wa.player_id, wb.player_id, "two players in it");
    assert_eq!(
        ma.search.rtt_ms.len(),
        1,
        "the host measured the one region"
    );
    drop((conn_a, conn_b));
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_game_below_the_version_floor_is_told_to_update() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, task) = host(dir.path(), Some("5.0")).await;
    let err = matchmake_and_connect(
        MatchOptions::new(format!("http://{addr}"), match_ticket("old"), "duel")
            .with_content_version("4.2"),
        ConnectOptions::new(""),
    )
    .await
    .expect_err("outdated");
    assert!(err.is_outdated(), "{err}");
    assert!(!err.retryable());
    let _ = stop.send(());
    task.await.unwrap();
}
