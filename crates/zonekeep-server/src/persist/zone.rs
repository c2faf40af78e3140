//! One loaded zone's persistence, driven by its simulation thread.
//!
//! The thread calls [`ZonePersist::before_advance`] and
//! [`ZonePersist::after_advance`] around every `advance`, and
//! [`ZonePersist::unload`] when the zone leaves the thread. Nothing here
//! waits: facts go to the fact worker with `try_send` (a fact that finds the
//! queue full is kept, in order, for the next step), snapshots go to the
//! storage worker's latest-wins slot, and settlements are drained from a
//! bounded channel.
//!
//! When either worker finds the zone fenced (the store refused a save or a
//! fact of this owner epoch: another host claimed the zone), the zone's
//! [`FenceAlarm`] is raised; the thread reads it through
//! [`ZonePersist::fenced`] and leaves through [`ZonePersist::discard`], which
//! writes nothing more.
//!
//! A lasting world also watches how long its newest state has waited unsaved:
//! past its bound [`ZonePersist::storage_lost`] says so, and the thread halts
//! the world through [`ZonePersist::halt`], which drops what was never written.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;
use zonekeep_core::{Call, Fact, FactOutcome, ZoneHost};
use zonekeep_protocol::limits::clip;

use super::calls::CallWorker;
use super::characters::{CharacterJob, CharacterWorker};
use super::facts::{FactQueue, FactQueueError, FactWorker};
use super::fence::FenceAlarm;
use super::route::{SettlementRoute, ZoneAnswer};
use super::schedule::SaveTimer;
use super::status::SaveStatus;
use super::storage::{SaveWatch, StorageHandle, SubmitError};

/// Why a zone leaves its thread, which decides what happens to its saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unload {
    /// Dormant (hibernation) or stopped by an administrator: the final save
    /// is written in the background and the storage worker then forgets the zone.
    Hibernate,
    /// Graceful shutdown: the final save is written by
    /// [`StorageHandle::shutdown`], which reports on every zone.
    Shutdown,
}

/// What became of a zone's final snapshot when it was unloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalSave {
    /// The kind keeps no state across restarts: there is nothing to save.
    NotPersisted,
    /// Queued for writing with this sequence number; it is durable once the
    /// storage worker reports it saved.
    Queued(u64),
    /// The storage worker refused it (closed or fenced): this state is lost.
    Refused(SubmitError),
}

/// What the admin zone detail shows about a zone's persistence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PersistDetail {
    /// The storage worker's view of the zone's saves (`None` before the
    /// worker knows it, which does not happen for a loaded zone).
    pub save: Option<SaveStatus>,
    /// Facts emitted and not yet settled.
    pub facts_in_flight: usize,
    /// Facts taken from the zone but not yet accepted by the fact queue
    /// (it was full); they are sent on a later step.
    pub facts_held: usize,
    /// Facts settled as committed since the zone started on this host.
    pub facts_settled: u64,
    /// Facts settled as refused (the sink turned them down for good) since the zone started on
    /// this host.
    pub facts_refused: u64,
    /// Why the newest refused fact was refused (cut to 256 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_fact_refusal: Option<String>,
    /// Durable calls made and not yet answered.
    pub calls_in_flight: usize,
    /// Calls waiting here to go out: for the save that holds them to commit, or for room in the
    /// call worker's queue.
    pub calls_held: usize,
    /// The periodic save interval, in milliseconds.
    pub save_every_ms: u64,
    /// When the next periodic save falls due, in milliseconds of host clock.
    pub next_save_due_ms: u64,
}

/// A loaded zone's fact queue, settlement route and save schedule.
#[derive(Debug)]
pub struct ZonePersist {
    zone_id: String,
    storage: StorageHandle,
    facts: FactWorker,
    queue: FactQueue,
    held: VecDeque<Fact>,
    route: SettlementRoute,
    timer: SaveTimer,
    /// Most settlements handed to the zone per step (its in-flight bound:
    /// the channel never holds more for a well-behaved sink).
    settle_budget: usize,
    /// Raised when a save or fact of this owner epoch was refused as fenced.
    alarm: FenceAlarm,
    /// The owner epoch this host holds the zone under.
    epoch: u64,
    /// The zone's saves as its writer sees them.
    watch: Option<SaveWatch>,
    /// A lasting world halts once its newest state waited unsaved this long.
    halt_after: Option<Duration>,
    /// Where the characters the zone hands back are written.
    characters: Option<CharacterWorker>,
    /// Character writes the worker's full queue did not take yet, in order.
    held_characters: VecDeque<CharacterJob>,
    /// Where the zone's durable calls go.
    calls: Option<CallWorker>,
    /// Calls not sent yet, in order, each with the sequence number of the save that holds it
    /// (`None` until the save is taken): a call goes out only once that save committed.
    held_calls: VecDeque<(Option<u64>, Call)>,
    /// The zone's kind keeps no saves (its calls go out at once).
    unsaved_kind: bool,
    /// Facts the zone emitted since it started here (a work counter).
    facts_emitted: u64,
    /// Facts settled as committed since the zone started here.
    facts_settled: u64,
    /// Facts settled as refused since the zone started here, and why the newest was.
    facts_refused: u64,
    last_fact_refusal: Option<String>,
    /// When each fact in flight was handed to the fact worker, by key (the `facts` stage).
    facts_sent_at: std::collections::HashMap<String, std::time::Instant>,
    /// Committed save writes already recorded as the `save` stage.
    saves_timed: u64,
}

/// Longest refusal reason the zone detail shows, in bytes.
const MAX_REFUSAL_SHOWN: usize = 256;

/// Most facts in flight timed at once (the fact worker's own in-flight bound is below it).
const FACTS_TIMED: usize = 4096;

impl ZonePersist {
    /// Ties a zone, claimed with the owner `epoch` (already registered with
    /// `storage`), to the workers. `now` is the host clock (the first
    /// periodic save falls due `save_every` later).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        zone_id: &str,
        epoch: u64,
        storage: StorageHandle,
        facts: FactWorker,
        route: SettlementRoute,
        save_every: Duration,
        settle_budget: usize,
        now: Duration,
    ) -> Self {
        // The storage worker's alarm for this registration is shared with the
        // fact queue, so either refusal is seen in one place.
        let alarm = storage.alarm(zone_id).unwrap_or_default();
        let queue = facts.open_zone(zone_id, Some(epoch), alarm.clone());
        let watch = storage.watch(zone_id);
        ZonePersist {
            zone_id: zone_id.to_owned(),
            storage,
            facts,
            queue,
            held: VecDeque::new(),
            route,
            timer: SaveTimer::new(save_every, now),
            settle_budget: settle_budget.max(1),
            alarm,
            epoch,
            watch,
            halt_after: None,
            characters: None,
            held_characters: VecDeque::new(),
            calls: None,
            held_calls: VecDeque::new(),
            unsaved_kind: false,
            facts_emitted: 0,
            facts_settled: 0,
            facts_refused: 0,
            last_fact_refusal: None,
            facts_sent_at: std::collections::HashMap::new(),
            saves_timed: 0,
        }
    }

    /// Sends the zone's durable calls to `worker` (see [`crate::persist::CallWorker`]).
    pub(crate) fn making_calls(mut self, worker: CallWorker) -> Self {
        self.calls = Some(worker);
        self
    }

    /// Sends the zone's calls whose save committed to the call worker, in order; a full queue
    /// keeps them for the next step.
    ///
    /// A call leaves only once a save holding it is committed, so an effect never happens for a
    /// call the zone could forget: a crash before that save loses the call together with the
    /// tick that made it, and a crash after it restores the call in flight, which its next owner
    /// sends again under the same key. A kind that keeps no saves sends its calls at once.
    fn send_calls(&mut self) {
        let Some(worker) = &self.calls else {
            return;
        };
        let committed = self.last_saved_seq();
        while let Some((holds, call)) = self.held_calls.pop_front() {
            let durable = self.unsaved_kind || holds.is_some_and(|h| committed >= Some(h));
            if !durable {
                self.held_calls.push_front((holds, call));
                break;
            }
            if let Err(call) = worker.try_send(&self.zone_id, Some(self.epoch), &self.alarm, call) {
                self.held_calls.push_front((holds, call));
                break;
            }
        }
    }

    /// Writes the characters the zone hands back through `worker` (see
    /// [`crate::persist::CharacterWorker`]).
    pub(crate) fn writing_characters(mut self, worker: CharacterWorker) -> Self {
        self.characters = Some(worker);
        self
    }

    /// Hands the zone's character writes to the worker, in order, under this owner's epoch; a
    /// full queue keeps them for the next step. The release of `recalled`'s character (if it is
    /// among them) answers `done` once it is settled.
    pub(crate) fn send_characters(
        &mut self,
        host: &mut ZoneHost,
        recalled: Option<(&str, tokio::sync::oneshot::Sender<bool>)>,
    ) {
        let mut recalled = recalled.map(|(p, d)| (p.to_owned(), d));
        for w in host.drain_character_writes() {
            let principal = w.principal.as_str().to_owned();
            let done = match &recalled {
                Some((p, _)) if w.release && *p == principal => recalled.take().map(|(_, d)| d),
                _ => None,
            };
            self.held_characters.push_back(CharacterJob {
                zone: self.zone_id.clone(),
                epoch: self.epoch,
                principal,
                data: Some(w.data),
                release: w.release,
                done,
            });
        }
        // A recall whose player holds no character here is answered once the writes queued
        // before it are settled (a release the player handed back as it moved out may still be
        // on its way): by a job with nothing to write, behind them.
        if let Some((principal, done)) = recalled {
            self.held_characters.push_back(CharacterJob {
                zone: self.zone_id.clone(),
                epoch: self.epoch,
                principal,
                data: None,
                release: false,
                done: Some(done),
            });
        }
        let Some(worker) = &self.characters else {
            self.held_characters.clear();
            return;
        };
        while let Some(job) = self.held_characters.pop_front() {
            if let Err(job) = worker.try_send(job) {
                self.held_characters.push_front(job);
                break;
            }
        }
    }

    /// Makes the zone a lasting world that halts once its newest state waited unsaved for
    /// `bound` (see [`storage_lost`](Self::storage_lost)); `None` keeps it running whatever
    /// its saves do.
    pub(crate) fn halting_after(mut self, bound: Option<Duration>) -> Self {
        self.halt_after = bound;
        self
    }

    /// For a lasting world: how long its newest state has waited unsaved, once that passed the
    /// world's bound (its saves failed or hung that long). The world must then halt rather
    /// than run on state it cannot keep. `None` otherwise, and always for other zones.
    pub fn storage_lost(&self) -> Option<Duration> {
        let bound = self.halt_after?;
        self.watch
            .as_ref()?
            .unsaved_for()
            .filter(|waited| *waited > bound)
    }

    /// The lasting world halts (see [`storage_lost`](Self::storage_lost)): no final save, and
    /// the snapshot still waiting is dropped, so the store keeps the last committed save as the
    /// world's state, which it resumes from. The facts it emitted go out, as when a zone fails.
    pub fn halt(mut self) {
        self.send_held();
        self.storage.halt(&self.zone_id);
        self.facts.close_zone(&self.zone_id);
    }

    /// The owner epoch this host holds the zone under: every durable write of the zone's
    /// (saves, facts, transfer records) carries it.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether the store refused one of this owner's writes as fenced: the
    /// zone must stop at once (see [`ZonePersist::discard`]).
    pub fn fenced(&self) -> bool {
        self.alarm.is_raised()
    }

    /// Whether the host's lease generation the zone was claimed under ended.
    pub fn lease_ended(&self) -> bool {
        self.alarm.lease_ended()
    }

    /// Hands the fact settlements and call results that arrived since the last step to the
    /// zone (it sees them on its next tick).
    pub fn before_advance(&mut self, host: &mut ZoneHost) {
        for _ in 0..self.settle_budget {
            match self.route.try_recv() {
                Some(ZoneAnswer::Fact(s)) => {
                    if let Some(sent) = self.facts_sent_at.remove(s.key.as_str()) {
                        host.record_stage(zonekeep_core::Stage::Facts, sent.elapsed());
                    }
                    match &s.outcome {
                        FactOutcome::Ok(_) => self.facts_settled += 1,
                        FactOutcome::Refused(why) => {
                            self.facts_refused += 1;
                            self.last_fact_refusal = Some(clip(why, MAX_REFUSAL_SHOWN).to_owned());
                        }
                    }
                    host.handle_settlement(s)
                }
                Some(ZoneAnswer::Call(a)) => host.handle_call_result(a),
                None => break,
            }
        }
    }

    /// Sends the zone's new facts and takes the periodic snapshot when due; returns the
    /// snapshot's sequence number when one was queued.
    pub fn after_advance(&mut self, host: &mut ZoneHost, now: Duration) -> Option<u64> {
        let facts = host.drain_facts();
        self.facts_emitted += facts.len() as u64;
        self.held.extend(facts);
        self.record_save_stage(host);
        self.send_held();
        let calls = host.drain_calls();
        // A call goes out once a save holds it: ask for that save now (it comes within the
        // prompt-save gap).
        if host.take_save_request() || !calls.is_empty() {
            self.timer.ask();
        }
        self.held_calls.extend(calls.into_iter().map(|c| (None, c)));
        let saved = if self.timer.poll(now) {
            // Characters changed since their last write are written with the zone's save.
            host.commit_characters();
            self.save(host)
        } else {
            None
        };
        self.send_characters(host, None);
        self.send_calls();
        saved
    }

    /// The storage worker's view of the zone's saves.
    pub fn save_status(&self) -> Option<SaveStatus> {
        self.storage.status(&self.zone_id)
    }

    /// The sequence number of the zone's newest save the store committed.
    pub fn last_saved_seq(&self) -> Option<u64> {
        self.storage
            .status(&self.zone_id)
            .and_then(|s| s.last_saved_seq)
    }

    /// Facts the zone emitted since it started here.
    pub fn facts_emitted(&self) -> u64 {
        self.facts_emitted
    }

    /// Records the store's newest committed save write as the zone's `save` stage, once.
    fn record_save_stage(&mut self, host: &mut ZoneHost) {
        let Some(status) = self.storage.status(&self.zone_id) else {
            return;
        };
        if status.writes > self.saves_timed {
            self.saves_timed = status.writes;
            if let Some(us) = status.last_write_us {
                host.record_stage(zonekeep_core::Stage::Save, Duration::from_micros(us));
            }
        }
    }

    /// Offers held facts in emission order until the queue refuses one.
    fn send_held(&mut self) {
        while let Some(fact) = self.held.pop_front() {
            let key = fact.key.as_str().to_owned();
            match self.queue.try_send(fact) {
                Ok(()) => {
                    // Timed from here to its settlement: queueing and the commit (the `facts`
                    // stage). Bounded by the queue's in-flight bound; the oldest go first.
                    if self.facts_sent_at.len() >= FACTS_TIMED {
                        self.facts_sent_at.clear();
                    }
                    self.facts_sent_at.insert(key, std::time::Instant::now());
                }
                // Full: counted by the queue; the fact waits for the next step.
                // Closed: the worker is shutting down; the fact is in flight in
                // the final snapshot and is re-sent after the restart.
                Err(FactQueueError::Full(f) | FactQueueError::Closed(f)) => {
                    self.held.push_front(f);
                    break;
                }
            }
        }
    }

    /// Takes a snapshot at this tick boundary and queues it for writing.
    /// Returns its sequence number, or `None` when the kind is not persisted
    /// or the storage worker refused it (logged and counted).
    pub fn save(&mut self, host: &ZoneHost) -> Option<u64> {
        let Some(bytes) = host.snapshot() else {
            self.unsaved_kind = true;
            return None;
        };
        match self.storage.try_submit(&self.zone_id, bytes) {
            Ok(s) => {
                // Every call taken so far is in this save.
                for (holds, _) in self.held_calls.iter_mut().filter(|(h, _)| h.is_none()) {
                    *holds = Some(s.seq);
                }
                Some(s.seq)
            }
            Err(e @ SubmitError::Fenced(_)) => {
                self.alarm.raise();
                tracing::warn!(zone = %self.zone_id, error = %e, "zone not saved: another owner holds it");
                None
            }
            Err(e) => {
                tracing::warn!(zone = %self.zone_id, error = %e, "zone not saved");
                None
            }
        }
    }

    /// The zone leaves its thread: last facts out, final snapshot queued,
    /// then the zone is closed for saving and its fact queue released.
    pub fn unload(mut self, host: &mut ZoneHost, why: Unload) -> FinalSave {
        self.held.extend(host.drain_facts());
        self.send_held();
        // Calls not sent yet stay in flight in the final save; the zone's next run sends them.
        self.send_calls();
        // The players still here give their characters back as they stand.
        host.release_characters();
        self.send_characters(host, None);
        let save = match host.snapshot() {
            None => FinalSave::NotPersisted,
            Some(bytes) => match self.storage.try_submit(&self.zone_id, bytes) {
                Ok(s) => FinalSave::Queued(s.seq),
                Err(e) => {
                    // At shutdown this state is lost for good; a hibernating zone is
                    // refused only when another owner holds it.
                    if why == Unload::Shutdown {
                        tracing::error!(zone = %self.zone_id, error = %e, "final save refused");
                    } else {
                        tracing::warn!(zone = %self.zone_id, error = %e, "final save refused");
                    }
                    FinalSave::Refused(e)
                }
            },
        };
        if !self.held.is_empty() {
            tracing::info!(zone = %self.zone_id, held = self.held.len(), "facts left unsent at unload; they are in the final save");
        }
        match why {
            Unload::Hibernate => self.storage.retire(&self.zone_id),
            Unload::Shutdown => self.storage.close(&self.zone_id),
        }
        self.facts.close_zone(&self.zone_id);
        save
    }

    /// The zone was fenced (another host owns it now): releases it writing
    /// nothing more — no final save, and the facts still held here are
    /// dropped (the new owner re-sends them from the save it restored).
    /// Facts already queued are dropped by the fact worker unsent.
    pub fn discard(self) {
        if !self.held.is_empty() {
            tracing::info!(zone = %self.zone_id, held = self.held.len(), "fenced zone unloaded; its unsent facts are left to the new owner");
        }
        self.storage.retire(&self.zone_id);
        self.facts.close_zone(&self.zone_id);
    }

    /// The zone's game code failed: the facts it emitted go out, but no final save is written,
    /// so its last good save stays the one a restart restores.
    ///
    /// The characters of its players are given up without the zone's last word on them: their
    /// last committed state stands, and they are free for the players' next zone.
    pub fn fail(mut self, host: &mut ZoneHost) {
        self.send_held();
        host.release_characters();
        for w in host.drain_character_writes() {
            self.held_characters.push_back(CharacterJob {
                zone: self.zone_id.clone(),
                epoch: self.epoch,
                principal: w.principal.as_str().to_owned(),
                data: None,
                release: true,
                done: None,
            });
        }
        self.send_characters(host, None);
        self.storage.retire(&self.zone_id);
        self.facts.close_zone(&self.zone_id);
    }

    /// The zone was built but never ran (its start could not be queued):
    /// releases it without saving, so its last save stays as it was.
    pub fn abandon(self) {
        self.storage.retire(&self.zone_id);
        self.facts.close_zone(&self.zone_id);
    }

    /// The admin view, given the zone's host.
    pub fn detail(&self, host: &ZoneHost) -> PersistDetail {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        PersistDetail {
            save: self.storage.status(&self.zone_id),
            facts_in_flight: host.facts_in_flight(),
            facts_held: self.held.len(),
            facts_settled: self.facts_settled,
            facts_refused: self.facts_refused,
            last_fact_refusal: self.last_fact_refusal.clone(),
            calls_in_flight: host.calls_in_flight(),
            calls_held: self.held_calls.len(),
            save_every_ms: ms(self.timer.every()),
            next_save_due_ms: ms(self.timer.next_due()),
        }
    }

    /// Facts waiting for room in the fact queue.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}
