//! Resuming from the last acknowledged frame (PROTOCOL.md §4.1.1) against the real host: a client
//! that says what its known set holds continues with an ordinary Delta, and its mirror then agrees
//! with the host's KnownSetCheck; one whose claim does not match gets a BASELINE. Both are counted.

use std::collections::BTreeMap;

use serde_json::Value;
use zonekeep_core::{
    Ctx, EntityId, InputRefusal, JoinRefusal, KindId, LeaveReason, PlayerId, PlayerInfo, Zone,
    ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::messages::{ClientMessage, Hello, ServerMessage, Welcome};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};
use zonekeep_protocol::{ResumeFrom, Schema};
use zonekeep_server::Host;

use crate::common::*;

/// Forty props that never move, and one walker per player that an input `[dx]` moves.
struct Strollers {
    walker: KindId,
    mine: BTreeMap<PlayerId, EntityId>,
}

fn failed(e: impl std::fmt::Display) -> ZoneError {
    ZoneError::Failed(e.to_string())
}

impl Zone for Strollers {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let w = ctx.world();
        let steps = FieldDef {
            name: "steps".into(),
            ty: FieldType::UInt,
        };
        let walker = w
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![steps.clone()],
            })
            .map_err(failed)?;
        let prop = w
            .declare_kind(KindDef {
                name: "prop".into(),
                fields: vec![steps],
            })
            .map_err(failed)?;
        for i in 0..40u8 {
            w.spawn(prop, f32::from(i), 5.0).map_err(failed)?;
        }
        Ok(Strollers {
            walker,
            mine: BTreeMap::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let e = ctx
            .world()
            .spawn(self.walker, p.id.0 as f32, 0.0)
            .map_err(|e| JoinRefusal::new(1, e.to_string()))?;
        ctx.set_control(p.id, Some(e));
        self.mine.insert(p.id, e);
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, _why: LeaveReason) {
        if let Some(e) = self.mine.remove(&p) {
            let _ = ctx.world().despawn(e);
        }
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(1, "one byte")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, dx: i8) {
        let Some(&e) = self.mine.get(&p) else { return };
        let w = ctx.world();
        if let (Ok((x, y)), Ok(steps)) = (w.pos(e), w.get_uint(e, 0)) {
            let _ = w.set_pos(e, x + f32::from(dx), y);
            let _ = w.set_uint(e, 0, steps + 1);
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

async fn server() -> TestServer {
    let zone = ZoneConfig {
        tick_hz: 20,
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(base_config())
        .zone_with::<Strollers>("strollers", zone, Value::Null)
        .build()
        .unwrap();
    TestServer::serve(host).await
}

/// Sends `hello` on a new socket and returns it with the Welcome.
async fn hello(server: &TestServer, zone: &str, hello: Hello) -> (Ws, Welcome) {
    let mut ws = connect(server, zone).await;
    send(&mut ws, ClientMessage::Hello(hello).to_bytes().unwrap()).await;
    match recv(&mut ws, &empty_schema()).await {
        Seen::Msg(ServerMessage::Welcome(w)) => (ws, w),
        other => panic!("expected Welcome, got {other:?}"),
    }
}

fn resume(ticket: &str, token: &[u8], from: Option<ResumeFrom>) -> Hello {
    Hello {
        versions: vec![3, 4],
        ticket: ticket.into(),
        reconnect_token: token.to_vec(),
        content_version: String::new(),
        resume_from: from,
    }
}

/// Having sent inputs up to `seq`: keeps Deltas coming (quiet ones are not sent) with an input
/// each until a KnownSetCheck arrives, which must match the mirror, then reads until the Delta
/// acknowledging the last input, after which nothing changes for this client. Returns that seq.
async fn settle(ws: &mut Ws, mirror: &mut Mirror, schema: &Schema, mut seq: u32) -> u32 {
    let mut checked = false;
    loop {
        match next_applied(ws, mirror, schema).await {
            ServerMessage::Delta(d) if checked && d.ack == seq => return seq,
            ServerMessage::Delta(_) if !checked => {
                seq += 1;
                send_input(ws, seq, &[0]).await;
            }
            ServerMessage::KnownSetCheck(c) => {
                assert!(mirror.matches(&c), "the mirror agrees with the host");
                checked = true;
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_resume_from_the_last_frame_continues_with_a_delta_and_a_wrong_one_gets_a_baseline() {
    let server = server().await;
    let zone = "stroll-1";
    let t = ticket("rita", zone);
    let (mut ws, w1) = hello(&server, zone, resume(&t, &[], None)).await;
    assert_eq!(w1.version, 4);
    let schema = w1.schema.clone();
    let mut mirror = Mirror::new();
    send_input(&mut ws, 1, &[3]).await;
    let seq = settle(&mut ws, &mut mirror, &schema, 1).await;
    // Every Delta so far applied; the inputs stop, so the host builds nothing new for rita
    // before it notices the drop (a quiet Delta changes nothing she holds).
    drop(ws);
    // Once the host has seen her go, it builds her nothing more.
    let path = format!("/admin/zones/{zone}");
    eventually("rita's drop reaches the zone", || async {
        let (_, body) = http(&server, "GET", &path, Some(ADMIN), None).await;
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["participants"][0]["connected"] == Value::Bool(false)
    })
    .await;

    // While rita is away, bob joins (a spawn she has not seen) and walks.
    let (mut bob, wb) = hello(&server, zone, resume(&ticket("bob", zone), &[], None)).await;
    let mut bob_mirror = Mirror::new();
    send_input(&mut bob, 1, &[2]).await;
    settle(&mut bob, &mut bob_mirror, &wb.schema, 1).await;
    assert_eq!(bob_mirror.len(), 42, "40 props and two walkers");

    let (mut ws, w2) = hello(
        &server,
        zone,
        resume(&t, &w1.reconnect_token, mirror.resume_from()),
    )
    .await;
    assert_eq!(w2.player_id, w1.player_id, "resumed");
    let first = loop {
        if let ServerMessage::Delta(d) = next_applied(&mut ws, &mut mirror, &schema).await {
            break d;
        }
    };
    assert!(!first.baseline, "continued from what rita held");
    assert!(
        first.spawns.len() == 1 && first.despawns.is_empty(),
        "only bob's walker is new to her: {first:?}"
    );
    assert_eq!(mirror.len(), 42);
    // The resumed sequence continues; later checks still match.
    send_input(&mut ws, seq + 1, &[1]).await;
    settle(&mut ws, &mut mirror, &schema, seq + 1).await;
    assert_eq!(
        metric(&server, "zonekeep_resumes_total{from=\"delta\"}").await,
        1.0
    );

    // A claim that does not match what the host holds (another hash): a BASELINE.
    drop(ws);
    let mut wrong = mirror.resume_from().unwrap();
    wrong.hash ^= 1;
    let (mut ws, _) = hello(&server, zone, resume(&t, &w2.reconnect_token, Some(wrong))).await;
    let first = loop {
        if let ServerMessage::Delta(d) = next_applied(&mut ws, &mut mirror, &schema).await {
            break d;
        }
    };
    assert!(first.baseline);
    assert_eq!(mirror.len(), 42);
    assert_eq!(
        metric(&server, "zonekeep_resumes_total{from=\"baseline\"}").await,
        1.0
    );
    server.stop().await;
}
