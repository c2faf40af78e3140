//! Zone module operations on PostgreSQL (see [`crate::ModuleStore`] for the contract).
//!
//! Storing a module first asks whether its address is already stored, so a repeated store of a
//! large module does not ship its bytes again, then inserts with `ON CONFLICT DO NOTHING` (two
//! hosts storing the same new module at once both succeed, and one row is kept). A deploy is one
//! statement, an upsert of the kind's row that raises its version, in a READ COMMITTED transaction
//! of its own (whatever the server's default isolation). Concurrent deploys of one kind
//! from any hosts serialize on that row (the second upsert waits for the first to commit, then
//! raises the version the first wrote), so each gets a version of its own; the insert reads the
//! module row through the foreign key, which keeps it in place until the deploy commits. The
//! deploy joins the kind's history, and the history's oldest entries past its bound leave it, in
//! the same transaction. Deploys are stamped by the server's clock, as heartbeats are, and kinds
//! are listed with `COLLATE "C"`.
//!
//! Arguments are checked, and a module hashed, by the caller before it takes a pooled connection;
//! hashing and checking run on the blocking pool for large modules (see [`crate::modules`]), so no
//! async worker thread hashes 32 MiB.

use async_trait::async_trait;
use tokio_postgres::{Client, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::error::{Result, StoreError};
use crate::modules::{history_limit, not_stored, verify_off_thread};
use crate::traits::{ModuleStore, MAX_DEPLOY_HISTORY};
use crate::types::{DeployCause, ModuleDeploy};
use crate::validate::{from_db, to_db};

/// Stores `bytes` (already checked) under `sha256`, their digest.
pub(super) async fn put_module(
    client: &Client,
    sha256: &str,
    bytes: &[u8],
    err: &PgErr,
) -> Result<()> {
    let size = to_db("module size", bytes.len() as u64)?;
    let stored = client
        .query_opt("SELECT 1 FROM modules WHERE sha256 = $1", &[&sha256])
        .await
        .map_err(|e| err.map(e))?
        .is_some();
    if !stored {
        client
            .execute(
                concat!(
                    "INSERT INTO modules (sha256, bytes, size, created_at_ms) VALUES ($1, $2, $3, ",
                    db_now_ms!(),
                    ") ON CONFLICT (sha256) DO NOTHING"
                ),
                &[&sha256, &bytes, &size],
            )
            .await
            .map_err(|e| err.map(e))?;
    }
    Ok(())
}

/// The module stored under `sha256` (already known to be well formed), checked against it.
pub(super) async fn get_module(
    client: &Client,
    sha256: &str,
    err: &PgErr,
) -> Result<Option<Vec<u8>>> {
    let Some(row) = client
        .query_opt("SELECT bytes FROM modules WHERE sha256 = $1", &[&sha256])
        .await
        .map_err(|e| err.map(e))?
    else {
        return Ok(None);
    };
    let bytes: Vec<u8> = col(&row, 0)?;
    verify_off_thread(sha256, bytes).await.map(Some)
}

/// Deploys `sha256` as `kind`'s module (both already checked by
/// [`check_deploy`](crate::modules::check_deploy)).
pub(super) async fn deploy_module(
    tx: Transaction<'_>,
    kind: &str,
    sha256: &str,
    cause: DeployCause,
    err: &PgErr,
) -> Result<ModuleDeploy> {
    // The SELECT yields no row for a module that is not stored: then nothing is inserted or
    // updated, and the statement returns no row (the transaction is dropped, i.e. rolled back).
    let row = tx
        .query_opt(
            concat!(
                "INSERT INTO module_kinds AS k (kind, sha256, version, deployed_at_ms)
                 SELECT $1, m.sha256, 1, ",
                db_now_ms!(),
                " FROM modules m WHERE m.sha256 = $2
                 ON CONFLICT (kind) DO UPDATE SET sha256 = EXCLUDED.sha256,
                     version = k.version + 1, deployed_at_ms = EXCLUDED.deployed_at_ms
                 RETURNING k.version, k.deployed_at_ms,
                     (SELECT m.size FROM modules m WHERE m.sha256 = k.sha256)"
            ),
            &[&kind, &sha256],
        )
        .await
        .map_err(|e| err.map(e))?
        .ok_or_else(|| not_stored(sha256))?;
    let size: Option<i64> = col(&row, 2)?;
    let size = size.ok_or_else(|| {
        StoreError::Corrupt(format!("module {sha256} vanished while it was deployed"))
    })?;
    let version: i64 = col(&row, 0)?;
    let deployed_at_ms: i64 = col(&row, 1)?;
    tx.execute(
        "INSERT INTO module_deploys (kind, version, sha256, cause, deployed_at_ms)
         VALUES ($1, $2, $3, $4, $5)",
        &[&kind, &version, &sha256, &cause.as_str(), &deployed_at_ms],
    )
    .await
    .map_err(|e| err.map(e))?;
    tx.execute(
        "DELETE FROM module_deploys WHERE kind = $1 AND version <= $2",
        &[&kind, &(version - MAX_DEPLOY_HISTORY as i64)],
    )
    .await
    .map_err(|e| err.map(e))?;
    let deploy = ModuleDeploy {
        kind: kind.to_owned(),
        sha256: sha256.to_owned(),
        version: from_db("module version", version)?,
        size: from_db("module size", size)?,
        deployed_at_ms: from_db("deployed_at_ms", deployed_at_ms)?,
        cause,
    };
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(deploy)
}

/// A deploy row as both queries read it: kind, sha256, version, size, deployed_at_ms, cause.
fn from_row(row: &tokio_postgres::Row) -> Result<ModuleDeploy> {
    let cause: String = col(row, 5)?;
    Ok(ModuleDeploy {
        kind: col(row, 0)?,
        sha256: col(row, 1)?,
        version: from_db("module version", col(row, 2)?)?,
        size: from_db("module size", col(row, 3)?)?,
        deployed_at_ms: from_db("deployed_at_ms", col(row, 4)?)?,
        cause: DeployCause::from_db(&cause)?,
    })
}

/// `kind`'s (already checked) newest deploys.
pub(super) async fn module_history(
    client: &Client,
    kind: &str,
    limit: usize,
    err: &PgErr,
) -> Result<Vec<ModuleDeploy>> {
    let rows = client
        .query(
            "SELECT d.kind, d.sha256, d.version, m.size, d.deployed_at_ms, d.cause
             FROM module_deploys d JOIN modules m ON m.sha256 = d.sha256
             WHERE d.kind = $1 ORDER BY d.version DESC LIMIT $2",
            &[&kind, &history_limit(limit)],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter().map(from_row).collect()
}

pub(super) async fn module_kinds(client: &Client, err: &PgErr) -> Result<Vec<ModuleDeploy>> {
    // A kind deployed before causes were kept has no history row: its cause is a push.
    let rows = client
        .query(
            "SELECT k.kind, k.sha256, k.version, m.size, k.deployed_at_ms,
                 coalesce(d.cause, 'push')
             FROM module_kinds k JOIN modules m ON m.sha256 = k.sha256
             LEFT JOIN module_deploys d ON d.kind = k.kind AND d.version = k.version
             ORDER BY k.kind COLLATE \"C\"",
            &[],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter().map(from_row).collect()
}

#[async_trait]
impl ModuleStore for PostgresStore {
    async fn put_module(&self, bytes: &[u8]) -> Result<String> {
        crate::modules::check_module(bytes)?;
        let sha256 = crate::modules::digest_off_thread(bytes).await?;
        let client = self.client().await?;
        put_module(&client, &sha256, bytes, &self.err).await?;
        Ok(sha256)
    }

    async fn get_module(&self, sha256: &str) -> Result<Option<Vec<u8>>> {
        if !crate::modules::is_digest(sha256) {
            return Ok(None);
        }
        let client = self.client().await?;
        get_module(&client, sha256, &self.err).await
    }

    async fn deploy_module(
        &self,
        kind: &str,
        sha256: &str,
        cause: DeployCause,
    ) -> Result<ModuleDeploy> {
        crate::modules::check_deploy(kind, sha256)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        deploy_module(tx, kind, sha256, cause, &self.err).await
    }

    async fn module_kinds(&self) -> Result<Vec<ModuleDeploy>> {
        let client = self.client().await?;
        module_kinds(&client, &self.err).await
    }

    async fn module_history(&self, kind: &str, limit: usize) -> Result<Vec<ModuleDeploy>> {
        crate::modules::check_kind(kind)?;
        let client = self.client().await?;
        module_history(&client, kind, limit, &self.err).await
    }
}
