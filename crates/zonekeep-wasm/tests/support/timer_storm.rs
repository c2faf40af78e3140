//! A module that makes many cheap calls a tick: CREATE sets `n` timers firing every tick, and each
//! TIMER call (op 9) runs `on_timer` (WebAssembly text, with a local `$i` to count with); JOIN
//! (op 2) runs `on_join`. Shared by the sandbox's library tests and the host's process tests.
#![allow(dead_code)]

/// The module's bytes.
pub fn timer_storm(n: u64, on_timer: &str, on_join: &str) -> Vec<u8> {
    // TIMER_EVERY (16): u64 ticks, u64 tag.
    let mut commands = Vec::new();
    for tag in 0..n {
        commands.push(16u8);
        commands.extend_from_slice(&1u64.to_le_bytes());
        commands.extend_from_slice(&tag.to_le_bytes());
    }
    let data: String = commands.iter().map(|b| format!("\\{b:02x}")).collect();
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 8192) "{data}")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (local $i i32)
                (if (i32.eq (local.get $op) (i32.const 1)) (then (return (i64.const {packed}))))
                (if (i32.eq (local.get $op) (i32.const 2)) (then {on_join}))
                (if (i32.eq (local.get $op) (i32.const 9)) (then {on_timer}))
                i64.const 0))"#,
        packed = (8192i64 << 32) | commands.len() as i64,
    ))
    .unwrap()
}

/// `on_timer` text spinning `n` iterations.
pub fn spin(n: u32) -> String {
    format!(
        "(local.set $i (i32.const {n})) (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))"
    )
}
