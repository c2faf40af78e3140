//! Property: whatever sequence of claims and (epoch, seq) writes arrives, a lower epoch never
//! overwrites a higher one, and every answer matches the reference model of the contract.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proptest::prelude::*;
use support::{Model, Verdict};
use zonekeep_store::{SaveStore, SqliteStore};

#[derive(Debug, Clone)]
enum Op {
    Claim,
    /// Epoch as an offset from the model's fence (so writes hover around it), seq, content.
    Write {
        epoch_offset: i8,
        seq: u8,
        content: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Claim),
        5 => (-3i8..=2, 0u8..6, 0u8..2).prop_map(|(epoch_offset, seq, content)| Op::Write {
            epoch_offset,
            seq,
            content
        }),
    ]
}

async fn run(ops: Vec<Op>) {
    let store = SqliteStore::open(":memory:").await.unwrap();
    let mut model = Model::default();
    let mut highest_written_epoch = 0u64;
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Claim => {
                let claimed = store.claim("z").await.unwrap().epoch;
                assert_eq!(claimed, model.claim(), "step {step}");
            }
            Op::Write {
                epoch_offset,
                seq,
                content,
            } => {
                let epoch = model.fence.saturating_add_signed(i64::from(epoch_offset));
                let bytes = [content];
                let result = store.write("z", epoch, u64::from(seq), "k", &bytes).await;
                let verdict = Verdict::of(&result);
                if verdict == Verdict::Written {
                    assert!(
                        epoch >= highest_written_epoch,
                        "step {step}: lower epoch overwrote"
                    );
                    highest_written_epoch = epoch;
                }
                assert_eq!(
                    verdict,
                    model.write(epoch, u64::from(seq), &bytes),
                    "step {step}"
                );
            }
        }
        // The stored save never goes back: its epoch is the highest ever written.
        let saved = store.load("z").await.unwrap();
        assert_eq!(saved.as_ref().map_or(0, |s| s.epoch), highest_written_epoch);
        assert_eq!(saved.map(|s| (s.epoch, s.seq, s.bytes)), model.save);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lower_epoch_never_overwrites(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops));
    }
}
