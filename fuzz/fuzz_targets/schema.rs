//! Fuzz target `schema`: the oracle `zonekeep_protocol::fuzzing::schema` must never fail or panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zonekeep_protocol::fuzzing::schema(data) {
        panic!("schema invariant broken: {e}");
    }
});
