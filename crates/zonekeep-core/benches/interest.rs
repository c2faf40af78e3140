//! The "interest" workload (docs/WORKLOADS.md, interest), mirrored exactly: xorshift64 with
//! the given seed and draw order, 20 warm-up + 400 measured ticks, timing grid rebuild + all view
//! updates (and the view part alone), p50/p99 per tick and mean visible per subscriber.
//!
//! Run: `cargo bench -p zonekeep-core --bench interest`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Instant;
use zonekeep_core::interest::{Interest, View, ViewSpec};
use zonekeep_core::world::{EntityId, World};
use zonekeep_protocol::schema::KindDef;

mod support;

use support::XorShift;

struct Case {
    name: &'static str,
    w: f32,
    r: f32,
    s: u32,
    e: u32,
    ref_total: f64,
    ref_views: f64,
}

struct Result {
    total_p50: f64,
    total_p99: f64,
    views_p50: f64,
    views_p99: f64,
    visible: f64,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(0.0)
}

fn run(c: &Case) -> Result {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut world = World::new(0.01).expect("pos step");
    let kind = world
        .declare_kind(KindDef {
            name: "e".into(),
            fields: vec![],
        })
        .expect("kind");
    let mut xs = Vec::with_capacity(c.e as usize);
    let mut ys = Vec::with_capacity(c.e as usize);
    for _ in 0..c.e {
        let x = rng.next() * c.w;
        let y = rng.next() * c.w;
        world.spawn(kind, x, y).expect("spawn");
        xs.push(x);
        ys.push(y);
    }
    let mut interest = Interest::new(c.r);
    let mut views: Vec<View> = (0..c.s).map(|_| View::new()).collect();
    let (mut totals, mut view_times) = (Vec::new(), Vec::new());
    let mut visible_sum = 0u64;
    for tick in 0..420 {
        for i in 0..c.e as usize {
            xs[i] = (xs[i] + (rng.next() - 0.5) * 20.0).clamp(0.0, c.w);
            ys[i] = (ys[i] + (rng.next() - 0.5) * 20.0).clamp(0.0, c.w);
            world
                .set_pos(EntityId(i as u32), xs[i], ys[i])
                .expect("set_pos");
        }
        let t0 = Instant::now();
        let cols = world.columns();
        interest.rebuild(&cols);
        let t1 = Instant::now();
        for (i, view) in views.iter_mut().enumerate() {
            let own = EntityId(i as u32);
            let (x, y) = world.pos(own).expect("own entity");
            let spec = ViewSpec {
                x,
                y,
                radius: c.r,
                margin: 0.1 * c.r,
                own: world.rank_of(own).map(|r| r as u32),
            };
            let me = i as u32;
            interest.update_view(&cols, view, &spec, |id| id % 97 != 0 || id == me);
        }
        let t2 = Instant::now();
        if tick >= 20 {
            totals.push((t2 - t0).as_secs_f64() * 1e3);
            view_times.push((t2 - t1).as_secs_f64() * 1e3);
            visible_sum += views.iter().map(|v| v.visible().len() as u64).sum::<u64>();
        }
    }
    Result {
        total_p50: pct(&mut totals, 0.5),
        total_p99: pct(&mut totals, 0.99),
        views_p50: pct(&mut view_times, 0.5),
        views_p99: pct(&mut view_times, 0.99),
        visible: visible_sum as f64 / (400.0 * f64::from(c.s)),
    }
}

fn main() {
    let cases = [
        Case {
            name: "spread",
            w: 2000.0,
            r: 150.0,
            s: 300,
            e: 1000,
            ref_total: 0.33,
            ref_views: 0.30,
        },
        Case {
            name: "crowd",
            w: 400.0,
            r: 150.0,
            s: 300,
            e: 1000,
            ref_total: 2.41,
            ref_views: 2.38,
        },
        Case {
            name: "sparse",
            w: 100_000.0,
            r: 100.0,
            s: 1000,
            e: 100_000,
            ref_total: 8.6,
            ref_views: 0.76,
        },
    ];
    println!("workload interest v1 (20 warm-up + 400 measured ticks, single thread)");
    println!(
        "| case | total p50 ms | total p99 ms | views p50 ms | views p99 ms | visible/sub | ref total p50 | ref views p50 | total vs ref |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    // Optional case filter: `cargo bench -p zonekeep-core --bench interest -- crowd`.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for c in cases
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| o == c.name))
    {
        let r = run(c);
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.2} | {:.2} | {:.2}x |",
            c.name,
            r.total_p50,
            r.total_p99,
            r.views_p50,
            r.views_p99,
            r.visible,
            c.ref_total,
            c.ref_views,
            r.total_p50 / c.ref_total
        );
    }
}
