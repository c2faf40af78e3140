//! The leaderboards' index in Redis: each board period's ranking as a sorted set, so top-N,
//! a principal's rank and the entries around it are logarithmic at any size.
//!
//! It is only an index of the store's `board_entries`. Keys, per board `B` and period start `P`:
//! `zk:board:B:P:z` (a sorted set: member the principal, score the row's `sort_key`, so ranks
//! order exactly as the store's: `sort_key` ascending, ties by principal in byte order),
//! `zk:board:B:P:v` (a hash: principal → the row version copied) and `zk:board:B:P:built`
//! (present once the period was filled from the store). A read serves from Redis only while
//! `built` is there; otherwise it falls back to the store and asks for a rebuild. Rows are
//! copied by a script that keeps the newer version, so copies arriving twice or out of order
//! (several hosts follow the same feed) never move a score back.

use redis::{AsyncCommands, RedisResult, Script};
use zonekeep_store::{BoardEntry, BoardOrder, BoardRow};

use crate::redis_link::RedisLink;

/// Rows one script call copies.
const APPLY_BATCH: usize = 256;

/// Copies rows, each only when its version is newer than the one copied before.
const APPLY: &str = r"
local n = 0
for i = 1, #KEYS, 2 do
  local j = (i - 1) / 2 * 3
  local p = ARGV[j + 1]
  local v = tonumber(ARGV[j + 3])
  local old = tonumber(redis.call('HGET', KEYS[i + 1], p) or '0')
  if v > old then
    redis.call('ZADD', KEYS[i], ARGV[j + 2], p)
    redis.call('HSET', KEYS[i + 1], p, v)
    n = n + 1
  end
end
return n
";

fn key(board: &str, period: u64, part: &str) -> String {
    format!("zk:board:{board}:{period}:{part}")
}

/// A ranking read from the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexRead {
    /// Principals with a score in the period.
    pub size: u64,
    /// The entries asked for.
    pub entries: Vec<BoardEntry>,
    /// The asking principal's entry (around-me reads).
    pub me: Option<BoardEntry>,
}

/// The Redis connection and the copy script.
pub(crate) struct BoardIndex {
    link: RedisLink,
    apply: Script,
}

fn score_of(order: BoardOrder, sort_key: f64) -> i64 {
    // Scores are within ±2^53 - 1, exact as doubles, so the cast is exact.
    #[allow(clippy::cast_possible_truncation)]
    let k = sort_key as i64;
    match order {
        BoardOrder::Desc => -k,
        BoardOrder::Asc => k,
    }
}

fn entries(order: BoardOrder, first_rank: u64, rows: Vec<(String, f64)>) -> Vec<BoardEntry> {
    rows.into_iter()
        .zip(first_rank..)
        .map(|((principal, k), rank)| BoardEntry {
            rank,
            principal,
            score: score_of(order, k),
        })
        .collect()
}

impl BoardIndex {
    /// An index at `url` (`redis://host:port`), connected on first use.
    pub fn new(url: &str) -> Result<Self, String> {
        Ok(Self {
            link: RedisLink::new(url)?,
            apply: Script::new(APPLY),
        })
    }

    /// False while backing off after a failed call.
    pub fn usable(&self) -> bool {
        self.link.usable()
    }

    /// Copies rows (newer versions only); answers how many changed the index.
    pub async fn apply(&self, rows: &[BoardRow]) -> RedisResult<u64> {
        let mut changed = 0;
        for chunk in rows.chunks(APPLY_BATCH) {
            let mut inv = self.apply.prepare_invoke();
            for r in chunk {
                inv.key(key(&r.board, r.period, "z"))
                    .key(key(&r.board, r.period, "v"))
                    .arg(&r.principal)
                    .arg(r.sort_key)
                    .arg(r.version);
            }
            let mut conn = self.link.conn();
            changed += self
                .link
                .run(async move { inv.invoke_async::<u64>(&mut conn).await })
                .await?;
        }
        Ok(changed)
    }

    /// The entries ranked `offset + 1 ..= offset + limit`; `None` when the period is not built.
    pub async fn top(
        &self,
        board: &str,
        period: u64,
        order: BoardOrder,
        offset: u64,
        limit: usize,
    ) -> RedisResult<Option<IndexRead>> {
        let z = key(board, period, "z");
        let start = isize::try_from(offset).unwrap_or(isize::MAX);
        let stop = start.saturating_add(isize::try_from(limit).unwrap_or(0).saturating_sub(1));
        let mut conn = self.link.conn();
        let (built, size, rows): (bool, u64, Vec<(String, f64)>) = self
            .link
            .run(async move {
                redis::pipe()
                    .exists(key(board, period, "built"))
                    .zcard(&z)
                    .zrange_withscores(&z, start, stop)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        if !built {
            return Ok(None);
        }
        Ok(Some(IndexRead {
            size,
            entries: entries(order, offset + 1, rows),
            me: None,
        }))
    }

    /// The principal's entry and up to `radius` on each side; `None` when the period is not
    /// built.
    pub async fn around(
        &self,
        board: &str,
        period: u64,
        order: BoardOrder,
        principal: &str,
        radius: usize,
    ) -> RedisResult<Option<IndexRead>> {
        let z = key(board, period, "z");
        let mut conn = self.link.conn();
        let zr = z.clone();
        let p = principal.to_owned();
        let (built, size, rank): (bool, u64, Option<u64>) = self
            .link
            .run(async move {
                redis::pipe()
                    .exists(key(board, period, "built"))
                    .zcard(&zr)
                    .zrank(&zr, &p)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        if !built {
            return Ok(None);
        }
        let Some(rank) = rank else {
            return Ok(Some(IndexRead {
                size,
                entries: Vec::new(),
                me: None,
            }));
        };
        let start = rank.saturating_sub(radius as u64);
        let stop = rank.saturating_add(radius as u64);
        let (s, e) = (
            isize::try_from(start).unwrap_or(isize::MAX),
            isize::try_from(stop).unwrap_or(isize::MAX),
        );
        let mut conn = self.link.conn();
        let rows: Vec<(String, f64)> = self
            .link
            .run(async move { conn.zrange_withscores(&z, s, e).await })
            .await?;
        let list = entries(order, start + 1, rows);
        let me = list.iter().find(|e| e.principal == principal).cloned();
        Ok(Some(IndexRead {
            size,
            entries: list,
            me,
        }))
    }

    /// Starts a rebuild of a period: clears the staging keys `tag` names.
    pub async fn stage_begin(&self, board: &str, period: u64, tag: &str) -> RedisResult<()> {
        let mut conn = self.link.conn();
        let (z, v) = (
            key(board, period, &format!("z.{tag}")),
            key(board, period, &format!("v.{tag}")),
        );
        self.link
            .run(async move { conn.del::<_, ()>(&[z, v]).await })
            .await
    }

    /// Adds a page of the store's rows to the staging keys.
    pub async fn stage_rows(
        &self,
        board: &str,
        period: u64,
        tag: &str,
        rows: &[BoardRow],
    ) -> RedisResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let (z, v) = (
            key(board, period, &format!("z.{tag}")),
            key(board, period, &format!("v.{tag}")),
        );
        let members: Vec<(i64, &str)> = rows
            .iter()
            .map(|r| (r.sort_key, r.principal.as_str()))
            .collect();
        let versions: Vec<(&str, u64)> = rows
            .iter()
            .map(|r| (r.principal.as_str(), r.version))
            .collect();
        let mut pipe = redis::pipe();
        pipe.zadd_multiple(&z, &members)
            .ignore()
            .hset_multiple(&v, &versions)
            .ignore();
        let mut conn = self.link.conn();
        self.link
            .run(async move { pipe.query_async::<()>(&mut conn).await })
            .await
    }

    /// Makes the staging keys the period's ranking and marks it built, in one transaction;
    /// `expire_at_ms` (periodic boards) lets Redis drop the period once the store prunes it.
    pub async fn stage_commit(
        &self,
        board: &str,
        period: u64,
        tag: &str,
        staged_rows: u64,
        expire_at_ms: Option<u64>,
    ) -> RedisResult<()> {
        let (z, v, b) = (
            key(board, period, "z"),
            key(board, period, "v"),
            key(board, period, "built"),
        );
        let (sz, sv) = (
            key(board, period, &format!("z.{tag}")),
            key(board, period, &format!("v.{tag}")),
        );
        let mut pipe = redis::pipe();
        pipe.atomic();
        if staged_rows == 0 {
            pipe.del(&[&z, &v]).ignore();
        } else {
            pipe.rename(&sz, &z).ignore().rename(&sv, &v).ignore();
        }
        pipe.set(&b, 1).ignore();
        if let Some(at) = expire_at_ms.and_then(|t| i64::try_from(t).ok()) {
            for k in [&z, &v, &b] {
                pipe.pexpire_at(k, at).ignore();
            }
        }
        let mut conn = self.link.conn();
        self.link
            .run(async move { pipe.query_async::<()>(&mut conn).await })
            .await
    }

    /// Forgets a period (an operator reset it, or deleted its board): the next read rebuilds.
    pub async fn forget(&self, board: &str, period: u64) -> RedisResult<()> {
        let keys = [
            key(board, period, "z"),
            key(board, period, "v"),
            key(board, period, "built"),
        ];
        let mut conn = self.link.conn();
        self.link
            .run(async move { conn.del::<_, ()>(&keys).await })
            .await
    }
}
