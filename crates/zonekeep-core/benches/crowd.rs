//! The "crowd" workload (docs/WORKLOADS.md, crowd), mirrored exactly: xorshift64 with the
//! given seed, three interleaved draws per player at setup, one heading draw per player per tick,
//! 400 ticks at 20 Hz, measured from tick 21 to 400 (19 s). Subscriber 0's frames are decoded by a
//! client mirror (`zonekeep_protocol::mirror::Mirror`); its position error is the 2D distance between
//! `pos_decode(q, step)` and the server's true position for every entity it holds after each frame.
//! Wire bytes = Delta message bytes + WebSocket frame header (2 bytes if ≤ 125, 4 if ≤ 65,535, else 10).
//! Entities carry only their position (no fields), as in the workload.
//!
//! Run: `cargo bench -p zonekeep-core --bench crowd`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Instant;
use zonekeep_core::replicate::{
    Focus, FrameInput, ReplicationConfig, Replicator, SubscriberConfig, SubscriberId,
};
use zonekeep_core::world::{EntityId, World};
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::quant::pos_decode;
use zonekeep_protocol::schema::KindDef;

mod support;

use support::XorShift;

struct Case {
    n: u32,
    step: f32,
    budget: Option<usize>,
    radius: f32,
    ref_kbs: f64,
    ref_ms: f64,
    ref_p99: f64,
}

struct Out {
    kbs: f64,
    build_ms: f64,
    p50: f64,
    p99: f64,
    max: f64,
    hits: u64,
    encodings: u64,
    shared: u64,
    deferred: u64,
}

fn ws_header(len: usize) -> usize {
    if len <= 125 {
        2
    } else if len <= 65_535 {
        4
    } else {
        10
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(0.0)
}

fn run(c: &Case) -> Out {
    const PLAYERS: usize = 300;
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut world = World::new(c.step).expect("pos step");
    let kind = world
        .declare_kind(KindDef {
            name: "player".into(),
            fields: vec![],
        })
        .expect("kind");
    let (mut xs, mut ys, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PLAYERS {
        let x = rng.next() * 60.0;
        let y = rng.next() * 60.0;
        let h = rng.next() * std::f32::consts::TAU;
        world.spawn(kind, x, y).expect("spawn");
        xs.push(x);
        ys.push(y);
        hs.push(h);
    }
    let schema = world.schema();
    // Cell size a quarter of the view radius: a query then scans about 9 × 9 small cells (56 % of the
    // area) instead of the whole 60 × 60 area. It does not matter for the unbounded views of cases 1–4.
    let mut rep = Replicator::new(ReplicationConfig {
        cell_size: 5.0,
        priority_distance: 10.0,
    });
    for i in 0..PLAYERS as u32 {
        rep.add_subscriber(
            SubscriberId(i),
            SubscriberConfig {
                radius: c.radius,
                margin: 0.0,
                budget: c.budget,
                focus: Focus::Entity(EntityId(i)),
                control: Some(EntityId(i)),
            },
        )
        .expect("subscriber");
    }
    let mut mirror = Mirror::new();
    let mut frame0 = Vec::new();
    let (mut wire, mut build_total, mut errors) = (0usize, 0.0f64, Vec::new());
    let (mut hits, mut encodings, mut deferred, mut shared) = (0u64, 0u64, 0u64, 0u64);
    for tick in 1..=400u64 {
        for i in 0..PLAYERS {
            hs[i] += (rng.next() - 0.5) * 0.6;
            xs[i] = (xs[i] + 0.075 * hs[i].cos()).clamp(0.0, 60.0);
            ys[i] = (ys[i] + 0.075 * hs[i].sin()).clamp(0.0, 60.0);
            world
                .set_pos(EntityId(i as u32), xs[i], ys[i])
                .expect("set_pos");
        }
        let t0 = Instant::now();
        let stats = rep
            .build(
                &world,
                tick,
                |_, _| true,
                |_| FrameInput::default(),
                |sid, bytes| {
                    if sid.0 == 0 {
                        frame0.clear();
                        frame0.extend_from_slice(bytes);
                    }
                },
            )
            .expect("build");
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        mirror.decode_apply(&frame0, &schema).expect("decode");
        if tick >= 21 {
            build_total += dt;
            wire += frame0.len() + ws_header(frame0.len());
            hits += stats.cache_hits;
            encodings += stats.encodings;
            deferred += stats.deferred;
            shared += stats.shared_bodies;
            for (id, e) in mirror.iter() {
                let (x, y) = (xs[id as usize], ys[id as usize]);
                let dx = f64::from(pos_decode(e.qx, c.step)) - f64::from(x);
                let dy = f64::from(pos_decode(e.qy, c.step)) - f64::from(y);
                errors.push((dx * dx + dy * dy).sqrt());
            }
        }
    }
    Out {
        kbs: wire as f64 / 19.0 / 1000.0,
        build_ms: build_total / 380.0,
        p50: pct(&mut errors, 0.5),
        p99: pct(&mut errors, 0.99),
        max: errors.last().copied().unwrap_or(0.0),
        hits,
        encodings,
        shared,
        deferred,
    }
}

fn main() {
    let cases = [
        Case {
            n: 1,
            step: 0.01,
            budget: None,
            radius: f32::INFINITY,
            ref_kbs: 23.2,
            ref_ms: 3.0,
            ref_p99: 0.007,
        },
        Case {
            n: 2,
            step: 0.05,
            budget: None,
            radius: f32::INFINITY,
            ref_kbs: 20.8,
            ref_ms: 2.9,
            ref_p99: 0.033,
        },
        Case {
            n: 3,
            step: 0.01,
            budget: Some(900),
            radius: f32::INFINITY,
            ref_kbs: 16.2,
            ref_ms: 6.2,
            ref_p99: 0.080,
        },
        Case {
            n: 4,
            step: 0.05,
            budget: Some(900),
            radius: f32::INFINITY,
            ref_kbs: 16.0,
            ref_ms: 6.4,
            ref_p99: 0.099,
        },
        Case {
            n: 5,
            step: 0.05,
            budget: Some(900),
            radius: 20.0,
            ref_kbs: 4.6,
            ref_ms: 1.1,
            ref_p99: 0.033,
        },
    ];
    println!("workload crowd v1 (ticks 21..=400 measured, single thread)");
    println!("| case | KB/s sub 0 | build ms/tick | err p50 | err p99 | err max | ref KB/s | ref ms | ref p99 | bytes vs ref | time vs ref | record hits/encodings | shared bodies | deferred |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // Optional case filter: `cargo bench -p zonekeep-core --bench crowd -- 1 5`.
    let only: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    for c in cases
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.n))
    {
        let o = run(c);
        println!(
            "| {} | {:.2} | {:.3} | {:.4} | {:.4} | {:.4} | {} | {} | {} | {:+.0}% | {:.2}x | {}/{} | {} | {} |",
            c.n,
            o.kbs,
            o.build_ms,
            o.p50,
            o.p99,
            o.max,
            c.ref_kbs,
            c.ref_ms,
            c.ref_p99,
            (o.kbs / c.ref_kbs - 1.0) * 100.0,
            o.build_ms / c.ref_ms,
            o.hits,
            o.encodings,
            o.shared,
            o.deferred
        );
    }
}
