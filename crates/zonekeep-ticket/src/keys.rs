//! Ticket signing keys and their rotation state.
//!
//! Several keys can be active at once (selected by the ticket header's `kid`)
//! so a new key can be rolled out before the old one stops being accepted.
//! A retired key is kept only so its tickets are refused with their own code
//! (`TICKET_RETIRED_KEY`) rather than looking like an unknown key.

use std::fmt;

use super::TicketError;

/// Shortest secret accepted: HS256 keys shorter than the hash output weaken the MAC.
pub const MIN_SECRET_LEN: usize = 32;

/// One HS256 key.
#[derive(Clone)]
pub struct TicketKey {
    /// The key id carried in ticket headers.
    pub kid: String,
    secret: Vec<u8>,
    /// Retired keys verify nothing: their tickets are refused with `TICKET_RETIRED_KEY`.
    pub retired: bool,
}

impl TicketKey {
    /// A key; the secret must be at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(
        kid: impl Into<String>,
        secret: impl Into<Vec<u8>>,
        retired: bool,
    ) -> Result<Self, KeyError> {
        let kid = kid.into();
        let secret = secret.into();
        if kid.is_empty() || kid.len() > 64 {
            return Err(KeyError::BadKid(kid));
        }
        if secret.len() < MIN_SECRET_LEN {
            return Err(KeyError::ShortSecret {
                kid,
                len: secret.len(),
            });
        }
        Ok(Self {
            kid,
            secret,
            retired,
        })
    }

    /// The raw secret (used only to compute MACs).
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// An HMAC-SHA256 of `data` under this key, for another `purpose` than tickets (e.g.
    /// reconnect tokens every host of a fleet can check). The purpose is MACed first, followed by
    /// a zero byte, so no MAC for one purpose — nor a ticket signature, whose input is base64url
    /// text without zero bytes — is ever valid for another.
    pub fn purpose_mac(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        use hmac::Mac as _;
        let mut out = [0u8; 32];
        if let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.secret) {
            mac.update(purpose.as_bytes());
            mac.update(&[0]);
            mac.update(data);
            out.copy_from_slice(&mac.finalize().into_bytes());
        }
        out
    }
}

// Secrets never reach logs: Debug shows only the kid and state.
impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketKey")
            .field("kid", &self.kid)
            .field("secret", &"<redacted>")
            .field("retired", &self.retired)
            .finish()
    }
}

/// A key configuration error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The secret is too short.
    #[error("ticket key {kid:?}: secret is {len} bytes, at least {MIN_SECRET_LEN} required")]
    ShortSecret {
        /// The key id.
        kid: String,
        /// Its length.
        len: usize,
    },
    /// The key id is empty or longer than 64 bytes.
    #[error("ticket key id {0:?} must be 1..=64 bytes")]
    BadKid(String),
    /// Two keys share an id.
    #[error("ticket key id {0:?} appears twice")]
    DuplicateKid(String),
    /// No key is active, so nothing could be verified or minted.
    #[error("no active ticket key configured")]
    NoActiveKey,
}

/// The set of keys a host knows. The first active key is the default for
/// minting and for tickets whose header has no `kid`.
#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    keys: Vec<TicketKey>,
}

impl KeyRing {
    /// A ring from `keys`; ids must be distinct and at least one key active.
    pub fn new(keys: Vec<TicketKey>) -> Result<Self, KeyError> {
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|o| o.kid == k.kid) {
                return Err(KeyError::DuplicateKid(k.kid.clone()));
            }
        }
        if !keys.iter().any(|k| !k.retired) {
            return Err(KeyError::NoActiveKey);
        }
        Ok(Self { keys })
    }

    /// The key for a header `kid` (or the default key when absent).
    pub(crate) fn select(&self, kid: Option<&str>) -> Result<&TicketKey, TicketError> {
        match kid {
            None => self.primary().ok_or(TicketError::UnknownKey),
            Some(kid) => match self.keys.iter().find(|k| k.kid == kid) {
                None => Err(TicketError::UnknownKey),
                Some(k) if k.retired => Err(TicketError::RetiredKey),
                Some(k) => Ok(k),
            },
        }
    }

    /// The first active key.
    pub fn primary(&self) -> Option<&TicketKey> {
        self.keys.iter().find(|k| !k.retired)
    }

    /// An active key by id.
    pub fn active(&self, kid: &str) -> Option<&TicketKey> {
        self.keys.iter().find(|k| k.kid == kid && !k.retired)
    }

    /// Every key (active and retired).
    pub fn keys(&self) -> &[TicketKey] {
        &self.keys
    }
}
