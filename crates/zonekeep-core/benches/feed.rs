//! The world feed's cost per patch (`zonekeep_core::feed`): encoding the changes since the last
//! patch once at the origin, and applying them to a replica, for a world of `n` entities of one
//! kind (`hp`, a 10-bit quantized field) where every entity moves each patch and one in ten
//! changes its `hp`. The bytes of one such delta are printed once per size.
//!
//! Run: `cargo bench -p zonekeep-core --bench feed`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use zonekeep_core::feed::{Replica, WorldFeed};
use zonekeep_core::world::{EntityId, World};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

mod support;

use support::XorShift;

/// A world of `n` units spread over 1,000 × 1,000.
fn world(n: usize, rng: &mut XorShift) -> (World, Vec<EntityId>) {
    let mut w = World::new(0.01).unwrap();
    let unit = w
        .declare_kind(KindDef {
            name: "unit".into(),
            fields: vec![FieldDef {
                name: "hp".into(),
                ty: FieldType::Quant {
                    min: 0.0,
                    max: 100.0,
                    bits: 10,
                },
            }],
        })
        .unwrap();
    let ids = (0..n)
        .map(|_| {
            w.spawn(unit, rng.next() * 1000.0, rng.next() * 1000.0)
                .unwrap()
        })
        .collect();
    (w, ids)
}

/// One patch of changes: every entity steps, one in ten changes its `hp`.
fn patch(w: &mut World, ids: &[EntityId], rng: &mut XorShift) {
    for (i, &id) in ids.iter().enumerate() {
        let (x, y) = w.pos(id).unwrap();
        w.set_pos(id, x + rng.next() - 0.5, y + rng.next() - 0.5)
            .unwrap();
        if i % 10 == 0 {
            w.set_f32(id, 0, rng.next() * 100.0).unwrap();
        }
    }
}

fn feed(c: &mut Criterion) {
    let mut group = c.benchmark_group("feed");
    for n in [1_000usize, 10_000] {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let (mut w, ids) = world(n, &mut rng);
        let mut image = Vec::new();
        WorldFeed::image(&w, &mut image);
        let mut writer = WorldFeed::new(&w);
        let mut replica = Replica::from_image(&image).unwrap();
        let mut out = Vec::new();
        patch(&mut w, &ids, &mut rng);
        writer.delta(&w, &mut out).unwrap();
        replica.apply(&out).unwrap();
        eprintln!(
            "feed: {n} entities: image {} bytes, a delta {} bytes ({:.1} per entity)",
            image.len(),
            out.len(),
            out.len() as f64 / n as f64
        );

        group.bench_function(BenchmarkId::new("delta", n), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    patch(&mut w, &ids, &mut rng);
                    out.clear();
                    let start = Instant::now();
                    writer.delta(&w, &mut out).unwrap();
                    took += start.elapsed();
                    replica.apply(&out).unwrap();
                }
                took
            })
        });
        group.bench_function(BenchmarkId::new("apply", n), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    patch(&mut w, &ids, &mut rng);
                    out.clear();
                    writer.delta(&w, &mut out).unwrap();
                    let start = Instant::now();
                    replica.apply(&out).unwrap();
                    took += start.elapsed();
                }
                took
            })
        });
    }
    group.finish();
}

criterion_group!(benches, feed);
criterion_main!(benches);
