//! Leaderboards (docs/LEADERBOARDS.md): rankings of principals that only facts change.
//!
//! The store holds the truth ([`zonekeep_store::BoardStore`]): a fact's board changes are made
//! in the transaction that records the fact, so a score counts once however often its fact is
//! delivered. This module declares the configured boards, answers reads over HTTP and to zones
//! (`calls`: the `board.top` and `board.around` durable-call functions), and keeps the optional
//! Redis index (`index`) following the store (`follow`). Reads go to Redis while the period is
//! built there and to the store otherwise, so losing Redis loses nothing and changes no rank.
//!
//! | route | auth | answer |
//! | --- | --- | --- |
//! | `GET /boards` | none | the boards and their current periods |
//! | `GET /boards/{name}[?limit&offset&period&from=store]` | none | `Ranking`: the top entries |
//! | `GET /boards/{name}/around/{principal}[?radius&period&from=store]` | none | `Ranking` with `me` |
//! | `POST /boards/{name}/scores` | the back-end (lobby) credential | a score submitted as a fact under the caller's key |
//! | `PUT /admin/boards/{name}` | admin | 201 created, 200 unchanged, 409 `board_conflict` |
//! | `DELETE /admin/boards/{name}` | admin | 200, 404 `no_board` |
//! | `POST /admin/boards/{name}/reset[?period]` | admin | the scores deleted |

mod calls;
mod follow;
mod index;
mod routes;
pub mod spec;

pub(crate) use routes::router;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use zonekeep_store::{BoardDef, BoardDefined, BoardEntry, BoardPeriod, StoreError};

use crate::host::{json_error, Shared};
use crate::metrics::Metrics;

/// Entries a top read returns when not told.
pub const DEFAULT_LIMIT: usize = 10;
/// Entries on each side of a principal an around read returns when not told.
pub const DEFAULT_RADIUS: usize = 5;
/// Longest body a route reads.
const MAX_BODY: usize = 4096;
/// Longest idempotency key a back end may submit a score under.
pub const MAX_SCORE_KEY: usize = 200;

/// The leaderboards of a host with a store.
pub(crate) struct Boards {
    /// The store (the truth).
    pub store: zonekeep_store::Store,
    /// The Redis index, when configured.
    pub index: Option<index::BoardIndex>,
    /// Board periods a read found not built in the index, for the follower to rebuild.
    rebuilds: Mutex<BTreeSet<(String, u64)>>,
    /// Wakes the follower when a rebuild is asked for.
    wake: tokio::sync::Notify,
    metrics: Arc<Metrics>,
}

/// Declares the configured boards and starts the index's follower (hosts with a store).
pub(crate) async fn start(shared: &Arc<Shared>) -> Result<(), StoreError> {
    let Some(persist) = shared.sim.persist.clone() else {
        return Ok(());
    };
    let store = persist.store().clone();
    for def in shared
        .config
        .boards()
        .map_err(|e| StoreError::InvalidArgument(format!("board configuration: {e}")))?
    {
        match store.boards.define_board(&def).await? {
            BoardDefined::Created => tracing::info!(board = %def.name, "board declared"),
            BoardDefined::Unchanged => {}
        }
    }
    let index = match &shared.config.board_redis {
        Some(url) => Some(
            index::BoardIndex::new(url.expose())
                .map_err(|e| StoreError::InvalidArgument(format!("board_redis: {e}")))?,
        ),
        None => None,
    };
    let boards = Arc::new(Boards {
        store,
        index,
        rebuilds: Mutex::new(BTreeSet::new()),
        wake: tokio::sync::Notify::new(),
        metrics: shared.metrics.clone(),
    });
    calls::register(persist.calls().sinks(), &boards);
    if boards.index.is_some() {
        tokio::spawn(follow::run(Arc::clone(&boards), shared.fleet_stop.clone()));
    }
    let _ = shared.boards.set(boards);
    Ok(())
}

/// Why a board request was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BoardFailure {
    #[error("{0}")]
    BadRequest(String),
    #[error("no board {0:?}")]
    NoBoard(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("leaderboards need a store: this host keeps nothing")]
    Off,
}

impl BoardFailure {
    fn code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::NoBoard(_) => (StatusCode::NOT_FOUND, "no_board"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "board_conflict"),
            Self::Refused(_) => (StatusCode::UNPROCESSABLE_ENTITY, "score_refused"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Off => (StatusCode::NOT_FOUND, "boards_off"),
        }
    }
}

impl From<StoreError> for BoardFailure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::InvalidArgument(m) => Self::BadRequest(m),
            StoreError::BoardConflict(m) => Self::Conflict(m),
            StoreError::InvalidFact { reason, .. } => Self::Refused(reason),
            e => Self::Unavailable(e.to_string()),
        }
    }
}

impl IntoResponse for BoardFailure {
    fn into_response(self) -> Response {
        let (status, code) = self.code();
        json_error(status, code, self.to_string())
    }
}

/// One store call, bounded like every request's (503 past it).
async fn stored<T>(
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, BoardFailure> {
    crate::host::bounded_store_call(call)
        .await
        .map_err(|e| match e {
            crate::host::StoreCallError::Store(e) => BoardFailure::from(e),
            crate::host::StoreCallError::Timeout(m) => BoardFailure::Unavailable(m),
        })
}

fn boards_of(shared: &Shared) -> Result<&Arc<Boards>, BoardFailure> {
    shared.boards.get().ok_or(BoardFailure::Off)
}

/// Which period a read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeriodAsk {
    Current,
    Previous,
    Start(u64),
}

impl PeriodAsk {
    /// Parses `current`, `previous` or a period's start (ms).
    pub fn parse(text: Option<&str>) -> Result<Self, BoardFailure> {
        match text {
            None | Some("current") => Ok(Self::Current),
            Some("previous") => Ok(Self::Previous),
            Some(n) => n.parse::<u64>().map(Self::Start).map_err(|_| {
                BoardFailure::BadRequest(
                    "period is current, previous, or a period's start in ms".into(),
                )
            }),
        }
    }

    /// The period's start on a board of `period`, by this host's clock.
    pub fn resolve(self, period: BoardPeriod) -> Result<u64, BoardFailure> {
        let current = period.start_of(crate::ticket::unix_now().saturating_mul(1000));
        match self {
            Self::Current => Ok(current),
            Self::Previous => period.previous(current).ok_or_else(|| {
                BoardFailure::BadRequest("this board has no previous period".into())
            }),
            Self::Start(s) if period.start_of(s) == s => Ok(s),
            Self::Start(_) => Err(BoardFailure::BadRequest(
                "period is not the start of one of this board's periods".into(),
            )),
        }
    }
}

/// A board's ranking as answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ranking {
    pub size: u64,
    pub entries: Vec<BoardEntry>,
    pub me: Option<BoardEntry>,
    pub source: &'static str,
}

impl Boards {
    /// The board `name`, or `NoBoard`.
    pub async fn def(&self, name: &str) -> Result<BoardDef, BoardFailure> {
        zonekeep_store::check_board_name(name).map_err(BoardFailure::from)?;
        stored(self.store.boards.board(name))
            .await?
            .ok_or_else(|| BoardFailure::NoBoard(name.to_owned()))
    }

    fn want_rebuild(&self, board: &str, period: u64) {
        self.metrics.boards().index("missing", 1);
        self.rebuilds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((board.to_owned(), period));
        self.wake.notify_one();
    }

    fn take_rebuilds(&self) -> BTreeSet<(String, u64)> {
        std::mem::take(&mut *self.rebuilds.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The entries ranked `offset + 1 ..= offset + limit`: from the index when it holds the
    /// period, else from the store.
    pub async fn top(
        &self,
        def: &BoardDef,
        period: u64,
        offset: u64,
        limit: usize,
        from_store: bool,
    ) -> Result<Ranking, BoardFailure> {
        if let (Some(index), false) = (&self.index, from_store) {
            match index.top(&def.name, period, def.order, offset, limit).await {
                Ok(Some(read)) => {
                    self.metrics.boards().read("index");
                    return Ok(Ranking {
                        size: read.size,
                        entries: read.entries,
                        me: None,
                        source: "index",
                    });
                }
                Ok(None) => self.want_rebuild(&def.name, period),
                Err(e) => self.index_failed(&e),
            }
        }
        self.metrics.boards().read("store");
        let b = &self.store.boards;
        let entries = stored(b.board_top(&def.name, period, offset, limit)).await?;
        let size = stored(b.board_size(&def.name, period)).await?;
        Ok(Ranking {
            size,
            entries,
            me: None,
            source: "store",
        })
    }

    /// The principal's entry and up to `radius` on each side.
    pub async fn around(
        &self,
        def: &BoardDef,
        period: u64,
        principal: &str,
        radius: usize,
        from_store: bool,
    ) -> Result<Ranking, BoardFailure> {
        if let (Some(index), false) = (&self.index, from_store) {
            match index
                .around(&def.name, period, def.order, principal, radius)
                .await
            {
                Ok(Some(read)) => {
                    self.metrics.boards().read("index");
                    return Ok(Ranking {
                        size: read.size,
                        entries: read.entries,
                        me: read.me,
                        source: "index",
                    });
                }
                Ok(None) => self.want_rebuild(&def.name, period),
                Err(e) => self.index_failed(&e),
            }
        }
        self.metrics.boards().read("store");
        let b = &self.store.boards;
        let entries = stored(b.board_around(&def.name, period, principal, radius)).await?;
        let size = stored(b.board_size(&def.name, period)).await?;
        let me = entries.iter().find(|e| e.principal == principal).cloned();
        Ok(Ranking {
            size,
            entries,
            me,
            source: "store",
        })
    }

    /// The principal's entry as it is now, for an answer to its own change: its row is read by
    /// key, then copied into the index and ranked there in one step (by version: a newer copy
    /// there stays), so the rank already counts the change. The store ranks it instead (counting
    /// the rows ahead of it: slow on a big board) only without an index built for the period, or
    /// when the index holds another score (a newer change of the same principal, copied first).
    pub async fn entry_now(
        &self,
        def: &BoardDef,
        period: u64,
        principal: &str,
    ) -> Result<Option<BoardEntry>, BoardFailure> {
        let Some(row) = stored(self.store.boards.board_row(&def.name, period, principal)).await?
        else {
            return Ok(None);
        };
        if let Some(index) = &self.index {
            match index.settle(def.order, &row).await {
                Ok(index::Settled::Ranked(entry)) if entry.score == row.score => {
                    self.metrics.boards().read("index");
                    return Ok(Some(entry));
                }
                Ok(index::Settled::NotBuilt) => self.want_rebuild(&def.name, period),
                Ok(_) => {}
                Err(e) => self.index_failed(&e),
            }
        }
        self.metrics.boards().read("store");
        stored(self.store.boards.board_rank(&def.name, period, principal)).await
    }

    fn index_failed(&self, e: &redis::RedisError) {
        tracing::debug!(error = %e, "board index call failed; answering from the store");
        self.metrics.boards().index("failed", 1);
    }

    /// Forgets the index's copy of the periods a board may hold (after a reset or a delete).
    async fn forget(&self, def: &BoardDef, periods: &[u64]) {
        if let Some(index) = &self.index {
            for p in periods {
                if let Err(e) = index.forget(&def.name, *p).await {
                    self.index_failed(&e);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_asked_by_name_or_start() {
        assert_eq!(PeriodAsk::parse(None).unwrap(), PeriodAsk::Current);
        assert_eq!(
            PeriodAsk::parse(Some("previous")).unwrap(),
            PeriodAsk::Previous
        );
        assert_eq!(PeriodAsk::parse(Some("0")).unwrap(), PeriodAsk::Start(0));
        assert!(PeriodAsk::parse(Some("yesterday")).is_err());
        assert_eq!(PeriodAsk::Start(0).resolve(BoardPeriod::All).unwrap(), 0);
        assert!(PeriodAsk::Start(5).resolve(BoardPeriod::Daily).is_err());
        assert!(PeriodAsk::Previous.resolve(BoardPeriod::All).is_err());
        let day = PeriodAsk::Current.resolve(BoardPeriod::Daily).unwrap();
        assert_eq!(
            PeriodAsk::Previous.resolve(BoardPeriod::Daily).unwrap(),
            day - 86_400_000
        );
    }
}
