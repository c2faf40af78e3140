//! The full bot: a `zonekeep_client::Connection` (decode against the known set, clock sync,
//! reconnect, NetSim) feeding an interpolating `Replica` one frame per patch, so the client's real
//! cost is paid. In the arena it can also be the probe, validating every patch (WORKLOADS.md arena §5).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::{sleep_until, timeout_at};
use zonekeep_client::connection::{
    connect, ConnectOptions, CountersSnapshot, Event, ReconnectPolicy,
};
use zonekeep_client::{ClientError, Patch, Replica, ReplicaConfig, Timing};
use zonekeep_protocol::quant::pos_encode;
use zonekeep_protocol::schema::FieldValue;

use super::light::kick_name;
use super::schedule::{first_input_at, InputGen};
use super::{micros, BotResult, Pending, Phase, RunShared, WindowCounts};
use crate::aim::Aimer;
use crate::arena::probe::{HeldEntity, Probe};
use crate::config::Workload;

/// The probe's copy of its known set, kept from patches (quantized positions, hp).
#[derive(Debug, Default)]
struct Held {
    map: BTreeMap<u32, HeldEntity>,
    own: Option<u32>,
    touched: Vec<u32>,
    list: Vec<HeldEntity>,
}

fn hp_of(fields: &[FieldValue]) -> Option<u32> {
    match fields.first() {
        Some(FieldValue::U(v)) => Some(*v),
        _ => None,
    }
}

impl Held {
    fn apply(&mut self, p: &Patch, pos_step: f32) {
        if p.baseline {
            self.map.clear();
        }
        if let Some(c) = p.control {
            self.own = c;
        }
        for id in &p.despawns {
            self.map.remove(id);
        }
        self.touched.clear();
        for u in &p.updates {
            self.touched.push(u.id);
            if let Some(e) = self.map.get_mut(&u.id) {
                if let Some((x, y)) = u.pos {
                    // The patch carries dequantized coordinates; re-quantizing recovers the exact
                    // integers the host sent (|q| is far below 2^23 here, so the round trip is exact).
                    e.qx = pos_encode(x, pos_step);
                    e.qy = pos_encode(y, pos_step);
                }
                for (i, v) in &u.fields {
                    if *i == 0 {
                        e.hp = hp_of(std::slice::from_ref(v));
                    }
                }
            }
        }
        for s in &p.spawns {
            self.touched.push(s.id);
            self.map.insert(
                s.id,
                HeldEntity {
                    id: s.id,
                    kind: s.kind,
                    qx: pos_encode(s.x, pos_step),
                    qy: pos_encode(s.y, pos_step),
                    hp: hp_of(&s.fields),
                },
            );
        }
        self.touched.sort_unstable();
        self.list.clear();
        self.list.extend(self.map.values().copied());
    }
}

fn window_between(a: &CountersSnapshot, b: &CountersSnapshot) -> WindowCounts {
    WindowCounts {
        bytes_in: b.bytes_in - a.bytes_in,
        frame_bytes_in: b.frame_bytes_in - a.frame_bytes_in,
        msgs_in: b.messages_in - a.messages_in,
        deltas: b.deltas - a.deltas,
        delta_bytes: b.delta_bytes - a.delta_bytes,
        inputs: b.inputs_sent - a.inputs_sent,
        bytes_out: b.bytes_out - a.bytes_out,
        acked: 0,
    }
}

/// Runs one decoding bot (the probe when `index == 0` in the arena).
pub async fn run(shared: Arc<RunShared>, index: u32, bot: u32) -> BotResult {
    let mut res = BotResult {
        bot,
        ..BotResult::default()
    };
    let cfg = &shared.cfg;
    let zone = cfg.zones.zone_of(bot);
    shared.wait_for_zone(index).await;
    let joined = {
        let Ok(_permit) = shared.join_gate.acquire().await else {
            res.join_error = Some("aborted".into());
            shared.first_join_done(index);
            return res;
        };
        shared.mark_join_start(Instant::now());
        let deadline = (Instant::now() + cfg.handshake_timeout).min(shared.hard_deadline);
        let attempt = async {
            let (zone, ticket) = shared.tickets.ticket(bot, &zone).await.map_err(|e| {
                tracing::debug!(bot, error = %e, "ticket");
                "ticket".to_owned()
            })?;
            let tickets = shared.tickets.clone();
            let z = zone.clone();
            let mut opts = ConnectOptions::new(ticket).with_fresh_ticket(move || {
                let (t, z) = (tickets.clone(), z.clone());
                async move {
                    t.ticket(bot, &z)
                        .await
                        .map(|(_, t)| t)
                        .map_err(|e| e.to_string())
                }
            });
            opts.netsim = cfg.netsim;
            opts.handshake_timeout = cfg.handshake_timeout;
            opts.reconnect = ReconnectPolicy {
                max_attempts: cfg.reconnect_attempts,
                backoff_max: cfg.reconnect_backoff_max,
                ..ReconnectPolicy::default()
            };
            connect(&cfg.zone_url(&zone), opts)
                .await
                .map_err(|e| match e {
                    ClientError::Kicked(k) | ClientError::ContentOutdated(k) => kick_name(k.code),
                    ClientError::HandshakeTimeout => "timeout".to_owned(),
                    other => {
                        tracing::debug!(bot, error = %other, "connect");
                        "connect".to_owned()
                    }
                })
        };
        timeout_at(deadline.into(), attempt)
            .await
            .unwrap_or_else(|_| Err("timeout".to_owned()))
    };
    shared.first_join_done(index);
    let (mut conn, welcome) = match joined {
        Ok(x) => x,
        Err(e) => {
            shared.add(&shared.failed, 1);
            res.join_error = Some(e);
            return res;
        }
    };
    shared.mark_joined(Instant::now());
    shared.add(&shared.connected, 1);
    res.joined = true;

    let mut replica = Replica::new(ReplicaConfig::for_zone(
        welcome.tick_hz,
        welcome.patch_every,
    ));
    let pos_step = welcome.schema.pos_step;
    let mut probe = match &cfg.workload {
        Workload::Arena(p) if index == 0 => Some(Probe::new(p, bot)),
        _ => None,
    };
    let mut held = Held::default();
    let mut aimer = match &cfg.workload {
        Workload::Aim(target) => {
            let mut a = Aimer::new(target.clone(), bot);
            a.on_welcome(&welcome.schema, false);
            Some(a)
        }
        _ => None,
    };
    let mut gen = InputGen::new(cfg, bot);
    let interval = cfg.input_interval();
    let mut next_input = interval.map(|i| first_input_at(Instant::now(), i, index, cfg.bots));
    let mut pending = Pending::default();
    let mut last_patch: Option<Instant> = None;
    let mut last_tick = welcome.tick;
    let mut phase_rx = shared.phase.clone();
    let mut start: Option<CountersSnapshot> = None;
    let mut whole = false;
    let mut acked = 0u64;
    let mut connected = true;
    loop {
        let far = shared.hard_deadline;
        let input_at = next_input.unwrap_or(far);
        tokio::select! {
            biased;
            changed = phase_rx.changed() => {
                let p = if changed.is_ok() { *phase_rx.borrow_and_update() } else { Phase::Done };
                match p {
                    Phase::Measure if start.is_none() => {
                        start = Some(conn.counters());
                        whole = connected;
                        if let Some(pr) = probe.as_mut() { pr.set_measuring(true); }
                    }
                    Phase::Done => break,
                    _ => {}
                }
            }
            _ = sleep_until(far.into()) => break,
            ev = conn.recv() => {
                let Some(ev) = ev else { break };
                let measuring = start.is_some() && shared.phase_now() == Phase::Measure;
                match ev {
                    Event::Delta(patch) => {
                        let now = Instant::now();
                        shared.add(&shared.bytes_in, patch.bytes as u64);
                        shared.add(&shared.msgs_in, 1);
                        last_tick = patch.tick;
                        if measuring {
                            if let Some(prev) = last_patch {
                                shared.record_patch_interval(micros(prev, now));
                            }
                        }
                        last_patch = Some(now);
                        res.last_ack = res.last_ack.max(patch.ack);
                        let n = pending.ack(patch.ack, |at| if measuring { shared.record_rtt(micros(at, now)) });
                        if measuring {
                            acked += n;
                        }
                        replica.apply(&patch);
                        if let Some(t) = Timing::from_clock(&conn.clock(), conn.now_us()) {
                            replica.frame(t);
                        }
                        if let Some(pr) = probe.as_mut() {
                            held.apply(&patch, pos_step);
                            let touched = &held.touched;
                            pr.check(patch.tick, patch.ack, held.own, &held.list, &|id| touched.binary_search(&id).is_ok());
                            let m = pr.counts().mismatches();
                            shared.mismatches.store(m, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Event::Welcome { welcome, resumed } => {
                        if let Some(a) = aimer.as_mut() {
                            a.on_welcome(&welcome.schema, resumed);
                        }
                        res.reconnects += 1;
                        if resumed {
                            res.resumes += 1;
                        } else {
                            res.fresh_joins += 1;
                            if let Some(pr) = probe.as_mut() {
                                pr.reset_player();
                            }
                        }
                        pending.clear();
                        last_patch = None;
                        if !connected {
                            connected = true;
                            shared.add(&shared.connected, 1);
                        }
                    }
                    Event::Disconnected { .. } => {
                        res.drops += 1;
                        whole = false;
                        if connected {
                            connected = false;
                            shared.connected.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Event::Kick(k) => {
                        *res.kicks.entry(kick_name(k.code)).or_insert(0) += 1;
                    }
                    Event::Closed(_) => {
                        whole = false;
                        break;
                    }
                    Event::Event { topic, payload, .. } => {
                        if let Some(a) = aimer.as_mut() {
                            a.on_event(topic, &payload);
                        }
                    }
                    Event::InputRefused(r) => {
                        if let Some(a) = aimer.as_mut() {
                            a.on_refused(r.seq);
                        }
                    }
                    Event::Transfer(_) => {}
                }
            }
            _ = sleep_until(input_at.into()), if next_input.is_some() => {
                next_input = interval.map(|i| input_at + i);
                if let Some(a) = aimer.as_mut() {
                    // Draw now, as a client's frame would, aim at what is drawn, and stamp the
                    // tick drawn (whole, as the SDKs do).
                    let measuring = start.is_some() && shared.phase_now() == Phase::Measure;
                    let Some(t) = Timing::from_clock(&conn.clock(), conn.now_us()) else {
                        a.nothing_drawn(measuring);
                        continue;
                    };
                    let drawn = replica.frame(t);
                    let Some(at) = a.aim(&replica) else {
                        a.nothing_drawn(measuring);
                        continue;
                    };
                    conn.set_view_tick(drawn.max(0.0).floor() as u64);
                    match conn.send_input(&Aimer::shot(at)) {
                        Ok(seq) => {
                            pending.push(seq, Instant::now());
                            a.fired(seq, measuring);
                        }
                        Err(ClientError::Backpressure) => res.outgoing_full += 1,
                        Err(_) => {}
                    }
                } else if let Some(input) = gen.next(last_tick) {
                    match conn.send_input(&input.payload) {
                        Ok(seq) => {
                            pending.push(seq, Instant::now());
                            if let (Some(pr), Some((dx, dy))) = (probe.as_mut(), input.arena) {
                                pr.sent_input(seq, dx, dy);
                            }
                        }
                        Err(ClientError::Backpressure) => res.outgoing_full += 1,
                        Err(_) => {}
                    }
                }
            }
        }
    }
    let end = conn.counters();
    if let Some(s) = start {
        res.window = window_between(&s, &end);
        res.window.acked = acked;
    }
    res.whole_window = start.is_some() && whole && connected;
    res.total_bytes_in = end.bytes_in;
    res.total_delta_bytes = end.delta_bytes;
    res.total_deltas = end.deltas;
    // The connection follows Redirects itself (joins and resumes alike) and counts them.
    res.redirects = end.redirects;
    res.outgoing_full += end.outgoing_full;
    res.probe = probe.map(|p| p.counts());
    res.aim = aimer.map(Aimer::finish);
    if connected {
        shared
            .connected
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
    let _ = timeout_at(
        (Instant::now() + Duration::from_secs(2)).into(),
        conn.close(),
    )
    .await;
    res
}
