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

/// The participants present, ordered by id so iteration is deterministic, with how many hold
/// each role: admitting a participant checks its role's cap without walking everyone (a zone of
/// 10,000 observers joining one by one would otherwise cost a walk per join).
///
/// It reads as the map it wraps; every change goes through it, so the counts stay true.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roster {
    by_id: BTreeMap<PlayerId, PlayerInfo>,
    observers: usize,
}

impl Roster {
    /// No participants.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Participants holding `role`.
    pub(crate) fn count(&self, role: Role) -> usize {
        match role {
            Role::Observer => self.observers,
            Role::Player => self.by_id.len() - self.observers,
        }
    }

    fn counted(&mut self, info: &PlayerInfo, up: bool) {
        if info.role == Role::Observer {
            if up {
                self.observers += 1;
            } else {
                self.observers -= 1;
            }
        }
    }

    /// Seats `info` under `id`, returning whom it replaced.
    pub(crate) fn insert(&mut self, id: PlayerId, info: PlayerInfo) -> Option<PlayerInfo> {
        self.counted(&info, true);
        let old = self.by_id.insert(id, info);
        if let Some(o) = &old {
            self.counted(o, false);
        }
        old
    }

    /// Removes `id`, returning what it held.
    pub(crate) fn remove(&mut self, id: &PlayerId) -> Option<PlayerInfo> {
        let old = self.by_id.remove(id);
        if let Some(o) = &old {
            self.counted(o, false);
        }
        old
    }

    /// Removes everyone.
    pub(crate) fn clear(&mut self) {
        self.by_id.clear();
        self.observers = 0;
    }

    /// Marks `id` connected or not, returning whether it was (`None`: not present).
    pub(crate) fn set_connected(&mut self, id: PlayerId, connected: bool) -> Option<bool> {
        self.by_id
            .get_mut(&id)
            .map(|p| std::mem::replace(&mut p.connected, connected))
    }
}

impl std::ops::Deref for Roster {
    type Target = BTreeMap<PlayerId, PlayerInfo>;

    fn deref(&self) -> &Self::Target {
        &self.by_id
    }
}

impl From<BTreeMap<PlayerId, PlayerInfo>> for Roster {
    fn from(by_id: BTreeMap<PlayerId, PlayerInfo>) -> Self {
        let observers = by_id.values().filter(|p| p.role == Role::Observer).count();
        Self { by_id, observers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u32, role: Role) -> PlayerInfo {
        PlayerInfo {
            id: PlayerId(id),
            principal: Principal::new(format!("p{id}")),
            role,
            claims: Claims::new(),
            connected: true,
        }
    }

    #[test]
    fn the_roster_counts_each_role_through_every_change() {
        let mut r = Roster::new();
        r.insert(PlayerId(1), info(1, Role::Player));
        r.insert(PlayerId(2), info(2, Role::Observer));
        r.insert(PlayerId(3), info(3, Role::Observer));
        assert_eq!((r.count(Role::Player), r.count(Role::Observer)), (1, 2));
        // Seated again under the same id as the other role: the old seat stops counting.
        r.insert(PlayerId(2), info(2, Role::Player));
        assert_eq!((r.count(Role::Player), r.count(Role::Observer)), (2, 1));
        assert!(r.remove(&PlayerId(3)).is_some());
        assert!(r.remove(&PlayerId(3)).is_none());
        assert_eq!((r.count(Role::Player), r.count(Role::Observer)), (2, 0));
        assert_eq!(r.set_connected(PlayerId(1), false), Some(true));
        assert_eq!(r.set_connected(PlayerId(1), false), Some(false));
        assert_eq!(r.set_connected(PlayerId(9), false), None);
        let rebuilt = Roster::from(BTreeMap::from([
            (PlayerId(4), info(4, Role::Observer)),
            (PlayerId(5), info(5, Role::Player)),
        ]));
        assert_eq!(
            (rebuilt.count(Role::Player), rebuilt.count(Role::Observer)),
            (1, 1)
        );
        r.clear();
        assert_eq!((r.count(Role::Player), r.count(Role::Observer)), (0, 0));
    }
}
