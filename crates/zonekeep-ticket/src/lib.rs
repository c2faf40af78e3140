//! Zonekeep tickets: compact JWS (JWT) signed with HS256, and nothing else.
//!
//! This crate owns minting and verifying tickets, their claims, the signing
//! keys and the `jti` replay cache. The host verifies with it and tools (the
//! `zonekeep ticket` command, load bots) mint with it, so neither has to link
//! the other. It depends on `zonekeep-core` only for the principal, role and
//! claim types a verified ticket hands to a zone; it does no I/O.
//!
//! A ticket admits one principal (`sub`) to one zone or a zone prefix pattern
//! (`zone`: `arena-1`, or `arena-*` for every id starting with `arena-`), with a
//! `role`, a validity window (`nbf`, `exp`, seconds since the UNIX epoch;
//! `iat` optional), a single-use id (`jti`), optional zone `kind` and create
//! `params` (used when the ticket's join creates the zone), and any other
//! claims, which are handed to the zone untouched.
//!
//! The claims the host reads (every other one goes to the zone):
//!
//! | claim | |
//! | --- | --- |
//! | `sub` | the principal, 1..=256 bytes |
//! | `zone` | the zone id, or a prefix pattern ending in `*` (`*` alone admits every zone) |
//! | `role` | `player` (the default), `observer`, or `moderator`: an observer in the zone that also moderates chat in the zones its `zone` claim admits, and in the whole fleet when `zone` is exactly `*` ([`VerifiedTicket::moderator`]) |
//! | `exp`, `nbf`, `iat` | the validity window, UNIX seconds (`nbf`, `iat` optional) |
//! | `jti` | the single-use id, 1..=128 bytes |
//! | `kind`, `params` | the zone kind and create parameters for a join that creates the zone |
//! | `xfer` | the transfer a transfer credential completes ([`VerifiedTicket::transfer`]) |
//!
//! Verification order (each step has its own refusal):
//! 1. shape: three base64url (unpadded) parts, a JSON header naming `alg`;
//! 2. `alg` must be exactly `HS256` — `none` and every other algorithm are
//!    refused before any key is looked at, so there is no algorithm confusion;
//! 3. `kid` selects the key (absent: the first active key); unknown and
//!    retired keys are refused with their own codes;
//! 4. the MAC is checked in constant time (`hmac`'s `verify_slice`);
//! 5. claims: `exp`/`nbf` with a small leeway, a maximum lifetime
//!    (`exp − now`), the zone pattern;
//! 6. the `jti` is consumed in the [`replay`] cache (a separate step so a
//!    reconnect may present the same ticket again, see the session code).
//!
//! A **transfer credential** is a ticket with an `xfer` claim: the host that
//! moves a player to another zone mints one ([`mint_transfer_credential`])
//! for the target zone and hands it to the client in a Transfer message; the
//! target reads the move it completes with [`VerifiedTicket::transfer`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod keys;
pub mod replay;
mod transfer;

use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;
use zonekeep_core::{Claims, Principal, Role};

pub use keys::{KeyError, KeyRing, TicketKey, MIN_SECRET_LEN};
use replay::{ReplayCache, ReplayError};
pub use transfer::{
    mint_transfer_credential, TransferClaim, MAX_TRANSFER_ID_LEN, TRANSFER_CREDENTIAL_TTL_SECS,
};

type HmacSha256 = Hmac<Sha256>;

/// Longest `sub` accepted.
pub const MAX_SUB_LEN: usize = 256;
/// Longest `jti` accepted (bounds the replay cache's memory per entry).
pub const MAX_JTI_LEN: usize = 128;

/// Claim names with a meaning to the host; every other claim goes to the zone.
const REGISTERED: &[&str] = &[
    "sub", "zone", "role", "exp", "nbf", "iat", "jti", "params", "kind", "xfer",
];

/// Why a ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// Not a well-formed compact JWS or its claims are missing/mistyped.
    #[error("malformed ticket: {0}")]
    Malformed(&'static str),
    /// The MAC does not match.
    #[error("ticket signature does not verify")]
    BadSignature,
    /// `alg` is not HS256.
    #[error("ticket algorithm {0:?} is not accepted (HS256 only)")]
    BadAlgorithm(String),
    /// No key with that `kid`.
    #[error("unknown ticket key id")]
    UnknownKey,
    /// The `kid` names a retired key.
    #[error("ticket key is retired")]
    RetiredKey,
    /// `exp` passed (beyond the leeway).
    #[error("ticket expired")]
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    #[error("ticket not yet valid")]
    NotYetValid,
    /// `exp` is further away than the host's maximum ticket lifetime.
    #[error("ticket lifetime exceeds the host's maximum")]
    LifetimeTooLong,
    /// The ticket does not admit this zone.
    #[error("ticket does not admit zone {0:?}")]
    WrongZone(String),
    /// The `jti` was already used.
    #[error("ticket already used")]
    Replayed,
    /// The replay cache is full of unexpired ids; new tickets are refused until some expire.
    #[error("ticket replay cache full; retry shortly")]
    ReplayCacheFull,
}

/// Time rules for verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketPolicy {
    /// Clock-skew leeway applied to `exp` and `nbf`, seconds.
    pub leeway_secs: u64,
    /// Largest accepted `exp − now`, seconds.
    pub max_lifetime_secs: u64,
}

impl Default for TicketPolicy {
    fn default() -> Self {
        Self {
            leeway_secs: 5,
            max_lifetime_secs: 600,
        }
    }
}

/// The claims of a ticket whose signature and times verified.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedTicket {
    /// The principal.
    pub sub: Principal,
    /// The zone id or prefix pattern the ticket admits.
    pub zone: String,
    /// Player or observer: a `moderator` ticket joins as an observer.
    pub role: Role,
    /// Whether the ticket's `role` is `moderator` (PROTOCOL.md §8, version 11): the session is an
    /// observer in the zone ([`Role::Observer`]) and moderates chat in the zones its `zone` claim
    /// admits ([`VerifiedTicket::moderates_zone`]), or in the whole fleet when the claim is
    /// exactly `*` ([`VerifiedTicket::moderates_fleet`]). Never true with [`Role::Player`].
    pub moderator: bool,
    /// Expiry, UNIX seconds.
    pub exp: u64,
    /// Not-before, UNIX seconds (0 when absent).
    pub nbf: u64,
    /// Issued-at, UNIX seconds, if given.
    pub iat: Option<u64>,
    /// Single-use id.
    pub jti: String,
    /// Create params for the zone, if the ticket carries them.
    pub params: Option<Value>,
    /// The zone kind to create if the zone is not running (else the host's default kind).
    pub kind: Option<String>,
    /// Every non-registered claim, for the zone.
    pub claims: Claims,
    /// The `xfer` claim of a transfer credential, checked in [`Verifier::verify`].
    transfer: Option<TransferClaim>,
}

impl VerifiedTicket {
    /// The transfer this ticket completes, when it is a transfer credential (it carries `xfer`,
    /// PROTOCOL.md §8): a host admits such a ticket only as the arrival of that transfer. A
    /// malformed `xfer` never gets this far: [`Verifier::verify`] refuses it as
    /// [`TicketError::Malformed`] (BAD_TICKET).
    pub fn transfer(&self) -> Option<&TransferClaim> {
        self.transfer.as_ref()
    }

    /// Whether this is a moderator ticket whose `zone` claim admits `zone_id`: its holder
    /// moderates chat in that zone.
    pub fn moderates_zone(&self, zone_id: &str) -> bool {
        self.moderator && zone_matches(&self.zone, zone_id)
    }

    /// Whether this is a moderator ticket whose `zone` claim is exactly `*`: its holder
    /// moderates the fleet (every zone, every group, fleet-wide sanctions).
    pub fn moderates_fleet(&self) -> bool {
        self.moderator && self.zone == "*"
    }
}

/// True when `pattern` (an exact id, or a prefix ending in `*`) admits `zone_id`.
pub fn zone_matches(pattern: &str, zone_id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => zone_id.starts_with(prefix),
        None => pattern == zone_id,
    }
}

/// Verifies tickets against a key ring and remembers consumed ids.
#[derive(Debug)]
pub struct Verifier {
    keys: KeyRing,
    policy: TicketPolicy,
    replay: Mutex<ReplayCache>,
}

impl Verifier {
    /// A verifier with a replay cache of `replay_capacity` ids.
    pub fn new(keys: KeyRing, policy: TicketPolicy, replay_capacity: usize) -> Self {
        Self {
            keys,
            policy,
            replay: Mutex::new(ReplayCache::new(replay_capacity)),
        }
    }

    /// The key ring (for minting).
    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// Verify `token` for `zone_id` at `now` (UNIX seconds) without consuming its `jti`.
    pub fn verify(
        &self,
        token: &str,
        zone_id: &str,
        now: u64,
    ) -> Result<VerifiedTicket, TicketError> {
        let mut parts = token.split('.');
        let (Some(h64), Some(c64), Some(s64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TicketError::Malformed("expected three dot-separated parts"));
        };
        let header = decode_json(h64, "header")?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .ok_or(TicketError::Malformed("header has no alg"))?;
        if alg != "HS256" {
            return Err(TicketError::BadAlgorithm(alg.chars().take(16).collect()));
        }
        if header.contains_key("crit") {
            return Err(TicketError::Malformed(
                "critical header extensions are not supported",
            ));
        }
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(TicketError::Malformed("kid is not a string")),
        };
        let key = self.keys.select(kid)?;
        let sig = URL_SAFE_NO_PAD
            .decode(s64)
            .map_err(|_| TicketError::Malformed("signature is not base64url"))?;
        let mut mac =
            HmacSha256::new_from_slice(key.secret()).map_err(|_| TicketError::BadSignature)?;
        mac.update(h64.as_bytes());
        mac.update(b".");
        mac.update(c64.as_bytes());
        // Constant-time comparison inside hmac.
        mac.verify_slice(&sig)
            .map_err(|_| TicketError::BadSignature)?;

        let claims = decode_json(c64, "claims")?;
        let t = parse_claims(claims)?;
        let leeway = self.policy.leeway_secs;
        if now > t.exp.saturating_add(leeway) {
            return Err(TicketError::Expired);
        }
        if t.nbf > now.saturating_add(leeway) {
            return Err(TicketError::NotYetValid);
        }
        if t.exp.saturating_sub(now) > self.policy.max_lifetime_secs {
            return Err(TicketError::LifetimeTooLong);
        }
        if !zone_matches(&t.zone, zone_id) {
            return Err(TicketError::WrongZone(zone_id.to_owned()));
        }
        Ok(t)
    }

    /// Consume the ticket's `jti` (single use).
    pub fn consume(&self, ticket: &VerifiedTicket, now: u64) -> Result<(), TicketError> {
        let forget_after = ticket.exp.saturating_add(self.policy.leeway_secs);
        let mut cache = self.replay.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .admit(&ticket.jti, forget_after, now)
            .map_err(|e| match e {
                ReplayError::Replayed => TicketError::Replayed,
                ReplayError::Full => TicketError::ReplayCacheFull,
            })
    }
}

fn decode_json(part: &str, what: &'static str) -> Result<Map<String, Value>, TicketError> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| {
        TicketError::Malformed(if what == "header" {
            "header is not base64url"
        } else {
            "claims are not base64url"
        })
    })?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(TicketError::Malformed(if what == "header" {
            "header is not a JSON object"
        } else {
            "claims are not a JSON object"
        })),
    }
}

fn parse_claims(mut m: Map<String, Value>) -> Result<VerifiedTicket, TicketError> {
    let sub = match m.get("sub") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_SUB_LEN => s.clone(),
        _ => {
            return Err(TicketError::Malformed(
                "sub must be a string of 1..=256 bytes",
            ))
        }
    };
    let zone = match m.get("zone") {
        Some(Value::String(s)) if !s.is_empty() && !s.trim_end_matches('*').contains('*') => {
            s.clone()
        }
        _ => {
            return Err(TicketError::Malformed(
                "zone must be an id or a prefix ending in '*'",
            ))
        }
    };
    // A moderator is an observer in the zone, and a moderator for chat.
    let (role, moderator) = match m.get("role") {
        None => (Role::Player, false),
        Some(Value::String(s)) if s == ROLE_PLAYER => (Role::Player, false),
        Some(Value::String(s)) if s == ROLE_OBSERVER => (Role::Observer, false),
        Some(Value::String(s)) if s == ROLE_MODERATOR => (Role::Observer, true),
        Some(_) => {
            return Err(TicketError::Malformed(
                "role must be \"player\", \"observer\" or \"moderator\"",
            ))
        }
    };
    let exp = m
        .get("exp")
        .and_then(Value::as_u64)
        .ok_or(TicketError::Malformed("exp must be an integer"))?;
    let nbf = match m.get("nbf") {
        None => 0,
        Some(v) => v
            .as_u64()
            .ok_or(TicketError::Malformed("nbf must be an integer"))?,
    };
    let iat = match m.get("iat") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or(TicketError::Malformed("iat must be an integer"))?,
        ),
    };
    let jti = match m.get("jti") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_JTI_LEN => s.clone(),
        _ => {
            return Err(TicketError::Malformed(
                "jti must be a string of 1..=128 bytes",
            ))
        }
    };
    let params = m.remove("params");
    let kind = match m.get("kind") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => Some(s.clone()),
        Some(_) => {
            return Err(TicketError::Malformed(
                "kind must be a string of 1..=64 bytes",
            ))
        }
    };
    let transfer = match m.get("xfer") {
        None => None,
        Some(v) => Some(TransferClaim::from_json(v)?),
    };
    if transfer.is_some() {
        // A transfer credential admits exactly the zone the player was moved to, as a player.
        if zone.ends_with('*') {
            return Err(TicketError::Malformed(
                "a transfer credential names its zone exactly",
            ));
        }
        if role != Role::Player {
            return Err(TicketError::Malformed(
                "a transfer credential admits a player",
            ));
        }
    }
    for k in REGISTERED {
        m.remove(*k);
    }
    Ok(VerifiedTicket {
        sub: Principal::new(sub),
        zone,
        role,
        moderator,
        exp,
        nbf,
        iat,
        jti,
        params,
        kind,
        claims: m,
        transfer,
    })
}

/// What to put in a new ticket.
#[derive(Debug, Clone, PartialEq)]
pub struct MintRequest {
    /// The principal.
    pub sub: String,
    /// Zone id or prefix pattern.
    pub zone: String,
    /// Player or observer ([`mint_moderator`] mints a moderator, an observer, whatever this says).
    pub role: Role,
    /// Lifetime from `now`, seconds.
    pub ttl_secs: u64,
    /// Zone create params.
    pub params: Option<Value>,
    /// Extra free-form claims for the zone.
    pub claims: Claims,
}

/// The `role` claim of a player ticket.
const ROLE_PLAYER: &str = "player";
/// The `role` claim of an observer ticket.
const ROLE_OBSERVER: &str = "observer";
/// The `role` claim of a moderator ticket (an observer that moderates chat).
const ROLE_MODERATOR: &str = "moderator";

/// Sign a ticket with `key` at `now` (UNIX seconds); `jti` is 16 random bytes. The `role` claim
/// is `req.role`'s (`player` or `observer`); [`mint_moderator`] mints a `moderator` one.
pub fn mint(key: &TicketKey, req: &MintRequest, now: u64) -> Result<String, MintError> {
    let role = match req.role {
        Role::Player => ROLE_PLAYER,
        Role::Observer => ROLE_OBSERVER,
    };
    mint_with_role(key, req, role, now)
}

/// Sign a moderator ticket with `key` at `now` (UNIX seconds): `role` is `moderator` whatever
/// `req.role` says, so it verifies as an observer with [`VerifiedTicket::moderator`] set. Its
/// `zone` claim (`req.zone`) is the moderation scope: the zones it admits, or the whole fleet
/// when it is exactly `*`.
pub fn mint_moderator(key: &TicketKey, req: &MintRequest, now: u64) -> Result<String, MintError> {
    mint_with_role(key, req, ROLE_MODERATOR, now)
}

fn mint_with_role(
    key: &TicketKey,
    req: &MintRequest,
    role: &str,
    now: u64,
) -> Result<String, MintError> {
    let mut jti = [0u8; 16];
    getrandom::fill(&mut jti).map_err(|_| MintError::Random)?;
    let mut claims = req.claims.clone();
    claims.insert("sub".into(), Value::from(req.sub.clone()));
    claims.insert("zone".into(), Value::from(req.zone.clone()));
    claims.insert("role".into(), Value::from(role));
    claims.insert("iat".into(), Value::from(now));
    claims.insert("nbf".into(), Value::from(now));
    claims.insert("exp".into(), Value::from(now.saturating_add(req.ttl_secs)));
    claims.insert("jti".into(), Value::from(URL_SAFE_NO_PAD.encode(jti)));
    if let Some(p) = &req.params {
        claims.insert("params".into(), p.clone());
    }
    let header = serde_json::json!({"alg": "HS256", "typ": "JWT", "kid": key.kid});
    Ok(sign_parts(key.secret(), &header, &Value::Object(claims)))
}

/// Sign arbitrary header and claims JSON with `secret` (HS256). Exposed for
/// tools and tests that need unusual tickets; [`mint`] is the normal path.
pub fn sign_parts(secret: &[u8], header: &Value, claims: &Value) -> String {
    let h64 = URL_SAFE_NO_PAD.encode(header.to_string());
    let c64 = URL_SAFE_NO_PAD.encode(claims.to_string());
    let mut out = format!("{h64}.{c64}");
    // Any key length is valid for HMAC, so this cannot fail; fall back to an
    // unsigned-looking token that no verifier accepts if it ever did.
    if let Ok(mut mac) = HmacSha256::new_from_slice(secret) {
        mac.update(out.as_bytes());
        let sig = mac.finalize().into_bytes();
        out.push('.');
        out.push_str(&URL_SAFE_NO_PAD.encode(sig));
    } else {
        out.push('.');
    }
    out
}

/// Why minting failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MintError {
    /// The OS random source failed.
    #[error("random source unavailable")]
    Random,
    /// The credential would be refused by every verifier (an empty or patterned zone, a transfer
    /// id or source zone out of bounds, an empty principal): never minted.
    #[error("cannot mint a transfer credential: {0}")]
    Invalid(&'static str),
}

/// Seconds since the UNIX epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
