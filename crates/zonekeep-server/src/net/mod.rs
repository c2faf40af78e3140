//! The host's network edge: the transports clients reach zones through, and what every
//! connection shares.
//!
//! - `ws`: the WebSocket transport (`GET /zones/{zone_id}`).
//! - [`relay`]: relays, the origin's link endpoint (`GET /relay/{zone_id}`) and the relay
//!   process that builds its clients' frames.
//! - [`webtransport`]: the WebTransport transport (HTTP/3 over QUIC).
//! - [`conn`]: what the simulation side holds of a connection, whatever its transport.
//! - [`conn_limit`]: the caps on connections, checked at accept.
//! - [`netsim`]: simulated latency, jitter and loss (dev mode).
//!
//! Both transports hand a client's Hello and later messages to the host's session module, which owns
//! admission and inputs; nothing here knows a zone's rules.

pub mod conn;
pub mod conn_limit;
pub mod netsim;
pub mod relay;
pub mod webtransport;
pub(crate) mod ws;

/// The next connection on `listener`. A failed accept (EMFILE and friends) is logged and retried
/// after a short pause instead of spinning; cancel-safe.
pub(crate) async fn accept(
    listener: &tokio::net::TcpListener,
) -> (tokio::net::TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(x) => return x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
