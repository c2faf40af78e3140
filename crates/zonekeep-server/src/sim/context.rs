//! What every simulation thread shares: the zone kinds and how each is run, the host's stores,
//! queues and policies, and the session limits Welcome announces.

use std::collections::HashMap;
use std::sync::Arc;

use zonekeep_core::{Clock, ZoneConfig, ZoneKinds};

use super::registry::Registry;
use super::DisposeHook;
use crate::metrics::Metrics;
use crate::persist::Persistence;
use crate::reconnect::ReconnectStore;

/// How one zone kind is run.
#[derive(Debug, Clone)]
pub(crate) struct KindSpec {
    pub config: ZoneConfig,
    pub default_params: serde_json::Value,
}

/// The session limits a Welcome announces (PROTOCOL.md §5.1).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionTimeouts {
    /// Silence after which a connection is kicked with IDLE_TIMEOUT.
    pub idle_ms: u32,
    /// Time allowed for the Hello.
    pub handshake_ms: u32,
}

/// Everything the threads share.
pub(crate) struct SimContext {
    pub kinds: ZoneKinds,
    pub specs: HashMap<String, KindSpec>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub reconnect: Arc<ReconnectStore>,
    pub registry: Arc<Registry>,
    pub dispose_hook: Option<DisposeHook>,
    pub zone_inbox: usize,
    /// What Welcome tells clients about the host's session timeouts.
    pub timeouts: SessionTimeouts,
    /// The content version Welcome tells clients, and the oldest a Hello may carry.
    pub content: crate::content::ContentPolicy,
    /// Saves, hibernation and facts; `None` runs zones in memory only.
    pub persist: Option<Arc<Persistence>>,
    /// Where else a client may enter, which Welcome lists (version 7); empty outside a fleet.
    pub entries: Arc<crate::fleet::EntryUrls>,
    /// Zone recordings.
    pub recordings: Arc<crate::recording::Recordings>,
    /// Stop flags of the running zones whose game code can be interrupted.
    pub interrupts: Arc<super::Interrupts>,
    /// The host's module kinds, if it has any: a zone of one with no module yet is not started.
    pub code: Option<Arc<dyn crate::code::CodeKinds>>,
    /// Moves of players out of this host's zones, on their way to the transfer worker.
    pub transfers: Arc<crate::transfer::TransferQueue>,
    /// The cross-zone bus, set once the host serves (in process, or NATS with `--bus`); zones
    /// bind to it at their next step once it is there.
    pub bus: Arc<std::sync::OnceLock<zonekeep_bus::BusHandle>>,
    /// Lasting worlds halted because their saves failed, until they resume.
    pub halts: Arc<crate::halt::Halts>,
    /// The clock every zone's stages are timed on (`stage_timing`); `None`: not timed.
    pub stage_clock: Option<Arc<dyn Clock>>,
    /// Which zone lifecycle lines are written.
    pub lifecycle: super::lifecycle::Lifecycle,
}
