//! The candidate index in Redis: each queue's queued searches, oldest first, with their round
//! trips, so a replica forming matches reads a queue without scanning the store.
//!
//! It is only an index. The store decides: a proposal takes a search only if the store still has
//! it queued, so a stale entry costs one failed proposal, never a wrong match. Entries are added
//! when a search is queued, refreshed on its heartbeats (each lives as long as its heartbeat
//! allows), and removed when it is cancelled or taken into a match. When the index is found
//! empty (Redis restarted or was flushed), after any failed call, and every
//! [`REBUILD_EVERY`] in any case, the queue's entries are rebuilt from the store. While Redis does
//! not answer, matches are formed from the store directly (slower, never wrong), and Redis is
//! left alone for a second after each failure ([`crate::redis_link`]) so a dead server costs nothing per request.
//!
//! Keys, per queue `Q`: `zk:match:Q:q` (a sorted set of search ids scored by queue time),
//! `zk:match:Q:c:ID` (a search's candidate as JSON, with an expiry), and `zk:match:Q:built`
//! (present once the set was filled from the store).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{AsyncCommands, RedisResult};
use zonekeep_store::{Candidate, SearchRecord};

use crate::metrics::Metrics;
use crate::redis_link::RedisLink;

/// How often a queue's entries are rebuilt from the store even when nothing failed.
pub const REBUILD_EVERY: Duration = Duration::from_secs(10);

/// A connection to the index (reconnecting by itself), and what this replica knows of its state.
pub(crate) struct CandidateIndex {
    link: RedisLink,
    /// How long a candidate lives without a heartbeat, seconds.
    ttl_secs: u64,
    /// Set after a failed call: the next read rebuilds.
    stale: AtomicBool,
}

fn zkey(queue: &str) -> String {
    format!("zk:match:{queue}:q")
}

fn ckey(queue: &str, id: &str) -> String {
    format!("zk:match:{queue}:c:{id}")
}

fn built(queue: &str) -> String {
    format!("zk:match:{queue}:built")
}

impl CandidateIndex {
    /// An index at `url` (`redis://host:port`), connected on first use.
    pub fn new(url: &str, ttl_secs: u64) -> Result<Self, String> {
        Ok(Self {
            link: RedisLink::new(url)?,
            ttl_secs: ttl_secs.max(1),
            stale: AtomicBool::new(true),
        })
    }

    fn usable(&self) -> bool {
        self.link.usable()
    }

    /// Runs one call; a failure marks the index stale (the next read rebuilds) and is counted.
    async fn run<T>(
        &self,
        metrics: &Metrics,
        f: impl std::future::Future<Output = RedisResult<T>>,
    ) -> Option<T> {
        if !self.usable() {
            self.stale.store(true, Ordering::Relaxed);
            return None;
        }
        match self.link.run(f).await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::debug!(error = %e, "match index call failed");
                metrics.matchmaker().index("failed");
                self.stale.store(true, Ordering::Relaxed);
                None
            }
        }
    }

    fn candidate(rec: &SearchRecord) -> Candidate {
        Candidate {
            search_id: rec.search_id.clone(),
            principal: rec.principal.clone(),
            rtt_ms: rec.rtt_ms.clone(),
            queued_at_ms: rec.queued_at_ms.unwrap_or(rec.created_at_ms),
        }
    }

    /// Adds a queued search.
    pub async fn add(&self, rec: &SearchRecord, metrics: &Metrics) {
        let c = Self::candidate(rec);
        let Ok(json) = serde_json::to_string(&c) else {
            return;
        };
        let mut conn = self.link.conn();
        let (z, k, ttl) = (
            zkey(&rec.queue),
            ckey(&rec.queue, &c.search_id),
            self.ttl_secs,
        );
        self.run(metrics, async move {
            redis::pipe()
                .atomic()
                .zadd(&z, &c.search_id, c.queued_at_ms)
                .ignore()
                .set_ex(&k, json, ttl)
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        })
        .await;
    }

    /// Extends a queued search's entry by its heartbeat.
    pub async fn touch(&self, rec: &SearchRecord, metrics: &Metrics) {
        let mut conn = self.link.conn();
        let k = ckey(&rec.queue, &rec.search_id);
        let ttl = i64::try_from(self.ttl_secs).unwrap_or(i64::MAX);
        self.run(metrics, async move { conn.expire::<_, ()>(&k, ttl).await })
            .await;
    }

    /// Removes searches of `queue` (cancelled, or taken into a match).
    pub async fn remove(&self, queue: &str, ids: &[String], metrics: &Metrics) {
        if ids.is_empty() {
            return;
        }
        let mut conn = self.link.conn();
        let z = zkey(queue);
        let keys: Vec<String> = ids.iter().map(|id| ckey(queue, id)).collect();
        let ids = ids.to_vec();
        self.run(metrics, async move {
            redis::pipe()
                .zrem(&z, ids)
                .ignore()
                .del(keys)
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        })
        .await;
    }

    /// The queue's candidates, oldest first, at most `limit`; `None` when the index cannot be
    /// used now (Redis down, or the entries must be rebuilt first).
    pub async fn candidates(
        &self,
        queue: &str,
        limit: usize,
        metrics: &Metrics,
    ) -> Option<Vec<Candidate>> {
        if self.stale.load(Ordering::Relaxed) || !self.usable() {
            return None;
        }
        let mut conn = self.link.conn();
        let (z, b) = (zkey(queue), built(queue));
        let stop = isize::try_from(limit)
            .unwrap_or(isize::MAX)
            .saturating_sub(1);
        let (present, ids): (bool, Vec<String>) = self
            .run(metrics, async move {
                redis::pipe()
                    .exists(&b)
                    .zrange(&z, 0, stop)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        if !present {
            // Redis lost the index (restarted, flushed): rebuild before trusting it.
            self.stale.store(true, Ordering::Relaxed);
            return None;
        }
        if ids.is_empty() {
            return Some(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| ckey(queue, id)).collect();
        let mut conn = self.link.conn();
        let found: Vec<Option<String>> = self
            .run(metrics, async move { conn.mget(keys).await })
            .await?;
        let mut out = Vec::with_capacity(found.len());
        let mut lapsed = Vec::new();
        for (id, json) in ids.into_iter().zip(found) {
            match json.and_then(|j| serde_json::from_str::<Candidate>(&j).ok()) {
                Some(c) => out.push(c),
                None => lapsed.push(id),
            }
        }
        // An entry whose candidate expired is a search that stopped beating: drop it.
        self.remove(queue, &lapsed, metrics).await;
        metrics.matchmaker().index("redis");
        Some(out)
    }

    /// Refills the queue's entries from the store's candidates.
    pub async fn rebuild(&self, queue: &str, candidates: &[Candidate], metrics: &Metrics) -> bool {
        if !self.usable() {
            return false;
        }
        let mut conn = self.link.conn();
        let (z, b, ttl) = (zkey(queue), built(queue), self.ttl_secs);
        let mut pipe = redis::pipe();
        pipe.atomic().del(&z).ignore();
        for c in candidates {
            let Ok(json) = serde_json::to_string(c) else {
                continue;
            };
            pipe.zadd(&z, &c.search_id, c.queued_at_ms)
                .ignore()
                .set_ex(ckey(queue, &c.search_id), json, ttl)
                .ignore();
        }
        pipe.set(&b, 1).ignore();
        let done = self
            .run(
                metrics,
                async move { pipe.query_async::<()>(&mut conn).await },
            )
            .await
            .is_some();
        if done {
            self.stale.store(false, Ordering::Relaxed);
            metrics.matchmaker().index("rebuilt");
        }
        done
    }

    /// True when the next read must rebuild first.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }
}
