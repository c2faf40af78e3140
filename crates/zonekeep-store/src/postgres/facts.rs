//! Fact ledger operations on PostgreSQL (see [`crate::FactLedger`] for the contract and the module
//! docs of [`super`] for why inserting the ledger row first makes racing recorders safe). A new
//! fact's board changes ([`super::boards::feed`]) happen in its recording transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, GenericClient, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::effect::{self, Effect};
use crate::error::{Result, StoreError};
use crate::fence;
use crate::traits::FactLedger;
use crate::types::{FactRecord, FactResult, StoredFact};
use crate::validate::{check_id, from_db, now_ms};

pub(super) async fn record(
    tx: Transaction<'_>,
    fact: &FactRecord,
    err: &PgErr,
) -> Result<FactResult> {
    check_id("fact key", &fact.key)?;
    check_id("zone id", &fact.zone_id)?;
    check_id("fact kind", &fact.kind)?;
    if let Some(p) = &fact.principal {
        check_id("principal", p)?;
    }
    let effect = effect::parse(fact)?;
    let submits = effect::board_submits(fact)?;
    if let Some(epoch) = fact.epoch {
        check_owner(&tx, &fact.zone_id, epoch, err).await?;
    }

    // Claim the key with a placeholder result; a concurrent recorder of the same key waits here on
    // the unique index until this transaction ends, then finds the row and the real result.
    let inserted = tx
        .execute(
            "INSERT INTO facts (key, zone_id, kind, principal, payload, result, recorded_at_ms)
             VALUES ($1, $2, $3, $4, $5, 'null'::jsonb, $6)
             ON CONFLICT (key) DO NOTHING",
            &[
                &fact.key,
                &fact.zone_id,
                &fact.kind,
                &fact.principal,
                &fact.payload,
                &now_ms(),
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    if inserted == 0 {
        let row = tx
            .query_opt(
                "SELECT result, payload FROM facts WHERE key = $1",
                &[&fact.key],
            )
            .await
            .map_err(|e| err.map(e))?
            .ok_or_else(|| {
                StoreError::Backend(format!("fact {:?} conflicted but is not visible", fact.key))
            })?;
        let result: Value = col(&row, 0)?;
        let stored_payload: Value = col(&row, 1)?;
        if stored_payload != fact.payload {
            tracing::warn!(key = %fact.key, "fact key reused with a different payload; first one stands");
        }
        return Ok(FactResult {
            first: false,
            result,
        });
    }

    let result = match &effect {
        Effect::None => Value::Null,
        Effect::Add { principal, amounts } => {
            for (name, amount) in amounts {
                tx.execute(
                    "INSERT INTO fact_totals (principal, name, total) VALUES ($1, $2, $3)
                     ON CONFLICT (principal, name)
                     DO UPDATE SET total = fact_totals.total + EXCLUDED.total",
                    &[principal, name, amount],
                )
                .await
                .map_err(|e| {
                    if e.code() == Some(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE) {
                        StoreError::InvalidFact {
                            key: fact.key.clone(),
                            reason: format!("total {name:?} would overflow"),
                        }
                    } else {
                        err.map(e)
                    }
                })?;
            }
            effect::totals_json(&totals(&tx, principal, err).await?)
        }
    };
    if let Some(principal) = &fact.principal {
        let no_adds = BTreeMap::new();
        let adds = match &effect {
            Effect::Add { amounts, .. } => amounts,
            Effect::None => &no_adds,
        };
        super::boards::feed(&tx, &fact.key, principal, adds, &submits, err).await?;
    }
    tx.execute(
        "UPDATE facts SET result = $2 WHERE key = $1",
        &[&fact.key, &result],
    )
    .await
    .map_err(|e| err.map(e))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(FactResult {
        first: true,
        result,
    })
}

/// Refuses a fact whose owner `epoch` is below the zone's fence, read `FOR SHARE`
/// ([`super::saves::share_current_fence`]): a fact is either committed before a newer owner's claim
/// or refused.
async fn check_owner(tx: &Transaction<'_>, zone_id: &str, epoch: u64, err: &PgErr) -> Result<()> {
    let fence = super::saves::share_current_fence(tx, zone_id, err).await?;
    fence::check_owner(fence, epoch)
}

pub(super) async fn get(client: &Client, key: &str, err: &PgErr) -> Result<Option<StoredFact>> {
    check_id("fact key", key)?;
    let Some(row) = client
        .query_opt(
            "SELECT zone_id, kind, principal, payload, result, recorded_at_ms
             FROM facts WHERE key = $1",
            &[&key],
        )
        .await
        .map_err(|e| err.map(e))?
    else {
        return Ok(None);
    };
    Ok(Some(StoredFact {
        key: key.to_owned(),
        zone_id: col(&row, 0)?,
        kind: col(&row, 1)?,
        principal: col(&row, 2)?,
        payload: col(&row, 3)?,
        result: col(&row, 4)?,
        recorded_at_ms: from_db("recorded_at_ms", col(&row, 5)?)?,
    }))
}

pub(super) async fn totals<C: GenericClient + Sync>(
    client: &C,
    principal: &str,
    err: &PgErr,
) -> Result<BTreeMap<String, i64>> {
    check_id("principal", principal)?;
    let rows = client
        .query(
            "SELECT name, total FROM fact_totals WHERE principal = $1",
            &[&principal],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter()
        .map(|row| Ok((col(row, 0)?, col(row, 1)?)))
        .collect()
}

pub(super) async fn count(client: &Client, err: &PgErr) -> Result<u64> {
    let n: i64 = client
        .query_one("SELECT count(*) FROM facts", &[])
        .await
        .map_err(|e| err.map(e))?
        .try_get(0)
        .map_err(super::corrupt_column)?;
    from_db("fact count", n)
}

#[async_trait]
impl FactLedger for PostgresStore {
    async fn record(&self, fact: &FactRecord) -> Result<FactResult> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        record(tx, fact, &self.err).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredFact>> {
        let client = self.client().await?;
        get(&client, key, &self.err).await
    }

    async fn totals(&self, principal: &str) -> Result<BTreeMap<String, i64>> {
        let client = self.client().await?;
        totals(&**client, principal, &self.err).await
    }

    async fn count(&self) -> Result<u64> {
        let client = self.client().await?;
        count(&client, &self.err).await
    }
}
