//! The fleet backend: PostgreSQL through a `deadpool-postgres` connection pool.
//!
//! Each area's file holds its SQL and its store trait's implementation for [`PostgresStore`].
//! Every method checks its arguments before it takes a pooled connection, then uses that
//! connection for one read, or for one READ COMMITTED transaction when it changes anything.
//!
//! Several hosts share one database, so atomicity comes from row locks rather than a process-wide
//! mutex. Every transaction runs at READ COMMITTED (set explicitly, whatever the server's default)
//! and follows one of these patterns:
//! - zone saves lock the zone's fence row (`INSERT .. ON CONFLICT DO NOTHING`, then
//!   `SELECT .. FOR UPDATE`) before reading or writing anything of that zone, so claims, writes and
//!   deletes of one zone are serialized across all hosts;
//! - facts insert the ledger row first (`ON CONFLICT (key) DO NOTHING`): a concurrent recorder of the
//!   same key blocks on the unique index until the first commits, then sees the conflict and reads
//!   the committed result. Totals rows are updated in name order, so no two facts deadlock. A fact
//!   carrying its owner's epoch first reads the zone's fence row `FOR SHARE` (before the ledger
//!   row), so it serializes with claims of its zone but not with other facts;
//! - directory changes of a zone (claim, move, release, forget) lock the zone's fence row first,
//!   like saves, then read host rows without locking them; only a registration locks a host row,
//!   and it touches no zone, so directory and save transactions cannot wait on each other in a
//!   cycle;
//! - a module deploy is one upsert of the kind's row, which serializes deploys of one kind; it
//!   touches no zone or host row, so it waits on nothing else;
//! - a character acquisition or write locks the character's row (`INSERT .. ON CONFLICT DO
//!   NOTHING`, then `SELECT .. FOR UPDATE`), which serializes everything done to one character,
//!   then reads the zone fences it checks `FOR SHARE`, like facts: claims of those zones wait for
//!   it or fence it, and as nothing that locks a fence row `FOR UPDATE` ever locks a character,
//!   character calls and claims cannot wait on each other in a cycle;
//! - a call begin or finish carrying an owner epoch reads the zone's fence row `FOR SHARE`, like
//!   facts, and then inserts the call (`ON CONFLICT DO NOTHING`, so a concurrent begin of the same
//!   key waits for the first on the primary key) or locks its row `FOR UPDATE` (a finish); the
//!   sweep deletes call rows only, so call transactions and claims cannot wait in a cycle either;
//! - a fact's board changes, in its recording transaction after its totals, read the boards it
//!   changes `FOR KEY SHARE` and lock each score row (`SELECT .. FOR UPDATE`, or insert it) in
//!   board name order, like totals; deleting a board deletes its row first, so it waits for the
//!   facts changing it, and the prune deletes old periods, which no fact writes;
//! - a presence write upserts and deletes presence rows only, one statement each, taking them in
//!   (principal, zone) order whatever order the host gave; it reads host rows without locking
//!   them, so presence writes wait only on each other, never in a cycle;
//! - a chat append upserts its channels' counter rows in channel byte order (each upsert locks
//!   its row until commit), then inserts and prunes lines of those channels only, so appends wait
//!   only on appends to a shared channel, never in a cycle; a lift locks its sanction row with its
//!   `UPDATE`; sanctions, reports and audit rows are otherwise only inserted.

/// The database's clock in milliseconds since the Unix epoch (the same expression everywhere, so
/// stamps and ages agree). Defined before the submodules, which use it in their SQL.
macro_rules! db_now_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

mod boards;
mod calls;
mod characters;
mod chat;
mod connection;
mod directory;
mod facts;
mod lobby;
mod matchmaking;
mod migrations;
mod modules;
mod presence;
mod saves;
mod transfers;

use deadpool_postgres::{Object, Pool};
use tokio_postgres::types::FromSql;
use tokio_postgres::{IsolationLevel, Row, Transaction};

pub use connection::PostgresOptions;

use crate::error::{redact, Result, StoreError};

/// Turns driver and pool errors into [`StoreError`]s with the configured password scrubbed out.
#[derive(Clone)]
pub(crate) struct PgErr {
    password: Option<String>,
}

impl std::fmt::Debug for PgErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgErr { password: <hidden> }")
    }
}

impl PgErr {
    /// Maps a driver error. Server errors are rendered from their code and message only (never the
    /// connection details); client-side errors are rendered and then scrubbed.
    pub(crate) fn map(&self, e: tokio_postgres::Error) -> StoreError {
        let text = match e.as_db_error() {
            Some(db) => format!("postgres {}: {}", db.code().code(), db.message()),
            None => format!("postgres: {e}"),
        };
        StoreError::Backend(redact(&text, self.password.as_deref()))
    }

    fn map_pool(&self, e: deadpool_postgres::PoolError) -> StoreError {
        match e {
            deadpool_postgres::PoolError::Backend(inner) => self.map(inner),
            other => StoreError::Backend(redact(
                &format!("postgres pool: {other}"),
                self.password.as_deref(),
            )),
        }
    }
}

/// Reads column `idx` of `row`. A value of the wrong type or a NULL where the schema forbids it means
/// the database holds something this code cannot read, so it is corruption, not a transient error.
pub(crate) fn col<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T> {
    row.try_get(idx).map_err(corrupt_column)
}

/// Maps a column read failure (see [`col`]).
pub(crate) fn corrupt_column(e: tokio_postgres::Error) -> StoreError {
    StoreError::Corrupt(format!("postgres column: {e}"))
}

/// Zone saves, the fact ledger, the fleet directory, zone modules, transfers, characters and the
/// call journal in a PostgreSQL database, pooled.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    err: PgErr,
    description: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.description)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    async fn client(&self) -> Result<Object> {
        self.pool.get().await.map_err(|e| self.err.map_pool(e))
    }

    /// Starts a READ COMMITTED transaction (the locking patterns in the module docs rely on it).
    async fn begin<'a>(&self, client: &'a mut Object) -> Result<Transaction<'a>> {
        // Go through to the driver's client: deadpool's wrapper returns its own transaction type.
        let client: &'a mut tokio_postgres::Client = client;
        client
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .await
            .map_err(|e| self.err.map(e))
    }
}
