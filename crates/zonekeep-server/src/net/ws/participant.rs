//! A host's WebSocket connection as its I/O thread serves it: a participant of a zone here.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::io::Peer;
use crate::error::SessionError;
use crate::host::Shared;
use crate::net::conn_limit::ConnGuard;
use crate::net::netsim::ConnNetSim;
use crate::session::{disconnected, handle_message, report_round_trip, Attached, Limits};

/// What a connection holds until it ends: the connection-limit slot and the host's count of
/// open sessions (graceful shutdown waits for it).
pub(crate) struct Hold {
    pub(crate) _guard: Option<Arc<ConnGuard>>,
    pub(crate) _track: tokio_util::task::task_tracker::TaskTrackerToken,
}

/// An attached session: its messages go to its zone under the host's per-connection limits.
pub(crate) struct Participant {
    shared: Arc<Shared>,
    attached: Attached,
    limits: Limits,
    _hold: Hold,
}

impl Participant {
    /// The session `attached` of the host `shared`.
    pub(crate) fn new(shared: Arc<Shared>, attached: Attached, hold: Hold) -> Self {
        let limits = Limits::new(&shared.config);
        Self {
            shared,
            attached,
            limits,
            _hold: hold,
        }
    }
}

impl Peer for Participant {
    fn message(&mut self, bytes: &[u8]) -> Result<Option<Bytes>, SessionError> {
        handle_message(&self.shared, &self.attached, &self.limits, bytes)
    }

    fn round_trip(&mut self, rtt: Duration) {
        report_round_trip(&self.shared, &self.attached, rtt);
    }

    fn version(&self) -> u32 {
        self.attached.version
    }

    fn netsim(&self) -> Option<&ConnNetSim> {
        Some(&self.attached.netsim)
    }

    fn ended(&mut self) {
        disconnected(&self.shared, &self.attached);
    }
}
