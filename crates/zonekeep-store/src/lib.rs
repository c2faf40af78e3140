//! Zonekeep's persistence layer: zone saves fenced by owner epochs, an exactly-once fact ledger,
//! the fleet directory (hosts and who owns which zone), zone modules (game code by content
//! address), transfers of players between zones, players' characters, the journal of zones'
//! external calls, the lobby's rooms and seats, the matchmaker's searches, leaderboards,
//! presence and chat, on SQLite (the embedded default: one file under the data dir, nothing to
//! install) or PostgreSQL (the shared store for a fleet of hosts). Both backends implement the
//! same twelve traits, [`SaveStore`], [`FactLedger`], [`Directory`], [`ModuleStore`],
//! [`TransferLedger`], [`CharacterStore`], [`CallStore`], [`LobbyStore`], [`MatchStore`],
//! [`BoardStore`], [`PresenceStore`] and [`ChatStore`], and pass the same contract test suite.
//!
//! This crate owns the database schema, its migrations and the fencing, idempotency and directory
//! rules. It must not depend on the server, any network framework, or the simulation runtime: zone
//! ids are strings and zone state is bytes, so the host, the CLI and admin tools can all use it.
//! The fleet protocol's pure rules (timing, liveness, who may claim a zone) come from
//! `zonekeep_fleet`, which the store applies inside its transactions.
//!
//! # Concepts
//! - **Save**: a zone's own state bytes, the latest one per zone. Written with the owner's
//!   **epoch** and a per-epoch sequence number; [`SaveStore::claim`] hands a new owner the next
//!   epoch, after which every older owner's writes are refused ([`StoreError::Fenced`]).
//! - **Fact**: a durable side effect recorded under an idempotency key. The first recording applies
//!   its effect and stores the result in the same transaction; repeats return that result and apply
//!   nothing, so a fact worker may retry freely.
//! - **Every owner write is fenced**: a fact carries its zone owner's epoch
//!   ([`FactRecord::epoch`]) and is checked against the zone's fence in the recording transaction,
//!   exactly like a save. Once a newer owner has claimed the zone, the old owner's saves and facts
//!   are both refused with [`StoreError::Fenced`], and a host that sees that error must stop
//!   running the zone. The idempotency key is unchanged by the check: the new owner's re-send of a
//!   fact from the restored save still settles once.
//! - **Module**: a zone kind's game code (WebAssembly), stored once under the SHA-256 of its bytes
//!   ([`ModuleStore::put_module`]) so every host of a fleet loads exactly the same bytes. Each
//!   module kind points at the module it runs, with a version raised by every
//!   [`ModuleStore::deploy_module`] (stamped by the database's clock); hosts follow
//!   [`ModuleStore::module_kinds`] to pick up new deploys.
//! - **Transfer**: one durable record of a player's move from one zone to another, written by both
//!   zones, each fenced by its own epoch; its status changes once, so the player ends in exactly
//!   one zone ([`TransferLedger`]).
//! - **Character**: the bytes that travel with a player from zone to zone (inventory, level, gold),
//!   one per principal, at most [`MAX_CHARACTER_BYTES`], with a version raised by every commit.
//!   At most one zone holds a character's **lease** at a time, under that zone's owner epoch
//!   ([`CharacterStore::acquire_character`]); only that holder may commit or release it, and every
//!   such write is checked against the holder zone's fence in its own transaction. So once another
//!   host claims the zone, the old owner's character writes are refused ([`StoreError::Fenced`]),
//!   and the zone's fence is the lease's only clock: a lease whose zone was claimed since is stale
//!   and the next zone to ask takes it over with the last committed data. A write from a zone that
//!   does not hold the lease is [`StoreError::CharacterLeaseLost`].
//! - **Call**: an external effect a zone asks for under a key (`ctx.call(key, function, args)`),
//!   which the host delivers at least once to a sink and whose answer (a JSON value, or a failure
//!   code and message) goes back into the zone. The host journals each call before invoking the
//!   sink ([`CallStore::begin_call`]) and records its answer after
//!   ([`CallStore::finish_call`]; the first answer wins). A call re-sent under the same key with
//!   the same function and args (after a crash) is answered from the journal once it has an answer,
//!   without invoking the sink again; the key with another function or other args is refused
//!   ([`CallBegin::KeyReused`]). Every journal write carries the zone owner's epoch and is fenced
//!   like a fact ([`StoreError::Fenced`]). Calls are kept until [`CallStore::sweep_calls`] removes
//!   them after a retention period ([`DEFAULT_CALL_RETENTION`], 7 days, unless the host passes
//!   another).
//! - **Room**: a zone listed in the lobby for players to find (kind, content version, capacity,
//!   metadata), or a private one found by its code, with the **seats** the lobby handed out in it:
//!   reserved until the player arrives or the reservation lapses, present while the room's owner
//!   reports the player there (fenced by its epoch, like every owner write). Seats are handed out
//!   under a lock per kind, so a room never seats more than it has ([`LobbyStore`]).
//! - **Board**: a leaderboard ranking principals by a score that only facts change, in the
//!   transaction that records the fact, so each fact counts once ([`BoardStore`]); periodic
//!   boards keep one ranking per day or week.
//! - **Presence**: who is in which zone, on which host and since when, fleet-wide: one row per
//!   principal and zone, written by the host running the zone's session (a join when the
//!   principal becomes a participant, a leave when it stops being one) under the host's
//!   incarnation. A row counts only while that host is alive in the directory under that same
//!   incarnation, judged by the database's clock like every liveness, so a dead or restarted
//!   host's rows vanish without anyone writing; a principal resuming on another host after a
//!   failover keeps its `since` ([`PresenceStore`]).
//! - **Chat**: lines said in a channel (a zone, a zone group, or a DM between two principals,
//!   kept under one key for both), each with a seq per channel (from 1, one more per line, in
//!   commit order) and a global id the fleet's hosts follow; a channel keeps only its newest
//!   lines. Moderation beside them: mutes and bans (fleet-wide, or of a zone or group) until a
//!   time or until lifted, reports that copy the reported lines from the store, and an audit row
//!   for every sanction, lift and report ([`ChatStore`]).
//!
//! # Directory
//! The fleet's shared view, one per database ([`Directory`]): which hosts exist and which host owns
//! which zone. SQLite holds the same directory for a fleet of one, with the same code.
//! - **Hosts** register under a host id and an incarnation (one per process start) and heartbeat.
//!   Every heartbeat is stamped, and every age computed, by the *database's* clock in SQL: it is
//!   the one clock all hosts share, so no host's clock skew can make another look dead. A host id
//!   is refused to a second live process ([`StoreError::HostIdInUse`]), and a replaced process
//!   learns it on its next heartbeat ([`StoreError::LeaseLost`]).
//! - **Zone entries** name the owner and keep the kind and params the zone runs with.
//!   [`Directory::claim_zone`] applies `zonekeep_fleet::claim::decide` in one transaction under
//!   the zone's fence lock (the lock saves and claims take): a granted claim (a new zone, a dead
//!   owner's zone, or an assigned host loading its zone) makes the target the owner and raises the
//!   fence; otherwise the caller learns where the zone lives ([`ZoneClaim::Owned`]).
//! - **No second epoch**: a zone's epoch *is* its fence. Every claim or move through the directory
//!   raises it, so the previous owner's saves and fact commits are refused
//!   ([`StoreError::Fenced`]) from that moment, with nothing that could get out of step.
//!
//! # Backends
//! Each backend is a cargo feature, both on by default: `sqlite` (the embedded default) and
//! `postgres`. Either compiles alone.
//!
//! # Opening a store
//! [`open_store`] takes the `--store` spec (`"sqlite"` or a `postgres://` URL) and returns a
//! [`Store`] holding its parts as trait objects. [`SlowStore`] wraps one to simulate slow storage.
//!
//! # Blocking
//! Nothing here blocks an async worker thread: SQLite calls run on tokio's blocking pool, and
//! PostgreSQL is natively async. Callers still must not await the store from a simulation thread;
//! the host's storage workers do that.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod boards;
mod calls;
mod characters;
mod chat;
mod chat_rows;
mod directory;
mod directory_rows;
mod effect;
mod error;
mod fence;
mod lobby;
mod matchmaking;
mod modules;
#[cfg(feature = "postgres")]
mod postgres;
mod presence;
mod schema;
mod slow;
#[cfg(feature = "sqlite")]
mod sqlite;
mod traits;
mod transfers;
mod types;
mod validate;

use std::path::Path;
use std::sync::Arc;

pub use boards::{
    check_board_name, sort_key, BoardDef, BoardDefined, BoardEntry, BoardOp, BoardOrder,
    BoardPeriod, BoardRow, BoardStore, MAX_BOARDS, MAX_BOARDS_PER_FACT, MAX_BOARD_NAME,
    MAX_BOARD_PAGE, MAX_KEEP_PERIODS, MAX_SCORE,
};
pub use calls::{
    CallAnswer, CallBegin, CallFinish, CallRecord, CallStore, StoredCall, DEFAULT_CALL_RETENTION,
    MAX_CALL_ANSWER, MAX_CALL_ARGS, MAX_CALL_CODE, MAX_CALL_FUNCTION, MAX_CALL_KEY,
};
pub use characters::{
    CharacterAcquire, CharacterStore, StoredCharacter, MAX_CHARACTER_BYTES, MAX_CHARACTER_PRINCIPAL,
};
pub use chat::{
    check_channel, dm_channel, dm_parties, AuditAction, AuditEntry, ChatScope, ChatStore, NewLine,
    NewReport, NewSanction, Report, ReportedLine, Sanction, SanctionAction, StoredLine,
    DM_SEPARATOR, MAX_ACTIVE_SANCTIONS, MAX_CHAT_BATCH, MAX_CHAT_BODY, MAX_CHAT_CHANNEL,
    MAX_CHAT_KEEP, MAX_CHAT_NAME, MAX_CHAT_PAGE, MAX_CHAT_PRINCIPAL, MAX_CHAT_REASON,
    MAX_REPORT_LINES,
};
pub use directory::{
    ClaimRequest, Directory, HostRecord, HostRegistration, ZoneClaim, ZoneLocation, MAX_JTI_LEN,
    MAX_PARAMS_LEN, MAX_URL_LEN,
};
pub use error::{Result, StoreError};
pub use lobby::{
    LobbyStore, NewRoom, ReportOutcome, Room, RoomFilter, RoomReport, SeatOutcome, SeatRequest,
    SeatRole, MAX_CODE_LEN, MAX_LISTED, MAX_METADATA_BYTES, MAX_REPORTED_PRINCIPALS,
};
pub use matchmaking::{
    search_of, Candidate, Lapses, MatchStore, NewSearch, Probe, ProbeAnswer, Proposal,
    SearchChange, SearchRecord, SearchState, Settled, MAX_ASSIGNMENT_BYTES, MAX_CANDIDATES,
    MAX_PROBES,
};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore};
pub use presence::{
    PresenceChange, PresenceEvent, PresenceRow, PresenceStore, MAX_PRESENCE_BATCH,
    MAX_PRESENCE_QUERY,
};
pub use slow::SlowStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use traits::{FactLedger, ModuleStore, SaveStore, MAX_DEPLOY_HISTORY, MAX_MODULE_BYTES};
pub use transfers::{
    NewTransfer, Reclaim, StoredTransfer, TransferLedger, TransferStatus, MAX_TRANSFER_CLAIMS,
    MAX_TRANSFER_ID, MAX_TRANSFER_REASON, MAX_TRANSFER_STATE,
};
pub use types::{
    Claim, DeployCause, FactRecord, FactResult, ModuleDeploy, SaveMeta, SaveRecord, StoredFact,
    WriteOutcome,
};
/// The fleet protocol's timing, re-exported because [`Directory`] methods take it.
pub use zonekeep_fleet::Timing;

/// File name of the SQLite database inside the data dir.
pub const SQLITE_FILE_NAME: &str = "zonekeep.db";

/// An opened store: its parts as shareable trait objects, plus a printable description.
#[derive(Clone)]
pub struct Store {
    /// Zone saves.
    pub saves: Arc<dyn SaveStore>,
    /// The fact ledger.
    pub facts: Arc<dyn FactLedger>,
    /// The fleet directory.
    pub directory: Arc<dyn Directory>,
    /// Zone modules and the module each kind runs.
    pub modules: Arc<dyn ModuleStore>,
    /// Transfers of players between zones.
    pub transfers: Arc<dyn TransferLedger>,
    /// Players' characters and the zone leases they are written under.
    pub characters: Arc<dyn CharacterStore>,
    /// The journal of zones' external calls and their answers.
    pub calls: Arc<dyn CallStore>,
    /// The lobby's rooms and seats.
    pub lobby: Arc<dyn LobbyStore>,
    /// The matchmaker's searches.
    pub matches: Arc<dyn MatchStore>,
    /// Leaderboards.
    pub boards: Arc<dyn BoardStore>,
    /// Who is online, in which zone, since when.
    pub presence: Arc<dyn PresenceStore>,
    /// Chat lines, sanctions, reports and their audit.
    pub chat: Arc<dyn ChatStore>,
    /// Which database this is, for logs and the admin API; never contains a password.
    pub description: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Bundles one backend that implements all twelve traits.
    pub fn from_backend<B>(backend: B, description: String) -> Store
    where
        B: SaveStore
            + FactLedger
            + Directory
            + ModuleStore
            + TransferLedger
            + CharacterStore
            + CallStore
            + LobbyStore
            + MatchStore
            + BoardStore
            + PresenceStore
            + ChatStore
            + 'static,
    {
        let backend = Arc::new(backend);
        Store {
            saves: Arc::clone(&backend) as Arc<dyn SaveStore>,
            facts: Arc::clone(&backend) as Arc<dyn FactLedger>,
            directory: Arc::clone(&backend) as Arc<dyn Directory>,
            modules: Arc::clone(&backend) as Arc<dyn ModuleStore>,
            transfers: Arc::clone(&backend) as Arc<dyn TransferLedger>,
            characters: Arc::clone(&backend) as Arc<dyn CharacterStore>,
            calls: Arc::clone(&backend) as Arc<dyn CallStore>,
            lobby: Arc::clone(&backend) as Arc<dyn LobbyStore>,
            matches: Arc::clone(&backend) as Arc<dyn MatchStore>,
            boards: Arc::clone(&backend) as Arc<dyn BoardStore>,
            presence: Arc::clone(&backend) as Arc<dyn PresenceStore>,
            chat: backend,
            description,
        }
    }
}

/// Opens the store named by `spec`:
/// - `""` or `"sqlite"`: the SQLite file `<data_dir>/zonekeep.db` (the directory is created),
///   with default [`SqliteOptions`];
/// - `postgres://...` or `postgresql://...`: a pooled [`PostgresStore`] with default
///   [`PostgresOptions`].
///
/// Pending migrations are applied before this returns. A backend left out of the build (cargo
/// features `sqlite` and `postgres`) is refused with [`StoreError::InvalidSpec`].
pub async fn open_store(spec: &str, data_dir: &Path) -> Result<Store> {
    let spec = spec.trim();
    if spec.is_empty() || spec.eq_ignore_ascii_case("sqlite") {
        return open_sqlite(data_dir).await;
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        return open_postgres(spec).await;
    }
    // Echo only the scheme: an unknown spec may still carry credentials after it.
    let scheme: String = spec
        .split(':')
        .next()
        .unwrap_or("")
        .chars()
        .take(32)
        .collect();
    Err(StoreError::InvalidSpec(format!("scheme {scheme:?}")))
}

/// The SQLite file `<data_dir>/zonekeep.db`, creating the directory.
#[cfg(feature = "sqlite")]
async fn open_sqlite(data_dir: &Path) -> Result<Store> {
    let dir = data_dir.to_path_buf();
    let create_dir = dir.clone();
    tokio::task::spawn_blocking(move || std::fs::create_dir_all(&create_dir))
        .await
        .map_err(|e| StoreError::Backend(format!("creating data dir: {e}")))?
        .map_err(|e| StoreError::Backend(format!("creating data dir {}: {e}", dir.display())))?;
    let path = dir.join(SQLITE_FILE_NAME);
    let store = SqliteStore::open(&path).await?;
    Ok(Store::from_backend(
        store,
        format!("sqlite:{}", path.display()),
    ))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_data_dir: &Path) -> Result<Store> {
    Err(StoreError::InvalidSpec(
        "this build has no SQLite backend (cargo feature `sqlite`)".into(),
    ))
}

/// A pooled PostgreSQL store at `url`.
#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<Store> {
    let store = PostgresStore::connect(url).await?;
    let description = store.description().to_owned();
    Ok(Store::from_backend(store, description))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str) -> Result<Store> {
    Err(StoreError::InvalidSpec(
        "this build has no PostgreSQL backend (cargo feature `postgres`)".into(),
    ))
}
