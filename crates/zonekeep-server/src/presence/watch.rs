//! Presence pushed to watchers: one poller per host reads the presence of every principal any
//! of its watchers watches, every [`POLL_EVERY`], and sends each watcher the principals whose
//! presence changed since the last read. A new watcher gets a snapshot of all its principals
//! from the next read, so the snapshot and the changes after it come from one sequence of reads
//! and none is missed between them.
//!
//! Polling the store, rather than listening to hosts, is what makes it right across a host's
//! failure: a dead host writes nothing, but the store's liveness rule stops counting its rows,
//! and the next read shows it.
//!
//! Bounded: at most [`MAX_WATCHERS`] watchers and [`MAX_WATCHED`] distinct principals per host;
//! each watcher's queue holds [`QUEUE`] events, and a watcher that lets it fill is closed
//! (counted `slow`): the reader reconnects and gets a fresh snapshot.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use zonekeep_store::{PresenceRow, MAX_PRESENCE_QUERY};

use crate::metrics::Metrics;

/// How often the watched principals' presence is read.
pub const POLL_EVERY: Duration = Duration::from_millis(500);
/// Most watchers one host serves.
pub const MAX_WATCHERS: usize = 10_000;
/// Most distinct principals one host's watchers watch.
pub const MAX_WATCHED: usize = 50_000;
/// Events a watcher may have unread before it is closed.
pub const QUEUE: usize = 64;

/// One principal's presence as pushed and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Presence {
    /// Whose.
    pub principal: String,
    /// In at least one zone.
    pub online: bool,
    /// The zones it is in, with the host and since when.
    pub zones: Vec<ZonePresence>,
}

/// One zone a principal is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZonePresence {
    /// The zone.
    pub zone: String,
    /// The host running its session.
    pub host: String,
    /// Since when (ms since the Unix epoch).
    pub since_ms: u64,
}

/// Each asked principal's presence, from the store's live rows (`rows` by principal).
pub fn presence_of(principals: &[String], rows: &[PresenceRow]) -> Vec<Presence> {
    let mut by: BTreeMap<&str, Vec<ZonePresence>> = BTreeMap::new();
    for r in rows {
        by.entry(r.principal.as_str())
            .or_default()
            .push(ZonePresence {
                zone: r.zone_id.clone(),
                host: r.host_id.clone(),
                since_ms: r.since_ms,
            });
    }
    principals
        .iter()
        .map(|p| {
            let zones = by.remove(p.as_str()).unwrap_or_default();
            Presence {
                principal: p.clone(),
                online: !zones.is_empty(),
                zones,
            }
        })
        .collect()
}

/// What a watcher is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    /// Every watched principal's presence (first).
    Snapshot(Vec<Presence>),
    /// A principal whose presence changed.
    Changed(Presence),
}

struct Watcher {
    principals: Vec<String>,
    tx: mpsc::Sender<Push>,
    snapshot_sent: bool,
}

/// Why a watch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchRefusal {
    /// The host serves as many watchers, or watched principals, as it may.
    Full,
}

#[derive(Default)]
struct State {
    next: u64,
    watchers: HashMap<u64, Watcher>,
    /// How many watchers watch each principal.
    counts: BTreeMap<String, usize>,
    /// The last presence read of each watched principal.
    last: HashMap<String, Presence>,
}

/// The host's watchers and what they were last told.
#[derive(Clone)]
pub(crate) struct Hub {
    state: Arc<Mutex<State>>,
    metrics: Arc<Metrics>,
}

/// A watcher's registration; dropping it unregisters the watcher.
pub(crate) struct Subscription {
    id: u64,
    hub: Hub,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.remove(self.id);
    }
}

impl Hub {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            state: Arc::default(),
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a watcher of `principals` (distinct, bounded by the caller); its snapshot
    /// comes with the next read.
    pub fn watch(
        &self,
        principals: Vec<String>,
    ) -> Result<(Subscription, mpsc::Receiver<Push>), WatchRefusal> {
        let mut s = self.lock();
        let new_principals = principals
            .iter()
            .filter(|p| !s.counts.contains_key(p.as_str()))
            .count();
        if s.watchers.len() >= MAX_WATCHERS || s.counts.len() + new_principals > MAX_WATCHED {
            self.metrics.presence().dropped("full");
            return Err(WatchRefusal::Full);
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        s.next += 1;
        let id = s.next;
        for p in &principals {
            *s.counts.entry(p.clone()).or_insert(0) += 1;
        }
        s.watchers.insert(
            id,
            Watcher {
                principals,
                tx,
                snapshot_sent: false,
            },
        );
        self.metrics.presence().set_watchers(s.watchers.len());
        drop(s);
        Ok((
            Subscription {
                id,
                hub: self.clone(),
            },
            rx,
        ))
    }

    fn remove(&self, id: u64) {
        let mut s = self.lock();
        if let Some(w) = s.watchers.remove(&id) {
            for p in w.principals {
                if let Some(n) = s.counts.get_mut(&p) {
                    *n -= 1;
                    if *n == 0 {
                        s.counts.remove(&p);
                        s.last.remove(&p);
                    }
                }
            }
        }
        self.metrics.presence().set_watchers(s.watchers.len());
    }

    /// The principals any watcher watches.
    fn watched(&self) -> Vec<String> {
        self.lock().counts.keys().cloned().collect()
    }

    /// Takes a read of `now` (every watched principal's presence) and sends each watcher its
    /// snapshot (new watchers) or the changes; a watcher whose queue is full is closed.
    fn publish(&self, now: Vec<Presence>) {
        let mut s = self.lock();
        let mut changed: BTreeSet<String> = BTreeSet::new();
        for p in &now {
            if s.last.get(&p.principal) != Some(p) {
                changed.insert(p.principal.clone());
            }
        }
        let by: HashMap<&str, &Presence> = now.iter().map(|p| (p.principal.as_str(), p)).collect();
        let mut slow: Vec<u64> = Vec::new();
        let mut sent = 0u64;
        for (id, w) in &mut s.watchers {
            let pushes: Vec<Push> = if w.snapshot_sent {
                w.principals
                    .iter()
                    .filter(|p| changed.contains(p.as_str()))
                    .filter_map(|p| by.get(p.as_str()).map(|v| Push::Changed((*v).clone())))
                    .collect()
            } else {
                let all: Vec<Presence> = w
                    .principals
                    .iter()
                    .filter_map(|p| by.get(p.as_str()).map(|v| (*v).clone()))
                    .collect();
                if all.len() < w.principals.len() {
                    // Registered after this read began: its snapshot comes with the next.
                    continue;
                }
                w.snapshot_sent = true;
                vec![Push::Snapshot(all)]
            };
            for push in pushes {
                match w.tx.try_send(push) {
                    Ok(()) => sent += 1,
                    Err(_) => {
                        slow.push(*id);
                        break;
                    }
                }
            }
        }
        for p in now {
            s.last.insert(p.principal.clone(), p);
        }
        drop(s);
        self.metrics.presence().events(sent);
        for id in slow {
            self.metrics.presence().dropped("slow");
            // Dropping its sender ends the watcher's stream; its subscription unregisters it.
            if let Some(w) = self.lock().watchers.get_mut(&id) {
                let (closed, _) = mpsc::channel(1);
                w.tx = closed;
            }
        }
    }
}

/// Reads the watched principals' presence every [`POLL_EVERY`] and publishes it, until `stop`.
pub(crate) async fn run(
    hub: Hub,
    store: zonekeep_store::Store,
    dead_after_ms: u64,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut every = tokio::time::interval(POLL_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let watched = hub.watched();
        if watched.is_empty() {
            continue;
        }
        let mut now = Vec::with_capacity(watched.len());
        let mut failed = false;
        for chunk in watched.chunks(MAX_PRESENCE_QUERY) {
            let call = store.presence.presence_of(chunk, dead_after_ms);
            match tokio::time::timeout(crate::host::STORE_TIMEOUT, call).await {
                Ok(Ok(rows)) => now.extend(presence_of(chunk, &rows)),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "presence read failed; watchers wait");
                    failed = true;
                    break;
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if !failed {
            hub.publish(now);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn row(p: &str, z: &str) -> PresenceRow {
        PresenceRow {
            principal: p.into(),
            zone_id: z.into(),
            host_id: "h".into(),
            since_ms: 7,
        }
    }

    #[test]
    fn a_watcher_gets_a_snapshot_then_only_changes() {
        let hub = Hub::new(Arc::new(Metrics::new(8)));
        let (_sub, mut rx) = hub.watch(vec!["ann".into(), "bob".into()]).unwrap();
        let ps = vec!["ann".to_owned(), "bob".to_owned()];
        hub.publish(presence_of(&ps, &[row("ann", "a")]));
        let Push::Snapshot(all) = rx.try_recv().unwrap() else {
            panic!("a snapshot first");
        };
        assert_eq!(all.len(), 2);
        assert!(all[0].online && !all[1].online);
        hub.publish(presence_of(&ps, &[row("ann", "a")]));
        assert!(rx.try_recv().is_err(), "nothing changed");
        hub.publish(presence_of(&ps, &[row("bob", "b")]));
        let mut got = vec![rx.try_recv().unwrap(), rx.try_recv().unwrap()];
        got.sort_by_key(|p| match p {
            Push::Changed(p) => p.principal.clone(),
            Push::Snapshot(_) => String::new(),
        });
        assert_eq!(
            got,
            [
                Push::Changed(Presence {
                    principal: "ann".into(),
                    online: false,
                    zones: vec![]
                }),
                Push::Changed(Presence {
                    principal: "bob".into(),
                    online: true,
                    zones: vec![ZonePresence {
                        zone: "b".into(),
                        host: "h".into(),
                        since_ms: 7
                    }]
                })
            ]
        );
    }

    #[test]
    fn a_watcher_that_does_not_read_is_closed_and_dropping_unregisters() {
        let hub = Hub::new(Arc::new(Metrics::new(8)));
        let (sub, mut rx) = hub.watch(vec!["ann".into()]).unwrap();
        let ps = vec!["ann".to_owned()];
        for i in 0..=QUEUE {
            let rows = if i % 2 == 0 {
                vec![row("ann", "a")]
            } else {
                vec![]
            };
            hub.publish(presence_of(&ps, &rows));
        }
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, QUEUE, "the queue's events, then closed");
        assert!(matches!(
            rx.try_recv(),
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
        ));
        drop(sub);
        assert!(hub.watched().is_empty());
    }
}
