//! What a matchmaker replica does in the background: forms its queues' matches, places each
//! on a host of its region and hands its players tickets, settles searches by time and by the
//! lobby's seats, and wakes long polls when the store says a search changed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Semaphore;
use zonekeep_core::{Claims, Role};
use zonekeep_store::{
    Candidate, HostRecord, Lapses, NewRoom, Proposal, SeatRequest, SeatRole, ZoneClaim,
    MAX_CANDIDATES,
};

use super::form::{form, Formed};
use super::index::{CandidateIndex, REBUILD_EVERY};
use super::{Matchmaker, QueueSpec};
use crate::fleet::{Fleet, FleetError};
use crate::host::Shared;
use crate::ticket::{mint, unix_now, MintRequest};

/// How often each queue's matches are formed.
pub const FORM_EVERY: Duration = Duration::from_millis(200);
/// How often searches are settled (lapses, arrivals).
pub const SETTLE_EVERY: Duration = Duration::from_secs(1);
/// How far back each read of the store's changed searches reaches (a change committed late by
/// a slow transaction is still seen).
const FEED_OVERLAP_MS: u64 = 2_000;
/// Matches being placed at once by one replica.
const PLACING: usize = 64;
/// A search not queued this long after it was created expires.
const PROBING_MS: u64 = 60_000;
/// A search proposed or allocated this long goes back to the queue.
const STUCK_MS: u64 = 15_000;
/// A final search is forgotten this long after it ended.
const FORGET_MS: u64 = 3_600_000;

/// Refuses to join the fleet with a ticket key retired (or gone) that live matches still hold:
/// their players would be refused. Checked by every host with a store, before it registers.
pub(crate) async fn check_keys(shared: &Shared) -> Result<(), FleetError> {
    let Some(persist) = shared.sim.persist.as_ref() else {
        return Ok(());
    };
    match super::retired_in_use(persist.store(), shared.verifier.keys()).await? {
        Some((kid, matches)) => Err(FleetError::KeyInUse { kid, matches }),
        None => Ok(()),
    }
}

/// Makes this host a matchmaker replica when it has queues: starts forming matches.
pub(crate) async fn start(shared: &Arc<Shared>, fleet: &Arc<Fleet>) -> Result<(), FleetError> {
    let queues = shared
        .config
        .match_queues()
        .map_err(|e| FleetError::Identity(e.to_string()))?;
    let Some(persist) = shared.sim.persist.clone() else {
        return Ok(());
    };
    if queues.is_empty() {
        return Ok(());
    }
    let store = persist.store().clone();
    let index = match &shared.config.match_redis {
        Some(url) => Some(
            CandidateIndex::new(url.expose(), 3 * shared.config.match_heartbeat_secs)
                .map_err(FleetError::Identity)?,
        ),
        None => None,
    };
    let mm = Arc::new(Matchmaker {
        queues,
        store,
        index,
        waiters: super::waiters::Waiters::default(),
    });
    let _ = shared.matchmaker.set(Arc::clone(&mm));
    tokio::spawn(run(Arc::clone(shared), mm, Arc::clone(fleet)));
    Ok(())
}

fn lapses(shared: &Shared) -> Lapses {
    Lapses {
        probing_ms: PROBING_MS,
        heartbeat_ms: 3 * shared.config.match_heartbeat_secs * 1000,
        stuck_ms: STUCK_MS,
        no_show_ms: crate::lobby::hold_secs(shared) * 1000 + 5_000,
        forget_ms: FORGET_MS,
    }
}

async fn run(shared: Arc<Shared>, mm: Arc<Matchmaker>, fleet: Arc<Fleet>) {
    let stop = shared.fleet_stop.clone();
    let placing = Arc::new(Semaphore::new(PLACING));
    let mut every = tokio::time::interval(FORM_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_settle = tokio::time::Instant::now();
    let mut last_rebuild: HashMap<String, tokio::time::Instant> = HashMap::new();
    let mut feed_since: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        if mm.waiters.any() {
            if let Ok((ids, now)) = mm
                .store
                .matches
                .changed_since(feed_since.saturating_sub(FEED_OVERLAP_MS))
                .await
            {
                for id in ids {
                    mm.waiters.wake(&id);
                }
                feed_since = now;
            }
        }
        if last_settle.elapsed() >= SETTLE_EVERY {
            last_settle = tokio::time::Instant::now();
            if let Err(e) = mm.store.matches.settle(&lapses(&shared)).await {
                tracing::warn!(error = %e, "settling searches failed");
            }
        }
        let hosts =
            match crate::fleet::query(&fleet.metrics, "hosts", fleet.directory.hosts()).await {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(error = %e, "matchmaker: the fleet directory did not answer");
                    continue;
                }
            };
        let mut room = Capacity::new(&fleet, hosts);
        for q in &mm.queues {
            let due = last_rebuild
                .get(&q.name)
                .is_none_or(|t| t.elapsed() >= REBUILD_EVERY);
            let Some(candidates) = candidates(&shared, &mm, q, due).await else {
                continue;
            };
            if due {
                last_rebuild.insert(q.name.clone(), tokio::time::Instant::now());
            }
            let formed = form(q, &candidates, &room.regions(), now_ms());
            if formed.is_empty() {
                continue;
            }
            propose_and_place(&shared, &mm, q, formed, &mut room, &placing).await;
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The queue's candidates: from the index when it can be used, else from the store (rebuilding
/// the index from them when it was stale or `rebuild` is due).
async fn candidates(
    shared: &Shared,
    mm: &Matchmaker,
    q: &QueueSpec,
    rebuild: bool,
) -> Option<Vec<Candidate>> {
    let metrics = &shared.metrics;
    if let Some(index) = &mm.index {
        if !rebuild && !index.is_stale() {
            if let Some(c) = index.candidates(&q.name, MAX_CANDIDATES, metrics).await {
                return Some(c);
            }
        }
    }
    let from_store = match mm.store.matches.queued(&q.name, MAX_CANDIDATES).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, queue = %q.name, "reading the queue failed");
            return None;
        }
    };
    metrics.matchmaker().index("store");
    if let Some(index) = &mm.index {
        index.rebuild(&q.name, &from_store, metrics).await;
    }
    Some(from_store)
}

/// Free capacity per host, by region, as this replica places matches in one round.
struct Capacity {
    hosts: Vec<HostRecord>,
    taken: BTreeMap<String, u32>,
}

impl Capacity {
    fn new(fleet: &Fleet, hosts: Vec<HostRecord>) -> Self {
        let hosts = hosts
            .into_iter()
            .filter(|h| {
                fleet
                    .timing
                    .is_alive(Duration::from_millis(h.heartbeat_age_ms), h.left)
                    && !h.draining
            })
            .collect();
        Self {
            hosts,
            taken: BTreeMap::new(),
        }
    }

    fn free(&self, h: &HostRecord) -> u32 {
        h.capacity
            .saturating_sub(h.zones)
            .saturating_sub(self.taken.get(&h.host_id).copied().unwrap_or(0))
    }

    /// Regions with a host that can take a zone.
    fn regions(&self) -> BTreeSet<String> {
        self.hosts
            .iter()
            .filter(|h| self.free(h) > 0)
            .map(|h| h.region.clone())
            .collect()
    }

    /// The host of `region` with the most room (ties to the smallest id), counted as taken.
    fn place(&mut self, region: &str) -> Option<HostRecord> {
        let chosen = self
            .hosts
            .iter()
            .filter(|h| h.region == region && self.free(h) > 0)
            .max_by(|a, b| {
                self.free(a)
                    .cmp(&self.free(b))
                    .then(b.host_id.cmp(&a.host_id))
            })?
            .clone();
        *self.taken.entry(chosen.host_id.clone()).or_default() += 1;
        Some(chosen)
    }
}

async fn propose_and_place(
    shared: &Arc<Shared>,
    mm: &Arc<Matchmaker>,
    q: &QueueSpec,
    formed: Vec<Formed>,
    room: &mut Capacity,
    placing: &Arc<Semaphore>,
) {
    let mut proposals = Vec::with_capacity(formed.len());
    for f in formed {
        let Ok(id) = crate::fleet::random_hex(8) else {
            return;
        };
        proposals.push(Proposal {
            match_id: format!("m-{id}"),
            region: f.region,
            search_ids: f.search_ids,
        });
    }
    let made = match mm.store.matches.propose(&q.name, &proposals).await {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, queue = %q.name, "proposing matches failed");
            return;
        }
    };
    let metrics = shared.metrics.matchmaker();
    metrics.matches("proposed", u64::try_from(made.len()).unwrap_or(0));
    let made: BTreeSet<String> = made.into_iter().collect();
    let mut taken = Vec::new();
    for p in proposals.into_iter().filter(|p| made.contains(&p.match_id)) {
        taken.extend(p.search_ids.iter().cloned());
        for id in &p.search_ids {
            mm.waiters.wake(id);
        }
        let host = room.place(&p.region);
        // At most PLACING matches are placed at once; the forming loop waits for a turn, so
        // proposals never pile up waiting (a match proposed and not placed within STUCK_MS
        // would go back to the queue).
        let Ok(permit) = Arc::clone(placing).acquire_owned().await else {
            return;
        };
        let (shared, mm, q) = (Arc::clone(shared), Arc::clone(mm), q.clone());
        tokio::spawn(async move {
            let _permit = permit;
            place(&shared, &mm, &q, &p, host).await;
        });
    }
    if let Some(index) = &mm.index {
        index.remove(&q.name, &taken, &shared.metrics).await;
    }
}

/// Places match `p`: its zone claimed for `host` (of its region), a room with a seat for each
/// player, a ticket for each, and the assignment recorded. Any failure puts its players back in
/// the queue.
async fn place(
    shared: &Arc<Shared>,
    mm: &Matchmaker,
    q: &QueueSpec,
    p: &Proposal,
    host: Option<HostRecord>,
) {
    let metrics = shared.metrics.matchmaker();
    let requeue = |reason: &'static str| async move {
        metrics.matches(reason, 1);
        if let Err(e) = mm.store.matches.requeue(&p.match_id, reason).await {
            tracing::warn!(error = %e, "queueing a match's players again failed");
        }
        for id in &p.search_ids {
            mm.waiters.wake(id);
        }
    };
    let Some(host) = host else {
        requeue("no_capacity").await;
        return;
    };
    match assign(shared, mm, q, p, &host).await {
        Ok(true) => metrics.matches("assigned", 1),
        Ok(false) => metrics.matches("partner_left", 1),
        Err(e) => {
            tracing::warn!(error = %e, match_id = %p.match_id, "placing a match failed");
            requeue("failed").await;
        }
    }
    for id in &p.search_ids {
        mm.waiters.wake(id);
    }
}

/// Claims, seats and assigns; `Ok(false)` when a player left the match meanwhile.
async fn assign(
    shared: &Arc<Shared>,
    mm: &Matchmaker,
    q: &QueueSpec,
    p: &Proposal,
    host: &HostRecord,
) -> Result<bool, String> {
    let fleet = shared.fleet().ok_or("not a fleet member")?;
    let zone = format!(
        "{}-{}",
        q.kind,
        crate::fleet::random_hex(6).map_err(|e| e.to_string())?
    );
    match fleet
        .claim_for(&zone, &q.kind, &Value::Null, &host.host_id)
        .await
        .map_err(|e| e.to_string())?
    {
        ZoneClaim::Claimed { .. } => {}
        ZoneClaim::Owned(l) if l.owner.as_deref() == Some(host.host_id.as_str()) => {}
        ZoneClaim::Owned(_) => return Err(format!("zone {zone} went to another host")),
    }
    if !mm
        .store
        .matches
        .allocate(&p.match_id, &zone, &p.search_ids)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(false);
    }
    let members: Vec<zonekeep_store::SearchRecord> = {
        let mut out = Vec::new();
        for id in &p.search_ids {
            if let Some(r) = mm
                .store
                .matches
                .search(id)
                .await
                .map_err(|e| e.to_string())?
            {
                out.push(r);
            }
        }
        out
    };
    let hold = crate::lobby::hold_secs(shared);
    let seat = |principal: &str| SeatRequest {
        principal: principal.to_owned(),
        role: SeatRole::Player,
        address: None,
        max_per_address: 0,
        hold_ms: hold * 1000,
    };
    let code = crate::fleet::random_hex(6).map_err(|e| e.to_string())?;
    let lobby = &mm.store.lobby;
    let first = members.first().ok_or("a match without players")?;
    lobby
        .create_room(
            &NewRoom {
                zone_id: zone.clone(),
                kind: q.kind.clone(),
                content_version: shared.config.content_version.clone(),
                code: Some(code),
                max_players: q.size,
                max_observers: 0,
                metadata: json!({"match": p.match_id, "queue": q.name}),
            },
            Some(&seat(&first.principal)),
        )
        .await
        .map_err(|e| e.to_string())?;
    for m in members.iter().skip(1) {
        lobby
            .take_seat(&zone, &seat(&m.principal))
            .await
            .map_err(|e| e.to_string())?;
    }
    let key = shared
        .verifier
        .keys()
        .primary()
        .ok_or("this host has no ticket key to mint with")?;
    let now = unix_now();
    let url = format!("{}/zones/{zone}", host.url);
    // The names players know each other by (the ticket's `name`, else the principal).
    let players: Vec<&str> = members
        .iter()
        .map(|m| m.name.as_deref().unwrap_or(&m.principal))
        .collect();
    let mut assignments = Vec::new();
    for m in &members {
        let mut claims = Claims::new();
        claims.insert("kind".into(), Value::from(q.kind.clone()));
        if let Some(n) = &m.name {
            claims.insert("name".into(), Value::from(n.clone()));
        }
        let ticket = mint(
            key,
            &MintRequest {
                sub: m.principal.clone(),
                zone: zone.clone(),
                role: Role::Player,
                ttl_secs: hold,
                params: None,
                claims,
            },
            now,
        )
        .map_err(|e| e.to_string())?;
        assignments.push((
            m.search_id.clone(),
            json!({
                "match": p.match_id,
                "zone": zone,
                "kind": q.kind,
                "region": p.region,
                "url": url,
                "host": host.host_id,
                "ticket": ticket,
                "expires_at": now.saturating_add(hold),
                "players": players,
            }),
        ));
    }
    mm.store
        .matches
        .assign(&p.match_id, &key.kid, &assignments)
        .await
        .map_err(|e| e.to_string())
}
