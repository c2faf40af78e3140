//! The arena's rules, written once: the movement rule, the layout and random placement, the
//! drones' flight and the players' names and colours. The native arena zone (`zonekeep-arena`)
//! and the arena module (`zonekeep-arena-module`, the same game as a WebAssembly zone module)
//! both run them, and the page runs the movement rule compiled to WebAssembly
//! (`wasm32-unknown-unknown`, served as `/arena-rules.wasm`) to predict its own player, so the
//! server and the prediction agree to the bit by construction.
//!
//! This crate owns those rules and, on `wasm32`, the movement rule's exports for the page. It
//! must depend on nothing but the protocol's quantization (what "snapped to the wire" means),
//! `rand_core`'s trait (the zone's RNG is handed in) and serde (a drone's path is part of an
//! arena's image; create params are JSON), so it builds for the browser and into a module with no runtime.
//!
//! The exports (all numbers little-endian `f32` in the module's memory):
//! - `arena_pillars(n: u32) -> u32`: the address of room for `n` pillars (`x`, `y`, `r` each),
//!   which the page fills before stepping;
//! - `arena_step(x: f32, y: f32, dir: u32, flags: u32, dt: f32, n: u32) -> u32`: one
//!   [`movement::step`] against the first `n` pillars written there; answers the address of the
//!   new `x`, `y`.

pub mod drones;
pub mod game;
pub mod identity;
pub mod map;
pub mod movement;
pub mod save;

#[cfg(target_arch = "wasm32")]
mod exports {
    use std::cell::RefCell;

    use crate::movement::{step, MoveInput, MoveState, Pillar};

    /// The page's pillars (`x`, `y`, `r` each) and the last step's result.
    struct Buffers {
        pillars: Vec<f32>,
        out: [f32; 2],
        scratch: Vec<Pillar>,
    }

    thread_local! {
        static BUFFERS: RefCell<Buffers> = const {
            RefCell::new(Buffers { pillars: Vec::new(), out: [0.0; 2], scratch: Vec::new() })
        };
    }

    /// Room for `n` pillars; the page writes them there.
    // SAFETY (`no_mangle`): the name is this module's export, defined once.
    #[allow(unsafe_code)]
    #[no_mangle]
    pub extern "C" fn arena_pillars(n: u32) -> u32 {
        BUFFERS.with(|b| {
            let mut b = b.borrow_mut();
            b.pillars.clear();
            b.pillars.resize(n as usize * 3, 0.0);
            b.pillars.as_ptr() as usize as u32
        })
    }

    /// One step against the first `n` pillars written at [`arena_pillars`]'s address (fewer when
    /// the page made room for fewer); answers the address of the new position.
    // SAFETY (`no_mangle`): as for `arena_pillars`.
    #[allow(unsafe_code)]
    #[no_mangle]
    pub extern "C" fn arena_step(x: f32, y: f32, dir: u32, flags: u32, dt: f32, n: u32) -> u32 {
        BUFFERS.with(|b| {
            let b = &mut *b.borrow_mut();
            b.scratch.clear();
            b.scratch
                .extend(b.pillars.chunks_exact(3).take(n as usize).map(|p| Pillar {
                    x: p[0],
                    y: p[1],
                    r: p[2],
                }));
            let input = MoveInput {
                dir: dir as u8,
                flags: flags as u8,
            };
            let s = step(&MoveState { x, y }, &input, dt, &b.scratch);
            b.out = [s.x, s.y];
            b.out.as_ptr() as usize as u32
        })
    }
}
