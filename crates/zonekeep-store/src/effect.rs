//! The ledger's built-in effects: adding named amounts to a principal's totals, and submitting
//! values to leaderboards (see [`crate::boards`]).
//!
//! Parsing and validation happen before any transaction starts, so a malformed fact is refused
//! without touching the database and both backends refuse exactly the same payloads.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::types::FactRecord;

/// Longest accepted total name, in bytes. Names become rows; bounding them bounds the table.
pub(crate) const MAX_NAME_LEN: usize = 128;
/// Most names one fact may add to.
pub(crate) const MAX_NAMES_PER_FACT: usize = 64;

/// The effect a fact asks for, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// No built-in effect: the fact is recorded and its result is `null`.
    None,
    /// Add each amount to `principal`'s total of that name. Names are sorted (a `BTreeMap`), which
    /// also gives every transaction the same row-lock order and so rules out deadlocks.
    Add {
        /// Whose totals change.
        principal: String,
        /// Name → amount to add.
        amounts: BTreeMap<String, i64>,
    },
}

/// Reads the effect out of `fact.payload`.
pub(crate) fn parse(fact: &FactRecord) -> Result<Effect> {
    let invalid = |reason: String| StoreError::InvalidFact {
        key: fact.key.clone(),
        reason,
    };
    let Some(add) = fact.payload.get("add") else {
        return Ok(Effect::None);
    };
    let Value::Object(map) = add else {
        return Err(invalid(
            "\"add\" must be an object of name → integer".into(),
        ));
    };
    let Some(principal) = fact.principal.clone() else {
        return Err(invalid("\"add\" needs a principal".into()));
    };
    if map.len() > MAX_NAMES_PER_FACT {
        return Err(invalid(format!(
            "\"add\" names {} totals, at most {MAX_NAMES_PER_FACT} allowed",
            map.len()
        )));
    }
    let mut amounts = BTreeMap::new();
    for (name, amount) in map {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(invalid(format!(
                "total name must be 1..={MAX_NAME_LEN} bytes"
            )));
        }
        let Some(amount) = amount.as_i64() else {
            return Err(invalid(format!(
                "amount for {name:?} is not a 64-bit integer"
            )));
        };
        amounts.insert(name.clone(), amount);
    }
    Ok(Effect::Add { principal, amounts })
}

/// Reads a fact's `{"boards": {"name": value}}` submissions (empty when it has none). Every
/// value is an integer within ±[`MAX_SCORE`](crate::boards::MAX_SCORE), the fact has a principal,
/// the names are board names, and there are at most
/// [`MAX_BOARDS_PER_FACT`](crate::boards::MAX_BOARDS_PER_FACT). Whether each board exists is
/// decided in the recording transaction.
pub(crate) fn board_submits(fact: &FactRecord) -> Result<BTreeMap<String, i64>> {
    use crate::boards::{check_board_name, MAX_BOARDS_PER_FACT, MAX_SCORE};
    let invalid = |reason: String| StoreError::InvalidFact {
        key: fact.key.clone(),
        reason,
    };
    let Some(boards) = fact.payload.get("boards") else {
        return Ok(BTreeMap::new());
    };
    let Value::Object(map) = boards else {
        return Err(invalid(
            "\"boards\" must be an object of board → integer".into(),
        ));
    };
    if fact.principal.is_none() {
        return Err(invalid("\"boards\" needs a principal".into()));
    }
    if map.len() > MAX_BOARDS_PER_FACT {
        return Err(invalid(format!(
            "\"boards\" names {} boards, at most {MAX_BOARDS_PER_FACT} allowed",
            map.len()
        )));
    }
    let mut values = BTreeMap::new();
    for (name, value) in map {
        check_board_name(name).map_err(|e| invalid(e.to_string()))?;
        let Some(value) = value
            .as_i64()
            .filter(|v| (-MAX_SCORE..=MAX_SCORE).contains(v))
        else {
            return Err(invalid(format!(
                "value for board {name:?} is not an integer within ±2^53 - 1"
            )));
        };
        values.insert(name.clone(), value);
    }
    Ok(values)
}

/// Adds `amount` to `current`, refusing overflow (a wrapped or saturated score would be a silent
/// wrong answer; refusing keeps the ledger exact).
// The SQLite backend sums in Rust; PostgreSQL checks the same overflow in SQL.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn checked_total(key: &str, name: &str, current: i64, amount: i64) -> Result<i64> {
    current
        .checked_add(amount)
        .ok_or_else(|| StoreError::InvalidFact {
            key: key.to_owned(),
            reason: format!("total {name:?} would overflow"),
        })
}

/// The JSON result of an `add` effect: the principal's totals after it.
pub(crate) fn totals_json(totals: &BTreeMap<String, i64>) -> Value {
    Value::Object(
        totals
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(*v)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn fact(principal: Option<&str>, payload: Value) -> FactRecord {
        FactRecord {
            key: "k".into(),
            zone_id: "z".into(),
            kind: "kill".into(),
            principal: principal.map(str::to_owned),
            payload,
            epoch: None,
        }
    }

    #[test]
    fn payload_without_add_has_no_effect() {
        assert_eq!(parse(&fact(None, json!({"mob": 3}))).unwrap(), Effect::None);
        assert_eq!(parse(&fact(None, json!(null))).unwrap(), Effect::None);
    }

    #[test]
    fn add_parses_amounts() {
        let e = parse(&fact(Some("p"), json!({"add": {"score": 50, "kills": -1}}))).unwrap();
        let Effect::Add { principal, amounts } = e else {
            panic!("expected add");
        };
        assert_eq!(principal, "p");
        assert_eq!(amounts.get("score"), Some(&50));
        assert_eq!(amounts.get("kills"), Some(&-1));
    }

    #[test]
    fn malformed_add_is_refused() {
        for payload in [
            json!({"add": 5}),
            json!({"add": {"score": 1.5}}),
            json!({"add": {"score": "5"}}),
            json!({"add": {"": 1}}),
            json!({"add": {"score": u64::MAX}}),
        ] {
            let err = parse(&fact(Some("p"), payload.clone())).unwrap_err();
            assert!(matches!(err, StoreError::InvalidFact { .. }), "{payload}");
        }
        let err = parse(&fact(None, json!({"add": {"score": 1}}))).unwrap_err();
        assert!(matches!(err, StoreError::InvalidFact { .. }));
    }

    #[test]
    fn board_submissions_parse_and_malformed_ones_are_refused() {
        let ok = board_submits(&fact(Some("p"), json!({"boards": {"laps": 8123}}))).unwrap();
        assert_eq!(ok.get("laps"), Some(&8123));
        assert!(board_submits(&fact(None, json!({"add": {}})))
            .unwrap()
            .is_empty());
        for payload in [
            json!({"boards": 5}),
            json!({"boards": {"laps": 1.5}}),
            json!({"boards": {"a b": 1}}),
            json!({"boards": {"laps": 9_007_199_254_740_992_i64}}),
        ] {
            let err = board_submits(&fact(Some("p"), payload.clone())).unwrap_err();
            assert!(matches!(err, StoreError::InvalidFact { .. }), "{payload}");
        }
        let err = board_submits(&fact(None, json!({"boards": {"laps": 1}}))).unwrap_err();
        assert!(matches!(err, StoreError::InvalidFact { .. }));
    }

    #[test]
    fn overflow_is_refused() {
        assert!(checked_total("k", "s", i64::MAX, 1).is_err());
        assert_eq!(checked_total("k", "s", 40, 2).unwrap(), 42);
    }
}
