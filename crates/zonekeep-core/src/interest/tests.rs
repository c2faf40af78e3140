#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::collections::BTreeSet;

struct Snap {
    ids: Vec<u32>,
    xs: Vec<f32>,
    ys: Vec<f32>,
    flags: Vec<u8>,
    /// Promise a stable layout (ids never move here), exercising the rank-reuse merge.
    trusted: bool,
}

impl Snap {
    fn cols(&self) -> Columns<'_> {
        let c = Columns::new(&self.ids, &self.xs, &self.ys, &self.flags).unwrap();
        if self.trusted {
            c.with_layout(7)
        } else {
            c
        }
    }
}

fn spec(x: f32, y: f32, radius: f32, margin: f32, own: Option<u32>) -> ViewSpec {
    ViewSpec {
        x,
        y,
        radius,
        margin,
        own,
    }
}

#[test]
fn hysteresis_keeps_an_edge_entity_without_flicker() {
    // Entity 1 oscillates across the radius edge (10) but never beyond radius + margin (12).
    let mut snap = Snap {
        ids: vec![0, 1],
        xs: vec![0.0, 9.0],
        ys: vec![0.0, 0.0],
        flags: vec![ALIVE, ALIVE],
        trusted: true,
    };
    let mut interest = Interest::new(10.0);
    let mut view = View::new();
    let mut entered = 0;
    let mut left = 0;
    for t in 0..200 {
        snap.xs[1] = if t % 2 == 0 { 9.5 } else { 11.9 };
        let cols = snap.cols();
        interest.rebuild(&cols);
        interest.update_view(
            &cols,
            &mut view,
            &spec(0.0, 0.0, 10.0, 2.0, Some(0)),
            |_| true,
        );
        entered += view.entered().len();
        left += view.left().len();
        assert_eq!(view.visible(), &[0, 1], "tick {t}");
    }
    assert_eq!((entered, left), (2, 0));
    // Past radius + margin it leaves; back beyond the radius only, it does not re-enter.
    snap.xs[1] = 12.5;
    let cols = snap.cols();
    interest.rebuild(&cols);
    interest.update_view(
        &cols,
        &mut view,
        &spec(0.0, 0.0, 10.0, 2.0, Some(0)),
        |_| true,
    );
    assert_eq!(view.left(), &[1]);
    snap.xs[1] = 11.0;
    let cols = snap.cols();
    interest.rebuild(&cols);
    interest.update_view(
        &cols,
        &mut view,
        &spec(0.0, 0.0, 10.0, 2.0, Some(0)),
        |_| true,
    );
    assert_eq!(view.visible(), &[0]);
    assert!(view.entered().is_empty());
}

#[test]
fn filter_hides_in_range_but_never_own_or_global() {
    let snap = Snap {
        ids: vec![3, 4, 5, 6],
        xs: vec![0.0, 1.0, 2.0, 5000.0],
        ys: vec![0.0; 4],
        flags: vec![ALIVE, ALIVE, ALIVE, ALIVE | GLOBAL],
        trusted: false,
    };
    let cols = snap.cols();
    let mut interest = Interest::new(16.0);
    interest.rebuild(&cols);
    let mut view = View::new();
    // The filter hides everything: still sees its own entity (rank 0, id 3) and the global (id 6).
    interest.update_view(
        &cols,
        &mut view,
        &spec(0.0, 0.0, 10.0, 1.0, Some(0)),
        |_| false,
    );
    assert_eq!(view.visible(), &[3, 6]);
    interest.update_view(
        &cols,
        &mut view,
        &spec(0.0, 0.0, 10.0, 1.0, Some(0)),
        |id| id != 4,
    );
    assert_eq!(view.visible(), &[3, 5, 6]);
    assert_eq!(view.entered(), &[5]);
    assert_eq!(view.visible_ranks(), &[0, 2, 3]);
}

#[test]
fn observer_focus_point_sees_its_area_only() {
    let snap = Snap {
        ids: vec![0, 1, 2],
        xs: vec![0.0, 100.0, 104.0],
        ys: vec![0.0, 100.0, 100.0],
        flags: vec![ALIVE; 3],
        trusted: true,
    };
    let cols = snap.cols();
    let mut interest = Interest::new(10.0);
    interest.rebuild(&cols);
    let mut view = View::new();
    interest.update_view(
        &cols,
        &mut view,
        &spec(101.0, 100.0, 5.0, 0.0, None),
        |_| true,
    );
    assert_eq!(view.visible(), &[1, 2]);
}

#[test]
fn dead_entities_leave() {
    let mut snap = Snap {
        ids: vec![0, 1, 2],
        xs: vec![0.0, 1.0, 2.0],
        ys: vec![0.0; 3],
        flags: vec![ALIVE; 3],
        trusted: true,
    };
    let mut interest = Interest::new(10.0);
    let mut view = View::new();
    let cols = snap.cols();
    interest.rebuild(&cols);
    interest.update_view(&cols, &mut view, &spec(0.0, 0.0, 10.0, 0.0, None), |_| true);
    assert_eq!(view.entered(), &[0, 1, 2]);
    snap.flags[1] = 0;
    let cols = snap.cols();
    interest.rebuild(&cols);
    interest.update_view(&cols, &mut view, &spec(0.0, 0.0, 10.0, 0.0, None), |_| true);
    assert_eq!(view.left(), &[1]);
    assert_eq!(view.visible(), &[0, 2]);
}

/// The reference model: the same rules written the obvious way.
fn model(
    snap: &Snap,
    prev: &BTreeSet<u32>,
    s: &ViewSpec,
    can_see: impl Fn(u32) -> bool,
) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for r in 0..snap.ids.len() {
        if snap.flags[r] & ALIVE == 0 {
            continue;
        }
        let id = snap.ids[r];
        let dx = snap.xs[r] - s.x;
        let dy = snap.ys[r] - s.y;
        let d2 = dx * dx + dy * dy;
        let forced = snap.flags[r] & GLOBAL != 0 || s.own == Some(r as u32);
        let inner = d2 <= s.radius * s.radius;
        let outer = d2 <= (s.radius + s.margin) * (s.radius + s.margin);
        if forced || (can_see(id) && (inner || (outer && prev.contains(&id)))) {
            out.insert(id);
        }
    }
    out
}

/// A reproducible stream of numbers in `[0, 1)` (xorshift) seeded with `seed`.
fn uniform(seed: u64) -> impl FnMut() -> f32 {
    let mut st = seed;
    move || {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        (st >> 40) as f32 / 16_777_216.0
    }
}

#[test]
fn random_worlds_match_the_model() {
    let mut next = uniform(0x9e37_79b9_7f4a_7c15u64);
    for (w, n, cell, r, trusted) in [
        (300.0, 400, 30.0, 40.0, false),
        (300.0, 400, 30.0, 40.0, true),
        (50_000.0, 2000, 10.0, 400.0, false),
        (50_000.0, 2000, 10.0, 400.0, true),
    ] {
        let mut snap = Snap {
            ids: (0..n).map(|i| i * 3 + 1).collect(),
            xs: (0..n).map(|_| next() * w).collect(),
            ys: (0..n).map(|_| next() * w).collect(),
            flags: (0..n)
                .map(|i| match i % 50 {
                    7 => 0,
                    9 => ALIVE | GLOBAL,
                    _ => ALIVE,
                })
                .collect(),
            trusted,
        };
        let mut interest = Interest::new(cell);
        let mut views: Vec<View> = (0..20).map(|_| View::new()).collect();
        let mut models: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); 20];
        for _tick in 0..30 {
            for i in 0..n as usize {
                snap.xs[i] = (snap.xs[i] + (next() - 0.5) * r * 0.3).clamp(0.0, w);
                snap.ys[i] = (snap.ys[i] + (next() - 0.5) * r * 0.3).clamp(0.0, w);
                if next() < 0.01 {
                    snap.flags[i] ^= ALIVE;
                }
            }
            let cols = snap.cols();
            interest.rebuild(&cols);
            for (v, (view, m)) in views.iter_mut().zip(models.iter_mut()).enumerate() {
                let own = (v * 13) as u32;
                let sp = spec(
                    snap.xs[own as usize],
                    snap.ys[own as usize],
                    r,
                    r * 0.1,
                    Some(own),
                );
                let hide = |id: u32| id % 11 != 0;
                interest.update_view(&cols, view, &sp, hide);
                let expect = model(&snap, m, &sp, hide);
                let got: BTreeSet<u32> = view.visible().iter().copied().collect();
                assert_eq!(got, expect);
                assert!(view.visible().windows(2).all(|p| p[0] < p[1]));
                let entered: BTreeSet<u32> = expect.difference(m).copied().collect();
                let left: BTreeSet<u32> = m.difference(&expect).copied().collect();
                assert_eq!(
                    view.entered().iter().copied().collect::<BTreeSet<_>>(),
                    entered
                );
                assert_eq!(view.left().iter().copied().collect::<BTreeSet<_>>(), left);
                for (&id, &rank) in view.visible().iter().zip(view.visible_ranks()) {
                    assert_eq!(snap.ids[rank as usize], id);
                }
                *m = expect;
            }
        }
    }
}

/// Views that see everything follow the model through patches where the set of entities does
/// not change (the shared list is only compared once), patches where entities die or come
/// back, and views that switch between the unbounded path and a bounded one.
#[test]
fn unbounded_views_match_the_model_across_unchanged_and_changed_patches() {
    let mut next = uniform(0x2545_f491_4f6c_dd1du64);
    let n = 300usize;
    let mut snap = Snap {
        ids: (0..n as u32).map(|i| i * 2 + 5).collect(),
        xs: (0..n).map(|_| next() * 500.0).collect(),
        ys: (0..n).map(|_| next() * 500.0).collect(),
        flags: vec![ALIVE; n],
        trusted: true,
    };
    let mut interest = Interest::new(40.0);
    let mut views: Vec<View> = (0..6).map(|_| View::new()).collect();
    let mut models: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); 6];
    for tick in 0..60 {
        for i in 0..n {
            snap.xs[i] = (snap.xs[i] + (next() - 0.5) * 10.0).clamp(0.0, 500.0);
            snap.ys[i] = (snap.ys[i] + (next() - 0.5) * 10.0).clamp(0.0, 500.0);
        }
        // Every fifth patch some entities die or come back; the others change nothing but
        // positions, so the list every unbounded view sees stays the same.
        if tick % 5 == 4 {
            for f in snap.flags.iter_mut() {
                if next() < 0.05 {
                    *f ^= ALIVE;
                }
            }
        }
        let cols = snap.cols();
        interest.rebuild(&cols);
        for (v, (view, m)) in views.iter_mut().zip(models.iter_mut()).enumerate() {
            let own = (v * 41) as u32;
            // Views 4 and 5 look through a bounded radius every seventh patch.
            let bounded = v >= 4 && tick % 7 == 3;
            let radius = if bounded { 120.0 } else { f32::INFINITY };
            let sp = spec(
                snap.xs[own as usize],
                snap.ys[own as usize],
                radius,
                0.0,
                Some(own),
            );
            if bounded {
                interest.update_view(&cols, view, &sp, |_| true);
            } else {
                interest.update_view_all(&cols, view, &sp);
            }
            let expect = model(&snap, m, &sp, |_| true);
            let got: BTreeSet<u32> = view.visible().iter().copied().collect();
            assert_eq!(got, expect, "view {v}, patch {tick}");
            let entered: BTreeSet<u32> = expect.difference(m).copied().collect();
            let left: BTreeSet<u32> = m.difference(&expect).copied().collect();
            assert_eq!(
                view.entered().iter().copied().collect::<BTreeSet<_>>(),
                entered,
                "view {v}, patch {tick}"
            );
            assert_eq!(
                view.left().iter().copied().collect::<BTreeSet<_>>(),
                left,
                "view {v}, patch {tick}"
            );
            assert_eq!(view.visible_ranks().len(), view.visible().len());
            for (&id, &rank) in view.visible().iter().zip(view.visible_ranks()) {
                assert_eq!(snap.ids[rank as usize], id);
            }
            *m = expect;
        }
    }
}
