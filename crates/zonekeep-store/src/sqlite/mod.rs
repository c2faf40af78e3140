//! The embedded backend: one SQLite file, nothing to install.
//!
//! One connection behind a mutex, used from `tokio::task::spawn_blocking`, so no SQLite call ever
//! runs on an async worker thread. A single connection is enough for a single host: SQLite admits
//! one writer at a time anyway, and every operation here is a short transaction. Every transaction
//! that writes is `BEGIN IMMEDIATE`, which takes the write lock up front: two stores on the same file
//! (two processes, or the contract tests' two stores) then serialize instead of failing with
//! `SQLITE_BUSY` on lock upgrade, waiting up to the busy timeout.

/// The database's clock in milliseconds since the Unix epoch (the same expression everywhere, so
/// stamps and ages agree). Defined before the submodules, which use it in their SQL.
macro_rules! db_now_ms {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::Connection;

use zonekeep_fleet::Timing;

use crate::characters::{CharacterAcquire, CharacterStore, StoredCharacter};
use crate::directory::{
    ClaimRequest, Directory, HostRecord, HostRegistration, ZoneClaim, ZoneLocation,
};
use crate::directory_rows::check_claim;
use crate::error::{Result, StoreError};
use crate::lobby::{
    LobbyStore, NewRoom, ReportOutcome, Room, RoomFilter, RoomReport, SeatOutcome, SeatRequest,
};
use crate::traits::{FactLedger, ModuleStore, SaveStore};
use crate::transfers::{NewTransfer, Reclaim, StoredTransfer, TransferLedger};
use crate::types::{
    Claim, DeployCause, FactRecord, FactResult, ModuleDeploy, SaveMeta, SaveRecord, StoredFact,
    WriteOutcome,
};

/// How hard SQLite works to make a commit durable (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// fsync the WAL on every commit. The default: a fact the ledger answered (and the player was
    /// shown as saved) must survive a power loss, not only a process crash. In WAL mode this costs one
    /// fsync per commit, which the storage workers pay off the tick.
    #[default]
    Full,
    /// fsync only at checkpoints. Survives process crashes (`kill -9`) but a power loss may roll back
    /// the last commits. For development machines and benchmarks where fsync latency dominates.
    Normal,
}

impl Synchronous {
    fn pragma_value(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// Settings for [`SqliteStore::open_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteOptions {
    /// Durability of commits; see [`Synchronous`].
    pub synchronous: Synchronous,
    /// How long a transaction waits for another connection's write lock before failing with a
    /// (retryable) backend error.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// Zone saves, the fact ledger, the fleet directory, zone modules, transfers, characters and the
/// call journal in one SQLite database file (a fleet of one host, or several processes on one
/// machine sharing the file).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` with default [`SqliteOptions`], switches it
    /// to WAL and applies pending migrations. `":memory:"` gives a private in-memory database.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        SqliteStore::open_with(path, SqliteOptions::default()).await
    }

    /// Like [`SqliteStore::open`] with explicit options.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        let open_path = path.clone();
        let conn = tokio::task::spawn_blocking(move || connection::open(&open_path, options))
            .await
            .map_err(join_err)??;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// The database path this store was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock poisons it; rusqlite rolls back the open transaction
            // when it is dropped during unwinding, so the connection itself is still sound.
            let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(join_err)?
    }
}

/// Maps a rusqlite error into the store's error. Conversion failures mean a row holds something the
/// schema forbids, i.e. corruption; everything else is a (possibly transient) backend failure.
pub(crate) fn sql_err(e: rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => {
            StoreError::Corrupt(format!("sqlite: {e}"))
        }
        other => StoreError::Backend(format!("sqlite: {other}")),
    }
}

fn join_err(e: tokio::task::JoinError) -> StoreError {
    StoreError::Backend(format!("sqlite task failed: {e}"))
}

#[async_trait]
impl SaveStore for SqliteStore {
    async fn claim(&self, zone_id: &str) -> Result<Claim> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| saves::claim(conn, &zone_id)).await
    }

    async fn write(
        &self,
        zone_id: &str,
        epoch: u64,
        seq: u64,
        kind: &str,
        bytes: &[u8],
    ) -> Result<WriteOutcome> {
        let (zone_id, kind, bytes) = (zone_id.to_owned(), kind.to_owned(), bytes.to_vec());
        self.run(move |conn| saves::write(conn, &zone_id, epoch, seq, &kind, &bytes))
            .await
    }

    async fn load(&self, zone_id: &str) -> Result<Option<SaveRecord>> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| saves::load(conn, &zone_id)).await
    }

    async fn list(&self) -> Result<Vec<SaveMeta>> {
        self.run(saves::list).await
    }

    async fn delete(&self, zone_id: &str) -> Result<bool> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| saves::delete(conn, &zone_id)).await
    }
}

#[async_trait]
impl FactLedger for SqliteStore {
    async fn record(&self, fact: &FactRecord) -> Result<FactResult> {
        let fact = fact.clone();
        self.run(move |conn| facts::record(conn, &fact)).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredFact>> {
        let key = key.to_owned();
        self.run(move |conn| facts::get(conn, &key)).await
    }

    async fn totals(&self, principal: &str) -> Result<BTreeMap<String, i64>> {
        let principal = principal.to_owned();
        self.run(move |conn| facts::totals(conn, &principal)).await
    }

    async fn count(&self) -> Result<u64> {
        self.run(|conn| facts::count(conn)).await
    }
}

#[async_trait]
impl Directory for SqliteStore {
    async fn register_host(&self, host: &HostRegistration, silent_after: Duration) -> Result<()> {
        let host = host.clone();
        self.run(move |conn| directory::register_host(conn, &host, silent_after))
            .await
    }

    async fn heartbeat(
        &self,
        host_id: &str,
        incarnation: &str,
        draining: bool,
        timing: Timing,
    ) -> Result<()> {
        let (host_id, incarnation) = (host_id.to_owned(), incarnation.to_owned());
        self.run(move |conn| directory::heartbeat(conn, &host_id, &incarnation, draining, timing))
            .await
    }

    async fn leave_host(&self, host_id: &str, incarnation: &str) -> Result<()> {
        let (host_id, incarnation) = (host_id.to_owned(), incarnation.to_owned());
        self.run(move |conn| directory::leave_host(conn, &host_id, &incarnation))
            .await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>> {
        self.run(directory::hosts).await
    }

    async fn locate(&self, zone_id: &str, timing: Timing) -> Result<Option<ZoneLocation>> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| directory::locate(conn, &zone_id, &timing))
            .await
    }

    async fn zones(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        self.run(move |conn| directory::zones(conn, &timing, limit))
            .await
    }

    async fn claim_zone(&self, req: &ClaimRequest<'_>) -> Result<ZoneClaim> {
        let params_text = check_claim(req)?;
        let zone_id = req.zone_id.to_owned();
        let kind = req.kind.to_owned();
        let params = req.params.clone();
        let by = req.by.to_owned();
        let by_incarnation = req.by_incarnation.to_owned();
        let to = req.to.to_owned();
        let timing = req.timing;
        self.run(move |conn| {
            let req = ClaimRequest {
                zone_id: &zone_id,
                kind: &kind,
                params: &params,
                by: &by,
                by_incarnation: &by_incarnation,
                to: &to,
                timing,
            };
            directory::claim_zone(conn, &req, &params_text)
        })
        .await
    }

    async fn move_zone(&self, zone_id: &str, from: &str, from_epoch: u64, to: &str) -> Result<u64> {
        let (zone_id, from, to) = (zone_id.to_owned(), from.to_owned(), to.to_owned());
        self.run(move |conn| directory::move_zone(conn, &zone_id, &from, from_epoch, &to))
            .await
    }

    async fn release_zone(&self, zone_id: &str, host: &str, epoch: u64) -> Result<bool> {
        let (zone_id, host) = (zone_id.to_owned(), host.to_owned());
        self.run(move |conn| directory::release_zone(conn, &zone_id, &host, epoch))
            .await
    }

    async fn orphans(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        self.run(move |conn| directory::orphans(conn, &timing, limit))
            .await
    }

    async fn forget_zone(&self, zone_id: &str) -> Result<bool> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| directory::forget_zone(conn, &zone_id))
            .await
    }

    async fn spend_ticket(&self, jti: &str, expires_at_ms: u64) -> Result<bool> {
        let jti = jti.to_owned();
        self.run(move |conn| directory::spend_ticket(conn, &jti, expires_at_ms))
            .await
    }
}

#[async_trait]
impl ModuleStore for SqliteStore {
    async fn put_module(&self, bytes: &[u8]) -> Result<String> {
        // Refuse before copying up to the limit's worth of bytes for the blocking pool.
        crate::modules::check_module(bytes)?;
        let bytes = bytes.to_vec();
        self.run(move |conn| modules::put_module(conn, &bytes))
            .await
    }

    async fn get_module(&self, sha256: &str) -> Result<Option<Vec<u8>>> {
        let sha256 = sha256.to_owned();
        self.run(move |conn| modules::get_module(conn, &sha256))
            .await
    }

    async fn deploy_module(
        &self,
        kind: &str,
        sha256: &str,
        cause: DeployCause,
    ) -> Result<ModuleDeploy> {
        let (kind, sha256) = (kind.to_owned(), sha256.to_owned());
        self.run(move |conn| modules::deploy_module(conn, &kind, &sha256, cause))
            .await
    }

    async fn module_kinds(&self) -> Result<Vec<ModuleDeploy>> {
        self.run(modules::module_kinds).await
    }

    async fn module_history(&self, kind: &str, limit: usize) -> Result<Vec<ModuleDeploy>> {
        let kind = kind.to_owned();
        self.run(move |conn| modules::module_history(conn, &kind, limit))
            .await
    }
}

#[async_trait]
impl LobbyStore for SqliteStore {
    async fn create_room(&self, room: &NewRoom, seat: Option<&SeatRequest>) -> Result<Room> {
        let (room, seat) = (room.clone(), seat.cloned());
        self.run(move |conn| lobby::create_room(conn, &room, seat.as_ref()))
            .await
    }

    async fn join_or_create(
        &self,
        filter: &RoomFilter,
        seat: &SeatRequest,
        room: &NewRoom,
    ) -> Result<(Room, bool)> {
        let (filter, seat, room) = (filter.clone(), seat.clone(), room.clone());
        self.run(move |conn| lobby::join_or_create(conn, &filter, &seat, &room))
            .await
    }

    async fn take_seat(&self, zone_id: &str, seat: &SeatRequest) -> Result<SeatOutcome> {
        let (zone_id, seat) = (zone_id.to_owned(), seat.clone());
        self.run(move |conn| lobby::take_seat(conn, &zone_id, &seat))
            .await
    }

    async fn room_by_code(&self, code: &str) -> Result<Option<Room>> {
        let code = code.to_owned();
        self.run(move |conn| lobby::room_by_code(conn, &code)).await
    }

    async fn room(&self, zone_id: &str) -> Result<Option<Room>> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| lobby::room(conn, &zone_id)).await
    }

    async fn list_rooms(&self, filter: &RoomFilter) -> Result<Vec<Room>> {
        let filter = filter.clone();
        self.run(move |conn| lobby::list_rooms(conn, &filter)).await
    }

    async fn report_rooms(&self, reports: &[RoomReport]) -> Result<ReportOutcome> {
        let reports = reports.to_vec();
        self.run(move |conn| lobby::report_rooms(conn, &reports))
            .await
    }

    async fn forget_idle_rooms(&self, idle_ms: u64) -> Result<u64> {
        self.run(move |conn| lobby::forget_idle_rooms(conn, idle_ms))
            .await
    }
}

#[async_trait]
impl TransferLedger for SqliteStore {
    async fn begin_transfer(&self, transfer: &NewTransfer) -> Result<StoredTransfer> {
        // Refuse before copying up to the limit's worth of state for the blocking pool.
        crate::transfers::check_new(transfer)?;
        let transfer = transfer.clone();
        self.run(move |conn| transfers::begin(conn, &transfer))
            .await
    }

    async fn accept_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        let id = id.to_owned();
        self.run(move |conn| transfers::accept(conn, &id, target_epoch))
            .await
    }

    async fn return_transfer(
        &self,
        id: &str,
        zone_id: &str,
        epoch: u64,
        reason: &str,
    ) -> Result<StoredTransfer> {
        let (id, zone_id, reason) = (id.to_owned(), zone_id.to_owned(), reason.to_owned());
        self.run(move |conn| transfers::give_back(conn, &id, &zone_id, epoch, &reason))
            .await
    }

    async fn arrive_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        let id = id.to_owned();
        self.run(move |conn| transfers::arrive(conn, &id, target_epoch))
            .await
    }

    async fn transfer(&self, id: &str) -> Result<Option<StoredTransfer>> {
        let id = id.to_owned();
        self.run(move |conn| transfers::get(conn, &id)).await
    }

    async fn open_transfers(&self, zone_id: &str) -> Result<Vec<StoredTransfer>> {
        let zone_id = zone_id.to_owned();
        self.run(move |conn| transfers::open(conn, &zone_id)).await
    }

    async fn latest_transfer_from(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        let (source_zone, principal) = (source_zone.to_owned(), principal.to_owned());
        self.run(move |conn| transfers::latest_from(conn, &source_zone, &principal, since_ms))
            .await
    }

    async fn reclaim_transfer(&self, id: &str, source_epoch: u64) -> Result<Reclaim> {
        let id = id.to_owned();
        self.run(move |conn| transfers::reclaim(conn, &id, source_epoch))
            .await
    }

    async fn release_reclaim(&self, id: &str, source_epoch: u64) -> Result<StoredTransfer> {
        let id = id.to_owned();
        self.run(move |conn| transfers::release_reclaim(conn, &id, source_epoch))
            .await
    }

    async fn unclaimed_return(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        let (source_zone, principal) = (source_zone.to_owned(), principal.to_owned());
        self.run(move |conn| transfers::unclaimed_return(conn, &source_zone, &principal, since_ms))
            .await
    }

    async fn prune_transfers(&self, before_ms: u64) -> Result<u64> {
        self.run(move |conn| transfers::prune(conn, before_ms))
            .await
    }
}

#[async_trait]
impl CharacterStore for SqliteStore {
    async fn acquire_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
    ) -> Result<CharacterAcquire> {
        let (principal, zone) = (principal.to_owned(), zone.to_owned());
        self.run(move |conn| characters::acquire(conn, &principal, &zone, epoch))
            .await
    }

    async fn commit_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: &[u8],
    ) -> Result<u64> {
        // Refuse before copying up to the limit's worth of data for the blocking pool.
        crate::characters::check_args(principal, zone, epoch, Some(data))?;
        let (principal, zone, data) = (principal.to_owned(), zone.to_owned(), data.to_vec());
        self.run(move |conn| characters::commit(conn, &principal, &zone, epoch, &data))
            .await
    }

    async fn release_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: Option<&[u8]>,
    ) -> Result<u64> {
        crate::characters::check_args(principal, zone, epoch, data)?;
        let (principal, zone) = (principal.to_owned(), zone.to_owned());
        let data = data.map(<[u8]>::to_vec);
        self.run(move |conn| characters::release(conn, &principal, &zone, epoch, data.as_deref()))
            .await
    }

    async fn load_character(&self, principal: &str) -> Result<Option<StoredCharacter>> {
        let principal = principal.to_owned();
        self.run(move |conn| characters::load(conn, &principal))
            .await
    }
}
