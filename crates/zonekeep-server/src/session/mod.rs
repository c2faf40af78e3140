//! A session: a connection admitted to a zone, whatever its transport. The transports
//! (`crate::net::ws`, `crate::net::webtransport`) read a client's first message and hand it to
//! [`admission`], then pass what the client sends on to [`inputs`].

mod admission;
mod character;
mod inputs;

use std::sync::Arc;

use bytes::Bytes;
use zonekeep_core::PlayerId;

use crate::net::netsim::ConnNetSim;
use crate::sim::ZoneEntry;

pub(crate) use admission::{
    admit_hello, count_takeover, enter_zone, spend_ticket, start_alone, start_failure,
};
pub(crate) use character::{
    acquire as acquire_character, give_back as give_back_character,
    held_here as character_held_here, kind_keeps_characters, zone_kind, PrincipalLocks,
};
pub(crate) use inputs::{accept_input, handle_message, report_round_trip, Limits};

/// A session attached to a zone.
pub(crate) struct Attached {
    pub(crate) entry: Arc<ZoneEntry>,
    pub(crate) player: PlayerId,
    /// This connection's id (a Resync names it, so a replaced connection's request is ignored).
    pub(crate) conn_id: u64,
    /// The NetSim (dev) its messages go through: its ticket subject's own, else the host's.
    pub(crate) netsim: ConnNetSim,
    /// The negotiated protocol version: a Kick is sent in its codes.
    pub(crate) version: u32,
    /// Its place in chat (a version 11 session on a host with a store).
    pub(crate) chat: Option<crate::chat::ChatSeat>,
}

/// Tell the zone its player's connection ended.
pub(crate) fn disconnected(shared: &crate::host::Shared, a: &Attached) {
    let cmd = crate::sim::SimCommand::Disconnected {
        zone_id: a.entry.zone_id.clone(),
        player: a.player,
        conn_id: a.conn_id,
    };
    shared.pool.send_eventually(a.entry.thread, cmd);
}

/// How a handshake ended without an error.
pub(crate) enum Handshake {
    /// Joined or resumed here.
    Attached(Attached),
    /// The client left before its Hello.
    Gone,
    /// Another host owns the zone: redirect or proxy the client there.
    Elsewhere(crate::fleet::forward::Moved),
    /// The player was moved to another zone (PROTOCOL.md §5.3.2): send it this Transfer frame
    /// again and close.
    Transferred(Bytes),
    /// A new player placed on a relay of the zone: redirect it to this relay base URL.
    ToRelay(String),
}

/// Where an admitted Hello went.
pub(crate) enum Entered {
    /// Into a zone of this host: its thread, and the principal.
    Zone(usize, String),
    /// Nowhere: the player was moved to another zone; this is its Transfer frame.
    Moved(Bytes),
}
