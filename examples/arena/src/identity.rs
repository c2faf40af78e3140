//! A player's display name and colour.
//!
//! The name comes from the ticket claim `name` (the only identity input besides the principal,
//! and still untrusted text): it is cut to a short, printable form. The colour is a hue derived
//! from the principal, so the same player keeps its colour everywhere.

use zonekeep_core::StateHasher;

use std::hash::Hasher;

/// Longest display name, in bytes (and the `name` field's wire limit).
pub const MAX_NAME: usize = 16;

/// The principal's stable hash (FNV-1a 64).
fn principal_hash(principal: &str) -> u64 {
    let mut h = StateHasher::new();
    h.write(principal.as_bytes());
    h.finish()
}

/// The player's hue in degrees (`0..360`), from the principal.
pub fn hue(principal: &str) -> u32 {
    (principal_hash(principal) % 360) as u32
}

/// A display name from the `name` claim: letters, digits, space, `-`, `_` and `.` only (other
/// characters dropped), runs of spaces collapsed, trimmed, at most [`MAX_NAME`] bytes. An empty
/// or missing claim gives `guest-XXXX` from the principal's hash.
pub fn display_name(claim: Option<&str>, principal: &str) -> String {
    let mut out = String::new();
    if let Some(raw) = claim {
        for c in raw.chars() {
            let keep = c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.');
            if !keep || c.is_control() {
                continue;
            }
            if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
                continue;
            }
            if out.len() + c.len_utf8() > MAX_NAME {
                break;
            }
            out.push(c);
        }
    }
    let trimmed = out.trim_end().to_owned();
    if trimmed.is_empty() {
        format!("guest-{:04x}", principal_hash(principal) & 0xffff)
    } else {
        trimmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_bounded() {
        assert_eq!(display_name(Some("  Ada   Lovelace "), "p"), "Ada Lovelace");
        assert_eq!(
            display_name(Some("<script>x</script>"), "p"),
            "scriptxscript"
        );
        assert_eq!(display_name(Some("a\u{0}b\nc\u{202e}d"), "p"), "abcd");
        assert_eq!(
            display_name(Some("0123456789abcdefXYZ"), "p"),
            "0123456789abcdef"
        );
        // Multi-byte characters are never split.
        let long = display_name(Some("ééééééééééé"), "p");
        assert!(long.len() <= MAX_NAME && long.chars().all(|c| c == 'é'));
        let guest = display_name(Some("!!!"), "alice");
        assert!(guest.starts_with("guest-") && guest.len() == 10);
        assert_eq!(display_name(None, "alice"), guest);
        assert_ne!(display_name(None, "bob"), guest);
    }

    #[test]
    fn hue_is_stable_per_principal() {
        assert_eq!(hue("alice"), hue("alice"));
        assert!(hue("alice") < 360 && hue("bob") < 360);
        let distinct: std::collections::BTreeSet<u32> =
            (0..50).map(|i| hue(&format!("p{i}"))).collect();
        assert!(distinct.len() > 30);
    }
}
