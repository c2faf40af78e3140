//! The transfer credential (PROTOCOL.md §5.3.2, §8): an ordinary ticket for the target zone
//! whose `xfer` claim names the transfer it completes, so the target admits it only as that
//! player's arrival.

use serde_json::{Map, Value};
use zonekeep_core::{Claims, Principal, Role};

use crate::{mint, MintError, MintRequest, TicketError, TicketKey, MAX_SUB_LEN};

/// How long a transfer credential is valid, seconds: the client retries its move with it for
/// this long, and a host re-sends the Transfer to a connection that comes back within it.
pub const TRANSFER_CREDENTIAL_TTL_SECS: u64 = 600;

/// Longest transfer id (and source zone id), bytes.
pub const MAX_TRANSFER_ID_LEN: usize = 128;

/// The `xfer` claim: which move a transfer credential completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferClaim {
    /// The transfer's id (1..=128 bytes), as the durable transfer record names it.
    pub id: String,
    /// The zone the player leaves (1..=128 bytes).
    pub from: String,
    /// The player's id in that zone.
    pub player: u32,
}

impl TransferClaim {
    /// Reads `xfer` from a ticket's claims; a missing or mistyped member is
    /// [`TicketError::Malformed`] (BAD_TICKET). Members it does not know are ignored, so a newer
    /// host may add some.
    pub(crate) fn from_json(v: &Value) -> Result<Self, TicketError> {
        let Value::Object(m) = v else {
            return Err(TicketError::Malformed("xfer must be an object"));
        };
        let bounded = |name: &str, what: &'static str| match m.get(name) {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_TRANSFER_ID_LEN => {
                Ok(s.clone())
            }
            _ => Err(TicketError::Malformed(what)),
        };
        let id = bounded("id", "xfer.id must be a string of 1..=128 bytes")?;
        let from = bounded("from", "xfer.from must be a zone id of 1..=128 bytes")?;
        let player = m
            .get("player")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .ok_or(TicketError::Malformed("xfer.player must be a u32"))?;
        Ok(Self { id, from, player })
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), Value::from(self.id.clone()));
        m.insert("from".into(), Value::from(self.from.clone()));
        m.insert("player".into(), Value::from(self.player));
        Value::Object(m)
    }
}

/// Mints the credential a Transfer carries (PROTOCOL.md §8): a ticket signed with `key` at `now`
/// for `principal` to join `target_zone` (exactly, no pattern) as a player, valid for
/// [`TRANSFER_CREDENTIAL_TTL_SECS`], with a fresh single-use `jti` and `xfer` = `transfer`.
/// Refuses ([`MintError::Invalid`]) a credential no verifier would accept.
pub fn mint_transfer_credential(
    key: &TicketKey,
    principal: &Principal,
    target_zone: &str,
    transfer: TransferClaim,
    now: u64,
) -> Result<String, MintError> {
    let sub = principal.as_str();
    if sub.is_empty() || sub.len() > MAX_SUB_LEN {
        return Err(MintError::Invalid("the principal must be 1..=256 bytes"));
    }
    if target_zone.is_empty() || target_zone.contains('*') {
        return Err(MintError::Invalid(
            "the target zone must be an exact zone id",
        ));
    }
    let bounded = |s: &str| !s.is_empty() && s.len() <= MAX_TRANSFER_ID_LEN;
    if !bounded(&transfer.id) || !bounded(&transfer.from) {
        return Err(MintError::Invalid(
            "the transfer id and source zone must be 1..=128 bytes",
        ));
    }
    let mut claims = Claims::new();
    claims.insert("xfer".into(), transfer.to_json());
    let req = MintRequest {
        sub: sub.to_owned(),
        zone: target_zone.to_owned(),
        role: Role::Player,
        ttl_secs: TRANSFER_CREDENTIAL_TTL_SECS,
        params: None,
        claims,
    };
    mint(key, &req, now)
}
