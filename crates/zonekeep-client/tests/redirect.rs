//! The client in a fleet (PROTOCOL.md §5.3.1): Redirects followed with the same Hello, at most
//! three per attempt, only to WebSocket URLs, and every resume through the entry URL, at once
//! after ZONE_MOVED or HOST_FENCED. Several hand-driven hosts on loopback play the fleet.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::future::Future;
use std::time::Duration;

use support::TestHost;
use zonekeep_client::{connect, ClientError, ConnectOptions, Connection, Event, ReconnectPolicy};
use zonekeep_protocol::messages::KickCode;

/// Guards against a hang (a bug), not a performance bound.
async fn guarded<F: Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("test hung");
}

/// Options whose reconnect backoff is `backoff`, and whose Pings never get in the tests' way.
fn options(ticket: &str, backoff: Duration) -> ConnectOptions {
    let mut o = ConnectOptions::new(ticket);
    o.ping_interval = Duration::from_secs(3600);
    o.reconnect = ReconnectPolicy {
        backoff_min: backoff,
        backoff_max: backoff,
        ..ReconnectPolicy::default()
    };
    o
}

async fn next(conn: &mut Connection) -> Event {
    conn.recv().await.expect("event channel ended")
}

fn hop(host: &TestHost, n: u32) -> String {
    format!("{}/zones/z1?hops={n}", host.base)
}

#[tokio::test]
async fn two_redirects_reach_the_owner_with_the_same_hello() {
    guarded(async {
        let mut entry = TestHost::start().await;
        let mut b = TestHost::start().await;
        let mut owner = TestHost::start().await;
        let url = entry.url.clone();
        let client =
            tokio::spawn(
                async move { connect(&url, options("t1", Duration::from_millis(1))).await },
            );

        let mut ha = entry.accept().await;
        assert_eq!(ha.target, "/zones/z1");
        let first = ha.hello().await;
        ha.redirect(&hop(&b, 1)).await;
        let mut hb = b.accept().await;
        assert_eq!(
            hb.target, "/zones/z1?hops=1",
            "the URL exactly as redirected"
        );
        assert_eq!(hb.hello().await, first);
        hb.redirect(&hop(&owner, 2)).await;
        let mut ho = owner.accept().await;
        assert_eq!(ho.target, "/zones/z1?hops=2");
        let last = ho.hello().await;
        assert_eq!(
            last, first,
            "the owner gets the Hello the entry host checked"
        );
        assert_eq!(last.ticket, "t1");
        ho.admit(7, b"tok-1", 100).await;

        let (mut conn, welcome) = client.await.unwrap().unwrap();
        assert_eq!(welcome.player_id, 7);
        // The redirects are invisible but for the counters: the BASELINE is the first event.
        match next(&mut conn).await {
            Event::Delta(p) => assert!(p.baseline),
            other => panic!("expected the BASELINE, got {other:?}"),
        }
        let c = conn.counters();
        assert_eq!(
            (c.redirects, c.fresh_joins, c.resumes, c.reconnects),
            (2, 1, 0, 0)
        );
        ho.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_fourth_redirect_is_not_followed() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client =
            tokio::spawn(
                async move { connect(&url, options("t1", Duration::from_millis(1))).await },
            );
        for n in 1..=4 {
            let mut hc = host.accept().await;
            hc.hello().await;
            hc.redirect(&hop(&host, n)).await;
        }
        match client.await.unwrap() {
            Err(ClientError::TooManyRedirects(followed)) => assert_eq!(followed, 3),
            other => panic!("expected too many redirects, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_redirect_to_another_scheme_is_refused() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client =
            tokio::spawn(
                async move { connect(&url, options("t1", Duration::from_millis(1))).await },
            );
        let mut hc = host.accept().await;
        hc.hello().await;
        let http = host.url.replacen("ws://", "http://", 1);
        hc.redirect(&http).await;
        match client.await.unwrap() {
            Err(ClientError::RedirectScheme(u)) => assert_eq!(u, http),
            other => panic!("expected a refused scheme, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn zone_moved_resumes_at_once_through_the_entry_url_with_the_token() {
    guarded(async {
        let mut entry = TestHost::start().await;
        let mut first_owner = TestHost::start().await;
        let mut new_owner = TestHost::start().await;
        let url = entry.url.clone();
        // Backoff of an hour: only an attempt made at once finishes before the guard.
        let client =
            tokio::spawn(
                async move { connect(&url, options("t1", Duration::from_secs(3600))).await },
            );
        let mut ha = entry.accept().await;
        ha.hello().await;
        ha.redirect(&hop(&first_owner, 1)).await;
        let mut h1 = first_owner.accept().await;
        h1.hello().await;
        h1.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(matches!(next(&mut conn).await, Event::Delta(_)));
        assert_eq!(conn.send_input(b"a").unwrap(), 1);
        assert_eq!(h1.input(100).await.seq, 1);
        // The zone consumed input 1 and said so; input 2 it never acknowledges (a zone frozen
        // for its handover consumes nothing more).
        h1.delta(support::ack_only(101, 1), support::KNOWN).await;
        assert!(matches!(next(&mut conn).await, Event::Delta(p) if p.ack == 1));
        assert_eq!(conn.send_input(b"b").unwrap(), 2);
        assert_eq!(h1.input(101).await.seq, 2);

        h1.kick(KickCode::ZONE_MOVED, "zone moved").await;
        h1.drain();
        match next(&mut conn).await {
            Event::Kick(k) => assert_eq!(k.code, KickCode::ZONE_MOVED),
            other => panic!("expected the Kick, got {other:?}"),
        }

        // Back at the entry, not at the last owner's URL: the owner changed.
        let mut ha = entry.accept().await;
        assert_eq!(ha.target, "/zones/z1");
        let resume = ha.hello().await;
        assert_eq!(resume.reconnect_token, b"tok-1");
        assert_eq!(resume.ticket, "t1", "the same ticket resumes");
        ha.redirect(&hop(&new_owner, 1)).await;
        let mut h2 = new_owner.accept().await;
        assert_eq!(h2.hello().await, resume);
        h2.admit(7, b"tok-2", 200).await;
        // The move landed on its first attempt: the application hears the Kick and the resume,
        // never a disconnect.
        match next(&mut conn).await {
            Event::Welcome { welcome, resumed } => {
                assert!(resumed);
                assert_eq!(welcome.player_id, 7);
            }
            other => panic!("expected Welcome, got {other:?}"),
        }
        // The unacknowledged input goes again, first and with its number (PROTOCOL.md §4.2); the
        // acknowledged one does not.
        let again = h2.input(200).await;
        assert_eq!((again.seq, again.payload.as_slice()), (2, &b"b"[..]));
        assert!(matches!(next(&mut conn).await, Event::Delta(p) if p.baseline));
        assert_eq!(conn.send_input(b"c").unwrap(), 3, "the same player goes on");
        assert_eq!(h2.input(200).await.seq, 3);
        let c = conn.counters();
        assert_eq!(
            (c.redirects, c.resumes, c.fresh_joins, c.reconnects),
            (2, 1, 1, 1)
        );
        h2.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn host_fenced_with_a_token_the_owner_does_not_know_joins_fresh() {
    guarded(async {
        let mut entry = TestHost::start().await;
        let mut owner = TestHost::start().await;
        let url = entry.url.clone();
        let opts = options("t1", Duration::from_millis(1))
            .with_fresh_ticket(|| async { Ok("fresh".to_owned()) });
        let client = tokio::spawn(async move { connect(&url, opts).await });
        let mut ha = entry.accept().await;
        ha.hello().await;
        ha.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(matches!(next(&mut conn).await, Event::Delta(_)));

        ha.kick(KickCode::HOST_FENCED, "lease lost").await;
        ha.drain();
        assert!(matches!(next(&mut conn).await, Event::Kick(k) if k.code == KickCode::HOST_FENCED));

        // The resume is redirected to the new owner, which lost the token with the old host.
        let mut ha = entry.accept().await;
        assert_eq!(ha.hello().await.reconnect_token, b"tok-1");
        ha.redirect(&hop(&owner, 1)).await;
        let mut ho = owner.accept().await;
        ho.hello().await;
        ho.kick(KickCode::RECONNECT_REFUSED, "unknown token").await;
        drop(ho);
        // The move did not land on its first attempt: now it is a disconnect to the application.
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        // So the client joins afresh, again through the entry.
        let mut ha = entry.accept().await;
        let fresh = ha.hello().await;
        assert!(fresh.reconnect_token.is_empty());
        assert_eq!(fresh.ticket, "fresh");
        ha.redirect(&hop(&owner, 1)).await;
        let mut ho = owner.accept().await;
        assert_eq!(ho.hello().await, fresh);
        ho.admit(8, b"tok-8", 300).await;
        assert!(matches!(
            next(&mut conn).await,
            Event::Welcome { resumed: false, .. }
        ));
        let c = conn.counters();
        assert_eq!(
            (c.redirects, c.resumes, c.fresh_joins, c.reconnects),
            (2, 0, 2, 1)
        );
        ho.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_resume_sends_only_the_newest_inputs_queued_during_the_outage() {
    guarded(async {
        let mut entry = TestHost::start().await;
        let mut owner = TestHost::start().await;
        let mut heir = TestHost::start().await;
        let url = entry.url.clone();
        let client =
            tokio::spawn(
                async move { connect(&url, options("t1", Duration::from_secs(3600))).await },
            );
        let mut ha = entry.accept().await;
        ha.hello().await;
        ha.redirect(&hop(&owner, 1)).await;
        let mut h1 = owner.accept().await;
        h1.hello().await;
        h1.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(matches!(next(&mut conn).await, Event::Delta(_)));
        h1.kick(KickCode::ZONE_MOVED, "zone moved").await;
        h1.drain();
        assert!(matches!(next(&mut conn).await, Event::Kick(_)));

        // While the new owner is not there yet, the game keeps producing inputs.
        let mut ha = entry.accept().await;
        ha.hello().await;
        for expected in 1..=40u32 {
            assert_eq!(conn.send_input(b"x").unwrap(), expected);
        }
        ha.redirect(&hop(&heir, 1)).await;
        let mut h2 = heir.accept().await;
        h2.hello().await;
        h2.admit(7, b"tok-2", 200).await;
        assert!(matches!(
            next(&mut conn).await,
            Event::Welcome { resumed: true, .. }
        ));
        // The backlog reaches the host as its newest 16 inputs, not as one burst of 40.
        let first = h2.input(200).await.seq;
        assert_eq!(first, 25, "inputs 1..=24 were dropped as stale");
        for seq in 26..=40 {
            assert_eq!(h2.input(200).await.seq, seq);
        }
        assert_eq!(conn.counters().inputs_discarded, 24);
        h2.drain();
        conn.close().await;
    })
    .await;
}
