//! What the WebTransport endpoint counts before a session exists: QUIC Initials answered with a
//! Retry, and handshakes in progress from addresses that proved themselves (bounded by
//! `webtransport_max_handshakes`; over the bound they are counted in
//! `zonekeep_connections_refused{reason="handshakes"}`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The endpoint's handshake metrics.
#[derive(Debug, Clone, Default)]
pub struct WebTransportMetrics {
    retries: Counter,
    handshakes: Gauge,
}

impl WebTransportMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_webtransport_retries",
            "QUIC Initials from an address not yet validated, answered with a Retry and nothing kept",
            self.retries.clone(),
        );
        registry.register(
            "zonekeep_webtransport_handshakes",
            "WebTransport handshakes in progress (QUIC and the CONNECT request, address validated), \
             held apart from the connection slots",
            self.handshakes.clone(),
        );
    }

    /// An Initial was answered with a Retry.
    pub fn retried(&self) {
        self.retries.inc();
    }

    /// The handshakes-in-progress gauge, moved by the endpoint's handshake guards.
    pub(crate) fn handshakes_gauge(&self) -> Gauge {
        self.handshakes.clone()
    }
}
