//! The fleet backend: PostgreSQL through a `deadpool-postgres` connection pool.
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
mod directory;
mod facts;
mod lobby;
mod matchmaking;
mod migrations;
mod modules;
mod presence;
mod saves;
mod transfers;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::FromSql;
use tokio_postgres::{Config, IsolationLevel, NoTls, Row, Transaction};
use zonekeep_fleet::Timing;

use crate::characters::{CharacterAcquire, CharacterStore, StoredCharacter};
use crate::directory::{
    ClaimRequest, Directory, HostRecord, HostRegistration, ZoneClaim, ZoneLocation,
};
use crate::directory_rows::{check_claim, check_registration};
use crate::error::{redact, Result, StoreError};
use crate::lobby::{
    LobbyStore, NewRoom, ReportOutcome, Room, RoomFilter, RoomReport, SeatOutcome, SeatRequest,
};
use crate::traits::{FactLedger, ModuleStore, SaveStore};
use crate::transfers::{NewTransfer, Reclaim, StoredTransfer, TransferLedger};
use crate::types::{
    Claim, DeployCause, FactRecord, FactResult, ModuleDeploy, SaveMeta, SaveRecord, StoredFact,
    WriteOutcome,
};
use crate::validate::{check_id, to_db};

/// Settings for [`PostgresStore::connect_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Most connections the pool opens. Storage workers are few; the default (8) leaves room.
    pub max_connections: usize,
    /// Keep every table in this schema (created if missing) by setting each connection's
    /// `search_path`. Lets several deployments or test runs share one database. Must be a plain
    /// lower-case identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes).
    pub schema: Option<String>,
    /// How long opening one connection may take.
    pub connect_timeout: Duration,
    /// How long an operation waits for a free pooled connection before failing (retryably), so a
    /// database outage surfaces as errors instead of hanging storage workers forever.
    pub wait_timeout: Duration,
    /// The database ends a session that sits this long inside a transaction without sending
    /// anything (`idle_in_transaction_session_timeout`), releasing its row locks: a host that was
    /// paused, or cut off, mid-transaction must not hold a zone's fence row and stall every other
    /// host's claim of that zone. Far above what any of our transactions take between statements.
    pub idle_in_transaction_timeout: Duration,
    /// Longest a statement waits for a row lock (`lock_timeout`) before failing retryably.
    pub lock_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 8,
            schema: None,
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Duration::from_secs(30),
            idle_in_transaction_timeout: Duration::from_secs(3),
            lock_timeout: Duration::from_secs(3),
        }
    }
}

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

/// Accepts only identifiers that need no escaping beyond double quotes.
fn valid_schema_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 63
}

impl PostgresStore {
    /// Connects to `url` (a `postgres://` URL or a `key=value` connection string) with default
    /// [`PostgresOptions`], and applies pending migrations.
    pub async fn connect(url: &str) -> Result<PostgresStore> {
        PostgresStore::connect_with(url, PostgresOptions::default()).await
    }

    /// Like [`PostgresStore::connect`] with explicit options.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<PostgresStore> {
        // The driver's parse errors can quote the offending text, which may hold the password.
        let mut config: Config = url.parse().map_err(|_| {
            StoreError::InvalidSpec("unparsable PostgreSQL connection string (withheld)".into())
        })?;
        let err = PgErr {
            password: config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        };
        let mut settings = format!(
            "-c idle_in_transaction_session_timeout={} -c lock_timeout={}",
            options.idle_in_transaction_timeout.as_millis(),
            options.lock_timeout.as_millis()
        );
        if let Some(schema) = &options.schema {
            if !valid_schema_name(schema) {
                return Err(StoreError::InvalidArgument(format!(
                    "schema name {schema:?} must match [a-z_][a-z0-9_]* (at most 63 bytes)"
                )));
            }
            settings.push_str(&format!(" -c search_path={schema}"));
        }
        let combined = match config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} {settings}"),
            _ => settings,
        };
        config.options(&combined);
        config.connect_timeout(options.connect_timeout);
        let description = describe(&config, options.schema.as_deref());

        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Backend(format!("postgres pool setup: {e}")))?;
        let store = PostgresStore {
            pool,
            err,
            description,
        };
        let mut client = store.client().await?;
        migrations::migrate(&mut client, options.schema.as_deref(), &store.err).await?;
        Ok(store)
    }

    /// A printable, password-free name of the database, e.g. `postgres://postgres@127.0.0.1:5432/test`.
    pub fn description(&self) -> &str {
        &self.description
    }

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

fn describe(config: &Config, schema: Option<&str>) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or("");
    let mut out = format!("postgres://{user}@{host}:{port}/{db}");
    if let Some(schema) = schema {
        out.push_str(&format!(" (schema {schema})"));
    }
    out
}

#[async_trait]
impl SaveStore for PostgresStore {
    async fn claim(&self, zone_id: &str) -> Result<Claim> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        saves::claim(tx, zone_id, &self.err).await
    }

    async fn write(
        &self,
        zone_id: &str,
        epoch: u64,
        seq: u64,
        kind: &str,
        bytes: &[u8],
    ) -> Result<WriteOutcome> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        saves::write(tx, zone_id, epoch, seq, kind, bytes, &self.err).await
    }

    async fn load(&self, zone_id: &str) -> Result<Option<SaveRecord>> {
        let client = self.client().await?;
        saves::load(&client, zone_id, &self.err).await
    }

    async fn list(&self) -> Result<Vec<SaveMeta>> {
        let client = self.client().await?;
        saves::list(&client, &self.err).await
    }

    async fn delete(&self, zone_id: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        saves::delete(tx, zone_id, &self.err).await
    }
}

#[async_trait]
impl FactLedger for PostgresStore {
    async fn record(&self, fact: &FactRecord) -> Result<FactResult> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        facts::record(tx, fact, &self.err).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredFact>> {
        let client = self.client().await?;
        facts::get(&client, key, &self.err).await
    }

    async fn totals(&self, principal: &str) -> Result<BTreeMap<String, i64>> {
        let client = self.client().await?;
        facts::totals(&**client, principal, &self.err).await
    }

    async fn count(&self) -> Result<u64> {
        let client = self.client().await?;
        facts::count(&client, &self.err).await
    }
}

#[async_trait]
impl Directory for PostgresStore {
    async fn register_host(&self, host: &HostRegistration, silent_after: Duration) -> Result<()> {
        check_registration(host)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        directory::register_host(tx, host, silent_after, &self.err).await
    }

    async fn heartbeat(
        &self,
        host_id: &str,
        incarnation: &str,
        draining: bool,
        timing: Timing,
    ) -> Result<()> {
        check_id("host id", host_id)?;
        check_id("host incarnation", incarnation)?;
        let client = self.client().await?;
        directory::heartbeat(&client, host_id, incarnation, draining, timing, &self.err).await
    }

    async fn leave_host(&self, host_id: &str, incarnation: &str) -> Result<()> {
        check_id("host id", host_id)?;
        check_id("host incarnation", incarnation)?;
        let client = self.client().await?;
        directory::leave_host(&client, host_id, incarnation, &self.err).await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>> {
        let client = self.client().await?;
        directory::hosts(&client, &self.err).await
    }

    async fn locate(&self, zone_id: &str, timing: Timing) -> Result<Option<ZoneLocation>> {
        check_id("zone id", zone_id)?;
        let client = self.client().await?;
        directory::locate(&client, zone_id, &timing, &self.err).await
    }

    async fn zones(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        let client = self.client().await?;
        directory::zones(&client, &timing, limit, &self.err).await
    }

    async fn claim_zone(&self, req: &ClaimRequest<'_>) -> Result<ZoneClaim> {
        // The params are stored as JSONB from the value itself; the text only bounds their size.
        check_claim(req)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        directory::claim_zone(tx, req, &self.err).await
    }

    async fn move_zone(&self, zone_id: &str, from: &str, from_epoch: u64, to: &str) -> Result<u64> {
        check_id("zone id", zone_id)?;
        check_id("host id", from)?;
        check_id("host id", to)?;
        to_db("epoch", from_epoch)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        directory::move_zone(tx, zone_id, from, from_epoch, to, &self.err).await
    }

    async fn release_zone(&self, zone_id: &str, host: &str, epoch: u64) -> Result<bool> {
        check_id("zone id", zone_id)?;
        check_id("host id", host)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        directory::release_zone(tx, zone_id, host, epoch, &self.err).await
    }

    async fn orphans(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        let client = self.client().await?;
        directory::orphans(&client, &timing, limit, &self.err).await
    }

    async fn forget_zone(&self, zone_id: &str) -> Result<bool> {
        check_id("zone id", zone_id)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        directory::forget_zone(tx, zone_id, &self.err).await
    }

    async fn spend_ticket(&self, jti: &str, expires_at_ms: u64) -> Result<bool> {
        let client = self.client().await?;
        directory::spend_ticket(&client, jti, expires_at_ms, &self.err).await
    }
}

#[async_trait]
impl ModuleStore for PostgresStore {
    async fn put_module(&self, bytes: &[u8]) -> Result<String> {
        crate::modules::check_module(bytes)?;
        let sha256 = crate::modules::digest_off_thread(bytes).await?;
        let client = self.client().await?;
        modules::put_module(&client, &sha256, bytes, &self.err).await?;
        Ok(sha256)
    }

    async fn get_module(&self, sha256: &str) -> Result<Option<Vec<u8>>> {
        if !crate::modules::is_digest(sha256) {
            return Ok(None);
        }
        let client = self.client().await?;
        modules::get_module(&client, sha256, &self.err).await
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
        modules::deploy_module(tx, kind, sha256, cause, &self.err).await
    }

    async fn module_kinds(&self) -> Result<Vec<ModuleDeploy>> {
        let client = self.client().await?;
        modules::module_kinds(&client, &self.err).await
    }

    async fn module_history(&self, kind: &str, limit: usize) -> Result<Vec<ModuleDeploy>> {
        crate::modules::check_kind(kind)?;
        let client = self.client().await?;
        modules::module_history(&client, kind, limit, &self.err).await
    }
}

#[async_trait]
impl LobbyStore for PostgresStore {
    async fn create_room(&self, room: &NewRoom, seat: Option<&SeatRequest>) -> Result<Room> {
        crate::lobby::check_room(room)?;
        if let Some(s) = seat {
            crate::lobby::check_seat(s)?;
        }
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        lobby::create_room(tx, room, seat, &self.err).await
    }

    async fn join_or_create(
        &self,
        filter: &RoomFilter,
        seat: &SeatRequest,
        room: &NewRoom,
    ) -> Result<(Room, bool)> {
        crate::lobby::check_filter(filter)?;
        crate::lobby::check_seat(seat)?;
        crate::lobby::check_room(room)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        lobby::join_or_create(tx, filter, seat, room, &self.err).await
    }

    async fn take_seat(&self, zone_id: &str, seat: &SeatRequest) -> Result<SeatOutcome> {
        check_id("zone id", zone_id)?;
        crate::lobby::check_seat(seat)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        lobby::take_seat(tx, zone_id, seat, &self.err).await
    }

    async fn room_by_code(&self, code: &str) -> Result<Option<Room>> {
        crate::lobby::check_code(code)?;
        let client = self.client().await?;
        lobby::room_by_code(&client, code, &self.err).await
    }

    async fn room(&self, zone_id: &str) -> Result<Option<Room>> {
        check_id("zone id", zone_id)?;
        let client = self.client().await?;
        lobby::room(&client, zone_id, &self.err).await
    }

    async fn list_rooms(&self, filter: &RoomFilter) -> Result<Vec<Room>> {
        crate::lobby::check_filter(filter)?;
        let client = self.client().await?;
        lobby::list_rooms(&client, filter, &self.err).await
    }

    async fn report_rooms(&self, reports: &[RoomReport]) -> Result<ReportOutcome> {
        for r in reports {
            crate::lobby::check_report(r)?;
        }
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        lobby::report_rooms(tx, reports, &self.err).await
    }

    async fn forget_idle_rooms(&self, idle_ms: u64) -> Result<u64> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        lobby::forget_idle_rooms(tx, idle_ms, &self.err).await
    }
}

#[async_trait]
impl TransferLedger for PostgresStore {
    async fn begin_transfer(&self, transfer: &NewTransfer) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        transfers::begin(tx, transfer, &self.err).await
    }

    async fn accept_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        transfers::accept(tx, id, target_epoch, &self.err).await
    }

    async fn return_transfer(
        &self,
        id: &str,
        zone_id: &str,
        epoch: u64,
        reason: &str,
    ) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        transfers::give_back(tx, id, zone_id, epoch, reason, &self.err).await
    }

    async fn arrive_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        transfers::arrive(tx, id, target_epoch, &self.err).await
    }

    async fn transfer(&self, id: &str) -> Result<Option<StoredTransfer>> {
        let client = self.client().await?;
        transfers::get(&**client, id, &self.err).await
    }

    async fn open_transfers(&self, zone_id: &str) -> Result<Vec<StoredTransfer>> {
        let client = self.client().await?;
        transfers::open(&**client, zone_id, &self.err).await
    }

    async fn latest_transfer_from(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        let client = self.client().await?;
        transfers::latest_from(&**client, source_zone, principal, since_ms, &self.err).await
    }

    async fn reclaim_transfer(&self, id: &str, source_epoch: u64) -> Result<Reclaim> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        transfers::reclaim(tx, id, source_epoch, &self.err).await
    }

    async fn release_reclaim(&self, id: &str, source_epoch: u64) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        transfers::release_reclaim(tx, id, source_epoch, &self.err).await
    }

    async fn unclaimed_return(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        let client = self.client().await?;
        transfers::unclaimed_return(&**client, source_zone, principal, since_ms, &self.err).await
    }

    async fn prune_transfers(&self, before_ms: u64) -> Result<u64> {
        let client = self.client().await?;
        transfers::prune(&**client, before_ms, &self.err).await
    }
}

#[async_trait]
impl CharacterStore for PostgresStore {
    async fn acquire_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
    ) -> Result<CharacterAcquire> {
        crate::characters::check_args(principal, zone, epoch, None)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        characters::acquire(tx, principal, zone, epoch, &self.err).await
    }

    async fn commit_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: &[u8],
    ) -> Result<u64> {
        crate::characters::check_args(principal, zone, epoch, Some(data))?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        characters::write(tx, principal, zone, epoch, Some(data), false, &self.err).await
    }

    async fn release_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: Option<&[u8]>,
    ) -> Result<u64> {
        crate::characters::check_args(principal, zone, epoch, data)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        characters::write(tx, principal, zone, epoch, data, true, &self.err).await
    }

    async fn load_character(&self, principal: &str) -> Result<Option<StoredCharacter>> {
        crate::characters::check_principal(principal)?;
        let client = self.client().await?;
        characters::load(&client, principal, &self.err).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(valid_schema_name("zk_test_1"));
        assert!(valid_schema_name("_x"));
        assert!(!valid_schema_name(""));
        assert!(!valid_schema_name("1abc"));
        assert!(!valid_schema_name("a\"; DROP TABLE x; --"));
        assert!(!valid_schema_name("Upper"));
        assert!(!valid_schema_name(&"a".repeat(64)));
    }

    #[test]
    fn description_has_no_password() {
        let config: Config = "postgres://alice:s3cret@db.example:6543/game"
            .parse()
            .unwrap_or_else(|_| Config::new());
        let d = describe(&config, Some("zk"));
        assert_eq!(d, "postgres://alice@db.example:6543/game (schema zk)");
        assert!(!d.contains("s3cret"));
    }

    #[tokio::test]
    async fn unparsable_url_error_withholds_the_text() {
        let err = PostgresStore::connect("postgres://u:hunter2@h:notaport/db")
            .await
            .err();
        let text = format!("{err:?}");
        assert!(matches!(err, Some(StoreError::InvalidSpec(_))), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
