//! Zone module operations on a SQLite connection (see [`crate::ModuleStore`] for the contract).
//!
//! Storing a module is one `INSERT .. ON CONFLICT DO NOTHING`, which makes it idempotent. A deploy
//! runs under `BEGIN IMMEDIATE`, so the check that its module is stored and the raise of the kind's
//! version happen under the database's write lock: concurrent deploys of a kind (from this store or
//! another on the same file) serialize, and each gets a version of its own. The deploy joins the
//! kind's history, and the history's oldest entries past its bound leave it, in the same
//! transaction. Deploys are stamped by SQLite's own clock, as heartbeats are.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::connection::CachedSql;
use super::sql_err;
use crate::error::{Result, StoreError};
use crate::modules::{
    check_deploy, check_kind, check_module, digest, history_limit, is_digest, not_stored, verify,
};
use crate::traits::MAX_DEPLOY_HISTORY;
use crate::types::{DeployCause, ModuleDeploy};
use crate::validate::{from_db, to_db};

pub(super) fn put_module(conn: &mut Connection, bytes: &[u8]) -> Result<String> {
    check_module(bytes)?;
    let sha256 = digest(bytes);
    let size = to_db("module size", bytes.len() as u64)?;
    conn.execute_cached(
        concat!(
            "INSERT INTO modules (sha256, bytes, size, created_at_ms) VALUES (?1, ?2, ?3, ",
            db_now_ms!(),
            ") ON CONFLICT (sha256) DO NOTHING"
        ),
        params![sha256, bytes, size],
    )
    .map_err(sql_err)?;
    Ok(sha256)
}

pub(super) fn get_module(conn: &mut Connection, sha256: &str) -> Result<Option<Vec<u8>>> {
    if !is_digest(sha256) {
        return Ok(None);
    }
    let bytes: Option<Vec<u8>> = conn
        .query_row_cached(
            "SELECT bytes FROM modules WHERE sha256 = ?1",
            params![sha256],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err)?;
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    verify(sha256, &bytes)?;
    Ok(Some(bytes))
}

pub(super) fn deploy_module(
    conn: &mut Connection,
    kind: &str,
    sha256: &str,
    cause: DeployCause,
) -> Result<ModuleDeploy> {
    check_deploy(kind, sha256)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let size: Option<i64> = tx
        .query_row_cached(
            "SELECT size FROM modules WHERE sha256 = ?1",
            params![sha256],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err)?;
    // Dropping the transaction rolls it back: a refused deploy changes nothing.
    let size = size.ok_or_else(|| not_stored(sha256))?;
    let (version, deployed_at_ms): (i64, i64) = tx
        .query_row_cached(
            concat!(
                "INSERT INTO module_kinds (kind, sha256, version, deployed_at_ms)
                 VALUES (?1, ?2, 1, ",
                db_now_ms!(),
                ")
                 ON CONFLICT (kind) DO UPDATE SET sha256 = excluded.sha256,
                     version = module_kinds.version + 1,
                     deployed_at_ms = excluded.deployed_at_ms
                 RETURNING version, deployed_at_ms"
            ),
            params![kind, sha256],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql_err)?;
    tx.execute_cached(
        "INSERT INTO module_deploys (kind, version, sha256, cause, deployed_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![kind, version, sha256, cause.as_str(), deployed_at_ms],
    )
    .map_err(sql_err)?;
    tx.execute_cached(
        "DELETE FROM module_deploys WHERE kind = ?1 AND version <= ?2",
        params![kind, version - MAX_DEPLOY_HISTORY as i64],
    )
    .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(ModuleDeploy {
        kind: kind.to_owned(),
        sha256: sha256.to_owned(),
        version: from_db("module version", version)?,
        size: from_db("module size", size)?,
        deployed_at_ms: from_db("deployed_at_ms", deployed_at_ms)?,
        cause,
    })
}

/// One deploy row as both queries read it: kind, sha256, version, size, deployed_at_ms, cause.
type DeployRow = (String, String, i64, Option<i64>, i64, String);

fn deploy_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DeployRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

/// A deploy row checked: a module row that is missing (only possible by hand: SQLite does not
/// enforce the reference) shows up as a NULL size, reported as corruption rather than hidden by a
/// join.
fn from_row(row: DeployRow) -> Result<ModuleDeploy> {
    let (kind, sha256, version, size, deployed_at_ms, cause) = row;
    let size = size.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "module kind {kind:?} version {version} runs {sha256}, which is not stored"
        ))
    })?;
    Ok(ModuleDeploy {
        cause: DeployCause::from_db(&cause)?,
        version: from_db("module version", version)?,
        size: from_db("module size", size)?,
        deployed_at_ms: from_db("deployed_at_ms", deployed_at_ms)?,
        kind,
        sha256,
    })
}

pub(super) fn module_history(
    conn: &mut Connection,
    kind: &str,
    limit: usize,
) -> Result<Vec<ModuleDeploy>> {
    check_kind(kind)?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT d.kind, d.sha256, d.version, m.size, d.deployed_at_ms, d.cause
             FROM module_deploys d LEFT JOIN modules m ON m.sha256 = d.sha256
             WHERE d.kind = ?1 ORDER BY d.version DESC LIMIT ?2",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![kind, history_limit(limit)], deploy_row)
        .map_err(sql_err)?;
    rows.map(|r| from_row(r.map_err(sql_err)?)).collect()
}

pub(super) fn module_kinds(conn: &mut Connection) -> Result<Vec<ModuleDeploy>> {
    // A kind deployed before causes were kept has no history row: its cause is a push.
    let mut stmt = conn
        .prepare_cached(
            "SELECT k.kind, k.sha256, k.version, m.size, k.deployed_at_ms,
                 coalesce(d.cause, 'push')
             FROM module_kinds k LEFT JOIN modules m ON m.sha256 = k.sha256
             LEFT JOIN module_deploys d ON d.kind = k.kind AND d.version = k.version
             ORDER BY k.kind",
        )
        .map_err(sql_err)?;
    let rows = stmt.query_map([], deploy_row).map_err(sql_err)?;
    rows.map(|r| from_row(r.map_err(sql_err)?)).collect()
}
