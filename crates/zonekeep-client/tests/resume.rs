//! Resuming from the mirror (PROTOCOL.md §4.1.1) against a hand-driven host: a version 4 resume
//! says what the mirror holds and keeps it for an ordinary Delta, a BASELINE still replaces it, a
//! version 3 session never sends it, and a host that refuses it as a protocol error gets the
//! Hello again without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{ack_only, guarded, welcome, HostConn, TestHost, KNOWN};
use zonekeep_client::{connect, ConnectOptions, Connection, Event, Patch};
use zonekeep_protocol::delta::{Delta, PosForm, Update};
use zonekeep_protocol::known_set_hash;
use zonekeep_protocol::messages::{KickCode, KnownSetCheck, ServerMessage};
use zonekeep_protocol::ResumeFrom;

fn options(versions: Vec<u32>) -> ConnectOptions {
    let mut o = support::options("t1");
    o.versions = versions;
    o
}

async fn next(conn: &mut Connection) -> Event {
    conn.recv().await.expect("event channel ended")
}

async fn next_delta(conn: &mut Connection) -> Patch {
    loop {
        match next(conn).await {
            Event::Delta(p) => return p,
            Event::Welcome { .. } | Event::Disconnected { .. } => {}
            other => panic!("expected a Delta, got {other:?}"),
        }
    }
}

/// Joins offering versions 3 to 5 (Welcome of `version`, the support BASELINE at tick 100, an ack
/// at 102) and drops the transport; returns the client and the host's side of the resuming
/// connection. The host answers the resume with version 5, the support Welcome's.
async fn joined_then_dropped(host: &mut TestHost, version: u32) -> (Connection, HostConn) {
    joined_offering_then_dropped(host, vec![3, 4, 5], version).await
}

/// [`joined_then_dropped`], offering `offered`.
async fn joined_offering_then_dropped(
    host: &mut TestHost,
    offered: Vec<u32>,
    version: u32,
) -> (Connection, HostConn) {
    let url = host.url.clone();
    let client = tokio::spawn(async move { connect(&url, options(offered)).await });
    let mut hc = host.accept().await;
    hc.hello().await;
    let mut w = welcome(7, b"tok-1", 100);
    w.version = version;
    hc.send(&ServerMessage::Welcome(w), None).await;
    hc.delta(support::baseline(100), &[]).await;
    let (mut conn, _) = client.await.unwrap().unwrap();
    next_delta(&mut conn).await;
    hc.delta(ack_only(102, 0), KNOWN).await;
    assert_eq!(next_delta(&mut conn).await.tick, 102);
    conn.drop_transport().await.unwrap();
    drop(hc);
    assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
    let hc = host.accept().await;
    (conn, hc)
}

/// Entity 9 (index 1 of [`KNOWN`]) moved by (4, 0): only a client holding it can apply this.
fn move_nine(tick: u64) -> Delta {
    Delta {
        updates: vec![Update {
            index: 1,
            id: 9,
            pos: Some(PosForm::Tiny { dx: 4, dy: 0 }),
            mask: 0,
            fields: vec![],
        }],
        ..ack_only(tick, 0)
    }
}

#[tokio::test]
async fn a_version_4_resume_sends_the_mirror_and_keeps_it_for_an_ordinary_delta() {
    guarded(async {
        let mut host = TestHost::start().await;
        let (mut conn, mut hc) = joined_then_dropped(&mut host, 4).await;
        let hello = hc.hello().await;
        assert_eq!(hello.reconnect_token, b"tok-1");
        assert_eq!(
            hello.resume_from,
            Some(ResumeFrom {
                tick: 102,
                count: 2,
                hash: known_set_hash([5, 9]),
            }),
            "the tick of the last Delta applied and the known set's count and hash"
        );
        // The host continues from it: Welcome, then an ordinary Delta.
        hc.welcome(7, b"tok-2", 200).await;
        hc.delta(move_nine(202), KNOWN).await;
        let first = next_delta(&mut conn).await;
        assert!(!first.baseline);
        // Resolved against the kept mirror: entity 9 was at qx -300 (x = -3.0).
        assert_eq!(first.updates.len(), 1);
        let (x, _) = first.updates[0].pos.unwrap();
        assert!((x - -2.96).abs() < 1e-4, "{x}");
        let check = KnownSetCheck {
            tick: 202,
            count: 2,
            hash: known_set_hash([5, 9]),
        };
        hc.send(&ServerMessage::KnownSetCheck(check), None).await;
        hc.delta(ack_only(204, 0), KNOWN).await;
        assert_eq!(next_delta(&mut conn).await.tick, 204);
        let c = conn.counters();
        assert_eq!((c.resumes, c.resyncs, c.deltas_skipped), (1, 0, 0));

        // Dropped again, the host no longer holds that state: a BASELINE replaces the mirror.
        conn.drop_transport().await.unwrap();
        drop(hc);
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(hello.resume_from.map(|r| r.tick), Some(204));
        hc.admit(7, b"tok-3", 300).await;
        let base = next_delta(&mut conn).await;
        assert!(base.baseline && base.tick == 300);
        hc.delta(move_nine(302), KNOWN).await;
        assert!(!next_delta(&mut conn).await.baseline);
        assert_eq!(conn.counters().resyncs, 0);
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_version_5_client_offering_only_5_sends_resume_from_too() {
    guarded(async {
        let mut host = TestHost::start().await;
        let (mut conn, mut hc) = joined_offering_then_dropped(&mut host, vec![5], 5).await;
        let hello = hc.hello().await;
        assert_eq!(hello.versions, vec![5]);
        assert_eq!(hello.resume_from.map(|r| (r.tick, r.count)), Some((102, 2)));
        hc.welcome(7, b"tok-2", 200).await;
        hc.delta(move_nine(202), KNOWN).await;
        assert!(
            !next_delta(&mut conn).await.baseline,
            "continued from the mirror"
        );
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_version_3_session_never_sends_resume_from() {
    guarded(async {
        let mut host = TestHost::start().await;
        let (mut conn, mut hc) = joined_then_dropped(&mut host, 3).await;
        let hello = hc.hello().await;
        assert_eq!(hello.reconnect_token, b"tok-1");
        assert_eq!(hello.resume_from, None, "a version 3 host would refuse it");
        hc.admit(7, b"tok-2", 200).await;
        assert!(next_delta(&mut conn).await.baseline);
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_host_refusing_resume_from_as_a_protocol_error_gets_the_hello_without_it() {
    guarded(async {
        let mut host = TestHost::start().await;
        let (mut conn, mut hc) = joined_then_dropped(&mut host, 4).await;
        assert!(hc.hello().await.resume_from.is_some());
        // A host of a fleet part way through an upgrade: trailing bytes after the Hello.
        hc.kick(
            KickCode::PROTOCOL_ERROR,
            "undecodable Hello: 8 trailing bytes",
        )
        .await;
        drop(hc);
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(hello.reconnect_token, b"tok-1", "still resuming");
        assert_eq!(hello.resume_from, None);
        hc.admit(7, b"tok-2", 200).await;
        assert!(next_delta(&mut conn).await.baseline);
        assert_eq!(conn.counters().resumes, 1);
        hc.drain();
        conn.close().await;
    })
    .await;
}
