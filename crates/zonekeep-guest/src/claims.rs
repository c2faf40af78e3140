//! A joining player's ticket claims, read as typed values: the claims arrive as JSON object text
//! ([`Player::claims`]), and a zone wants `name` as a string or `team` as a number.

use std::fmt;

use serde_json::{Map, Value};

use crate::zone::Player;

/// Why a player's claims could not be read: the text is not a JSON object. The host only admits
/// claims its ticket check verified, so this means a hand-written test input or a host bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimsError(String);

impl fmt::Display for ClaimsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the ticket claims are not a JSON object: {}", self.0)
    }
}

impl std::error::Error for ClaimsError {}

/// The ticket claims of a player, by name. Each typed getter answers `None` when the claim is
/// missing or of another JSON type (a `"7"` is a string, not a number).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claims(Map<String, Value>);

impl Claims {
    /// Parses claims text (`{}` or empty text: no claims).
    pub fn parse(text: &str) -> Result<Claims, ClaimsError> {
        if text.trim().is_empty() {
            return Ok(Claims::default());
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(Claims(map)),
            Ok(other) => Err(ClaimsError(format!("a JSON {}", json_type(&other)))),
            Err(e) => Err(ClaimsError(e.to_string())),
        }
    }

    /// The claim `key` as a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.as_str()
    }

    /// The claim `key` as a signed integer (a JSON number without a fraction, in `i64`).
    pub fn i64(&self, key: &str) -> Option<i64> {
        self.0.get(key)?.as_i64()
    }

    /// The claim `key` as an unsigned integer (a JSON number without a fraction, in `u64`).
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.0.get(key)?.as_u64()
    }

    /// The claim `key` as a float (any JSON number).
    pub fn f64(&self, key: &str) -> Option<f64> {
        self.0.get(key)?.as_f64()
    }

    /// The claim `key` as a boolean.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.0.get(key)?.as_bool()
    }

    /// The claim `key` as JSON, whatever its type (arrays, objects).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Whether there is a claim `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// The claim names, in sorted order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Player {
    /// The player's ticket claims ([`Player::claims`]) read as typed values:
    /// `player.read_claims()?.str("name")`.
    pub fn read_claims(&self) -> Result<Claims, ClaimsError> {
        Claims::parse(&self.claims)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn typed_claims_are_read_by_name() {
        let c = Claims::parse(
            r#"{"name":"Ada","team":2,"handicap":-3,"speed":1.5,"vip":true,"tags":["a"]}"#,
        )
        .unwrap();
        assert_eq!(c.str("name"), Some("Ada"));
        assert_eq!(c.u64("team"), Some(2));
        assert_eq!(c.i64("handicap"), Some(-3));
        assert_eq!(c.u64("handicap"), None, "negative: not a u64");
        assert_eq!(c.f64("speed"), Some(1.5));
        assert_eq!(c.i64("speed"), None, "a fraction is not an integer");
        assert_eq!(c.bool("vip"), Some(true));
        assert_eq!(c.str("team"), None, "a number is not a string");
        assert!(c.get("tags").unwrap().is_array());
        assert_eq!(c.str("missing"), None);
        assert!(c.contains("vip") && !c.contains("missing"));
        assert_eq!(
            c.keys().collect::<Vec<_>>(),
            ["handicap", "name", "speed", "tags", "team", "vip"]
        );
    }

    #[test]
    fn no_claims_and_bad_text() {
        assert_eq!(Claims::parse("{}").unwrap(), Claims::default());
        assert_eq!(Claims::parse("").unwrap(), Claims::default());
        let e = Claims::parse("[1]").unwrap_err();
        assert!(e.to_string().contains("a JSON array"), "{e}");
        assert!(Claims::parse("{\"name\":").is_err());
    }
}
