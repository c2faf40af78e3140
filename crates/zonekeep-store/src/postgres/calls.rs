//! The call journal on PostgreSQL (see [`crate::CallStore`] for the contract).
//!
//! A begin or finish carrying an owner epoch first reads the zone's fence `FOR SHARE`
//! ([`super::saves::share_current_fence`]), like a fact: a claim of the zone waits until it ends,
//! or, if it committed first, is seen and fences the call. Then:
//! - a begin inserts the call (`ON CONFLICT (zone_id, call_key) DO NOTHING`): a concurrent begin
//!   of the same key waits on the primary key until the first commits, then sees the conflict and
//!   reads the committed call, so exactly one of them starts it;
//! - a finish locks the call's row (`SELECT .. FOR UPDATE`), so of two answers the second waits,
//!   then reads the first and answers [`CallFinish::AlreadyDone`].
//!
//! Fence rows are only ever shared here and the transactions that lock them `FOR UPDATE` touch no
//! call, while the sweep deletes call rows and touches no fence, so nothing here waits in a cycle.

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::{Client, Row, Transaction};

use super::saves::share_current_fence;
use super::{col, PgErr, PostgresStore};
use crate::calls::{
    self, answer_columns, answer_of_columns, check_call, check_call_id, check_finish, CallAnswer,
    CallBegin, CallFinish, CallRecord, CallStore, Journaled, StoredCall,
};
use crate::error::{Result, StoreError};
use crate::validate::from_db;

/// The answer columns, then the rest of a stored call.
const COLUMNS: &str = "answer_kind, answer_ok, answer_code, answer_message, function, args, \
                       args_sha256, created_at_ms, settled_at_ms";

/// The answer in columns 0..4 of `row` (see [`COLUMNS`]).
fn answer_of(row: &Row, zone_id: &str, key: &str) -> Result<Option<CallAnswer>> {
    answer_of_columns(
        zone_id,
        key,
        col(row, 0)?,
        col(row, 1)?,
        col(row, 2)?,
        col(row, 3)?,
    )
}

fn to_stored(row: &Row, zone_id: &str, key: &str) -> Result<StoredCall> {
    let settled: Option<i64> = col(row, 8)?;
    Ok(StoredCall {
        zone_id: zone_id.to_owned(),
        key: key.to_owned(),
        function: col(row, 4)?,
        args: col(row, 5)?,
        answer: answer_of(row, zone_id, key)?,
        created_at_ms: from_db("created_at_ms", col(row, 7)?)?,
        settled_at_ms: settled.map(|s| from_db("settled_at_ms", s)).transpose()?,
    })
}

/// The zone's fence, read `FOR SHARE`, when the write carries an epoch (0 otherwise: it is not
/// checked).
async fn fence_for(
    tx: &Transaction<'_>,
    zone_id: &str,
    epoch: Option<u64>,
    err: &PgErr,
) -> Result<u64> {
    match epoch {
        Some(_) => share_current_fence(tx, zone_id, err).await,
        None => Ok(0),
    }
}

/// Begins `call`, already checked ([`check_call`]) by the caller.
async fn begin(
    tx: Transaction<'_>,
    call: &CallRecord,
    args_sha256: &str,
    err: &PgErr,
) -> Result<CallBegin> {
    let fence = fence_for(&tx, &call.zone_id, call.epoch, err).await?;
    // Journal the call as pending; if the decision below refuses it (a fenced owner), the
    // transaction rolls back and the row was never there.
    let inserted = tx
        .execute(
            &format!(
                "INSERT INTO zone_calls
                     (zone_id, call_key, function, args, args_sha256, created_at_ms)
                 VALUES ($1, $2, $3, $4, $5, {})
                 ON CONFLICT (zone_id, call_key) DO NOTHING",
                db_now_ms!()
            ),
            &[
                &call.zone_id,
                &call.key,
                &call.function,
                &call.args,
                &args_sha256,
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    let stored = if inserted == 1 {
        None
    } else {
        let row = tx
            .query_opt(
                &format!("SELECT {COLUMNS} FROM zone_calls WHERE zone_id = $1 AND call_key = $2"),
                &[&call.zone_id, &call.key],
            )
            .await
            .map_err(|e| err.map(e))?
            .ok_or_else(|| {
                StoreError::Backend(format!(
                    "call {:?} of zone {:?} conflicted but is not visible (swept meanwhile?)",
                    call.key, call.zone_id
                ))
            })?;
        Some(Journaled {
            answer: answer_of(&row, &call.zone_id, &call.key)?,
            function: col(&row, 4)?,
            args: col(&row, 5)?,
            args_sha256: col(&row, 6)?,
        })
    };
    let decision = calls::decide_begin(call, args_sha256, fence, stored)?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(decision)
}

/// Finishes a call; the arguments were already checked ([`check_finish`]) by the caller.
async fn finish(
    tx: Transaction<'_>,
    zone_id: &str,
    key: &str,
    epoch: Option<u64>,
    answer: &CallAnswer,
    err: &PgErr,
) -> Result<CallFinish> {
    let fence = fence_for(&tx, zone_id, epoch, err).await?;
    let stored = tx
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM zone_calls WHERE zone_id = $1 AND call_key = $2 FOR UPDATE"
            ),
            &[&zone_id, &key],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| answer_of(&row, zone_id, key))
        .transpose()?;
    let decision = calls::decide_finish(zone_id, key, epoch, fence, stored)?;
    if decision == CallFinish::Recorded {
        let (kind, ok, code, message) = answer_columns(answer);
        tx.execute(
            &format!(
                "UPDATE zone_calls SET answer_kind = $3, answer_ok = $4, answer_code = $5,
                     answer_message = $6, settled_at_ms = {}
                 WHERE zone_id = $1 AND call_key = $2",
                db_now_ms!()
            ),
            &[&zone_id, &key, &kind, &ok, &code, &message],
        )
        .await
        .map_err(|e| err.map(e))?;
        tx.commit().await.map_err(|e| err.map(e))?;
    }
    Ok(decision)
}

async fn get(client: &Client, zone_id: &str, key: &str, err: &PgErr) -> Result<Option<StoredCall>> {
    client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM zone_calls WHERE zone_id = $1 AND call_key = $2"),
            &[&zone_id, &key],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| to_stored(&row, zone_id, key))
        .transpose()
}

async fn sweep(client: &Client, keep: Duration, err: &PgErr) -> Result<u64> {
    client
        .execute(
            // The cutoff is computed once, in a subquery: compared directly, the volatile clock
            // would be read per row and keep the planner off the index on the same expression.
            &format!(
                "DELETE FROM zone_calls
                 WHERE coalesce(settled_at_ms, created_at_ms) <= (SELECT {} - $1)",
                db_now_ms!()
            ),
            &[&calls::keep_ms(keep)],
        )
        .await
        .map_err(|e| err.map(e))
}

async fn count(client: &Client, err: &PgErr) -> Result<u64> {
    let n: i64 = client
        .query_one("SELECT count(*) FROM zone_calls", &[])
        .await
        .map_err(|e| err.map(e))?
        .try_get(0)
        .map_err(super::corrupt_column)?;
    from_db("call count", n)
}

#[async_trait]
impl CallStore for PostgresStore {
    async fn begin_call(&self, call: &CallRecord) -> Result<CallBegin> {
        check_call(call)?;
        let sha = calls::args_sha256(&call.args);
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        begin(tx, call, &sha, &self.err).await
    }

    async fn finish_call(
        &self,
        zone_id: &str,
        key: &str,
        epoch: Option<u64>,
        answer: &CallAnswer,
    ) -> Result<CallFinish> {
        check_finish(zone_id, key, epoch, answer)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        finish(tx, zone_id, key, epoch, answer, &self.err).await
    }

    async fn get_call(&self, zone_id: &str, key: &str) -> Result<Option<StoredCall>> {
        check_call_id(zone_id, key)?;
        let client = self.client().await?;
        get(&client, zone_id, key, &self.err).await
    }

    async fn sweep_calls(&self, keep: Duration) -> Result<u64> {
        let client = self.client().await?;
        sweep(&client, keep, &self.err).await
    }

    async fn count_calls(&self) -> Result<u64> {
        let client = self.client().await?;
        count(&client, &self.err).await
    }
}
