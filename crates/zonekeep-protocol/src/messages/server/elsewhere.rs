//! Where else a client goes (§5.3–§5.3.2): a Redirect to the zone's owner, a Transfer into
//! another zone, and the entry URLs of the zone's hosts, with the rule that a client follows only
//! absolute `ws://` or `wss://` URLs, so that a ticket never goes anywhere but to a zone host.

use crate::error::{DecodeError, EncodeError};
use crate::limits::{MAX_ENTRIES, MAX_URL};
use crate::wire::{put_str_named, put_varint, Reader};

/// The answer to a Hello at a host that does not own the zone (§5.3, protocol version 3): connect
/// to `url` and send the same Hello again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The zone's full WebSocket URL at its owner, `ws://` or `wss://` (≤ 512 bytes).
    pub url: String,
    /// The zone to ask for there (≤ 128 bytes).
    pub zone_id: String,
}

impl Redirect {
    /// The URL to follow, or `None` when it is not an absolute `ws://` or `wss://` URL, which a
    /// client must refuse (§5.3): a Redirect must not send a client's ticket anywhere but to
    /// another zone host. The scheme is matched without regard to case (RFC 3986 §3.1).
    pub fn websocket_url(&self) -> Option<&str> {
        is_websocket_url(&self.url).then_some(self.url.as_str())
    }
}

/// Whether `url` is an absolute `ws://` or `wss://` URL with a host, the scheme matched without
/// regard to case (RFC 3986 §3.1).
pub(super) fn is_websocket_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let ws = scheme.eq_ignore_ascii_case("ws") || scheme.eq_ignore_ascii_case("wss");
    // An empty authority (`ws:///zones/a`) names no host.
    ws && !rest.is_empty() && !rest.starts_with('/')
}

/// The player was moved to another zone (§5.3.2, protocol version 8): the client opens a new
/// connection to `url` with a Hello carrying `ticket`, keeps showing the old world until the new
/// zone's Welcome and BASELINE arrive, then closes this connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// The zone the player now belongs to, exactly (≤ 128 bytes).
    pub zone_id: String,
    /// The transfer credential: a single-use ticket for that zone (≤ 4096 bytes, §8).
    pub ticket: String,
    /// The zone's full WebSocket URL at its owner, `ws://` or `wss://` (≤ 512 bytes).
    pub url: String,
}

impl Transfer {
    /// The URL to connect to, or `None` when it is not an absolute `ws://` or `wss://` URL: the
    /// client then ignores the Transfer (§5.3.2), as it refuses such a Redirect, so that the
    /// credential never goes anywhere but to a zone host.
    pub fn websocket_url(&self) -> Option<&str> {
        is_websocket_url(&self.url).then_some(self.url.as_str())
    }
}

/// Where else the client may enter the zone, anew (§5.3.1, version 7): the host sends it when the
/// list its Welcome gave has changed (a host joined, drained or died), so a client that later
/// finds its entry URL unreachable knows the fleet as it is, not as it was when it joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entries {
    /// The same list as [`Welcome::entries`]: at most [`MAX_ENTRIES`] WebSocket URLs of the zone,
    /// its owner first. It replaces the one the client held.
    ///
    /// [`Welcome::entries`]: super::Welcome::entries
    /// [`MAX_ENTRIES`]: crate::limits::MAX_ENTRIES
    pub entries: Vec<String>,
}

impl Entries {
    /// The entry URLs a client may connect to, as [`Welcome::websocket_entries`].
    ///
    /// [`Welcome::websocket_entries`]: super::Welcome::websocket_entries
    pub fn websocket_entries(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .map(String::as_str)
            .filter(|u| is_websocket_url(u))
    }
}

/// Writes a list of entry URLs (Welcome from version 7, Entries): a count, then each URL.
pub(super) fn put_entries(out: &mut Vec<u8>, entries: &[String]) -> Result<(), EncodeError> {
    if entries.len() > MAX_ENTRIES {
        return Err(EncodeError::TooLong {
            what: "entries",
            len: entries.len() as u64,
            max: MAX_ENTRIES as u64,
        });
    }
    put_varint(out, entries.len() as u64);
    for e in entries {
        put_str_named(out, "entry url", e, MAX_URL)?;
    }
    Ok(())
}

/// Reads a list of entry URLs written by [`put_entries`].
pub(super) fn read_entries(r: &mut Reader<'_>) -> Result<Vec<String>, DecodeError> {
    let n = r.count("entries", MAX_ENTRIES)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(r.str_named("entry url", MAX_URL)?.to_owned());
    }
    Ok(entries)
}
