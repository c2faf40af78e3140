//! Generates the movement parity fixture `tests/fixtures/arena/movement.json` and checks that the
//! committed file is fresh. The page's node test replays the same file through `movement.ts` and
//! asserts bit-identical results; together they prove server and client agree.
//!
//! `ZONEKEEP_BLESS=1 cargo test -p zonekeep-arena --test movement_fixture` rewrites the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::{json, Value};
use zonekeep_arena::map::PILLARS;
use zonekeep_arena::movement::{
    snap, step, MoveInput, MoveState, Pillar, ARENA_H, ARENA_W, DIAGONAL, DIR_MASK, DT, FLAG_MASK,
    MAX_X, MAX_Y, MIN_X, MIN_Y, PLAYER_RADIUS, POS_STEP, SPEED, WALK_SPEED,
};

/// SplitMix64: a tiny, fixed generator so the fixture never changes unless the rule does.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / 16_777_216.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn bits(v: f32) -> Value {
    json!(v.to_bits())
}

fn pillar_json(p: &Pillar) -> Value {
    json!([p.x.to_bits(), p.y.to_bits(), p.r.to_bits()])
}

struct Case {
    name: String,
    dt: f32,
    pillars: Vec<Pillar>,
    start: MoveState,
    inputs: Vec<MoveInput>,
}

fn run(case: &Case) -> Value {
    let mut s = case.start;
    let mut states = Vec::with_capacity(case.inputs.len());
    for i in &case.inputs {
        s = step(&s, i, case.dt, &case.pillars);
        states.push(json!([s.x.to_bits(), s.y.to_bits()]));
    }
    json!({
        "name": case.name,
        "dt": bits(case.dt),
        "pillars": case.pillars.iter().map(pillar_json).collect::<Vec<_>>(),
        "start": [case.start.x.to_bits(), case.start.y.to_bits()],
        "inputs": case.inputs.iter().map(|i| json!([i.dir, i.flags])).collect::<Vec<_>>(),
        "states": states,
    })
}

/// Inputs held for a few ticks each, like a person pressing keys (includes raw out-of-mask bits
/// masked the way `MoveInput::decode` does).
fn held_inputs(rng: &mut Mix, n: usize) -> Vec<MoveInput> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let raw = [rng.next() as u8, rng.next() as u8];
        let input = MoveInput::decode(&raw).unwrap();
        let hold = 1 + rng.below(20) as usize;
        for _ in 0..hold.min(n - out.len()) {
            out.push(input);
        }
    }
    out
}

fn cases() -> Vec<Case> {
    let mut rng = Mix(0x5a6f_6e65_6b65_6570);
    let mut cases = Vec::new();
    // Long walks on the real map, from grid-aligned and from arbitrary starts.
    for k in 0..6 {
        let start = MoveState {
            x: rng.unit() * ARENA_W,
            y: rng.unit() * ARENA_H,
        };
        cases.push(Case {
            name: format!("map walk {k}"),
            dt: DT,
            pillars: PILLARS.to_vec(),
            start,
            inputs: held_inputs(&mut rng, 300),
        });
    }
    // Random pillar fields, some overlapping, with odd radii and off-grid centres.
    for k in 0..8 {
        let pillars: Vec<Pillar> = (0..1 + rng.below(12))
            .map(|_| Pillar {
                x: rng.unit() * 30.0,
                y: rng.unit() * 30.0,
                r: 0.1 + rng.unit() * 5.0,
            })
            .collect();
        cases.push(Case {
            name: format!("pillar field {k}"),
            dt: DT,
            start: MoveState {
                x: rng.unit() * 30.0,
                y: rng.unit() * 30.0,
            },
            pillars,
            inputs: held_inputs(&mut rng, 150),
        });
    }
    // Other step lengths (the rule takes dt as a parameter).
    for (k, dt) in [1.0f32 / 60.0, 0.1, 0.25, 1.0].into_iter().enumerate() {
        cases.push(Case {
            name: format!("dt {k}"),
            dt,
            pillars: PILLARS.to_vec(),
            start: MoveState { x: 60.0, y: 40.0 },
            inputs: held_inputs(&mut rng, 120),
        });
    }
    // Edges: pressing into every wall and corner, starting outside the arena.
    let every: Vec<MoveInput> = (0..=DIR_MASK)
        .flat_map(|dir| {
            (0..=FLAG_MASK).flat_map(move |flags| std::iter::repeat_n(MoveInput { dir, flags }, 12))
        })
        .collect();
    for (k, start) in [
        MoveState { x: 0.0, y: 0.0 },
        MoveState {
            x: ARENA_W,
            y: ARENA_H,
        },
        MoveState { x: -5.0, y: 200.0 },
        MoveState { x: MIN_X, y: MAX_Y },
        MoveState { x: MAX_X, y: MIN_Y },
    ]
    .into_iter()
    .enumerate()
    {
        cases.push(Case {
            name: format!("walls {k}"),
            dt: DT,
            pillars: Vec::new(),
            start,
            inputs: every.clone(),
        });
    }
    // Pillars hit dead centre, grazed, and started inside.
    let p = Pillar {
        x: 10.0,
        y: 10.0,
        r: 2.0,
    };
    let right = MoveInput { dir: 8, flags: 0 };
    cases.push(Case {
        name: "dead centre".into(),
        dt: DT,
        pillars: vec![p],
        start: MoveState {
            x: 10.0 - SPEED * DT,
            y: 10.0,
        },
        inputs: vec![right; 5],
    });
    cases.push(Case {
        name: "started inside".into(),
        dt: DT,
        pillars: vec![p],
        start: MoveState { x: 10.5, y: 9.25 },
        inputs: every.iter().copied().take(150).collect(),
    });
    cases.push(Case {
        name: "graze".into(),
        dt: DT,
        pillars: vec![p],
        start: MoveState {
            x: 5.0,
            y: 10.0 - p.r - PLAYER_RADIUS + 0.003,
        },
        inputs: vec![right; 60],
    });
    cases
}

fn fixture() -> String {
    let doc = json!({
        "about": "Arena movement parity: each case starts at `start`, applies `inputs` ([dir, flags]) one \
                  step each with `dt` and `pillars` ([x, y, r]), and lists the state after each step. \
                  Every float is its f32 bit pattern. Generated by examples/arena/tests/movement_fixture.rs \
                  (ZONEKEEP_BLESS=1 regenerates); replayed by examples/arena/web/test/movement.test.mjs.",
        "constants": {
            "ARENA_W": bits(ARENA_W), "ARENA_H": bits(ARENA_H), "PLAYER_RADIUS": bits(PLAYER_RADIUS),
            "SPEED": bits(SPEED), "WALK_SPEED": bits(WALK_SPEED), "DT": bits(DT),
            "POS_STEP": bits(POS_STEP), "DIAGONAL": bits(DIAGONAL),
            "MIN_X": bits(MIN_X), "MAX_X": bits(MAX_X), "MIN_Y": bits(MIN_Y), "MAX_Y": bits(MAX_Y),
        },
        "map_pillars": PILLARS.iter().map(pillar_json).collect::<Vec<_>>(),
        "cases": cases().iter().map(run).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string(&doc).unwrap();
    text.push('\n');
    text
}

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/arena/movement.json")
}

#[test]
fn movement_fixture_is_fresh() {
    let want = fixture();
    let path = fixture_path();
    if std::env::var_os("ZONEKEEP_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale or missing: run `ZONEKEEP_BLESS=1 cargo test -p zonekeep-arena --test movement_fixture`",
        path.display()
    );
}

#[test]
fn fixture_cases_exercise_every_branch() {
    // Guards the fixture's value: it must include pillar pushes, wall clamps and both speeds.
    let mut pushed = false;
    let mut clamped = false;
    for case in cases() {
        let mut s = case.start;
        for i in &case.inputs {
            let free = step(&s, i, case.dt, &[]);
            let next = step(&s, i, case.dt, &case.pillars);
            pushed |= free != next;
            clamped |= [MIN_X, MAX_X].map(snap).contains(&next.x)
                || [MIN_Y, MAX_Y].map(snap).contains(&next.y);
            s = next;
        }
    }
    assert!(pushed && clamped);
}
