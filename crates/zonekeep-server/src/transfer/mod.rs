//! Moving players between zones: the host's side of a transfer (docs/ARCHITECTURE.md,
//! "Transfers"; PROTOCOL.md §5.3.2).
//!
//! A zone asks, during its tick, to move a player (`Ctx::transfer`). Its simulation thread takes
//! the request out after the tick and hands it, without waiting, to this worker; the zone refuses
//! the player's inputs and sends it nothing while the move is decided. The worker then, off every
//! tick:
//! 1. writes the move as a **pending transfer record**, fenced by the source's owner epoch;
//! 2. has the target admit the player (starting the target zone here if needed), or asks the
//!    target's owner host to, through the bus;
//! 3. settles the record: **accepted** by the target (fenced by the target's epoch) or
//!    **returned** (refused, not startable, or no answer within [`DECISION_TIMEOUT`]). The store
//!    decides by compare-and-set, so when both happen at once exactly one wins;
//! 4. tells the source: accepted → the player leaves it (`LeaveReason::Transferred`) and each of
//!    its connections gets a Transfer frame with a credential for the target; returned → the zone
//!    takes the player back (`returning = true`) and it sees why, still connected.
//!
//! The record is the truth under crashes: a new owner of either zone finishes the transfers it
//! finds open ([`recover`]), and a player always ends in exactly one zone.
//!
//! A move carries the player's character ([`characters`]) between zones of kinds that keep
//! characters: the source hands it back as the player moves out, the target takes its lease
//! before admitting the player (a move whose target cannot take it is returned), and a returned
//! move takes it again for the source.

mod chaos;
mod characters;
mod credential;
mod reclaim;
mod recover;
mod remote;
pub(crate) use remote::ask_recall;
mod target;
mod worker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use zonekeep_core::TransferRequest;
use zonekeep_store::TransferLedger;

pub(crate) use reclaim::on_join as reclaim_on_join;
pub(crate) use remote::serve as serve_notes;
pub(crate) use target::arrival;
pub(crate) use worker::run;

/// Longest a move may take from the source's request to the target's answer; past it the source
/// takes the player back (unless the target's acceptance landed first).
pub const DECISION_TIMEOUT: Duration = Duration::from_secs(5);
/// Moves waiting for the worker, per host; beyond it a move is refused at once (counted).
pub const QUEUE: usize = 1024;
/// Moves the worker decides at once, per host.
pub const IN_FLIGHT: usize = 256;
/// How long a Transfer is sent again to a connection that comes back to the source.
pub const RESEND_WINDOW: Duration = Duration::from_secs(600);
/// The reserved event topic by which a returned player is told why (PROTOCOL.md §5.3.2): its
/// payload is the reason as UTF-8.
pub const RETURNED_TOPIC: u16 = 0xFFFF;
/// The InputRefused code of an input sent while its player is being moved.
pub const MOVING_CODE: u16 = 0xFFFF;

/// A source zone's request, on its way to the worker.
#[derive(Debug)]
pub(crate) struct Outbound {
    /// The source zone.
    pub zone_id: String,
    /// Its simulation thread.
    pub thread: usize,
    /// Its owner epoch (0 without persistence).
    pub epoch: u64,
    /// What the zone asked.
    pub request: TransferRequest,
}

/// Work for the transfer worker.
#[derive(Debug)]
pub(crate) enum Job {
    /// Move a player out of a zone of this host.
    Move(Outbound),
    /// A moved player's connection reached its target zone here.
    Arrived {
        /// The transfer.
        id: String,
        /// The target zone's owner epoch.
        epoch: u64,
    },
    /// A join that reclaimed a returned move's state was not admitted: give the state up again
    /// for the player's next join ([`zonekeep_store::TransferLedger::release_reclaim`]).
    Unclaimed {
        /// The transfer.
        id: String,
        /// The source zone's owner epoch the reclaim was made under.
        epoch: u64,
    },
    /// A zone started here under a new owner epoch: finish the moves its previous run left.
    Started {
        /// The zone.
        zone_id: String,
        /// Its owner epoch.
        epoch: u64,
    },
}

/// How a move ended, as told to the source zone's thread.
#[derive(Debug, Clone)]
pub(crate) enum Resolution {
    /// The target has the player: send it this Transfer frame and let it go.
    Moved(Bytes),
    /// The source keeps the player, for this reason; with its character when the source zone's
    /// kind keeps characters (taken again for it, as the player moved out without it).
    Returned(String, Option<Retaken>),
}

/// A returned move's character, taken again for its source zone.
#[derive(Debug, Clone)]
pub(crate) struct Retaken {
    /// Whose character it is.
    pub principal: String,
    /// Its bytes, under the source zone's lease now; or why it could not be taken (the player
    /// cannot stay without it).
    pub character: Result<Vec<u8>, String>,
}

/// The transfer worker's queue is full (or the worker is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueFull;

/// The simulation threads' end of the worker: a bounded queue they never wait on.
#[derive(Debug)]
pub(crate) struct TransferQueue {
    tx: mpsc::Sender<Job>,
    rx: Mutex<Option<mpsc::Receiver<Job>>>,
    /// Transfer frames sent, by source zone and principal, for a connection that comes back.
    sent: Mutex<HashMap<(String, String), (Bytes, Instant)>>,
    /// Moves to another host's zone waiting for its answer, by transfer id.
    waiters: Mutex<HashMap<String, oneshot::Sender<remote::Answer>>>,
}

impl TransferQueue {
    /// A queue of [`QUEUE`] jobs.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        Self {
            tx,
            rx: Mutex::new(Some(rx)),
            sent: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
        }
    }

    /// Waits (through `tx`) for the answer to move `id` (at most [`IN_FLIGHT`] wait at once,
    /// the worker's own bound).
    pub(crate) fn wait_for(&self, id: &str, tx: oneshot::Sender<remote::Answer>) {
        let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        w.insert(id.to_owned(), tx);
    }

    /// Stops waiting for move `id`.
    pub(crate) fn stop_waiting(&self, id: &str) {
        let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        w.remove(id);
    }

    /// Hands the answer to move `id` to whoever waits for it (nobody: it came too late).
    pub(crate) fn answer(&self, id: &str, answer: remote::Answer) {
        let waiter = {
            let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            w.remove(id)
        };
        if let Some(tx) = waiter {
            let _ = tx.send(answer);
        }
    }

    /// Hands a job to the worker without waiting; refused when the queue is full (or the worker
    /// is gone), and the caller undoes what the job was for.
    pub fn submit(&self, job: Job) -> Result<(), QueueFull> {
        self.tx.try_send(job).map_err(|_| QueueFull)
    }

    /// The worker's end, taken once when the host starts serving.
    pub fn take_receiver(&self) -> Option<mpsc::Receiver<Job>> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Remembers the Transfer frame sent to `principal` leaving `zone_id`.
    pub fn remember(&self, zone_id: &str, principal: &str, frame: Bytes) {
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // Bounded by the window: every insert first drops what has expired.
        sent.retain(|_, (_, at)| now.duration_since(*at) < RESEND_WINDOW);
        sent.insert((zone_id.to_owned(), principal.to_owned()), (frame, now));
    }

    /// The Transfer frame sent to `principal` leaving `zone_id` within the window, if this host
    /// still has it.
    pub fn recall(&self, zone_id: &str, principal: &str) -> Option<Bytes> {
        let sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        sent.get(&(zone_id.to_owned(), principal.to_owned()))
            .filter(|(_, at)| at.elapsed() < RESEND_WINDOW)
            .map(|(f, _)| f.clone())
    }
}

impl Default for TransferQueue {
    fn default() -> Self {
        Self::new()
    }
}

/// The transfer ledger a host uses: its store's, or, for a host that keeps nothing (no
/// persistence), one in memory — there a crash loses the zones too, so nothing needs to outlive
/// the process.
pub(crate) fn ledger(shared: &crate::host::Shared) -> Option<Arc<dyn TransferLedger>> {
    shared
        .sim
        .persist
        .as_ref()
        .map(|p| Arc::clone(&p.store().transfers))
        .or_else(|| shared.memory_transfers.get().cloned())
}

/// The id of a move: unique per source zone, owner epoch, tick and player (a zone moves a
/// player at most once a tick), so a retried write names the same move. Readable when it fits
/// the store's 128 bytes, else the SHA-256 of the same text.
pub(crate) fn transfer_id(o: &Outbound) -> String {
    use sha2::Digest;
    let id = format!(
        "{}~{}~{}~{}",
        o.zone_id, o.epoch, o.request.tick, o.request.player.0
    );
    if id.len() <= zonekeep_store::MAX_TRANSFER_ID {
        return id;
    }
    sha2::Sha256::digest(id.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The Transfer frame of `principal`'s move out of `zone_id` within the last
/// [`RESEND_WINDOW`], for a connection of its that comes back there: the one sent, when this
/// host still has it, otherwise one made anew from the record.
pub(crate) async fn resend(
    shared: &crate::host::Shared,
    zone_id: &str,
    principal: &str,
) -> Option<Bytes> {
    if let Some(frame) = shared.sim.transfers.recall(zone_id, principal) {
        shared.metrics.transfer("resent");
        return Some(frame);
    }
    let ledger = ledger(shared)?;
    let window = u64::try_from(RESEND_WINDOW.as_millis()).unwrap_or(u64::MAX);
    let since = crate::sim::now_ms().saturating_sub(window);
    let moved = match ledger.latest_transfer_from(zone_id, principal, since).await {
        Ok(moved) => moved?,
        Err(e) => {
            tracing::warn!(zone = %zone_id, error = %e, "a returning moved player's transfer was not looked up");
            return None;
        }
    };
    let frame = credential::transfer_frame(shared, &moved).await.ok()?;
    shared
        .sim
        .transfers
        .remember(zone_id, principal, frame.clone());
    shared.metrics.transfer("resent");
    Some(frame)
}
