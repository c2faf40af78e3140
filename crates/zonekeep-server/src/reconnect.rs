//! Reconnect tokens: 32 random bytes bound to (principal, zone, player).
//!
//! A token is issued with every Welcome and replaces the player's previous
//! one. It remembers the role it was issued for: a resume is admitted only
//! when the new ticket grants that same role (an observer ticket never gets a
//! player slot back, nor a player ticket an observer's). While the player's connection is up the token is valid; when it drops
//! the token is valid until the zone's reconnect grace ends. Redeeming checks
//! the principal and zone (a token presented by anyone else is refused and
//! stays valid for its owner) and consumes the token. The store is bounded:
//! when full of live tokens a Welcome carries no token (counted by the caller).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use zonekeep_core::{PlayerId, Principal, Role};

/// Token length in bytes.
pub const TOKEN_LEN: usize = 32;

/// A reconnect token.
pub type Token = [u8; TOKEN_LEN];

/// Why a token was not redeemed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReconnectError {
    /// No such token (never issued, used, or the player left).
    #[error("unknown reconnect token")]
    Unknown,
    /// The grace window has passed.
    #[error("reconnect token expired")]
    Expired,
    /// The token belongs to another principal or zone.
    #[error("reconnect token belongs to someone else")]
    NotYours,
    /// The ticket grants another role than the one the token resumes.
    #[error("the ticket grants the {ticket:?} role but the reconnect token resumes a {token:?}: join with a fresh ticket instead")]
    WrongRole {
        /// The role the presented ticket grants.
        ticket: Role,
        /// The role the token was issued for.
        token: Role,
    },
    /// The store is full of live tokens.
    #[error("reconnect token store full")]
    Full,
    /// The OS random source failed.
    #[error("random source unavailable")]
    Random,
}

#[derive(Debug)]
struct Entry {
    principal: Principal,
    zone: String,
    player: PlayerId,
    role: Role,
    expires: Option<Instant>,
}

#[derive(Debug, Default)]
struct Inner {
    by_token: HashMap<Token, Entry>,
    by_player: HashMap<(String, PlayerId), Token>,
}

/// Every live reconnect token of the host.
#[derive(Debug)]
pub struct ReconnectStore {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl ReconnectStore {
    /// A store holding at most `capacity` tokens.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Issue a fresh token for a connected player in `role` (replacing its old one).
    pub fn issue(
        &self,
        principal: &Principal,
        zone: &str,
        player: PlayerId,
        role: Role,
        now: Instant,
    ) -> Result<Token, ReconnectError> {
        let mut token = [0u8; TOKEN_LEN];
        getrandom::fill(&mut token).map_err(|_| ReconnectError::Random)?;
        let mut g = self.lock();
        if let Some(old) = g.by_player.remove(&(zone.to_owned(), player)) {
            g.by_token.remove(&old);
        }
        if g.by_token.len() >= self.capacity {
            let expired: Vec<Token> = g
                .by_token
                .iter()
                .filter(|(_, e)| e.expires.is_some_and(|t| t <= now))
                .map(|(k, _)| *k)
                .collect();
            for k in expired {
                if let Some(e) = g.by_token.remove(&k) {
                    g.by_player.remove(&(e.zone, e.player));
                }
            }
            if g.by_token.len() >= self.capacity {
                return Err(ReconnectError::Full);
            }
        }
        g.by_token.insert(
            token,
            Entry {
                principal: principal.clone(),
                zone: zone.to_owned(),
                player,
                role,
                expires: None,
            },
        );
        g.by_player.insert((zone.to_owned(), player), token);
        Ok(token)
    }

    /// The player's connection dropped: its token stays valid until `until`.
    pub fn detach(&self, zone: &str, player: PlayerId, until: Instant) {
        let mut g = self.lock();
        if let Some(t) = g.by_player.get(&(zone.to_owned(), player)).copied() {
            if let Some(e) = g.by_token.get_mut(&t) {
                e.expires = Some(until);
            }
        }
    }

    /// Redeem `token` for `principal` in `zone` with a ticket granting `role`: the player it
    /// resumes. A refusal for someone else's token or another role leaves the token valid.
    pub fn redeem(
        &self,
        token: &[u8],
        principal: &Principal,
        zone: &str,
        role: Role,
        now: Instant,
    ) -> Result<PlayerId, ReconnectError> {
        let key: Token = token.try_into().map_err(|_| ReconnectError::Unknown)?;
        let mut g = self.lock();
        let e = g.by_token.get(&key).ok_or(ReconnectError::Unknown)?;
        if &e.principal != principal || e.zone != zone {
            return Err(ReconnectError::NotYours);
        }
        if e.role != role {
            return Err(ReconnectError::WrongRole {
                ticket: role,
                token: e.role,
            });
        }
        let expired = e.expires.is_some_and(|t| t <= now);
        let player = e.player;
        g.by_token.remove(&key);
        g.by_player.remove(&(zone.to_owned(), player));
        if expired {
            return Err(ReconnectError::Expired);
        }
        Ok(player)
    }

    /// The player left for good.
    pub fn forget(&self, zone: &str, player: PlayerId) {
        let mut g = self.lock();
        if let Some(t) = g.by_player.remove(&(zone.to_owned(), player)) {
            g.by_token.remove(&t);
        }
    }

    /// The zone stopped.
    pub fn forget_zone(&self, zone: &str) {
        let mut g = self.lock();
        let tokens: Vec<Token> = g
            .by_player
            .iter()
            .filter(|((z, _), _)| z == zone)
            .map(|(_, t)| *t)
            .collect();
        for t in tokens {
            if let Some(e) = g.by_token.remove(&t) {
                g.by_player.remove(&(e.zone, e.player));
            }
        }
    }

    /// Tokens held.
    pub fn len(&self) -> usize {
        self.lock().by_token.len()
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    const P: Role = Role::Player;

    #[test]
    fn issue_detach_redeem() {
        let s = ReconnectStore::new(2);
        let alice = Principal::new("alice");
        let now = Instant::now();
        let t = s.issue(&alice, "z", PlayerId(1), P, now).unwrap();
        assert_eq!(
            s.redeem(&t, &Principal::new("bob"), "z", P, now),
            Err(ReconnectError::NotYours)
        );
        assert_eq!(
            s.redeem(&t, &alice, "y", P, now),
            Err(ReconnectError::NotYours)
        );
        s.detach("z", PlayerId(1), now + Duration::from_secs(1));
        assert_eq!(
            s.redeem(&t, &alice, "z", Role::Observer, now),
            Err(ReconnectError::WrongRole {
                ticket: Role::Observer,
                token: Role::Player
            }),
            "an observer ticket never gets the player slot back"
        );
        assert_eq!(s.redeem(&t, &alice, "z", P, now), Ok(PlayerId(1)));
        assert_eq!(
            s.redeem(&t, &alice, "z", P, now),
            Err(ReconnectError::Unknown),
            "single use"
        );
        let t2 = s.issue(&alice, "z", PlayerId(1), P, now).unwrap();
        s.detach("z", PlayerId(1), now);
        assert_eq!(
            s.redeem(&t2, &alice, "z", P, now + Duration::from_millis(1)),
            Err(ReconnectError::Expired)
        );
    }

    #[test]
    fn bounded_and_reissue_replaces() {
        let s = ReconnectStore::new(1);
        let a = Principal::new("a");
        let now = Instant::now();
        let t1 = s.issue(&a, "z", PlayerId(1), P, now).unwrap();
        let _t2 = s.issue(&a, "z", PlayerId(1), P, now).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s.redeem(&t1, &a, "z", P, now), Err(ReconnectError::Unknown));
        assert_eq!(
            s.issue(&a, "z", PlayerId(2), P, now),
            Err(ReconnectError::Full)
        );
        s.forget("z", PlayerId(1));
        assert!(s.is_empty());
    }
}
