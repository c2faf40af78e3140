//! A zone recorded on a real `zonekeep serve` host through the admin API, played by SDK clients
//! (one of which loses its transport and resumes), stopped, downloaded and replayed with the
//! built `zonekeep replay`: the replay matches, and a copy with one input's payload byte flipped
//! is reported at the tick that consumed that input. Also the admin API's answers around it:
//! status, stop reason, an unknown zone, a second recording, a size cap past the maximum.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use support::replay_cli::{assert_changed_input_diverges, replay};
use support::{Server, StoreSpec, ADMIN_TOKEN};
use zonekeep_client::{connect, ConnectOptions, Connection, Event};
use zonekeep_core::recording::{Origin, Outcome, Record, RecordReader, StopReason};
use zonekeep_core::PlayerId;

/// The arena's direction bits (examples/arena: `DIR_LEFT`, `DIR_RIGHT`).
const LEFT: u8 = 4;
const RIGHT: u8 = 8;
/// Inputs each player sends.
const INPUTS: usize = 20;
/// Players in the zone.
const PLAYERS: usize = 3;
/// Largest size cap the admin API accepts (256 MiB).
const MAX_RECORDING_BYTES: u64 = 256 << 20;

/// A signed ticket for the arena zone `zone`.
fn ticket(sub: &str, zone: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    support::sign(&json!({
        "sub": sub, "zone": zone, "exp": exp, "kind": "arena",
        "jti": format!("rec-{sub}-{}", support::unique_run()),
    }))
}

/// The next event of `conn` (bounded: a host that stops answering fails the test).
async fn next_event(conn: &mut Connection, what: &str) -> Event {
    match tokio::time::timeout(Duration::from_secs(20), conn.recv()).await {
        Ok(Some(Event::Closed(why))) => panic!("closed while waiting for {what}: {why:?}"),
        Ok(Some(e)) => e,
        Ok(None) => panic!("no more events while waiting for {what}"),
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// What one player did.
#[derive(Debug)]
struct Played {
    player: u32,
    resumed: bool,
}

/// Joins the arena `zone` as `principal` and sends `INPUTS` inputs alternating right and left,
/// each only once the previous one is acknowledged: every input reaches an empty buffer, so the
/// tick after its arrival consumes it. With `drop_after`, the transport drops after that many
/// inputs and the SDK resumes with its reconnect token before the next one. Closes at the end.
async fn play(addr: String, zone: String, principal: String, drop_after: Option<usize>) -> Played {
    let url = format!("ws://{addr}/zones/{zone}");
    let (mut conn, welcome) = connect(&url, ConnectOptions::new(ticket(&principal, &zone)))
        .await
        .unwrap();
    let mut resumed = false;
    for i in 0..INPUTS {
        if drop_after == Some(i) {
            conn.drop_transport().await.unwrap();
            loop {
                match next_event(&mut conn, "the resumed Welcome").await {
                    Event::Welcome {
                        welcome: w,
                        resumed: true,
                    } => {
                        assert_eq!(w.player_id, welcome.player_id, "the same player resumes");
                        resumed = true;
                        break;
                    }
                    Event::Welcome { resumed: false, .. } => panic!("joined afresh, not resumed"),
                    _ => {}
                }
            }
        }
        let dir = if i % 2 == 0 { RIGHT } else { LEFT };
        let seq = conn.send_input(&[dir]).unwrap();
        loop {
            match next_event(&mut conn, "the input's ack").await {
                Event::Delta(p) if p.ack >= seq => break,
                Event::InputRefused(r) => panic!("input refused: {r:?}"),
                Event::Kick(k) => panic!("kicked: {k:?}"),
                _ => {}
            }
        }
    }
    conn.close().await;
    Played {
        player: welcome.player_id,
        resumed,
    }
}

/// A host on its own SQLite store under `dir`, with the admin API on.
async fn start_host(dir: &std::path::Path) -> Server {
    let store = StoreSpec::Sqlite(dir.join("data"));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    Server::start(
        &store,
        &["--admin-token", ADMIN_TOKEN],
        &dir.join("host.log"),
    )
    .await
}

/// The `{"error": {"code", "message"}}` of an admin answer.
fn error_of(v: &Value) -> (&str, &str) {
    (
        v["error"]["code"].as_str().unwrap_or_default(),
        v["error"]["message"].as_str().unwrap_or_default(),
    )
}

/// What a recording holds, decoded.
#[derive(Debug, Default)]
struct Contents {
    ticks: u64,
    joins: usize,
    inputs: BTreeMap<u32, usize>,
    dropped: Vec<u32>,
    rejoined: Vec<(u32, Outcome)>,
    end: Option<StopReason>,
}

fn contents(bytes: &[u8]) -> Contents {
    let (_, mut reader) = RecordReader::open(bytes).unwrap();
    let mut c = Contents::default();
    let mut last_rejoin = None;
    while let Some(r) = reader.next_record().unwrap() {
        match r {
            Record::Tick { .. } => c.ticks += 1,
            Record::Join { .. } | Record::JoinCharacter { .. } => c.joins += 1,
            Record::Input { player, .. } => *c.inputs.entry(player.0).or_default() += 1,
            Record::Drop(p) => c.dropped.push(p.0),
            Record::Rejoin(p) | Record::RejoinFrom { player: p, .. } => last_rejoin = Some(p.0),
            Record::Outcome(o) => {
                if let Some(p) = last_rejoin.take() {
                    c.rejoined.push((p, o));
                }
            }
            Record::End(why) => c.end = Some(why),
            _ => {}
        }
    }
    c
}

/// The byte offset of the payload byte of `player`'s input `seq` and the last tick run before it.
fn input_of(bytes: &[u8], player: u32, seq: u32) -> (usize, u64) {
    let (header, mut reader) = RecordReader::open(bytes).unwrap();
    let mut tick = header.start_tick;
    loop {
        match reader.next_record().unwrap().expect("the player's input") {
            Record::Tick { tick: t, .. } => tick = t,
            Record::Input {
                player: p,
                seq: s,
                payload,
                ..
            } if p == PlayerId(player) && s == seq => {
                assert_eq!(payload, [RIGHT], "input {seq} moves right");
                // The payload is the record body's last byte.
                return (reader.offset() - 1, tick);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_played_zone_recorded_through_the_admin_api_replays_to_a_match() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_host(dir.path()).await;
    let zone = "rec-arena";
    let recording = format!("/admin/zones/{zone}/recording");

    // A size cap past the maximum is refused, and the zone is not created with it.
    let (status, body) = server
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": zone, "kind": "arena", "record": {"max_bytes": MAX_RECORDING_BYTES + 1}})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(error_of(&body).0, "bad_request", "{body}");
    assert!(error_of(&body).1.contains("max_bytes must be"), "{body}");
    assert_eq!(server.admin_request("GET", &recording, None).await.0, 404);

    let (status, body) = server
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": zone, "kind": "arena", "record": {}})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, running) = server.admin_request("GET", &recording, None).await;
    assert_eq!(status, 200, "{running}");
    assert_eq!(running["state"], "running", "{running}");
    assert_eq!(running["reason"], Value::Null, "{running}");
    assert_eq!(running["max_bytes"], 64 << 20, "the default cap: {running}");

    // A second recording of the zone, a cap past the maximum, an unknown zone: all refused.
    let (status, body) = server
        .admin_request("POST", &recording, Some(&json!({})))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        error_of(&body).1.contains("being recorded already"),
        "{body}"
    );
    let (status, body) = server
        .admin_request(
            "POST",
            &recording,
            Some(&json!({"max_bytes": MAX_RECORDING_BYTES + 1})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_of(&body).1.contains("max_bytes must be"), "{body}");
    for (method, path) in [
        ("POST", "/admin/zones/no-such-zone/recording"),
        ("GET", "/admin/zones/no-such-zone/recording"),
        ("POST", "/admin/zones/no-such-zone/recording/stop"),
        ("GET", "/admin/zones/no-such-zone/recording/file"),
    ] {
        let (status, body) = server
            .admin_request(method, path, (method == "POST").then_some(&json!({})))
            .await;
        assert_eq!(status, 404, "{method} {path}: {body}");
        assert_eq!(error_of(&body).0, "not_found", "{method} {path}: {body}");
        assert!(
            error_of(&body).1.contains("\"no-such-zone\""),
            "{method} {path}: {body}"
        );
    }
    // Nothing to download while it runs.
    let (status, body) = server
        .admin_request("GET", &format!("{recording}/file"), None)
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(error_of(&body).0, "running", "{body}");

    // Three players; the second loses its transport halfway and resumes.
    let players: Vec<_> = (0..PLAYERS)
        .map(|i| {
            tokio::spawn(play(
                server.addr.clone(),
                zone.to_owned(),
                format!("rec-player-{i}"),
                (i == 1).then_some(INPUTS / 2),
            ))
        })
        .collect();
    let mut played = Vec::new();
    for p in players {
        played.push(p.await.unwrap());
    }
    assert!(played[1].resumed, "{played:?}");

    let (status, before) = server.admin_request("GET", &recording, None).await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["state"], "running", "{before}");
    assert!(before["ticks"].as_u64().unwrap() > 0, "{before}");
    assert!(before["bytes"].as_u64().unwrap() > 0, "{before}");

    let (status, stopped) = server
        .admin_request("POST", &format!("{recording}/stop"), None)
        .await;
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert_eq!(stopped["reason"], "requested", "{stopped}");
    assert_eq!(stopped["detail"], "stopped on request", "{stopped}");
    let ticks = stopped["ticks"].as_u64().unwrap();
    let bytes = stopped["bytes"].as_u64().unwrap();
    assert!(ticks >= before["ticks"].as_u64().unwrap(), "{stopped}");
    assert!(bytes > before["bytes"].as_u64().unwrap(), "{stopped}");
    // The status route says the same once stopped.
    let (_, status_after) = server.admin_request("GET", &recording, None).await;
    assert_eq!(status_after["reason"], "requested", "{status_after}");
    assert_eq!(status_after["ticks"], ticks, "{status_after}");

    let (status, file) = server
        .admin_bytes("GET", &format!("{recording}/file"), None)
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&file));
    assert_eq!(
        file.len() as u64,
        bytes,
        "the file is what the status counted"
    );

    // The file holds the whole session: joins, every input, the drop and the resume, the closes.
    let (header, _) = RecordReader::open(&file).unwrap();
    assert_eq!(header.zone_id, zone);
    assert_eq!(header.kind, "arena");
    assert_eq!(header.origin, Origin::Created);
    let c = contents(&file);
    assert_eq!(c.ticks, ticks, "{c:?}");
    assert_eq!(c.joins, PLAYERS, "{c:?}");
    for (i, p) in played.iter().enumerate() {
        assert_eq!(c.inputs.get(&p.player), Some(&INPUTS), "{c:?}");
        // A closed connection is a drop too (the player stays resumable for the grace).
        let drops = c.dropped.iter().filter(|d| **d == p.player).count();
        assert_eq!(drops, if i == 1 { 2 } else { 1 }, "{c:?}");
    }
    // The client resumes from its mirror (protocol version 4); whether the host still held that
    // state depends on the frames in flight when the socket closed: either is a resume.
    assert!(
        matches!(
            c.rejoined[..],
            [(p, Outcome::ResumedDelta | Outcome::ResumedBaseline)] if p == played[1].player
        ),
        "{c:?}"
    );
    assert_eq!(c.end, Some(StopReason::Requested), "{c:?}");

    let path = dir.path().join("arena.zkrec");
    std::fs::write(&path, &file).unwrap();
    let (code, out, err) = replay(&path);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("MATCH: {ticks} ticks and ")),
        "every tick matched: {out}"
    );
    assert!(
        out.contains(&format!(
            "zone \"{zone}\" of kind \"arena\", recorded from its creation"
        )),
        "{out}"
    );

    // The resumed player's first input after the resume, right turned into no move (near the
    // arena's centre, where players spawn clear of pillars, a step right always moves: a pillar
    // in the way makes it slide): the state differs from the tick that consumed it, the one after
    // it arrived, and every tick before matches.
    let resumed = played[1].player;
    let seq = u32::try_from(INPUTS / 2 + 1).unwrap();
    let (at, arrived) = input_of(&file, resumed, seq);
    let out = assert_changed_input_diverges(dir.path(), &file, at, RIGHT, arrived);
    assert!(
        out.contains(&format!("input from {resumed} seq {seq} view tick")),
        "the changed input is listed: {out}"
    );
}

/// A zone already played in is recorded from then on: the recording starts from the zone's
/// image (drones mid-flight, players who left still within their grace, the RNG where it was),
/// and the replay matches every tick from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_zone_recorded_midway_replays_from_its_image() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_host(dir.path()).await;
    let zone = "rec-midway";
    let recording = format!("/admin/zones/{zone}/recording");
    let (status, body) = server
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": zone, "kind": "arena"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    // Before the recording: two players play and leave (they stay in the zone's roster, dropped,
    // for their grace).
    for i in 0..2 {
        play(
            server.addr.clone(),
            zone.to_owned(),
            format!("early-{i}"),
            None,
        )
        .await;
    }
    let (status, body) = server
        .admin_request("POST", &recording, Some(&json!({})))
        .await;
    assert_eq!(status, 201, "{body}");

    // During it: two other players, one of whom loses its transport and resumes.
    let players: Vec<_> = (0..2)
        .map(|i| {
            tokio::spawn(play(
                server.addr.clone(),
                zone.to_owned(),
                format!("late-{i}"),
                (i == 1).then_some(INPUTS / 2),
            ))
        })
        .collect();
    for p in players {
        p.await.unwrap();
    }
    let (status, stopped) = server
        .admin_request("POST", &format!("{recording}/stop"), None)
        .await;
    assert_eq!(status, 200, "{stopped}");
    let ticks = stopped["ticks"].as_u64().unwrap();
    let (status, file) = server
        .admin_bytes("GET", &format!("{recording}/file"), None)
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&file));

    let (header, _) = RecordReader::open(&file).unwrap();
    assert!(
        matches!(header.origin, Origin::Image { .. }),
        "{:?}",
        header.start_tick
    );
    assert!(header.start_tick > 0);
    let c = contents(&file);
    assert_eq!(
        c.joins, 2,
        "only the late players join in the recording: {c:?}"
    );

    let path = dir.path().join("midway.zkrec");
    std::fs::write(&path, &file).unwrap();
    let (code, out, err) = replay(&path);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("MATCH: {ticks} ticks and ")),
        "every tick matched: {out}"
    );
    assert!(
        out.contains(&format!(
            "recorded from its image at tick {}",
            header.start_tick
        )),
        "{out}"
    );
}
