//! Persistence in the host: zone saves, hibernation and exactly-once facts.
//!
//! Everything here runs on the tokio runtime, never on a simulation thread.
//! The simulation threads only hand work over without waiting:
//! [`StorageHandle::try_submit`] puts a snapshot into the zone's latest-wins
//! slot and [`FactQueue::try_send`] puts a fact into the zone's bounded fact
//! queue. Both return at once; a full or slow store shows up in
//! [`PersistMetrics`] and [`SaveStatus`], never in tick durations.
//!
//! - [`StorageWorker`]: writes snapshots with the zone's owner epoch and an
//!   increasing sequence number, retries failures with capped exponential
//!   [`Backoff`], and can be flushed (hibernation, shutdown).
//! - [`ZoneLoader`]: on zone creation, waits for this host's unwritten save of
//!   the zone, `claim`s it (a new epoch, fencing every older owner) and hands
//!   back the last save to restore from; records why a zone could not start.
//! - [`FactWorker`]: per-zone bounded fact queues drained into a [`FactSink`]
//!   ([`LedgerSink`] or [`WebhookSink`]) with retries; settlements go back to
//!   the zone through a [`SettlementInbox`].
//! - [`CallWorker`]: durable calls journaled in the store's call journal, delivered at least
//!   once to [`CallSinks`] (in-process [`CallHandler`]s, else the call webhook) and answered back
//!   into the zone through a [`CallInbox`].
//! - [`PersistConfig`]: the `--store`, `--data-dir`, `--save-every`,
//!   `--fact-sink` and `--store-delay` settings, and [`open`] to build the store.
//! - [`Persistence`]: all of the above for one host, handed to the host
//!   builder; each loaded zone gets a [`ZonePersist`] that its simulation
//!   thread drives around every `advance` (facts out, settlements in,
//!   periodic snapshots) and on unload (final snapshot: hibernation, stop,
//!   shutdown).
//! - [`FenceAlarm`]: raised by either worker when the store refuses one of a
//!   zone's writes as fenced (a newer owner claimed it); the zone's simulation
//!   thread then unloads it at once, with no final save.

mod backoff;
mod call_sinks;
mod calls;
mod characters;
mod config;
mod facts;
mod fence;
mod host;
mod ledger;
mod loader;
mod metrics;
mod route;
mod schedule;
mod sink;
mod status;
mod storage;
mod webhook;
mod zone;

pub use backoff::Backoff;
pub use call_sinks::{CallHandler, CallSinks, INVALID_CALL, NO_HANDLER};
pub use calls::{CallInbox, CallMetrics, CallWorker, CallWorkerConfig, OutboundCall};
pub use characters::{CharacterJob, CharacterMetrics, CharacterWorker};
pub use config::{open, parse_duration, ConfigError, FactSinkSpec, PersistConfig};
pub use facts::{FactQueue, FactQueueError, FactWorker, FactWorkerConfig, SettlementInbox};
pub use fence::FenceAlarm;
pub use host::{ClaimRefusal, PersistShutdown, Persistence};
pub use ledger::LedgerSink;
pub use loader::{
    ClaimedZone, FreshStart, LoadError, StartFailure, StartFailures, ZoneLoader, ZoneRecords,
    NATIVE_BUILD,
};
pub use metrics::PersistMetrics;
pub use route::{SettlementRoute, SettlementRouter, ZoneAnswer};
pub use schedule::{SaveTimer, PROMPT_GAP};
pub use sink::{FactSink, OutboundFact, SinkError};
pub use status::SaveStatus;
pub use storage::{
    ShutdownReport, StorageConfig, StorageHandle, StorageWorker, SubmitError, Submitted,
};
pub use webhook::{WebhookError, WebhookSink};
pub use zone::{FinalSave, PersistDetail, Unload, ZonePersist};
