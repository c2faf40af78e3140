//! Argument checks and number conversions shared by the backends.
//!
//! Both SQLite and PostgreSQL store integers as signed 64-bit; the API speaks `u64`. Converting in
//! one place means a value that does not fit is refused as an argument on the way in and reported
//! as corruption on the way out, never silently wrapped.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Result, StoreError};

/// Longest zone id, fact key, kind or principal accepted, in bytes.
pub(crate) const MAX_ID_LEN: usize = 512;

/// Refuses empty or over-long identifiers.
pub(crate) fn check_id(what: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.len() > MAX_ID_LEN {
        return Err(StoreError::InvalidArgument(format!(
            "{what} must be 1..={MAX_ID_LEN} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

/// Refuses a URL that is empty, longer than `max` bytes, or not plain text (control characters or
/// whitespace): URLs are handed to clients verbatim, so they must be one printable token.
pub(crate) fn check_url(what: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() || value.len() > max {
        return Err(StoreError::InvalidArgument(format!(
            "{what} must be 1..={max} bytes, got {}",
            value.len()
        )));
    }
    if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(StoreError::InvalidArgument(format!(
            "{what} must not contain whitespace or control characters"
        )));
    }
    Ok(())
}

/// Converts an API number to the backends' integer type.
pub(crate) fn to_db(what: &str, value: u64) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| StoreError::InvalidArgument(format!("{what} {value} exceeds i64::MAX")))
}

/// Converts a stored integer back, refusing negatives as corruption.
pub(crate) fn from_db(what: &str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

/// Milliseconds since the Unix epoch by this host's clock (0 if the clock is before 1970).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bounded() {
        assert!(check_id("zone id", "").is_err());
        assert!(check_id("zone id", &"x".repeat(MAX_ID_LEN + 1)).is_err());
        assert!(check_id("zone id", "arena-1").is_ok());
    }

    #[test]
    fn urls_are_bounded_printable_text() {
        assert!(check_url("url", "ws://10.0.0.7:7400/ws", 512).is_ok());
        assert!(check_url("url", "", 512).is_err());
        assert!(check_url("url", &"u".repeat(513), 512).is_err());
        assert!(check_url("url", "ws://a b", 512).is_err());
        assert!(check_url("url", "ws://a\nb", 512).is_err());
    }

    #[test]
    fn numbers_round_trip_or_refuse() {
        assert_eq!(to_db("epoch", 7), Ok(7));
        assert!(matches!(
            to_db("epoch", u64::MAX),
            Err(StoreError::InvalidArgument(_))
        ));
        assert_eq!(from_db("epoch", 7), Ok(7));
        assert!(matches!(from_db("epoch", -1), Err(StoreError::Corrupt(_))));
    }
}
