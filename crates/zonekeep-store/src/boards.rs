//! Leaderboards fed by facts (see [`BoardStore`]): the rules both backends share.
//!
//! A **board** ranks principals by a score. Its scores change only through the fact ledger, in
//! the same transaction that records a fact ([`FactLedger::record`](crate::FactLedger::record)),
//! so a fact counts on a board exactly once however often it is delivered, replayed or re-sent
//! from a restored save. Two ways in:
//! - a board that **follows a total** (`total = "score"`, operator `incr`) adds every amount a
//!   fact's `{"add": {"score": n}}` adds to that total;
//! - a fact's `{"boards": {"laps": 8123}}` **submits** a value to a board by name, applied with
//!   the board's operator (`incr` adds it, `best` keeps the better of old and new, `set` keeps the
//!   newest).
//!
//! A **periodic** board (`daily`, `weekly`, UTC; weeks start on Monday) keeps one ranking per
//! period, found by the period's start: a new period starts empty (the reset), and the last
//! `keep_periods` periods stay readable until [`BoardStore::prune_boards`] removes older ones.
//! The period of a change is the database clock's when the fact is recorded.
//!
//! **Ranks are exact and total**: better scores first (higher for `desc` boards, lower for `asc`),
//! ties by principal in byte order. Each row keeps its `sort_key` (the score, negated on a `desc`
//! board), so every query, in SQL or in a Redis sorted set (whose ties fall in byte order of the
//! member), orders `sort_key` ascending then principal ascending and agrees on every rank.
//! Scores stay within ±[`MAX_SCORE`] (2⁵³ − 1) so that a Redis score (a double) and a JavaScript
//! number hold them exactly; a change past it refuses the fact.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::validate::check_id;

/// Largest score magnitude a board holds: 2⁵³ − 1, exact as a double.
pub const MAX_SCORE: i64 = (1 << 53) - 1;
/// Most boards one fact may submit to.
pub const MAX_BOARDS_PER_FACT: usize = 16;
/// Most entries one read returns.
pub const MAX_BOARD_PAGE: usize = 1000;
/// Most boards a store keeps (boards are declared by operators, never by players).
pub const MAX_BOARDS: usize = 1024;
/// Most past periods a periodic board keeps.
pub const MAX_KEEP_PERIODS: u32 = 366;
/// Longest board name, in bytes.
pub const MAX_BOARD_NAME: usize = 64;

const DAY_MS: u64 = 86_400_000;
const WEEK_MS: u64 = 7 * DAY_MS;
/// 1970-01-01 was a Thursday: Monday 1970-01-05 is 4 days later.
const FIRST_MONDAY_MS: u64 = 4 * DAY_MS;

/// Which scores rank first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoardOrder {
    /// Higher scores first (points, kills).
    Desc,
    /// Lower scores first (lap times).
    Asc,
}

/// How a submitted value changes a principal's score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoardOp {
    /// Adds the value to the score (a first value is the score).
    Incr,
    /// Keeps the better of the score and the value (by the board's order).
    Best,
    /// Replaces the score with the value.
    Set,
}

/// How long one ranking lasts before a new, empty one starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoardPeriod {
    /// One ranking for good (its period start is 0).
    All,
    /// A ranking per UTC day.
    Daily,
    /// A ranking per UTC week, from Monday 00:00.
    Weekly,
}

impl BoardPeriod {
    /// The start (ms since the Unix epoch) of the period holding `now_ms`.
    pub fn start_of(self, now_ms: u64) -> u64 {
        match self {
            BoardPeriod::All => 0,
            BoardPeriod::Daily => now_ms - now_ms % DAY_MS,
            BoardPeriod::Weekly => {
                if now_ms < FIRST_MONDAY_MS {
                    return 0;
                }
                let since = now_ms - FIRST_MONDAY_MS;
                FIRST_MONDAY_MS + since - since % WEEK_MS
            }
        }
    }

    /// The start of the period before the one starting at `start` (`None` for `all`, and
    /// before the first period).
    pub fn previous(self, start: u64) -> Option<u64> {
        match self {
            BoardPeriod::All => None,
            BoardPeriod::Daily => start.checked_sub(DAY_MS),
            BoardPeriod::Weekly => start.checked_sub(WEEK_MS).filter(|s| *s >= FIRST_MONDAY_MS),
        }
    }

    /// The start of the oldest period a board keeping `keep` past periods still holds, given
    /// the current period's start (`None` for `all`: nothing is ever pruned).
    pub fn oldest_kept(self, current: u64, keep: u32) -> Option<u64> {
        let len = match self {
            BoardPeriod::All => return None,
            BoardPeriod::Daily => DAY_MS,
            BoardPeriod::Weekly => WEEK_MS,
        };
        Some(current.saturating_sub(len.saturating_mul(u64::from(keep))))
    }
}

/// A board's settings ([`BoardStore::define_board`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardDef {
    /// Its name: 1..=[`MAX_BOARD_NAME`] bytes of ASCII letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// Which scores rank first.
    pub order: BoardOrder,
    /// How a submitted value changes a score.
    pub op: BoardOp,
    /// How long one ranking lasts.
    pub period: BoardPeriod,
    /// The fact total this board follows, if any (only with [`BoardOp::Incr`]).
    #[serde(default)]
    pub total: Option<String>,
    /// How many past periods stay readable (periodic boards; 0..=[`MAX_KEEP_PERIODS`]).
    #[serde(default = "default_keep")]
    pub keep_periods: u32,
}

fn default_keep() -> u32 {
    8
}

/// What [`BoardStore::define_board`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardDefined {
    /// The board is new.
    Created,
    /// The board existed with these very settings.
    Unchanged,
}

/// One principal's place on a board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardEntry {
    /// 1 for the best.
    pub rank: u64,
    /// Whose score it is.
    pub principal: String,
    /// The score.
    pub score: i64,
}

/// One stored score, as the index (Redis) copies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardRow {
    /// The board.
    pub board: String,
    /// The period's start (0 for an `all` board).
    pub period: u64,
    /// Whose score it is.
    pub principal: String,
    /// The score.
    pub score: i64,
    /// The score as ranked: negated on a `desc` board; lower ranks first.
    pub sort_key: i64,
    /// Raised by every change of this row (1 when created), so an index applying rows out of
    /// order keeps the newest.
    pub version: u64,
    /// When it last changed (ms since the Unix epoch, the database's clock).
    pub updated_at_ms: u64,
}

/// Leaderboards: their settings and their rankings. Scores change only through the fact ledger
/// (see the module docs); this trait declares boards and reads them.
#[async_trait]
pub trait BoardStore: Send + Sync {
    /// Declares a board. Declaring it again with the same settings is [`BoardDefined::Unchanged`];
    /// with other settings it is refused with [`StoreError::BoardConflict`] (delete it first), as
    /// is a board past [`MAX_BOARDS`]. Malformed settings are [`StoreError::InvalidArgument`].
    async fn define_board(&self, def: &BoardDef) -> Result<BoardDefined>;

    /// The board `name`, if declared.
    async fn board(&self, name: &str) -> Result<Option<BoardDef>>;

    /// Every board, by name.
    async fn boards(&self) -> Result<Vec<BoardDef>>;

    /// Deletes a board and all its scores; answers whether it existed.
    async fn delete_board(&self, name: &str) -> Result<bool>;

    /// Deletes the scores of one period of a board (an operator's reset); answers how many.
    async fn reset_board(&self, name: &str, period: u64) -> Result<u64>;

    /// The entries ranked `offset + 1 ..= offset + limit` of a board's period, best first
    /// (`limit` at most [`MAX_BOARD_PAGE`]).
    async fn board_top(
        &self,
        name: &str,
        period: u64,
        offset: u64,
        limit: usize,
    ) -> Result<Vec<BoardEntry>>;

    /// The principal's entry with its rank, if it has a score in that period.
    async fn board_rank(
        &self,
        name: &str,
        period: u64,
        principal: &str,
    ) -> Result<Option<BoardEntry>>;

    /// The principal's entry and up to `radius` entries on each side of it (empty when it has
    /// no score in that period; `radius` at most [`MAX_BOARD_PAGE`] / 2).
    async fn board_around(
        &self,
        name: &str,
        period: u64,
        principal: &str,
        radius: usize,
    ) -> Result<Vec<BoardEntry>>;

    /// The principal's stored row in a board's period (its score and version), if any: one
    /// read by key, whatever the board's size.
    async fn board_row(&self, name: &str, period: u64, principal: &str)
        -> Result<Option<BoardRow>>;

    /// How many principals have a score in a board's period.
    async fn board_size(&self, name: &str, period: u64) -> Result<u64>;

    /// Rows of a board's period with principal greater than `after` (all, for `None`), by
    /// principal, at most `limit` ([`MAX_BOARD_PAGE`]): pages for rebuilding an index.
    async fn board_rows(
        &self,
        name: &str,
        period: u64,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<BoardRow>>;

    /// Rows of any board changed at or after `since_ms` (the database's clock), oldest change
    /// first, at most `limit` ([`MAX_BOARD_PAGE`]), and the database's now: the feed an index
    /// follows.
    async fn board_changes(&self, since_ms: u64, limit: usize) -> Result<(Vec<BoardRow>, u64)>;

    /// Deletes the scores of periods older than each periodic board keeps; answers how many.
    async fn prune_boards(&self) -> Result<u64>;
}

/// Refuses a malformed board name.
pub fn check_board_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > MAX_BOARD_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(StoreError::InvalidArgument(format!(
            "a board name is 1..={MAX_BOARD_NAME} bytes of letters, digits, '-', '_' and '.'"
        )));
    }
    Ok(())
}

/// Refuses malformed board settings.
pub(crate) fn check_def(def: &BoardDef) -> Result<()> {
    check_board_name(&def.name)?;
    if let Some(total) = &def.total {
        check_id("total", total)?;
        if total.len() > crate::effect::MAX_NAME_LEN {
            return Err(StoreError::InvalidArgument(format!(
                "a total name is at most {} bytes",
                crate::effect::MAX_NAME_LEN
            )));
        }
        if def.op != BoardOp::Incr {
            return Err(StoreError::InvalidArgument(
                "a board following a total adds to it: its operator is incr".into(),
            ));
        }
    }
    if def.keep_periods > MAX_KEEP_PERIODS {
        return Err(StoreError::InvalidArgument(format!(
            "a board keeps at most {MAX_KEEP_PERIODS} past periods"
        )));
    }
    Ok(())
}

/// Refuses a read's bounds past [`MAX_BOARD_PAGE`].
pub(crate) fn check_page(limit: usize) -> Result<()> {
    if limit == 0 || limit > MAX_BOARD_PAGE {
        return Err(StoreError::InvalidArgument(format!(
            "a board read takes 1..={MAX_BOARD_PAGE} entries"
        )));
    }
    Ok(())
}

/// The rank order's key of `score` on a board of `order`.
pub fn sort_key(order: BoardOrder, score: i64) -> i64 {
    match order {
        BoardOrder::Desc => -score,
        BoardOrder::Asc => score,
    }
}

/// The rule for one change: the score after applying `value` with the board's operator to
/// `current` (`None`: no score yet), or `None` when nothing changes (a `best` that is not
/// better, a `set` to the same value). A score past ±[`MAX_SCORE`] refuses the fact `key`.
pub(crate) fn apply(
    key: &str,
    def: &BoardDef,
    current: Option<i64>,
    value: i64,
) -> Result<Option<i64>> {
    let next = match (def.op, current) {
        (_, None) => value,
        (BoardOp::Incr, Some(c)) => c.saturating_add(value),
        (BoardOp::Set, Some(_)) => value,
        (BoardOp::Best, Some(c)) => {
            let better = match def.order {
                BoardOrder::Desc => value > c,
                BoardOrder::Asc => value < c,
            };
            if better {
                value
            } else {
                c
            }
        }
    };
    if !(-MAX_SCORE..=MAX_SCORE).contains(&next) {
        return Err(StoreError::InvalidFact {
            key: key.to_owned(),
            reason: format!("board {:?} score would pass ±2^53 - 1", def.name),
        });
    }
    if current == Some(next) {
        return Ok(None);
    }
    Ok(Some(next))
}

/// The score after applying `values` in turn to `current` with [`apply`], or `None` when the row
/// ends as it was (every value left it alone, or they cancelled out): then nothing is written
/// and the row's version stays. Any step past ±[`MAX_SCORE`] refuses the fact `key`.
pub(crate) fn apply_all(
    key: &str,
    def: &BoardDef,
    current: Option<i64>,
    values: &[i64],
) -> Result<Option<i64>> {
    let mut score = current;
    for value in values {
        if let Some(next) = apply(key, def, score, *value)? {
            score = Some(next);
        }
    }
    Ok(score.filter(|s| current != Some(*s)))
}

/// The changes one fact makes: for each board, in name order (which is also every
/// transaction's row-lock order), the values to apply in turn. `defs` are the boards the fact
/// names or whose total it adds to; `adds` its `add` amounts; `submits` its `boards` values. A
/// submitted board that is not declared refuses the fact.
pub(crate) fn changes(
    key: &str,
    defs: &[BoardDef],
    adds: &BTreeMap<String, i64>,
    submits: &BTreeMap<String, i64>,
) -> Result<BTreeMap<String, (BoardDef, Vec<i64>)>> {
    let mut out: BTreeMap<String, (BoardDef, Vec<i64>)> = BTreeMap::new();
    for def in defs {
        if let Some(total) = &def.total {
            if let Some(amount) = adds.get(total) {
                out.entry(def.name.clone())
                    .or_insert_with(|| (def.clone(), Vec::new()))
                    .1
                    .push(*amount);
            }
        }
    }
    for (name, value) in submits {
        let Some(def) = defs.iter().find(|d| &d.name == name) else {
            return Err(StoreError::InvalidFact {
                key: key.to_owned(),
                reason: format!("no board named {name:?}"),
            });
        };
        out.entry(name.clone())
            .or_insert_with(|| (def.clone(), Vec::new()))
            .1
            .push(*value);
    }
    Ok(out)
}

/// A stored enum's text.
pub(crate) fn order_str(o: BoardOrder) -> &'static str {
    match o {
        BoardOrder::Desc => "desc",
        BoardOrder::Asc => "asc",
    }
}

/// A stored enum's text.
pub(crate) fn op_str(o: BoardOp) -> &'static str {
    match o {
        BoardOp::Incr => "incr",
        BoardOp::Best => "best",
        BoardOp::Set => "set",
    }
}

/// A stored enum's text.
pub(crate) fn period_str(p: BoardPeriod) -> &'static str {
    match p {
        BoardPeriod::All => "all",
        BoardPeriod::Daily => "daily",
        BoardPeriod::Weekly => "weekly",
    }
}

/// A stored board row's settings, parsed (`keep_periods` as stored).
pub(crate) fn def_from_db(
    name: String,
    order: &str,
    op: &str,
    period: &str,
    total: Option<String>,
    keep_periods: i64,
) -> Result<BoardDef> {
    let corrupt =
        |what: &str, v: &str| StoreError::Corrupt(format!("board {name:?}: {what} {v:?}"));
    let order = match order {
        "desc" => BoardOrder::Desc,
        "asc" => BoardOrder::Asc,
        o => return Err(corrupt("order", o)),
    };
    let op = match op {
        "incr" => BoardOp::Incr,
        "best" => BoardOp::Best,
        "set" => BoardOp::Set,
        o => return Err(corrupt("operator", o)),
    };
    let period = match period {
        "all" => BoardPeriod::All,
        "daily" => BoardPeriod::Daily,
        "weekly" => BoardPeriod::Weekly,
        p => return Err(corrupt("period", p)),
    };
    let keep_periods = u32::try_from(keep_periods)
        .map_err(|_| corrupt("keep_periods", &keep_periods.to_string()))?;
    Ok(BoardDef {
        name,
        order,
        op,
        period,
        total,
        keep_periods,
    })
}

/// The entries of one page, given the rank of its first row.
pub(crate) fn ranked(first_rank: u64, rows: Vec<(String, i64)>) -> Vec<BoardEntry> {
    rows.into_iter()
        .zip(first_rank..)
        .map(|((principal, score), rank)| BoardEntry {
            rank,
            principal,
            score,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn def(op: BoardOp, order: BoardOrder) -> BoardDef {
        BoardDef {
            name: "b".into(),
            order,
            op,
            period: BoardPeriod::All,
            total: None,
            keep_periods: 8,
        }
    }

    #[test]
    fn periods_start_at_utc_midnight_and_monday() {
        // 2026-12-06 (a Sunday) 02:14:43 UTC.
        let now = 1_796_523_283_000;
        assert_eq!(BoardPeriod::All.start_of(now), 0);
        assert_eq!(BoardPeriod::Daily.start_of(now), 1_796_515_200_000);
        // Monday 2026-11-30 00:00 UTC.
        assert_eq!(BoardPeriod::Weekly.start_of(now), 1_795_996_800_000);
        let day = BoardPeriod::Daily.start_of(now);
        assert_eq!(BoardPeriod::Daily.start_of(day), day);
        assert_eq!(BoardPeriod::Daily.start_of(day - 1), day - DAY_MS);
        assert_eq!(BoardPeriod::Daily.previous(day), Some(day - DAY_MS));
        assert_eq!(BoardPeriod::All.previous(0), None);
        assert_eq!(
            BoardPeriod::Weekly.oldest_kept(1_795_996_800_000, 2),
            Some(1_795_996_800_000 - 2 * WEEK_MS)
        );
    }

    #[test]
    fn operators_apply_by_order_and_refuse_past_the_bound() {
        let incr = def(BoardOp::Incr, BoardOrder::Desc);
        assert_eq!(apply("k", &incr, None, 5).unwrap(), Some(5));
        assert_eq!(apply("k", &incr, Some(5), 3).unwrap(), Some(8));
        assert_eq!(apply("k", &incr, Some(5), 0).unwrap(), None);
        assert!(apply("k", &incr, Some(MAX_SCORE), 1).is_err());
        let best_desc = def(BoardOp::Best, BoardOrder::Desc);
        assert_eq!(apply("k", &best_desc, Some(5), 3).unwrap(), None);
        assert_eq!(apply("k", &best_desc, Some(5), 9).unwrap(), Some(9));
        let best_asc = def(BoardOp::Best, BoardOrder::Asc);
        assert_eq!(apply("k", &best_asc, Some(5), 3).unwrap(), Some(3));
        assert_eq!(apply("k", &best_asc, Some(5), 9).unwrap(), None);
        let set = def(BoardOp::Set, BoardOrder::Desc);
        assert_eq!(apply("k", &set, Some(5), 1).unwrap(), Some(1));
        assert!(apply("k", &set, None, -MAX_SCORE - 1).is_err());
    }

    #[test]
    fn values_apply_in_turn_and_a_row_left_as_it_was_is_not_written() {
        let incr = def(BoardOp::Incr, BoardOrder::Desc);
        assert_eq!(apply_all("k", &incr, None, &[5, 3]).unwrap(), Some(8));
        assert_eq!(apply_all("k", &incr, None, &[0]).unwrap(), Some(0));
        assert_eq!(apply_all("k", &incr, Some(4), &[3, -3]).unwrap(), None);
        assert!(apply_all("k", &incr, Some(MAX_SCORE), &[1, -1]).is_err());
        let best = def(BoardOp::Best, BoardOrder::Desc);
        assert_eq!(apply_all("k", &best, Some(9), &[3, 7]).unwrap(), None);
        assert_eq!(apply_all("k", &best, Some(9), &[3, 12]).unwrap(), Some(12));
        assert_eq!(apply_all("k", &best, Some(9), &[]).unwrap(), None);
    }

    #[test]
    fn names_and_settings_are_checked() {
        assert!(check_board_name("arena.score-daily_1").is_ok());
        assert!(check_board_name("").is_err());
        assert!(check_board_name("a b").is_err());
        assert!(check_board_name(&"x".repeat(MAX_BOARD_NAME + 1)).is_err());
        let mut d = def(BoardOp::Best, BoardOrder::Desc);
        d.total = Some("score".into());
        assert!(check_def(&d).is_err(), "a total is followed by incr only");
        d.op = BoardOp::Incr;
        assert!(check_def(&d).is_ok());
        d.keep_periods = MAX_KEEP_PERIODS + 1;
        assert!(check_def(&d).is_err());
    }

    #[test]
    fn a_fact_changes_followers_and_named_boards_and_refuses_unknown_ones() {
        let mut follows = def(BoardOp::Incr, BoardOrder::Desc);
        follows.name = "score".into();
        follows.total = Some("score".into());
        let mut laps = def(BoardOp::Best, BoardOrder::Asc);
        laps.name = "laps".into();
        let adds = BTreeMap::from([("score".to_owned(), 5)]);
        let submits = BTreeMap::from([("laps".to_owned(), 8123)]);
        let out = changes("k", &[follows.clone(), laps.clone()], &adds, &submits).unwrap();
        assert_eq!(out["score"].1, vec![5]);
        assert_eq!(out["laps"].1, vec![8123]);
        let unknown = BTreeMap::from([("nope".to_owned(), 1)]);
        assert!(matches!(
            changes("k", &[follows], &adds, &unknown),
            Err(StoreError::InvalidFact { .. })
        ));
    }

    #[test]
    fn sort_keys_rank_better_scores_lower() {
        assert!(sort_key(BoardOrder::Desc, 10) < sort_key(BoardOrder::Desc, 5));
        assert!(sort_key(BoardOrder::Asc, 5) < sort_key(BoardOrder::Asc, 10));
    }
}
