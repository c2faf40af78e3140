//! What the origin's relay link endpoint counts: links open, link requests refused for their
//! credential, and relayed messages.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Why a link request was refused.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

/// The origin's relay metrics.
#[derive(Debug, Clone, Default)]
pub struct RelayMetrics {
    links: Gauge,
    refused: Family<Reason, Counter>,
    patches: Counter,
    patch_bytes: Counter,
}

impl RelayMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_relay_links",
            "Relay links open to this host (one per zone per relay)",
            self.links.clone(),
        );
        registry.register(
            "zonekeep_relay_refused",
            "Relay link requests refused for their credential: `missing` (no bearer token) or \
             `wrong` (not the relay token)",
            self.refused.clone(),
        );
        for reason in ["missing", "wrong"] {
            let _ = self.refused.get_or_create(&Reason { reason });
        }
        registry.register(
            "zonekeep_relay_patches",
            "Patch messages queued to relay links (one per patch per link)",
            self.patches.clone(),
        );
        registry.register(
            "zonekeep_relay_patch_bytes",
            "Bytes of the patch messages queued to relay links",
            self.patch_bytes.clone(),
        );
    }

    /// A link request was refused for its credential.
    pub fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&Reason { reason }).inc();
    }

    /// Links opened (+1) or closed (-1).
    pub fn links(&self, delta: i64) {
        self.links.inc_by(delta);
    }

    /// A patch message of `bytes` was queued to a link.
    pub fn patch(&self, bytes: usize) {
        self.patches.inc();
        self.patch_bytes.inc_by(bytes as u64);
    }
}
