//! Channel keys: the three forms a channel takes (a zone, a zone group, a DM), and the one key
//! a DM is kept under whichever side speaks, so both sides read one conversation.

use super::checks::{check_len, invalid};
use super::{DM_SEPARATOR, MAX_CHAT_CHANNEL, MAX_CHAT_NAME, MAX_CHAT_PRINCIPAL};
use crate::error::Result;

/// A channel key, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Channel<'a> {
    Zone(&'a str),
    Group(&'a str),
    Dm(&'a str, &'a str),
}

pub(super) fn parse_channel(channel: &str) -> Result<Channel<'_>> {
    check_len("a chat channel", channel, MAX_CHAT_CHANNEL)?;
    if let Some(zone) = channel.strip_prefix("zone:") {
        check_len("a channel's zone id", zone, MAX_CHAT_NAME)?;
        return Ok(Channel::Zone(zone));
    }
    if let Some(group) = channel.strip_prefix("group:") {
        check_len("a channel's group name", group, MAX_CHAT_NAME)?;
        return Ok(Channel::Group(group));
    }
    let Some((a, b)) = channel
        .strip_prefix("dm:")
        .and_then(|pair| pair.split_once(DM_SEPARATOR))
    else {
        return Err(invalid(
            "a chat channel is \"zone:<id>\", \"group:<name>\" or a DM key",
        ));
    };
    check_dm_party(a)?;
    check_dm_party(b)?;
    // One key per conversation: the other order would be a second channel for the same two.
    if a > b {
        return Err(invalid("a DM key names its two principals in byte order"));
    }
    Ok(Channel::Dm(a, b))
}

fn check_dm_party(principal: &str) -> Result<()> {
    check_len("a principal", principal, MAX_CHAT_PRINCIPAL)?;
    if principal.contains(DM_SEPARATOR) {
        return Err(invalid("a principal holding U+001F has no DM channel"));
    }
    Ok(())
}

/// Refuses a malformed channel key: `zone:<id>` or `group:<name>` (1..=[`MAX_CHAT_NAME`]
/// bytes), or a DM key as [`dm_channel`] makes it.
pub fn check_channel(channel: &str) -> Result<()> {
    parse_channel(channel).map(|_| ())
}

/// The DM channel key of the conversation between `a` and `b` (either order):
/// `dm:` + the smaller + U+001F + the larger. Refuses a principal that is empty, too long or
/// holds U+001F.
pub fn dm_channel(a: &str, b: &str) -> Result<String> {
    check_dm_party(a)?;
    check_dm_party(b)?;
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    Ok(format!("dm:{lo}{DM_SEPARATOR}{hi}"))
}

/// The two principals of a DM channel key, in byte order (`None` for any other channel).
pub fn dm_parties(channel: &str) -> Option<(&str, &str)> {
    match parse_channel(channel) {
        Ok(Channel::Dm(a, b)) => Some((a, b)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn channels_have_three_forms_and_one_dm_key_per_pair() {
        assert!(check_channel("zone:arena-1").is_ok());
        assert!(check_channel("group:world-1").is_ok());
        for bad in [
            "",
            "zone:",
            "group:",
            "arena-1",
            "dm:bob",
            "Zone:x",
            "dm:\u{1f}bob",
        ] {
            assert!(check_channel(bad).is_err(), "{bad:?}");
        }
        assert!(check_channel(&format!("zone:{}", "z".repeat(MAX_CHAT_NAME + 1))).is_err());
        let key = dm_channel("bob", "ann").unwrap();
        assert_eq!(key, "dm:ann\u{1f}bob");
        assert_eq!(dm_channel("ann", "bob").unwrap(), key);
        assert!(check_channel(&key).is_ok());
        assert!(check_channel("dm:bob\u{1f}ann").is_err(), "not canonical");
        assert_eq!(dm_parties(&key), Some(("ann", "bob")));
        assert_eq!(dm_parties("zone:a"), None);
        assert!(dm_channel("a\u{1f}b", "c").is_err());
        assert!(dm_channel("", "c").is_err());
        let longest = "p".repeat(MAX_CHAT_PRINCIPAL);
        let key = dm_channel(&longest, &longest).unwrap();
        assert_eq!(key.len(), MAX_CHAT_CHANNEL);
        assert!(check_channel(&key).is_ok());
        assert!(dm_channel(&format!("{longest}p"), "a").is_err());
    }
}
