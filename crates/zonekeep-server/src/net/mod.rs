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
