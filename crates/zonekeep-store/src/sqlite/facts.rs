//! Fact ledger operations on a SQLite connection (see [`crate::FactLedger`] for the contract).
//!
//! `record` runs under `BEGIN IMMEDIATE`, i.e. holding the database's write lock from the first
//! read: the "is this key new?" check, the effect and the insert are one serialized step, so two
//! stores racing on a key cannot both see it as new. A fact carrying its owner's epoch is checked
//! against the zone's fence inside that same step, so a claim by a newer owner either lands before
//! the check (and the fact is refused) or after the commit. The fact's board changes
//! ([`super::boards::feed`]) happen in that same step, once, when the key is new.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::connection::CachedSql;
use super::sql_err;
use crate::effect::{self, Effect};
use crate::error::{Result, StoreError};
use crate::fence;
use crate::types::{FactRecord, FactResult, StoredFact};
use crate::validate::{check_id, from_db, now_ms};

fn parse_json(what: &str, key: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("fact {key:?}: stored {what} is not JSON: {e}")))
}

fn encode_json(value: &Value) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::InvalidArgument(format!("payload not encodable: {e}")))
}

pub(super) fn record(conn: &mut Connection, fact: &FactRecord) -> Result<FactResult> {
    check_id("fact key", &fact.key)?;
    check_id("zone id", &fact.zone_id)?;
    check_id("fact kind", &fact.kind)?;
    if let Some(p) = &fact.principal {
        check_id("principal", p)?;
    }
    let effect = effect::parse(fact)?;
    let submits = effect::board_submits(fact)?;
    let payload = encode_json(&fact.payload)?;

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    if let Some(epoch) = fact.epoch {
        let fence = from_db("epoch", super::saves::current_fence(&tx, &fact.zone_id)?)?;
        fence::check_owner(fence, epoch)?;
    }
    let existing: Option<(String, String)> = tx
        .query_row_cached(
            "SELECT result, payload FROM facts WHERE key = ?1",
            params![fact.key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql_err)?;
    if let Some((result, stored_payload)) = existing {
        if stored_payload != payload {
            tracing::warn!(key = %fact.key, "fact key reused with a different payload; first one stands");
        }
        return Ok(FactResult {
            first: false,
            result: parse_json("result", &fact.key, &result)?,
        });
    }

    let result = match &effect {
        Effect::None => Value::Null,
        Effect::Add { principal, amounts } => {
            for (name, amount) in amounts {
                let current: i64 = tx
                    .query_row_cached(
                        "SELECT total FROM fact_totals WHERE principal = ?1 AND name = ?2",
                        params![principal, name],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql_err)?
                    .unwrap_or(0);
                let total = effect::checked_total(&fact.key, name, current, *amount)?;
                tx.execute_cached(
                    "INSERT INTO fact_totals (principal, name, total) VALUES (?1, ?2, ?3)
                     ON CONFLICT (principal, name) DO UPDATE SET total = excluded.total",
                    params![principal, name, total],
                )
                .map_err(sql_err)?;
            }
            effect::totals_json(&totals(&tx, principal)?)
        }
    };
    if let Some(principal) = &fact.principal {
        let no_adds = BTreeMap::new();
        let adds = match &effect {
            Effect::Add { amounts, .. } => amounts,
            Effect::None => &no_adds,
        };
        super::boards::feed(&tx, &fact.key, principal, adds, &submits)?;
    }
    tx.execute_cached(
        "INSERT INTO facts (key, zone_id, kind, principal, payload, result, recorded_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            fact.key,
            fact.zone_id,
            fact.kind,
            fact.principal,
            payload,
            encode_json(&result)?,
            now_ms()
        ],
    )
    .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(FactResult {
        first: true,
        result,
    })
}

pub(super) fn get(conn: &Connection, key: &str) -> Result<Option<StoredFact>> {
    check_id("fact key", key)?;
    let row: Option<(String, String, Option<String>, String, String, i64)> = conn
        .query_row_cached(
            "SELECT zone_id, kind, principal, payload, result, recorded_at_ms
             FROM facts WHERE key = ?1",
            params![key],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
        )
        .optional()
        .map_err(sql_err)?;
    row.map(|(zone_id, kind, principal, payload, result, at)| {
        Ok(StoredFact {
            key: key.to_owned(),
            zone_id,
            kind,
            principal,
            payload: parse_json("payload", key, &payload)?,
            result: parse_json("result", key, &result)?,
            recorded_at_ms: from_db("recorded_at_ms", at)?,
        })
    })
    .transpose()
}

pub(super) fn totals(conn: &Connection, principal: &str) -> Result<BTreeMap<String, i64>> {
    check_id("principal", principal)?;
    let mut stmt = conn
        .prepare_cached("SELECT name, total FROM fact_totals WHERE principal = ?1")
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![principal], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<BTreeMap<String, i64>>>()
        .map_err(sql_err)
}

pub(super) fn count(conn: &Connection) -> Result<u64> {
    let n: i64 = conn
        .query_row_cached("SELECT count(*) FROM facts", [], |r| r.get(0))
        .map_err(sql_err)?;
    from_db("fact count", n)
}
