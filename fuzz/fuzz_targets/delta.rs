//! Fuzz target `delta`: the oracle `zonekeep_protocol::fuzzing::delta` must never fail or panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zonekeep_protocol::fuzzing::delta(data) {
        panic!("delta invariant broken: {e}");
    }
});
