//! The runtime behind the exports (natively: addresses are placeholders, but the checks hold).

use super::{valid_input, Probe};
use crate::testing::decode_commands;
use crate::Op;

#[test]
fn runtime_runs_calls_written_to_its_buffer() {
    let mut rt = crate::Runtime::<Probe>::new();
    let create = valid_input(Op::Create);
    rt.alloc(create.len() as i32);
    rt.write_input(&create);
    let packed = rt.call(1, create.len() as i32);
    let out_len = (packed as u64 & 0xffff_ffff) as usize;
    assert_eq!(out_len, rt.output().len());
    assert_eq!(decode_commands(rt.output()).unwrap().len(), 1);
    // A smaller alloc keeps the buffer; the next call reads only its own length.
    let drop = valid_input(Op::Drop);
    rt.alloc(drop.len() as i32);
    rt.write_input(&drop);
    assert_eq!(rt.call(4, drop.len() as i32) as u64 & 0xffff_ffff, 0);
}

#[test]
#[should_panic(expected = "zk_call with 9 input bytes, but zk_alloc gave 8")]
fn runtime_refuses_a_length_beyond_the_buffer() {
    let mut rt = crate::Runtime::<Probe>::new();
    rt.alloc(8);
    rt.call(1, 9);
}

#[test]
#[should_panic(expected = "malformed Create input")]
fn runtime_refuses_malformed_input() {
    let mut rt = crate::Runtime::<Probe>::new();
    rt.alloc(8);
    rt.call(1, 8);
}

#[test]
#[should_panic(expected = "a negative length")]
fn runtime_refuses_a_negative_alloc() {
    let mut rt = crate::Runtime::<Probe>::new();
    rt.alloc(-1);
}
