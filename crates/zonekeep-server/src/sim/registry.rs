//! Which zones exist, which thread runs each, and what admin/metrics can read
//! about them without waking the thread.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use serde::Serialize;

use super::InboxInput;

/// A zone as listed by the admin API.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ZoneSummary {
    /// Zone id.
    pub id: String,
    /// Zone kind.
    pub kind: String,
    /// `hot`, `idle` or `dormant`.
    pub tier: &'static str,
    /// A lasting world: never Dormant, stopped only when forced.
    pub lasting: bool,
    /// Current tick.
    pub tick: u64,
    /// Players present (connected or within grace).
    pub players: u32,
    /// Observers present.
    pub observers: u32,
    /// Replicated entities (0 until the world is replicated).
    pub entities: u32,
    /// Ticks run since the zone started.
    pub ticks_run: u64,
    /// Due ticks dropped by the catch-up cap.
    pub ticks_dropped: u64,
    /// Duration of the last tick, µs.
    pub last_tick_us: u64,
    /// Longest tick so far, µs.
    pub max_tick_us: u64,
    /// Mean tick duration, µs.
    pub mean_tick_us: f64,
}

/// A running zone as the lobby reports it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LobbyView {
    pub zone_id: String,
    pub epoch: u64,
    pub players: u32,
    pub observers: u32,
    /// Shared with the zone's entry: unchanged, it is the same allocation.
    pub present: Arc<[String]>,
    pub listing: Option<zonekeep_core::Listing>,
}

/// One participant in the admin zone detail.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlayerSummary {
    /// Player id.
    pub id: u32,
    /// Principal.
    pub principal: String,
    /// The ticket's `name` claim, when it has one (what players see each other as).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `player` or `observer`.
    pub role: &'static str,
    /// False within the reconnect grace.
    pub connected: bool,
    /// Last input processed (the ack).
    pub ack: Option<u32>,
    /// `websocket` or `webtransport`: the transport of its connection; `None` (JSON `null`)
    /// while it is dropped, within the reconnect grace.
    pub transport: Option<&'static str>,
    /// Bytes of the frames its zone queued to its connection since it attached (to its last
    /// one, while dropped): Welcome, Deltas and States, events, notices (not the Pongs its session
    /// answers Pings with).
    pub bytes_out: u64,
    /// Bytes queued to it per second, over the last window of about a second the zone measured
    /// (measured once a second as the zone steps; a window ends 0 to 1 s before the answer).
    pub bytes_out_per_s: u64,
    /// Its connection's round trip in milliseconds, when the host measured one (WebTransport:
    /// QUIC's path estimate, reported every second; WebSocket: the I/O thread's read-progress
    /// Ping and its Pong); `None` (JSON `null`) before, and while it is dropped.
    pub rtt_ms: Option<f64>,
}

/// Zone detail for the admin API.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ZoneDetail {
    /// The summary.
    #[serde(flatten)]
    pub summary: ZoneSummary,
    /// Every participant.
    pub participants: Vec<PlayerSummary>,
    /// Saves and facts (absent when the host runs without persistence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistence: Option<crate::persist::PersistDetail>,
    /// Every stage of the zone's work over the last 30 to 60 seconds (all zero when the host
    /// does not time stages, `stage_timing = false`).
    pub stages: Vec<StageDetail>,
    /// What the zone did since it started on this host.
    pub work: super::work::WorkCounters,
    /// What its last patch built (the per-patch counters; `patches` and the tick and input
    /// counters are 0).
    pub last_patch: super::work::WorkCounters,
}

/// One stage's recent durations ([`zonekeep_core::StageSummary`]), in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StageDetail {
    /// The stage's name (`tick`, `encode`, ...).
    pub stage: &'static str,
    /// Durations recorded in the window.
    pub count: u64,
    /// Median, as the top of its histogram bucket (within 19 % above the true value).
    pub p50_us: u64,
    /// 95th percentile, as the median.
    pub p95_us: u64,
    /// Longest, exact.
    pub max_us: u64,
}

/// A live zone as seen from outside its thread.
#[derive(Debug)]
pub(crate) struct ZoneEntry {
    pub zone_id: String,
    pub thread: usize,
    pub inbox: crossbeam_channel::Sender<InboxInput>,
    /// The zone's tick, published after each advance (for Pong).
    pub tick: AtomicU64,
    /// The zone's owner epoch in the store, set before it is marked running (0 without
    /// persistence): what a join fences its store writes with before the zone's thread has it.
    pub epoch: AtomicU64,
    pub summary: Mutex<ZoneSummary>,
    /// The principals present (players and observers), published when who is present changes:
    /// what the lobby's report names. Replaced whole, never edited: readers holding the last one
    /// see by its address alone that it did not change.
    pub present: Mutex<Arc<[String]>>,
    /// What the zone published last for a lobby listing it (see
    /// [`zonekeep_core::Ctx::publish_listing`]).
    pub listing: Mutex<Option<zonekeep_core::Listing>>,
    pub rate_limited: Counter,
    pub inbox_full: Counter,
    /// Where the zone is in its start (joins wait while it is starting).
    pub ready: tokio::sync::watch::Sender<super::start::Startup>,
    /// The zone groups the zone is in, published by its thread as they change (chat's group
    /// channels and a world's sanctions go by them).
    pub groups: Mutex<Vec<String>>,
    /// Joins, resumes and arrivals routed to the zone and not yet handled by its thread (see
    /// [`Arrival`]). Changed only under the registry's lock.
    pub arriving: AtomicUsize,
}

impl ZoneEntry {
    pub fn tick(&self) -> u64 {
        self.tick.load(Ordering::Relaxed)
    }

    /// The zone groups the zone is in now.
    pub fn groups(&self) -> Vec<String> {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// A join, resume or move's arrival on its way to a zone: taken when the registry routes it
/// there, dropped once the zone's thread has handled it (or admission gave up before). An empty
/// zone with one is not unloaded as dormant: admission may spend a store round trip or two
/// between finding the zone and reaching its thread (a character's lease, a reclaimed move), and
/// a zone unloaded meanwhile would refuse a player it was about to take in.
#[derive(Debug)]
pub(crate) struct Arrival(Arc<ZoneEntry>);

impl Drop for Arrival {
    fn drop(&mut self) {
        // Outside the lock: a retirement that still sees this one only waits for the next step.
        self.0.arriving.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Most fenced zone ids remembered; past it the oldest is forgotten (a join
/// may then claim that zone back, which fences the other host in turn).
const FENCED_CAP: usize = 4096;

/// Zones this host unloaded because another host claimed them: joins are
/// refused until the process restarts, so a client cannot make this host
/// claim the zone back and two copies ping-pong. Bounded by [`FENCED_CAP`].
#[derive(Debug, Default)]
struct FencedZones {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

/// A zone whose game code failed — a module trapped, panicked or overran its budget while it ran,
/// or the kind's code could not create the zone or restore its save — as the admin API lists it
/// until an operator stops it or a new version of its kind is deployed. Joins are refused
/// meanwhile, and nothing starts it again.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FailedZone {
    /// Zone id.
    pub id: String,
    /// Zone kind.
    pub kind: String,
    /// Why it failed.
    pub reason: String,
    /// The tick it failed at (0 when it failed to start).
    pub tick: u64,
    /// Whether it failed while starting (created or restored), before its first tick.
    pub at_start: bool,
    /// When it failed, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl FailedZone {
    /// A zone of `kind` that failed to start for `reason`, now.
    pub(crate) fn at_start(id: &str, kind: &str, reason: &str) -> Self {
        FailedZone {
            id: id.to_owned(),
            kind: kind.to_owned(),
            reason: reason.to_owned(),
            tick: 0,
            at_start: true,
            at_ms: now_ms(),
        }
    }

    /// What a join to the failed zone is told: the failure, and how it may run again.
    pub(crate) fn message(&self) -> String {
        let when = if self.at_start {
            "failed to start".to_owned()
        } else {
            format!("failed at tick {}", self.tick)
        };
        format!(
            "zone {:?} {when}: {}; it runs again once an operator stops it (POST /admin/zones/{}/stop) or a new version of kind {:?} is deployed",
            self.id, self.reason, self.id, self.kind
        )
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Most failed zones remembered; past it the oldest is forgotten (and counted).
const FAILED_CAP: usize = 4096;

/// Every zone of the host, by id.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    zones: Mutex<HashMap<String, Arc<ZoneEntry>>>,
    fenced: Mutex<FencedZones>,
    failed: Mutex<VecDeque<FailedZone>>,
}

impl Registry {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ZoneEntry>>> {
        self.zones.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, zone_id: &str) -> Option<Arc<ZoneEntry>> {
        self.lock().get(zone_id).cloned()
    }

    /// Takes an [`Arrival`] for `entry`. The caller holds the registry's lock (`_zones`), so a
    /// retirement cannot slip between finding the zone and this.
    pub fn arrival(_zones: &HashMap<String, Arc<ZoneEntry>>, entry: &Arc<ZoneEntry>) -> Arrival {
        entry.arriving.fetch_add(1, Ordering::AcqRel);
        Arrival(Arc::clone(entry))
    }

    /// The zone registered under `zone_id` with an [`Arrival`] for it, when one runs.
    pub fn hold(&self, zone_id: &str) -> Option<(Arc<ZoneEntry>, Arrival)> {
        let zones = self.lock();
        let entry = zones.get(zone_id)?.clone();
        let arrival = Self::arrival(&zones, &entry);
        Some((entry, arrival))
    }

    /// Removes a dormant zone's `entry` unless a join, resume or arrival is on its way to it
    /// (then the zone stays, and is asked again at its next step). True when it was removed,
    /// or was not registered any more.
    pub fn retire(&self, entry: &Arc<ZoneEntry>) -> bool {
        let mut z = self.lock();
        if entry.arriving.load(Ordering::Acquire) > 0 {
            return false;
        }
        if z.get(&entry.zone_id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            z.remove(&entry.zone_id);
        }
        true
    }

    /// Remove `entry` if it is still the one registered under its id.
    pub fn remove(&self, entry: &Arc<ZoneEntry>) {
        let mut z = self.lock();
        if z.get(&entry.zone_id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            z.remove(&entry.zone_id);
        }
    }

    /// Remembers that another host owns `zone_id` now (see [`FencedZones`]).
    /// Returns whether the oldest remembered zone had to be forgotten for it
    /// (the caller counts that overflow).
    pub fn mark_fenced(&self, zone_id: &str) -> bool {
        let mut f = self.fenced.lock().unwrap_or_else(|p| p.into_inner());
        if !f.ids.insert(zone_id.to_owned()) {
            return false;
        }
        f.order.push_back(zone_id.to_owned());
        if f.order.len() <= FENCED_CAP {
            return false;
        }
        let Some(old) = f.order.pop_front() else {
            return false;
        };
        tracing::warn!(zone = %old, "forgetting the oldest fenced zone: joins may claim it here again");
        f.ids.remove(&old);
        true
    }

    /// Forgets that `zone_id` was fenced here: the fleet directory handed it back to this host.
    pub fn unmark_fenced(&self, zone_id: &str) {
        let mut f = self.fenced.lock().unwrap_or_else(|p| p.into_inner());
        if f.ids.remove(zone_id) {
            f.order.retain(|z| z != zone_id);
        }
    }

    /// Whether this host unloaded `zone_id` because another host owns it.
    pub fn is_fenced(&self, zone_id: &str) -> bool {
        self.fenced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ids
            .contains(zone_id)
    }

    /// Remembers that `zone`'s game code failed. Returns whether the oldest remembered failure
    /// had to be forgotten for it.
    pub fn mark_failed(&self, zone: FailedZone) -> bool {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        f.retain(|z| z.id != zone.id);
        f.push_back(zone);
        if f.len() > FAILED_CAP {
            f.pop_front();
            return true;
        }
        false
    }

    /// Why `zone_id` failed, while it is remembered.
    pub fn failure(&self, zone_id: &str) -> Option<FailedZone> {
        let f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        f.iter().find(|z| z.id == zone_id).cloned()
    }

    /// Every remembered failure, oldest first.
    pub fn failures(&self) -> Vec<FailedZone> {
        let f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        f.iter().cloned().collect()
    }

    /// Forgets `zone_id`'s failure (an operator removed the zone): joins may create it again,
    /// from its last save. Returns whether it was remembered.
    pub fn remove_failed(&self, zone_id: &str) -> bool {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        let before = f.len();
        f.retain(|z| z.id != zone_id);
        f.len() != before
    }

    /// Forgets the failures of every zone of `kind` (a new version of the kind was deployed):
    /// they may start again. Returns the zones forgotten.
    pub fn remove_failed_kind(&self, kind: &str) -> Vec<String> {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        let ids = f
            .iter()
            .filter(|z| z.kind == kind)
            .map(|z| z.id.clone())
            .collect();
        f.retain(|z| z.kind != kind);
        ids
    }

    /// The ids of the zones registered here.
    pub fn zone_ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// What the lobby reports of each zone running here under a known owner epoch.
    pub fn lobby_views(&self) -> Vec<LobbyView> {
        let entries: Vec<Arc<ZoneEntry>> = self.lock().values().cloned().collect();
        entries
            .iter()
            .filter_map(|e| {
                let epoch = e.epoch.load(Ordering::Relaxed);
                let s = e.summary.lock().unwrap_or_else(|p| p.into_inner());
                // A zone still starting has published nothing yet.
                if s.id.is_empty() || epoch == 0 {
                    return None;
                }
                let (players, observers) = (s.players, s.observers);
                drop(s);
                Some(LobbyView {
                    zone_id: e.zone_id.clone(),
                    epoch,
                    players,
                    observers,
                    present: Arc::clone(&e.present.lock().unwrap_or_else(|p| p.into_inner())),
                    listing: e.listing.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                })
            })
            .collect()
    }

    pub fn summaries(&self) -> Vec<ZoneSummary> {
        let entries: Vec<Arc<ZoneEntry>> = self.lock().values().cloned().collect();
        let mut out: Vec<ZoneSummary> = entries
            .iter()
            .map(|e| e.summary.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{FailedZone, Registry, FENCED_CAP};

    #[test]
    fn a_deploy_of_a_kind_forgets_only_that_kinds_failures() {
        let r = Registry::default();
        r.mark_failed(FailedZone::at_start("a-1", "a", "trapped"));
        r.mark_failed(FailedZone::at_start("b-1", "b", "trapped"));
        r.mark_failed(FailedZone::at_start("a-2", "a", "trapped"));
        assert_eq!(r.remove_failed_kind("a"), ["a-1", "a-2"]);
        assert!(r.failure("a-1").is_none() && r.failure("a-2").is_none());
        assert!(r.failure("b-1").is_some(), "another kind's failure stays");
        assert!(r.remove_failed_kind("a").is_empty());
    }

    #[test]
    fn a_failed_zones_message_names_the_failure_and_the_way_out() {
        let f = FailedZone::at_start("z", "boom", "cannot create the zone: trapped");
        let said = f.message();
        assert!(
            said.contains("failed to start: cannot create the zone: trapped"),
            "{said}"
        );
        assert!(said.contains("POST /admin/zones/z/stop"), "{said}");
    }

    #[test]
    fn the_fenced_set_is_bounded_and_reports_what_it_forgets() {
        let r = Registry::default();
        for i in 0..FENCED_CAP {
            assert!(!r.mark_fenced(&format!("z-{i}")), "room for {i}");
        }
        assert!(
            !r.mark_fenced("z-0"),
            "a zone already remembered costs nothing"
        );
        assert!(
            r.mark_fenced("z-new"),
            "one past the bound forgets the oldest"
        );
        assert!(!r.is_fenced("z-0"));
        assert!(r.is_fenced("z-1") && r.is_fenced("z-new"));
    }
}
