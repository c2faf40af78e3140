//! Fuzz target `server_message`: the oracle `zonekeep_protocol::fuzzing::server_message` must never fail or panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = zonekeep_protocol::fuzzing::server_message(data) {
        panic!("server_message invariant broken: {e}");
    }
});
