//! The fact keys the SDK makes for a zone: under the host's prefix, counting on across a save,
//! and none made yet when restoring a save of the first format.

use super::Ledger;
use crate::testing::{Command, TestHost};

#[test]
fn fact_keys_the_sdk_makes_carry_the_hosts_prefix_and_go_on_counting_across_a_save() {
    let mut host = TestHost::<Ledger>::new(50_000);
    host.create(1, "bank-1", "{}").unwrap();
    host.tick().unwrap();
    let commands = host.tick().unwrap();
    assert!(matches!(&commands[..], [Command::Fact { key, .. }] if key == "bank-1:0:m1"));
    let save = host.save().unwrap();

    // Restored in a new instance (an in-place upgrade keeps the prefix): no key is made twice.
    let mut next = TestHost::<Ledger>::new(50_000);
    next.restore(1, "bank-1", "{}", &save).unwrap();
    next.tick().unwrap();
    let keys = &next.zone().unwrap().keys;
    assert_eq!(keys, &["bank-1:0:m2".to_owned()]);
}

#[test]
fn a_save_of_the_first_format_restores_with_no_fact_keys_made() {
    let mut host = TestHost::<Ledger>::new(1000);
    let mut save = vec![1];
    save.extend_from_slice(&[7; 32]);
    host.restore(0, "bank-1", "{}", &save).unwrap();
    assert_eq!(host.guest().rng_state(), [u64::from_le_bytes([7; 8]); 4]);
    host.tick().unwrap();
    assert_eq!(host.zone().unwrap().keys, ["bank-1:0:m0"]);
}
