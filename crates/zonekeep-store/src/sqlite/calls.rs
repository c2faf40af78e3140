//! The call journal on a SQLite connection (see [`crate::CallStore`] for the contract).
//!
//! Every begin and finish runs under `BEGIN IMMEDIATE`: reading the zone's fence and the journaled
//! call, deciding and writing are one serialized step, so two stores beginning one new call cannot
//! both start it, two answers cannot both be recorded, and a claim of the zone lands either before
//! a call's fence check (which is then fenced) or after its commit.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::connection::CachedSql;
use super::{sql_err, SqliteStore};
use crate::calls::{
    self, answer_columns, answer_of_columns, check_call, check_call_id, check_finish, CallAnswer,
    CallBegin, CallFinish, CallRecord, CallStore, Journaled, StoredCall,
};
use crate::error::Result;
use crate::validate::from_db;

const COLUMNS: &str = "function, args, args_sha256, answer_kind, answer_ok, answer_code, \
                       answer_message, created_at_ms, settled_at_ms";

/// One row's columns, in [`COLUMNS`] order.
type Raw = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    Option<i64>,
);

fn read_raw(conn: &Connection, zone_id: &str, key: &str) -> Result<Option<Raw>> {
    conn.query_row_cached(
        &format!("SELECT {COLUMNS} FROM zone_calls WHERE zone_id = ?1 AND call_key = ?2"),
        params![zone_id, key],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        },
    )
    .optional()
    .map_err(sql_err)
}

fn to_stored(zone_id: &str, key: &str, raw: Raw) -> Result<StoredCall> {
    let (function, args, _sha, kind, ok, code, message, created, settled) = raw;
    Ok(StoredCall {
        zone_id: zone_id.to_owned(),
        key: key.to_owned(),
        function,
        args,
        answer: answer_of_columns(zone_id, key, kind, ok, code, message)?,
        created_at_ms: from_db("created_at_ms", created)?,
        settled_at_ms: settled.map(|s| from_db("settled_at_ms", s)).transpose()?,
    })
}

/// The zone's fence when the write carries an epoch (0 otherwise: it is not checked).
fn fence_for(tx: &Transaction<'_>, zone_id: &str, epoch: Option<u64>) -> Result<u64> {
    match epoch {
        Some(_) => from_db("epoch", super::saves::current_fence(tx, zone_id)?),
        None => Ok(0),
    }
}

/// Begins `call`, already checked ([`check_call`]) by the caller.
fn begin(conn: &mut Connection, call: &CallRecord, args_sha256: &str) -> Result<CallBegin> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = fence_for(&tx, &call.zone_id, call.epoch)?;
    let stored = match read_raw(&tx, &call.zone_id, &call.key)? {
        Some((function, args, sha, kind, ok, code, message, ..)) => Some(Journaled {
            function,
            args,
            args_sha256: sha,
            answer: answer_of_columns(&call.zone_id, &call.key, kind, ok, code, message)?,
        }),
        None => None,
    };
    let decision = calls::decide_begin(call, args_sha256, fence, stored)?;
    if decision == CallBegin::Started {
        tx.execute_cached(
            concat!(
                "INSERT INTO zone_calls
                     (zone_id, call_key, function, args, args_sha256, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ",
                db_now_ms!(),
                ")"
            ),
            params![
                call.zone_id,
                call.key,
                call.function,
                call.args,
                args_sha256
            ],
        )
        .map_err(sql_err)?;
        tx.commit().map_err(sql_err)?;
    }
    Ok(decision)
}

/// Finishes a call; the arguments were already checked ([`check_finish`]) by the caller.
fn finish(
    conn: &mut Connection,
    zone_id: &str,
    key: &str,
    epoch: Option<u64>,
    answer: &CallAnswer,
) -> Result<CallFinish> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = fence_for(&tx, zone_id, epoch)?;
    let stored = read_raw(&tx, zone_id, key)?
        .map(|(_, _, _, kind, ok, code, message, ..)| {
            answer_of_columns(zone_id, key, kind, ok, code, message)
        })
        .transpose()?;
    let decision = calls::decide_finish(zone_id, key, epoch, fence, stored)?;
    if decision == CallFinish::Recorded {
        let (kind, ok, code, message) = answer_columns(answer);
        tx.execute_cached(
            concat!(
                "UPDATE zone_calls SET answer_kind = ?3, answer_ok = ?4, answer_code = ?5,
                     answer_message = ?6, settled_at_ms = ",
                db_now_ms!(),
                " WHERE zone_id = ?1 AND call_key = ?2"
            ),
            params![zone_id, key, kind, ok, code, message],
        )
        .map_err(sql_err)?;
        tx.commit().map_err(sql_err)?;
    }
    Ok(decision)
}

fn get(conn: &Connection, zone_id: &str, key: &str) -> Result<Option<StoredCall>> {
    check_call_id(zone_id, key)?;
    read_raw(conn, zone_id, key)?
        .map(|raw| to_stored(zone_id, key, raw))
        .transpose()
}

fn sweep(conn: &Connection, keep: Duration) -> Result<u64> {
    let n = conn
        .execute_cached(
            concat!(
                "DELETE FROM zone_calls
                 WHERE coalesce(settled_at_ms, created_at_ms) <= ",
                db_now_ms!(),
                " - ?1"
            ),
            params![calls::keep_ms(keep)],
        )
        .map_err(sql_err)?;
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}

fn count(conn: &Connection) -> Result<u64> {
    let n: i64 = conn
        .query_row_cached("SELECT count(*) FROM zone_calls", [], |r| r.get(0))
        .map_err(sql_err)?;
    from_db("call count", n)
}

#[async_trait]
impl CallStore for SqliteStore {
    async fn begin_call(&self, call: &CallRecord) -> Result<CallBegin> {
        // Refuse before copying up to the limit's worth of args for the blocking pool.
        check_call(call)?;
        let sha = calls::args_sha256(&call.args);
        let call = call.clone();
        self.run(move |conn| begin(conn, &call, &sha)).await
    }

    async fn finish_call(
        &self,
        zone_id: &str,
        key: &str,
        epoch: Option<u64>,
        answer: &CallAnswer,
    ) -> Result<CallFinish> {
        check_finish(zone_id, key, epoch, answer)?;
        let (zone_id, key, answer) = (zone_id.to_owned(), key.to_owned(), answer.clone());
        self.run(move |conn| finish(conn, &zone_id, &key, epoch, &answer))
            .await
    }

    async fn get_call(&self, zone_id: &str, key: &str) -> Result<Option<StoredCall>> {
        let (zone_id, key) = (zone_id.to_owned(), key.to_owned());
        self.run(move |conn| get(conn, &zone_id, &key)).await
    }

    async fn sweep_calls(&self, keep: Duration) -> Result<u64> {
        self.run(move |conn| sweep(conn, keep)).await
    }

    async fn count_calls(&self) -> Result<u64> {
        self.run(|conn| count(conn)).await
    }
}
