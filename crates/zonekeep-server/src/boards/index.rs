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
//!
//! Every read is one atomic step in Redis (a script, or a `MULTI` pipeline): a rank found in one
//! round trip and its page read in another would disagree whenever a score ahead changed in
//! between, which on a busy board is often.

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

/// Copies one row (when newer, as [`APPLY`] does) and ranks its principal, in one step: answers
/// `{built, rank, sort_key}` with `built` 0 when the period is not built and `rank` -1 when the
/// principal is not there.
const SETTLE: &str = r"
local p = ARGV[1]
local v = tonumber(ARGV[3])
local old = tonumber(redis.call('HGET', KEYS[2], p) or '0')
if v > old then
  redis.call('ZADD', KEYS[1], ARGV[2], p)
  redis.call('HSET', KEYS[2], p, v)
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {0, -1, '0'}
end
local rank = redis.call('ZRANK', KEYS[1], p)
if not rank then
  return {1, -1, '0'}
end
return {1, rank, redis.call('ZSCORE', KEYS[1], p)}
";

/// A principal's entry and up to `radius` on each side, in one step: answers `{built, size,
/// start, [member, sort_key, ...]}` with `start` the rank (from 0) of the first entry, -1 when
/// the principal is not there.
const AROUND: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {0, 0, -1, {}}
end
local size = redis.call('ZCARD', KEYS[1])
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then
  return {1, size, -1, {}}
end
local start = rank - tonumber(ARGV[2])
if start < 0 then
  start = 0
end
return {1, size, start, redis.call('ZRANGE', KEYS[1], start, rank + tonumber(ARGV[2]), 'WITHSCORES')}
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

/// Where a principal stands in the index after its row was copied ([`BoardIndex::settle`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The period is not built: the index cannot rank.
    NotBuilt,
    /// The principal is not in the period (a rebuild swapped in rows read before its change).
    Absent,
    /// Its entry as the index holds it: the copied row's, or a newer copy's.
    Ranked(BoardEntry),
}

/// The Redis connection and the scripts.
pub(crate) struct BoardIndex {
    link: RedisLink,
    apply: Script,
    settle: Script,
    around: Script,
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
            settle: Script::new(SETTLE),
            around: Script::new(AROUND),
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
                    .atomic()
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

    /// The principal's entry and up to `radius` on each side, read in one step; `None` when the
    /// period is not built.
    pub async fn around(
        &self,
        board: &str,
        period: u64,
        order: BoardOrder,
        principal: &str,
        radius: usize,
    ) -> RedisResult<Option<IndexRead>> {
        let mut inv = self.around.prepare_invoke();
        inv.key(key(board, period, "z"))
            .key(key(board, period, "built"))
            .arg(principal)
            .arg(radius);
        let mut conn = self.link.conn();
        let (built, size, start, rows): (u8, u64, i64, Vec<(String, f64)>) = self
            .link
            .run(async move { inv.invoke_async(&mut conn).await })
            .await?;
        if built == 0 {
            return Ok(None);
        }
        let Ok(start) = u64::try_from(start) else {
            return Ok(Some(IndexRead {
                size,
                entries: Vec::new(),
                me: None,
            }));
        };
        let list = entries(order, start + 1, rows);
        let me = list.iter().find(|e| e.principal == principal).cloned();
        Ok(Some(IndexRead {
            size,
            entries: list,
            me,
        }))
    }

    /// Copies `row` (when newer than the index's copy) and ranks its principal, in one step.
    pub async fn settle(&self, order: BoardOrder, row: &BoardRow) -> RedisResult<Settled> {
        let mut inv = self.settle.prepare_invoke();
        inv.key(key(&row.board, row.period, "z"))
            .key(key(&row.board, row.period, "v"))
            .key(key(&row.board, row.period, "built"))
            .arg(&row.principal)
            .arg(row.sort_key)
            .arg(row.version);
        let mut conn = self.link.conn();
        let (built, rank, sort_key): (u8, i64, f64) = self
            .link
            .run(async move { inv.invoke_async(&mut conn).await })
            .await?;
        if built == 0 {
            return Ok(Settled::NotBuilt);
        }
        let Ok(rank) = u64::try_from(rank) else {
            return Ok(Settled::Absent);
        };
        Ok(Settled::Ranked(BoardEntry {
            rank: rank + 1,
            principal: row.principal.clone(),
            score: score_of(order, sort_key),
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
            .run(async move { conn.unlink::<_, ()>(&[z, v]).await })
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
    ///
    /// The old ranking is `UNLINK`ed first, so Redis frees it off its main thread: a `RENAME`
    /// over it would free it inline (0.8 s for a million entries), stalling every other call past
    /// its bound, so the host would fall back to the store and rebuild again.
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
        pipe.unlink(&[&z, &v]).ignore();
        if staged_rows > 0 {
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
    /// (`UNLINK`: a big ranking is freed off Redis's main thread.)
    pub async fn forget(&self, board: &str, period: u64) -> RedisResult<()> {
        let keys = [
            key(board, period, "z"),
            key(board, period, "v"),
            key(board, period, "built"),
        ];
        let mut conn = self.link.conn();
        self.link
            .run(async move { conn.unlink::<_, ()>(&keys).await })
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! Against a private `redis-server` (`ZONEKEEP_REDIS_SERVER`, as the fleet tests take it).

    use std::io::Write;
    use std::process::{Child, Command, Stdio};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A `redis-server` on a free port, killed when dropped.
    struct Server(Child, u16);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The server from `ZONEKEEP_REDIS_SERVER`; `None` (the test is skipped) without it.
    fn server(test: &str, dir: &std::path::Path) -> Option<Server> {
        let Some(bin) = std::env::var("ZONEKEEP_REDIS_SERVER")
            .ok()
            .filter(|b| !b.is_empty())
        else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: ZONEKEEP_REDIS_SERVER is not set, and CI=true requires the service"
            );
            let line = format!("SKIPPED: zonekeep-server {test}: ZONEKEEP_REDIS_SERVER not set");
            eprintln!("{line}");
            if let Ok(path) = std::env::var("ZONEKEEP_SKIPPED_LOG") {
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = writeln!(f, "{line}");
                }
            }
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        Some(Server(child, port))
    }

    fn row(principal: &str, score: i64, version: u64) -> BoardRow {
        BoardRow {
            board: "t".into(),
            period: 0,
            principal: principal.into(),
            score,
            sort_key: -score,
            version,
            updated_at_ms: 0,
        }
    }

    /// Builds period 0 of board `t` from `rows`, waiting for the server to answer.
    async fn build(index: &BoardIndex, rows: &[BoardRow]) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while index.stage_begin("t", 0, "x").await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server answers"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
            // A refused connection backs the link off: wait it out.
            tokio::time::sleep(crate::redis_link::BACK_OFF).await;
        }
        index.stage_rows("t", 0, "x", rows).await.unwrap();
        index
            .stage_commit("t", 0, "x", rows.len() as u64, None)
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_and_a_submissions_rank_are_one_state_while_scores_change_ahead() {
        let test = "reads_and_a_submissions_rank_are_one_state_while_scores_change_ahead";
        let dir = tempfile::tempdir().unwrap();
        let Some(server) = server(test, dir.path()) else {
            return;
        };
        let index = Arc::new(BoardIndex::new(&format!("redis://127.0.0.1:{}", server.1)).unwrap());
        // Not built: nothing ranks from the index.
        build(&index, &[]).await;
        index.forget("t", 0).await.unwrap();
        assert_eq!(
            index
                .settle(BoardOrder::Desc, &row("p", 1, 1))
                .await
                .unwrap(),
            Settled::NotBuilt
        );
        assert_eq!(
            index
                .around("t", 0, BoardOrder::Desc, "p", 2)
                .await
                .unwrap(),
            None
        );

        // p000..p199 scoring 0..199: p199 ranks 1, p100 ranks 100.
        let rows: Vec<BoardRow> = (0..200).map(|i| row(&format!("p{i:03}"), i, 1)).collect();
        build(&index, &rows).await;
        let read = index
            .around("t", 0, BoardOrder::Desc, "p100", 2)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.size, 200);
        assert_eq!(
            read.entries
                .iter()
                .map(|e| (e.rank, e.principal.as_str(), e.score))
                .collect::<Vec<_>>(),
            vec![
                (98, "p102", 102),
                (99, "p101", 101),
                (100, "p100", 100),
                (101, "p099", 99),
                (102, "p098", 98),
            ]
        );
        assert_eq!(read.me.unwrap().rank, 100);
        let top = index
            .around("t", 0, BoardOrder::Desc, "p199", 2)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(top.entries.first().unwrap().rank, 1);
        assert_eq!(top.entries.len(), 3);
        let nobody = index
            .around("t", 0, BoardOrder::Desc, "nobody", 2)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (nobody.size, nobody.entries.len(), nobody.me),
            (200, 0, None)
        );

        // A submission's own row: copied when newer, ranked in the same step.
        let Settled::Ranked(me) = index
            .settle(BoardOrder::Desc, &row("p100", 150, 2))
            .await
            .unwrap()
        else {
            panic!("p100 ranks");
        };
        assert_eq!((me.rank, me.score), (50, 150));
        // An older copy arriving later changes nothing: the index answers what it holds.
        let Settled::Ranked(me) = index
            .settle(BoardOrder::Desc, &row("p100", 100, 1))
            .await
            .unwrap()
        else {
            panic!("p100 ranks");
        };
        assert_eq!((me.rank, me.score), (50, 150));

        // Scores change ahead of p100 all the while: every read still finds it in the middle of
        // its page, with the rank the page gives it.
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (index, stop) = (Arc::clone(&index), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let rows: Vec<BoardRow> = (0..8)
                        .map(|k| row(&format!("a{n}-{k}"), 1000 + i64::try_from(n).unwrap(), 1))
                        .collect();
                    index.apply(&rows).await.unwrap();
                    n += 1;
                }
                n
            })
        };
        for i in 0..300u64 {
            let read = index
                .around("t", 0, BoardOrder::Desc, "p100", 2)
                .await
                .unwrap()
                .unwrap();
            let me = read.me.clone().expect("p100 is on its own page");
            assert_eq!(read.entries.len(), 5, "{read:?}");
            assert_eq!(read.entries[2], me, "{read:?}");
            assert!(read.size >= 200 && me.rank <= read.size, "{read:?}");
            for w in read.entries.windows(2) {
                assert_eq!(w[0].rank + 1, w[1].rank, "{read:?}");
            }
            let Settled::Ranked(own) = index
                .settle(BoardOrder::Desc, &row("p100", 150, 2))
                .await
                .unwrap()
            else {
                panic!("p100 ranks");
            };
            assert!(own.rank >= me.rank, "round {i}: {own:?} after {me:?}");
        }
        stop.store(true, Ordering::Relaxed);
        assert!(writer.await.unwrap() > 0);

        // A rebuild replaces the period whole (the old ranking unlinked), empty ones included.
        build(&index, &rows[..10]).await;
        let read = index
            .around("t", 0, BoardOrder::Desc, "p009", 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((read.size, read.me.unwrap().rank), (10, 1));
        build(&index, &[]).await;
        let read = index
            .top("t", 0, BoardOrder::Desc, 0, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((read.size, read.entries.len()), (0, 0));
        drop(server);
    }
}
