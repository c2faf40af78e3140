//! Zone module operations on a SQLite connection (see [`crate::ModuleStore`] for the contract).
//!
//! Storing a module is one `INSERT .. ON CONFLICT DO NOTHING`, which makes it idempotent. A deploy
//! runs under `BEGIN IMMEDIATE`, so the check that its module is stored and the raise of the kind's
//! version happen under the database's write lock: concurrent deploys of a kind (from this store or
//! another on the same file) serialize, and each gets a version of its own. Deploys are stamped by
//! SQLite's own clock, as heartbeats are.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::sql_err;
use crate::error::{Result, StoreError};
use crate::modules::{check_deploy, check_module, digest, is_digest, not_stored, verify};
use crate::types::ModuleDeploy;
use crate::validate::{from_db, to_db};

pub(super) fn put_module(conn: &mut Connection, bytes: &[u8]) -> Result<String> {
    check_module(bytes)?;
    let sha256 = digest(bytes);
    let size = to_db("module size", bytes.len() as u64)?;
    conn.execute(
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
        .query_row(
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
) -> Result<ModuleDeploy> {
    check_deploy(kind, sha256)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let size: Option<i64> = tx
        .query_row(
            "SELECT size FROM modules WHERE sha256 = ?1",
            params![sha256],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err)?;
    // Dropping the transaction rolls it back: a refused deploy changes nothing.
    let size = size.ok_or_else(|| not_stored(sha256))?;
    let (version, deployed_at_ms): (i64, i64) = tx
        .query_row(
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
    tx.commit().map_err(sql_err)?;
    Ok(ModuleDeploy {
        kind: kind.to_owned(),
        sha256: sha256.to_owned(),
        version: from_db("module version", version)?,
        size: from_db("module size", size)?,
        deployed_at_ms: from_db("deployed_at_ms", deployed_at_ms)?,
    })
}

pub(super) fn module_kinds(conn: &mut Connection) -> Result<Vec<ModuleDeploy>> {
    // A kind whose module row is missing (only possible by hand: SQLite does not enforce the
    // reference) shows up as a NULL size, reported as corruption rather than hidden by a join.
    let mut stmt = conn
        .prepare(
            "SELECT k.kind, k.sha256, k.version, m.size, k.deployed_at_ms
             FROM module_kinds k LEFT JOIN modules m ON m.sha256 = k.sha256
             ORDER BY k.kind",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, i64>(4)?,
            ))
        })
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, sha256, version, size, deployed_at_ms) = row.map_err(sql_err)?;
        let size = size.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "module kind {kind:?} runs {sha256}, which is not stored"
            ))
        })?;
        out.push(ModuleDeploy {
            kind,
            sha256,
            version: from_db("module version", version)?,
            size: from_db("module size", size)?,
            deployed_at_ms: from_db("deployed_at_ms", deployed_at_ms)?,
        });
    }
    Ok(out)
}
