//! Who is in a zone: ids, roles, principals and claims.

use std::collections::BTreeMap;
use std::fmt;

/// A player's id inside one host; assigned by the host, starting at 1, never
/// reused within the host's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlayerId(pub u32);

impl fmt::Display for PlayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a participant may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Controls something; may send inputs.
    Player,
    /// Watches read-only; inputs are refused.
    Observer,
}

/// The identity taken from a verified ticket. The core only carries it; it
/// never derives one from anything a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(String);

impl Principal {
    /// Wrap an identity string taken from a verified ticket.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The identity string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Ticket claims: free-form JSON the game defines (team, cosmetics, rank...).
pub type Claims = serde_json::Map<String, serde_json::Value>;

/// What the zone knows about one participant.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerInfo {
    /// Host-assigned id.
    pub id: PlayerId,
    /// Verified identity.
    pub principal: Principal,
    /// Player or observer.
    pub role: Role,
    /// Claims from the ticket.
    pub claims: Claims,
    /// False while the connection is lost and the reconnect grace runs.
    pub connected: bool,
}

/// The participants present, ordered by id so iteration is deterministic.
pub(crate) type Roster = BTreeMap<PlayerId, PlayerInfo>;
