//! Channel names: what a session names on the wire, the key the store keeps a channel under, and
//! who may read or speak in one.
//!
//! - `zone:<id>`: everyone attached to that zone.
//! - `group:<name>`: everyone attached to a zone of that group (a world is a zone group).
//! - `dm:<principal>`: a direct message, named by the *other* principal. The store keeps both
//!   directions of a pair under one key, `dm:` and the two principals sorted, joined by 0x1F.

use std::fmt;

use zonekeep_store::DM_SEPARATOR;

/// Longest channel name on the wire or over HTTP, in bytes.
pub(crate) const MAX_CHANNEL: usize = 300;
/// Longest zone id or group name a channel names, in bytes.
const MAX_NAME: usize = 128;
/// Longest principal, in bytes (as a ticket's `sub`).
const MAX_PRINCIPAL: usize = 256;

/// A channel as the host understands it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Channel {
    /// A zone's channel.
    Zone(String),
    /// A zone group's channel.
    Group(String),
    /// The direct channel of two principals, sorted (`a < b`).
    Direct { a: String, b: String },
}

/// Why a channel name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ChannelError {
    /// Not of the forms above, or a part is empty or too long.
    #[error("{0}")]
    Malformed(String),
}

impl Channel {
    /// The channel a session of `me` names `name` on the wire (`dm:` names the other principal).
    pub fn from_wire(name: &str, me: &str) -> Result<Channel, ChannelError> {
        if name.len() > MAX_CHANNEL {
            return Err(ChannelError::Malformed(format!(
                "a channel name is at most {MAX_CHANNEL} bytes"
            )));
        }
        if let Some(other) = name.strip_prefix("dm:") {
            return Channel::direct(me, other);
        }
        Channel::shared(name)
    }

    /// A zone or group channel by its name (`zone:<id>`, `group:<name>`).
    pub fn shared(name: &str) -> Result<Channel, ChannelError> {
        let (kind, rest) = name.split_once(':').ok_or_else(|| malformed(name))?;
        if rest.is_empty() || rest.len() > MAX_NAME || rest.chars().any(char::is_control) {
            return Err(malformed(name));
        }
        match kind {
            "zone" => Ok(Channel::Zone(rest.to_owned())),
            "group" => Ok(Channel::Group(rest.to_owned())),
            _ => Err(malformed(name)),
        }
    }

    /// The direct channel of `from` and `to`.
    pub fn direct(from: &str, to: &str) -> Result<Channel, ChannelError> {
        for p in [from, to] {
            if p.is_empty() || p.len() > MAX_PRINCIPAL || p.contains(DM_SEPARATOR) {
                return Err(ChannelError::Malformed(
                    "a direct message names a principal of 1 to 256 bytes".into(),
                ));
            }
        }
        if from == to {
            return Err(ChannelError::Malformed(
                "a direct message goes to another principal".into(),
            ));
        }
        let (a, b) = if from < to { (from, to) } else { (to, from) };
        Ok(Channel::Direct {
            a: a.to_owned(),
            b: b.to_owned(),
        })
    }

    /// The channel the store keeps under `key` (see [`Channel::key`]).
    pub fn from_key(key: &str) -> Option<Channel> {
        if let Some((a, b)) = zonekeep_store::dm_parties(key) {
            return Some(Channel::Direct {
                a: a.to_owned(),
                b: b.to_owned(),
            });
        }
        Channel::shared(key).ok()
    }

    /// The key the store keeps the channel's lines under (a direct channel's is the store's
    /// [`zonekeep_store::dm_channel`]).
    pub fn key(&self) -> String {
        match self {
            Channel::Zone(z) => format!("zone:{z}"),
            Channel::Group(g) => format!("group:{g}"),
            Channel::Direct { a, b } => format!("dm:{a}{DM_SEPARATOR}{b}"),
        }
    }

    /// The name `viewer` knows the channel by: a direct channel is named by the other principal.
    pub fn wire_name(&self, viewer: &str) -> String {
        match self {
            Channel::Direct { a, b } => {
                let other = if viewer == a { b } else { a };
                format!("dm:{other}")
            }
            _ => self.key(),
        }
    }

    /// Whether `principal` is one of a direct channel's two.
    pub fn is_party(&self, principal: &str) -> bool {
        matches!(self, Channel::Direct { a, b } if a == principal || b == principal)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Channel::Direct { a, b } => write!(f, "dm:{a},{b}"),
            other => f.write_str(&other.key()),
        }
    }
}

fn malformed(name: &str) -> ChannelError {
    let shown: String = name.chars().take(64).collect();
    ChannelError::Malformed(format!(
        "{shown:?} is not a channel: name `zone:<id>`, `group:<name>` or `dm:<principal>`"
    ))
}

/// Where a session stands: its principal, its zone and that zone's groups.
pub(crate) struct Seat<'a> {
    pub principal: &'a str,
    pub zone: &'a str,
    pub groups: &'a [String],
}

impl Seat<'_> {
    /// Whether the session hears (and may speak in, and read the history of) `channel`.
    pub fn hears(&self, channel: &Channel) -> bool {
        match channel {
            Channel::Zone(z) => z == self.zone,
            Channel::Group(g) => self.groups.iter().any(|x| x == g),
            Channel::Direct { .. } => channel.is_party(self.principal),
        }
    }
}

/// Checks a line's body against the host's `max` bytes: not blank, no control characters.
pub(crate) fn check_body(body: &str, max: usize) -> Result<(), String> {
    if body.trim().is_empty() {
        return Err("a line says something: it is empty".into());
    }
    if body.len() > max {
        return Err(format!(
            "a line is at most {max} bytes here; this one is {}",
            body.len()
        ));
    }
    if body.chars().any(char::is_control) {
        return Err("a line holds no control characters (newlines, escapes)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_direct_channel_is_one_key_for_both_and_named_by_the_other() {
        let from_ann = Channel::from_wire("dm:bob", "ann").unwrap();
        let from_bob = Channel::from_wire("dm:ann", "bob").unwrap();
        assert_eq!(from_ann, from_bob);
        assert_eq!(from_ann.key(), "dm:ann\u{1f}bob");
        assert_eq!(Channel::from_key(&from_ann.key()), Some(from_ann.clone()));
        assert_eq!(from_ann.wire_name("ann"), "dm:bob");
        assert_eq!(from_ann.wire_name("bob"), "dm:ann");
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in [
            "", "zone:", "zone", "team:x", "dm:", "dm:ann", "group:\n", ":x",
        ] {
            assert!(Channel::from_wire(bad, "ann").is_err(), "{bad:?}");
        }
        assert!(Channel::from_wire(&format!("zone:{}", "z".repeat(129)), "a").is_err());
        assert!(Channel::from_wire(&"z".repeat(301), "a").is_err());
        assert!(Channel::from_wire("dm:b\u{1f}c", "a").is_err());
        assert_eq!(
            Channel::from_wire("zone:arena-1", "a").unwrap(),
            Channel::Zone("arena-1".into())
        );
    }

    #[test]
    fn a_seat_hears_its_zone_its_groups_and_its_own_direct_channels() {
        let groups = vec!["world-1".to_owned()];
        let seat = Seat {
            principal: "ann",
            zone: "z1",
            groups: &groups,
        };
        assert!(seat.hears(&Channel::Zone("z1".into())));
        assert!(!seat.hears(&Channel::Zone("z2".into())));
        assert!(seat.hears(&Channel::Group("world-1".into())));
        assert!(!seat.hears(&Channel::Group("world-2".into())));
        assert!(seat.hears(&Channel::direct("ann", "bob").unwrap()));
        assert!(!seat.hears(&Channel::direct("cat", "bob").unwrap()));
    }

    #[test]
    fn bodies_are_checked() {
        assert!(check_body("hello", 10).is_ok());
        assert!(check_body("   ", 10).is_err());
        assert!(check_body("12345678901", 10).is_err());
        assert!(check_body("a\nb", 10).is_err());
        assert!(check_body("a\u{1b}[31m", 10).is_err());
    }
}
