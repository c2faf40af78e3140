//! The simulation pool: dedicated OS threads that own and tick the zones.
//!
//! Zones never run on the tokio runtime. Each zone is pinned to one sim
//! thread for its life. A thread sleeps until the earliest tick deadline of
//! its zones or a command, whichever comes first (`recv_timeout` on a bounded
//! command queue). Inputs do not wake it: network tasks push them into the
//! zone's bounded inbox and the thread drains the inbox right before the
//! zone's next `advance`. Frames leave through each connection's bounded
//! outbox with `try_send`, so the tick never waits on the network.

mod context;
mod frames;
mod interrupts;
mod lifecycle;
mod limit_log;
pub(crate) mod notices;
mod registry;
mod start;
mod thread;
mod work;
mod zone_run;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use crossbeam_channel::{bounded, Sender, TrySendError};
use tokio::sync::oneshot;
use zonekeep_core::{Claims, JoinRefusal, PlayerId, Principal, Role, ZoneHost};
use zonekeep_protocol::ResumeFrom;

use crate::net::conn::ConnHandle;

pub(crate) use context::{KindSpec, SessionTimeouts, SimContext};
pub(crate) use frames::{kick_frame, pong_frame};
pub(crate) use interrupts::Interrupts;
pub(crate) use lifecycle::Lifecycle;
pub use lifecycle::LifecycleLog;
pub(crate) use registry::{now_ms, Arrival, LobbyView, Registry, ZoneEntry};
pub use registry::{FailedZone, PlayerSummary, ZoneDetail, ZoneSummary};
pub(crate) use start::{admit_zone, wait_running, AdmitError, StartError, Startup};
pub use zone_run::ZoneUpgrade;

/// Called on the sim thread when a zone stops for good (shutdown, stop,
/// dormant unload), after its last tick and before its clients are kicked.
/// This is the persistence hook: save the zone here.
pub type DisposeHook = Arc<dyn Fn(&str, &mut ZoneHost) + Send + Sync>;

/// One input on its way to a zone's inbox.
#[derive(Debug)]
pub(crate) struct InboxInput {
    pub player: PlayerId,
    pub seq: u32,
    pub view_tick: u32,
    pub payload: Bytes,
}

/// A registered zone, to be built and handed to its thread by [`admit_zone`].
pub(crate) struct ZoneCreate {
    pub kind: String,
    pub params: serde_json::Value,
    pub inbox: crossbeam_channel::Receiver<InboxInput>,
    pub metrics: crate::metrics::ZoneMetrics,
}

/// A built zone on its way to its thread.
pub(crate) struct ZoneStart {
    pub host: ZoneHost,
    pub persist: Option<crate::persist::ZonePersist>,
    pub inbox: crossbeam_channel::Receiver<InboxInput>,
    pub metrics: crate::metrics::ZoneMetrics,
    /// Record the zone from its first tick, within these limits.
    pub record: Option<zonekeep_core::recording::RecordLimits>,
}

/// A successful join or resume.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Joined {
    pub player: PlayerId,
}

/// Why a join or resume failed (mapped to a Kick in `error.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinFailure {
    /// No slot left for the role.
    #[error("zone is full")]
    Full,
    /// The zone's hook refused.
    #[error("refused by the zone: {0}")]
    Refused(JoinRefusal),
    /// The zone could not be created or is gone.
    #[error("zone unavailable: {0}")]
    Unavailable(String),
    /// The store (or the fleet directory in it) did not answer while admitting the client, as
    /// when this host's database link is down: nothing is wrong with the join, and a retry
    /// shortly lands — here once the store answers, or at the zone's next owner once this host
    /// has fenced itself and the zone moved.
    #[error("the store did not answer ({0}); retry shortly")]
    StoreUnreachable(String),
    /// The player's character is held by a zone this host cannot ask to give it back (another
    /// host's, or one whose owner is unreachable): retry shortly, by when the holder released it
    /// or was claimed by a new owner.
    #[error("{0}")]
    CharacterElsewhere(String),
    /// The zone failed (its game code could not start it, or failed while it ran) and stays
    /// failed until an operator stops it or its kind is deployed anew; the message says why.
    #[error("{0}")]
    Failed(String),
    /// The zone is a lasting world halted because its saves failed; it resumes from its last
    /// committed save once its store answers. The message says why it halted.
    #[error("{0}")]
    Halted(String),
    /// The reconnect could not resume the player.
    #[error("reconnect refused: {0}")]
    ReconnectRefused(String),
    /// The host has too many zones.
    #[error("the host runs its maximum number of zones")]
    TooManyZones,
    /// The simulation thread's queue is full.
    #[error("host busy, retry")]
    Busy,
    /// The host is shutting down.
    #[error("host shutting down")]
    ShuttingDown,
    /// Another host claimed the zone; this host unloaded it and does not
    /// serve it any more.
    #[error("the zone moved to another host")]
    Fenced,
    /// The principal is banned from the zone, its group or the fleet; the message says until
    /// when and why.
    #[error("{0}")]
    Banned(String),
    /// Another host of the fleet owns the zone; `url` is its advertised base URL.
    #[error("the zone is served by host {host:?}")]
    Moved {
        /// The owner's host id.
        host: String,
        /// The owner's advertised base URL.
        url: String,
    },
}

/// Why an admin operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminFailure {
    /// No such zone.
    #[error("no zone {0:?}")]
    NoZone(String),
    /// No such player in the zone.
    #[error("no player {0} in the zone")]
    NoPlayer(u32),
    /// The zone exists already.
    #[error("zone {0:?} exists")]
    Exists(String),
    /// Unknown kind or bad params.
    #[error("{0}")]
    BadRequest(String),
    /// The zone failed (see [`JoinFailure::Failed`]); the message says why.
    #[error("{0}")]
    Failed(String),
    /// Queue full, zone cap, or shutting down.
    #[error("{0}")]
    Unavailable(String),
    /// The zone is a lasting world halted because its saves failed (see
    /// [`JoinFailure::Halted`]); the message says why.
    #[error("{0}")]
    Halted(String),
    /// The zone is a lasting world: stopping it needs the operator to force it.
    #[error("zone {0:?} is a lasting world: it is stopped only when forced (\"force\": true)")]
    Lasting(String),
}

pub(crate) enum SimCommand {
    Join {
        zone_id: String,
        create: Option<ZoneStart>,
        principal: Principal,
        claims: Claims,
        role: Role,
        version: u32,
        conn: ConnHandle,
        /// A move out of this zone whose state this join reclaimed (its source crashed while
        /// it was pending): the player joins through the zone's return, with that state.
        reclaimed: Option<Box<zonekeep_store::StoredTransfer>>,
        /// The player's character, whose lease the host holds for this zone (kinds with
        /// characters).
        character: Option<Vec<u8>>,
        reply: oneshot::Sender<Result<Joined, JoinFailure>>,
    },
    /// Another zone acquires `principal`'s character, which `zone_id` holds: its players of that
    /// principal leave and hand it back; `done` answers once the release is settled.
    RecallCharacter {
        zone_id: String,
        principal: String,
        done: oneshot::Sender<bool>,
    },
    Resume {
        zone_id: String,
        /// The zone to start first, when the resume is what starts it here (a deploy or a
        /// failover moved it to this host): started and resumed in one command, so the restored
        /// zone's first tick already carries this player's BASELINE.
        create: Option<ZoneStart>,
        player: PlayerId,
        principal: Principal,
        version: u32,
        /// What the client says it holds (PROTOCOL.md §4.1.1; version 4 only): the first frame
        /// continues from it when the zone still holds that state.
        resume_from: Option<ResumeFrom>,
        conn: ConnHandle,
        reply: oneshot::Sender<Result<Joined, JoinFailure>>,
    },
    Disconnected {
        zone_id: String,
        player: PlayerId,
        conn_id: u64,
    },
    /// A move into `zone_id` (started first when `create` is set): admit the player from the
    /// record, answering its new id and the zone's owner epoch.
    TransferIn {
        zone_id: String,
        create: Option<ZoneStart>,
        record: zonekeep_store::StoredTransfer,
        /// The player's character, whose lease the host took for this zone (kinds with
        /// characters).
        character: Option<Vec<u8>>,
        reply: oneshot::Sender<Result<(PlayerId, u64), JoinFailure>>,
    },
    /// A move into `zone_id` was returned after the zone admitted `player`: it leaves again.
    TransferCancel {
        zone_id: String,
        player: PlayerId,
    },
    /// How the move of `player` out of `zone_id` ended.
    TransferResolved {
        zone_id: String,
        player: PlayerId,
        resolution: crate::transfer::Resolution,
    },
    /// A moved player's connection arrived with its credential (the zone started first when
    /// `create` is set): attach it to the player admitted for `record`.
    Arrive {
        zone_id: String,
        create: Option<ZoneStart>,
        record: zonekeep_store::StoredTransfer,
        principal: Principal,
        version: u32,
        conn: ConnHandle,
        /// The player's character, when the host had to take its lease for this zone again (the
        /// zone restarted without the player).
        character: Option<Vec<u8>>,
        reply: oneshot::Sender<Result<Joined, JoinFailure>>,
    },
    /// The client asked for a BASELINE (PROTOCOL.md §4.4).
    Resync {
        zone_id: String,
        player: PlayerId,
        conn_id: u64,
    },
    /// The connection measured its round trip (a WebSocket Ping and its Pong): lag
    /// compensation bounds the player's reach into the past by it.
    RoundTrip {
        zone_id: String,
        player: PlayerId,
        conn_id: u64,
        rtt: Duration,
    },
    Create {
        zone_id: String,
        create: ZoneStart,
        reply: oneshot::Sender<Result<(), AdminFailure>>,
    },
    Inspect {
        zone_id: String,
        reply: oneshot::Sender<Option<ZoneDetail>>,
    },
    Kick {
        zone_id: String,
        player: PlayerId,
        reason: String,
        reply: oneshot::Sender<Result<(), AdminFailure>>,
    },
    Stop {
        zone_id: String,
        /// Stop a lasting world too.
        force: bool,
        reply: oneshot::Sender<Result<(), AdminFailure>>,
    },
    /// Start recording a running zone (from its snapshot, at the next tick boundary).
    Record {
        zone_id: String,
        limits: zonekeep_core::recording::RecordLimits,
        reply: oneshot::Sender<Result<(), AdminFailure>>,
    },
    /// Stop a zone's recording.
    StopRecording {
        zone_id: String,
        reply: oneshot::Sender<Result<(), AdminFailure>>,
    },
    /// Graceful shutdown, step 1: stop ticking every zone of the thread and
    /// queue their final saves; the zones stay, frozen, with their clients
    /// attached until [`SimCommand::Release`].
    Freeze {
        reply: oneshot::Sender<Vec<FrozenZone>>,
    },
    /// Graceful shutdown, one zone at a time: freeze only `zone_id` (as
    /// [`SimCommand::Freeze`] does every zone), right after its next tick, so
    /// its clients' last Delta is as recent as the freeze and the thread's
    /// other zones keep ticking until their own turn. `None` when the thread
    /// does not run it (or it was fenced or went dormant before its tick).
    /// Also an operator's move of one zone to another host (`drain` false): then the thread
    /// keeps taking new zones.
    FreezeZone {
        zone_id: String,
        /// A graceful shutdown's freeze: the thread starts no zone from here on.
        drain: bool,
        reply: oneshot::Sender<Option<FrozenZone>>,
    },
    /// Graceful shutdown, step 2: the frozen zone's final save is durable (or
    /// given up on): kick its clients — ZONE_MOVED when the directory handed
    /// the zone to another host, SHUTTING_DOWN otherwise — and dispose it.
    Release {
        zone_id: String,
        moved: bool,
        /// Answered once the clients were told, so the shutdown closes the remaining sessions
        /// only after (they would otherwise hear SHUTTING_DOWN instead of ZONE_MOVED).
        done: oneshot::Sender<()>,
    },
    Shutdown {
        reply: std::sync::mpsc::Sender<()>,
    },
    /// Look at every zone now (the lease watchdog saw the lease lapse).
    Wake,
    /// Rebuild every running zone of `kind` into the kind's current game code (a module
    /// deploy), one at a time between ticks.
    Upgrade {
        kind: String,
        reply: oneshot::Sender<Vec<ZoneUpgrade>>,
    },
    /// A join, resume or arrival (`cmd`) to a running zone, with the [`Arrival`] that keeps the
    /// zone from being unloaded as dormant until its thread has handled `cmd`.
    Arriving {
        arrival: Arrival,
        cmd: Box<SimCommand>,
    },
}

/// A zone frozen for shutdown: no longer ticking, its final save queued.
#[derive(Debug, Clone)]
pub(crate) struct FrozenZone {
    pub zone_id: String,
    pub thread: usize,
    pub save: crate::persist::FinalSave,
}

impl SimCommand {
    /// The built zone a command carries to its thread, if any (to abandon it
    /// when the command cannot be queued).
    fn into_start(self) -> Option<ZoneStart> {
        match self {
            SimCommand::Join { create, .. }
            | SimCommand::Resume { create, .. }
            | SimCommand::TransferIn { create, .. }
            | SimCommand::Arrive { create, .. } => create,
            SimCommand::Create { create, .. } => Some(create),
            _ => None,
        }
    }
}

/// The running threads and their command queues.
pub(crate) struct SimPool {
    senders: Vec<Sender<SimCommand>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next: AtomicUsize,
}

impl SimPool {
    /// Start `n` threads.
    pub fn start(n: usize, queue: usize, ctx: Arc<SimContext>) -> std::io::Result<Self> {
        let mut senders = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let (tx, rx) = bounded(queue);
            let ctx = ctx.clone();
            let h = std::thread::Builder::new()
                .name(format!("zonekeep-sim-{i}"))
                .spawn(move || thread::run(i, rx, ctx))?;
            senders.push(tx);
            threads.push(h);
        }
        Ok(Self {
            senders,
            threads: Mutex::new(threads),
            next: AtomicUsize::new(0),
        })
    }

    /// The thread a new zone goes to (round robin).
    pub fn pick_thread(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len()
    }

    /// Queue a command without waiting; the command comes back when the
    /// queue is full or the thread is gone.
    pub fn send(&self, thread: usize, cmd: SimCommand) -> Result<(), Box<SimCommand>> {
        let Some(tx) = self.senders.get(thread) else {
            return Err(Box::new(cmd));
        };
        tx.try_send(cmd).map_err(|e| match e {
            TrySendError::Full(c) | TrySendError::Disconnected(c) => Box::new(c),
        })
    }

    /// Queue a command, waiting at most `bound` for room: blocks the calling
    /// thread (use from a blocking task). False when it could not be queued.
    pub fn send_within(&self, thread: usize, cmd: SimCommand, bound: Duration) -> bool {
        self.senders
            .get(thread)
            .is_some_and(|tx| tx.send_timeout(cmd, bound).is_ok())
    }

    /// Senders that can wake every thread from outside (the lease watchdog's thread).
    pub fn wakers(&self) -> Vec<Sender<SimCommand>> {
        self.senders.clone()
    }

    /// How many threads the pool runs.
    pub fn threads(&self) -> usize {
        self.senders.len()
    }

    /// Queue a command that must not be lost (a disconnect): try now, and if
    /// the queue is full, wait for room on a blocking thread (bounded).
    pub fn send_eventually(&self, thread: usize, cmd: SimCommand) {
        let Some(tx) = self.senders.get(thread) else {
            return;
        };
        match tx.try_send(cmd) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(cmd)) => {
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    if tx.send_timeout(cmd, Duration::from_secs(10)).is_err() {
                        tracing::error!("sim queue stayed full for 10 s; a disconnect was lost");
                    }
                });
            }
        }
    }

    /// Dispose every zone and stop the threads, waiting at most `bound`.
    /// Returns false when a thread did not finish in time.
    pub fn shutdown(&self, bound: Duration) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut expected = 0;
        for s in &self.senders {
            // A blocking send: shutdown must reach every thread even if its queue is full.
            if s.send_timeout(SimCommand::Shutdown { reply: tx.clone() }, bound)
                .is_ok()
            {
                expected += 1;
            }
        }
        let deadline = std::time::Instant::now() + bound;
        for _ in 0..expected {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if rx.recv_timeout(left).is_err() {
                return false;
            }
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for h in threads {
            let _ = h.join();
        }
        true
    }
}
