//! Opening a WebTransport session to a zone (PROTOCOL.md §1.1): ask the entry host where its
//! endpoint is (`GET /webtransport` on the WebSocket URL's HTTP origin), open the session with the
//! published certificate hash pinned, send the Hello on the control stream, and wait for Welcome,
//! following Redirects (which name WebSocket URLs: the next hop is asked the same question).
//!
//! [`discover`], [`read_message`] and [`write_message`] are public for clients that speak the
//! protocol themselves (the bench's light bots).

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wtransport::{ClientConfig, Endpoint as QuicEndpoint};
use zonekeep_protocol::limits::MAX_REDIRECTS;
use zonekeep_protocol::messages::{ClientMessage, Hello, KickCode, ServerMessage, Welcome};

use super::counters::{add, Counters};
pub use super::link::{read_message, write_message};
use super::link::{Incoming, Link, WtLink};
use crate::error::ClientError;

/// How long a State's acknowledgement waits for an input to carry it before it goes in an Inputs
/// datagram of its own (PROTOCOL.md §4.5). Each datagram the client sends costs the host a receive
/// and a QUIC acknowledgement of its own, so an acknowledgement that rides an input saves both.
/// It stays under QUIC's default `max_ack_delay` (25 ms), so a datagram sent when the hold ends
/// still carries the client's QUIC acknowledgement of the State, and well under a patch interval,
/// so the host still encodes the next State against it.
pub const STATE_ACK_HOLD: std::time::Duration = std::time::Duration::from_millis(20);

/// Largest `/webtransport` answer read.
const MAX_DISCOVERY: usize = 16 * 1024;

fn wt_err(e: impl std::fmt::Display) -> ClientError {
    ClientError::WebTransport(e.to_string())
}

/// `(authority, path and query)` of a `ws://` URL. Discovery speaks plain HTTP only, so a `wss://`
/// entry (behind TLS) cannot be asked and is refused.
fn split_ws_url(url: &str) -> Result<(&str, &str), ClientError> {
    let rest = url
        .strip_prefix("ws://")
        .ok_or_else(|| wt_err(format!("discovery needs a ws:// entry URL, not {url}")))?;
    Ok(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    })
}

/// Where a host serves WebTransport (`GET /webtransport`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `https://host:port`; a zone's session is at `{url}/zones/{zone}`.
    pub url: String,
    /// SHA-256 of the host's development certificate, to pin; `None` for a configured
    /// certificate, which the system's roots must trust.
    pub certificate_hash: Option<[u8; 32]>,
}

impl Endpoint {
    /// The QUIC client configuration that trusts this endpoint's certificate.
    pub fn client_config(&self) -> ClientConfig {
        match self.certificate_hash {
            Some(h) => ClientConfig::builder()
                .with_bind_default()
                .with_server_certificate_hashes([wtransport::tls::Sha256Digest::new(h)])
                .build(),
            None => ClientConfig::builder()
                .with_bind_default()
                .with_native_certs()
                .build(),
        }
    }
}

/// Asks the host of a `ws://` zone or entry URL where its WebTransport endpoint is.
pub async fn discover(ws_url: &str) -> Result<Endpoint, ClientError> {
    let (authority, _) = split_ws_url(ws_url)?;
    let (url, certificate_hash) = ask(authority).await?;
    Ok(Endpoint {
        url,
        certificate_hash,
    })
}

/// Asks the host at `authority` where its WebTransport endpoint is: the base URL and, for a
/// development certificate, its SHA-256 hash.
async fn ask(authority: &str) -> Result<(String, Option<[u8; 32]>), ClientError> {
    let mut tcp = TcpStream::connect(authority).await.map_err(wt_err)?;
    let request = format!(
        "GET /webtransport HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAccept: application/json\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.map_err(wt_err)?;
    let mut answer = Vec::new();
    tcp.take(MAX_DISCOVERY as u64 + 1)
        .read_to_end(&mut answer)
        .await
        .map_err(wt_err)?;
    if answer.len() > MAX_DISCOVERY {
        return Err(wt_err("the /webtransport answer is too long"));
    }
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| wt_err("malformed /webtransport answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        return Err(wt_err(format!(
            "the host serves no WebTransport (GET /webtransport: {status})"
        )));
    }
    let v: serde_json::Value = serde_json::from_str(body).map_err(wt_err)?;
    let url = v["url"]
        .as_str()
        .filter(|u| u.starts_with("https://"))
        .ok_or_else(|| wt_err("/webtransport names no https:// url"))?
        .to_owned();
    let hash = match v["certificate_hashes"]
        .get(0)
        .and_then(|h| h["value"].as_str())
    {
        None => None,
        Some(b64) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| wt_err("/webtransport: bad certificate hash"))?,
        ),
    };
    Ok((url, hash))
}

/// Opens a session for the zone at WebSocket URL `url` and sends `hello`; the host's answer.
async fn handshake(
    url: &str,
    hello_bytes: &[u8],
    counters: &Counters,
) -> Result<(WtLink, ServerMessage), ClientError> {
    let (_, path) = split_ws_url(url)?;
    let found = discover(url).await?;
    let endpoint = QuicEndpoint::client(found.client_config()).map_err(wt_err)?;
    let conn = endpoint
        .connect(format!("{}{path}", found.url))
        .await
        .map_err(wt_err)?;
    let (send, recv) = conn
        .open_bi()
        .await
        .map_err(wt_err)?
        .await
        .map_err(wt_err)?;
    let mut link = WtLink { conn, send, recv };
    counters.sent(hello_bytes.len());
    link.write_message(hello_bytes).await.map_err(wt_err)?;
    let mut as_link = Link::WebTransport(link);
    let first = loop {
        match as_link.next().await {
            Incoming::Message(b) => break b,
            // Nothing comes in a datagram before the Welcome.
            Incoming::Datagram(_) => {}
            Incoming::Nothing => {}
            _ => return Err(ClientError::ClosedDuringHandshake),
        }
    };
    let Link::WebTransport(link) = as_link else {
        return Err(ClientError::ClosedDuringHandshake);
    };
    counters.received(first.len());
    Ok((link, ServerMessage::decode(&first, None)?))
}

/// Opens a session through the entry URL, following up to [`MAX_REDIRECTS`] Redirects with the
/// same Hello, as the WebSocket path does.
pub(crate) async fn open(
    entry: &str,
    hello: &Hello,
    counters: &Counters,
) -> Result<(WtLink, Welcome), ClientError> {
    let bytes = ClientMessage::Hello(hello.clone()).to_bytes()?;
    let mut url = entry.to_owned();
    let mut followed = 0;
    loop {
        let (link, answer) = handshake(&url, &bytes, counters).await?;
        match answer {
            ServerMessage::Welcome(w) => {
                if !hello.versions.contains(&w.version) {
                    return Err(ClientError::VersionMismatch(w.version));
                }
                return Ok((link, w));
            }
            ServerMessage::Redirect(r) => {
                link.conn.close(0u32.into(), b"");
                if followed >= MAX_REDIRECTS {
                    return Err(ClientError::TooManyRedirects(followed));
                }
                let Some(next) = r.websocket_url() else {
                    return Err(ClientError::RedirectScheme(r.url));
                };
                followed += 1;
                add(&counters.redirects, 1);
                url = next.to_owned();
            }
            ServerMessage::Kick(k) if k.code == KickCode::CONTENT_OUTDATED => {
                return Err(ClientError::ContentOutdated(k))
            }
            ServerMessage::Kick(k) => return Err(ClientError::Kicked(k)),
            _ => {
                return Err(ClientError::Protocol(
                    "expected Welcome, Redirect or Kick first",
                ))
            }
        }
    }
}
