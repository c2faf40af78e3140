//! The index's follower: keeps the Redis rankings a copy of the store's.
//!
//! Every [`FOLLOW_EVERY`] it reads the store's feed of changed score rows (`board_changes`,
//! stamped by the database's clock) and copies them; the script keeps the newer version of each
//! row, so copying a row twice changes nothing. Each read starts [`OVERLAP_MS`] before the last
//! read's end, so a transaction that stamped its rows just before the last read and committed
//! after it is still seen; rows already copied at that version are skipped here.
//!
//! A board period is **rebuilt** from the store (its rows staged under fresh keys, then swapped
//! in with the `built` marker in one transaction) when a read found it not built (Redis
//! flushed, restarted, or a new period), after a failed copy, at start, and every
//! [`REBUILD_EVERY`] in any case. Copies made during a rebuild may be overwritten by the swap,
//! so the feed is read again from the rebuild's start. Old periods are pruned from the store
//! every [`PRUNE_EVERY`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zonekeep_store::{BoardDef, BoardPeriod, BoardRow, MAX_BOARD_PAGE};

use super::Boards;

/// How often the feed is read.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);
/// How far before the last read's end each read starts, ms.
pub const OVERLAP_MS: u64 = 1000;
/// How often every board's current period is rebuilt even when nothing failed.
pub const REBUILD_EVERY: Duration = Duration::from_secs(300);
/// How often old periods are pruned from the store.
pub const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// Most feed pages one round reads (the rest waits for the next round).
const MAX_PAGES: usize = 64;
const DAY_MS: u64 = 86_400_000;

type RowKey = (String, u64, String);

/// The follower's own state.
struct Follower {
    /// Where the next feed read starts (the database's clock); `None` before the first.
    since: Option<u64>,
    /// Rows copied recently, at which version and when they changed.
    recent: HashMap<RowKey, (u64, u64)>,
    /// When every board was last rebuilt; `None`: rebuild at the next round.
    full_at: Option<Instant>,
    pruned_at: Option<Instant>,
}

/// Runs the follower until `stop`.
pub(crate) async fn run(boards: Arc<Boards>, stop: CancellationToken) {
    let mut f = Follower {
        since: None,
        recent: HashMap::new(),
        full_at: None,
        pruned_at: None,
    };
    loop {
        f.round(&boards).await;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(FOLLOW_EVERY) => {}
            () = boards.wake.notified() => {}
        }
    }
}

/// The database's clock: the feed's answer to a read of changes from the far future (none).
async fn db_now(boards: &Boards) -> Option<u64> {
    // The largest time a store represents (its integers are signed 64-bit).
    const FAR: u64 = i64::MAX as u64;
    match boards.store.boards.board_changes(FAR, 1).await {
        Ok((_, now)) => Some(now),
        Err(e) => {
            tracing::debug!(error = %e, "board follower: store unavailable");
            None
        }
    }
}

/// When Redis may drop a period's keys: a day after the store prunes it.
fn expiry(def: &BoardDef, period: u64) -> Option<u64> {
    let len = match def.period {
        BoardPeriod::All => return None,
        BoardPeriod::Daily => DAY_MS,
        BoardPeriod::Weekly => 7 * DAY_MS,
    };
    Some(
        period
            .saturating_add(len.saturating_mul(u64::from(def.keep_periods) + 1))
            .saturating_add(DAY_MS),
    )
}

impl Follower {
    async fn round(&mut self, boards: &Boards) {
        let Some(index) = &boards.index else {
            return;
        };
        if !index.usable() {
            return;
        }
        let full_due = self.full_at.is_none_or(|t| t.elapsed() >= REBUILD_EVERY);
        let mut wanted = boards.take_rebuilds();
        let defs = match boards.store.boards.boards().await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "board follower: store unavailable");
                return;
            }
        };
        let defs: BTreeMap<String, BoardDef> =
            defs.into_iter().map(|d| (d.name.clone(), d)).collect();
        if full_due {
            let now = crate::ticket::unix_now().saturating_mul(1000);
            for d in defs.values() {
                wanted.insert((d.name.clone(), d.period.start_of(now)));
            }
        }
        if !wanted.is_empty() && !self.rebuild(boards, &defs, wanted).await {
            return;
        }
        if full_due {
            self.full_at = Some(Instant::now());
        }
        self.follow(boards).await;
        if self.pruned_at.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            self.pruned_at = Some(Instant::now());
            match boards.store.boards.prune_boards().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(rows = n, "pruned old board periods"),
                Err(e) => tracing::debug!(error = %e, "pruning board periods failed"),
            }
        }
    }

    /// Rebuilds each wanted period; false when Redis or the store failed (try again later).
    async fn rebuild(
        &mut self,
        boards: &Boards,
        defs: &BTreeMap<String, BoardDef>,
        wanted: BTreeSet<(String, u64)>,
    ) -> bool {
        let Some(index) = &boards.index else {
            return false;
        };
        for (name, period) in wanted {
            let Some(def) = defs.get(&name) else {
                continue;
            };
            // The database's now before the first page: changes after it are read again.
            let Some(start) = db_now(boards).await else {
                return false;
            };
            let tag = match crate::fleet::random_hex(6) {
                Ok(t) => t,
                Err(_) => return false,
            };
            if let Err(e) = index.stage_begin(&name, period, &tag).await {
                boards.index_failed(&e);
                return false;
            }
            let mut after: Option<String> = None;
            let mut staged = 0u64;
            loop {
                let page = match boards
                    .store
                    .boards
                    .board_rows(&name, period, after.as_deref(), MAX_BOARD_PAGE)
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::debug!(error = %e, "board rebuild: store unavailable");
                        return false;
                    }
                };
                if let Err(e) = index.stage_rows(&name, period, &tag, &page).await {
                    boards.index_failed(&e);
                    return false;
                }
                staged += page.len() as u64;
                let full = page.len() == MAX_BOARD_PAGE;
                after = page.last().map(|r| r.principal.clone());
                if !full {
                    break;
                }
            }
            if let Err(e) = index
                .stage_commit(&name, period, &tag, staged, expiry(def, period))
                .await
            {
                boards.index_failed(&e);
                return false;
            }
            boards.metrics.boards().index("rebuilt", 1);
            tracing::debug!(board = %name, period, rows = staged, "board index rebuilt");
            self.recent
                .retain(|(b, p, _), _| !(b == &name && *p == period));
            let from = start.saturating_sub(OVERLAP_MS);
            self.since = Some(self.since.map_or(from, |s| s.min(from)));
        }
        true
    }

    /// Copies the feed's rows since the last read.
    async fn follow(&mut self, boards: &Boards) {
        let Some(index) = &boards.index else {
            return;
        };
        let mut since = match self.since {
            Some(s) => s,
            None => match db_now(boards).await {
                Some(now) => now.saturating_sub(OVERLAP_MS),
                None => return,
            },
        };
        for _ in 0..MAX_PAGES {
            let (rows, now) = match boards
                .store
                .boards
                .board_changes(since, MAX_BOARD_PAGE)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(error = %e, "board follower: store unavailable");
                    break;
                }
            };
            let fresh: Vec<BoardRow> = rows
                .iter()
                .filter(|r| {
                    self.recent
                        .get(&(r.board.clone(), r.period, r.principal.clone()))
                        .is_none_or(|(v, _)| *v < r.version)
                })
                .cloned()
                .collect();
            if !fresh.is_empty() {
                match index.apply(&fresh).await {
                    Ok(n) => boards.metrics.boards().index("applied", n),
                    Err(e) => {
                        boards.index_failed(&e);
                        // Some rows may be missing now: rebuild everything next round.
                        self.full_at = None;
                        break;
                    }
                }
                for r in fresh {
                    self.recent.insert(
                        (r.board, r.period, r.principal),
                        (r.version, r.updated_at_ms),
                    );
                }
            }
            if rows.len() < MAX_BOARD_PAGE {
                since = now.saturating_sub(OVERLAP_MS);
                break;
            }
            let first = rows.first().map_or(since, |r| r.updated_at_ms);
            let last = rows.last().map_or(since, |r| r.updated_at_ms);
            if first == last {
                // A whole page changed in one millisecond: step past it and let a rebuild
                // catch any row of that millisecond this read could not reach.
                since = last + 1;
                self.full_at = None;
            } else {
                since = last;
            }
        }
        self.since = Some(since);
        let horizon = since.saturating_sub(OVERLAP_MS);
        self.recent.retain(|_, (_, at)| *at >= horizon);
    }
}
