//! Reconnect tokens: 32 bytes bound to (principal, zone, player), signed so
//! that every host of a fleet sharing the ticket keys can check them.
//!
//! A token is the player id (4 bytes), the role (1), a random nonce (11) and
//! an HMAC-SHA256 (first 16 bytes) over those and the zone and principal,
//! under the primary ticket key ([`TokenSigner`]). The host that issued it
//! also remembers it (below). Another host — the zone moved there in a deploy
//! or a failover — has no memory of it, checks its MAC against the ticket's
//! principal and the zone instead, and resumes the player if the zone it
//! restored still holds that player within its grace. Each nonce is accepted
//! once per host (a bounded set remembers the ones redeemed).
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

/// The purpose string reconnect-token MACs are made for.
const PURPOSE: &str = "zonekeep reconnect token v1";
/// Bytes of a token before its MAC: player id, role, nonce.
const HEAD_LEN: usize = 16;

/// Signs and checks reconnect tokens with the host's active ticket keys (the primary signs;
/// every active key verifies, so a key rotation does not strand resuming players).
#[derive(Clone, Default)]
pub struct TokenSigner {
    keys: Vec<crate::ticket::TicketKey>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl TokenSigner {
    /// A signer with `ring`'s active keys, the primary first.
    pub fn new(ring: &crate::ticket::KeyRing) -> Self {
        let primary = ring.primary().cloned();
        let primary_kid = primary.as_ref().map(|k| k.kid.clone());
        let mut keys: Vec<_> = primary.into_iter().collect();
        keys.extend(
            ring.keys()
                .iter()
                .filter(|k| !k.retired && Some(&k.kid) != primary_kid.as_ref())
                .cloned(),
        );
        TokenSigner { keys }
    }

    fn mac(
        key: &crate::ticket::TicketKey,
        zone: &str,
        principal: &Principal,
        head: &[u8],
    ) -> [u8; 16] {
        let mut data = Vec::with_capacity(zone.len() + principal.as_str().len() + 2 + head.len());
        data.extend_from_slice(zone.as_bytes());
        data.push(0);
        data.extend_from_slice(principal.as_str().as_bytes());
        data.push(0);
        data.extend_from_slice(head);
        let full = key.purpose_mac(PURPOSE, &data);
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// A signed token for `player` in `role`, or `None` without a key.
    fn sign(
        &self,
        zone: &str,
        principal: &Principal,
        player: PlayerId,
        role: Role,
    ) -> Result<Option<Token>, ReconnectError> {
        let Some(key) = self.keys.first() else {
            return Ok(None);
        };
        let mut token = [0u8; TOKEN_LEN];
        token[..4].copy_from_slice(&player.0.to_le_bytes());
        token[4] = u8::from(role == Role::Observer);
        getrandom::fill(&mut token[5..HEAD_LEN]).map_err(|_| ReconnectError::Random)?;
        let mac = Self::mac(key, zone, principal, &token[..HEAD_LEN]);
        token[HEAD_LEN..].copy_from_slice(&mac);
        Ok(Some(token))
    }

    /// The player and role a token signed for `principal` in `zone` names, if its MAC checks
    /// out under any active key (compared in constant time).
    fn verify(&self, token: &Token, zone: &str, principal: &Principal) -> Option<(PlayerId, Role)> {
        use subtle::ConstantTimeEq as _;
        let (head, mac) = token.split_at(HEAD_LEN);
        let ok = self
            .keys
            .iter()
            .any(|k| bool::from(Self::mac(k, zone, principal, head).ct_eq(mac)));
        if !ok {
            return None;
        }
        let player = PlayerId(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
        let role = match head[4] {
            0 => Role::Player,
            1 => Role::Observer,
            _ => return None,
        };
        Some((player, role))
    }
}

/// Nonces of tokens redeemed on this host, bounded (the oldest is forgotten first).
#[derive(Debug, Default)]
struct Redeemed {
    order: std::collections::VecDeque<[u8; HEAD_LEN]>,
    set: std::collections::HashSet<[u8; HEAD_LEN]>,
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
    redeemed: Redeemed,
}

impl Inner {
    /// Remembers a redeemed token's head; false when it was redeemed before.
    fn spend(&mut self, token: &Token, cap: usize) -> bool {
        let mut head = [0u8; HEAD_LEN];
        head.copy_from_slice(&token[..HEAD_LEN]);
        if !self.redeemed.set.insert(head) {
            return false;
        }
        self.redeemed.order.push_back(head);
        while self.redeemed.order.len() > cap {
            if let Some(old) = self.redeemed.order.pop_front() {
                self.redeemed.set.remove(&old);
            }
        }
        true
    }
}

/// Every live reconnect token of the host.
#[derive(Debug)]
pub struct ReconnectStore {
    capacity: usize,
    inner: Mutex<Inner>,
    signer: TokenSigner,
}

impl ReconnectStore {
    /// A store holding at most `capacity` tokens.
    pub fn new(capacity: usize) -> Self {
        Self::with_signer(capacity, TokenSigner::default())
    }

    /// A store holding at most `capacity` tokens, signing them with `signer` so other hosts of
    /// the fleet accept them (see the module docs).
    pub fn with_signer(capacity: usize, signer: TokenSigner) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner::default()),
            signer,
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
        let token = match self.signer.sign(zone, principal, player, role)? {
            Some(t) => t,
            None => {
                let mut t = [0u8; TOKEN_LEN];
                getrandom::fill(&mut t).map_err(|_| ReconnectError::Random)?;
                t
            }
        };
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
        let Some(e) = g.by_token.get(&key) else {
            // Not issued here: a token of another host of the fleet, if its MAC says so.
            let (player, token_role) = self
                .signer
                .verify(&key, zone, principal)
                .ok_or(ReconnectError::Unknown)?;
            if token_role != role {
                return Err(ReconnectError::WrongRole {
                    ticket: role,
                    token: token_role,
                });
            }
            if !g.spend(&key, self.capacity) {
                return Err(ReconnectError::Unknown);
            }
            return Ok(player);
        };
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
        g.spend(&key, self.capacity);
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

    fn ring() -> crate::ticket::KeyRing {
        let key = crate::ticket::TicketKey::new("k1", vec![7u8; 32], false).unwrap();
        crate::ticket::KeyRing::new(vec![key]).unwrap()
    }

    #[test]
    fn a_token_issued_by_one_host_resumes_once_at_another_of_the_fleet() {
        let issuer = ReconnectStore::with_signer(8, TokenSigner::new(&ring()));
        let other = ReconnectStore::with_signer(8, TokenSigner::new(&ring()));
        let alice = Principal::new("alice");
        let now = Instant::now();
        let t = issuer.issue(&alice, "z", PlayerId(7), P, now).unwrap();
        // Not its principal, not its zone, or tampered: not a token of this fleet.
        assert_eq!(
            other.redeem(&t, &Principal::new("bob"), "z", P, now),
            Err(ReconnectError::Unknown)
        );
        assert_eq!(
            other.redeem(&t, &alice, "y", P, now),
            Err(ReconnectError::Unknown)
        );
        let mut bad = t;
        bad[2] ^= 1;
        assert_eq!(
            other.redeem(&bad, &alice, "z", P, now),
            Err(ReconnectError::Unknown)
        );
        assert!(matches!(
            other.redeem(&t, &alice, "z", Role::Observer, now),
            Err(ReconnectError::WrongRole { .. })
        ));
        assert_eq!(other.redeem(&t, &alice, "z", P, now), Ok(PlayerId(7)));
        assert_eq!(
            other.redeem(&t, &alice, "z", P, now),
            Err(ReconnectError::Unknown),
            "single use on every host"
        );
        // A host with other keys does not accept it.
        let stranger_ring = crate::ticket::KeyRing::new(vec![crate::ticket::TicketKey::new(
            "k2",
            vec![9u8; 32],
            false,
        )
        .unwrap()])
        .unwrap();
        let stranger = ReconnectStore::with_signer(8, TokenSigner::new(&stranger_ring));
        let t2 = issuer.issue(&alice, "z", PlayerId(7), P, now).unwrap();
        assert_eq!(
            stranger.redeem(&t2, &alice, "z", P, now),
            Err(ReconnectError::Unknown)
        );
        // The issuer itself accepts it once, and not again as a stranger's token.
        assert_eq!(issuer.redeem(&t2, &alice, "z", P, now), Ok(PlayerId(7)));
        assert_eq!(
            issuer.redeem(&t2, &alice, "z", P, now),
            Err(ReconnectError::Unknown)
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
