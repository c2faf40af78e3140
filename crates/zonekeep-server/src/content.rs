//! Content versions (PROTOCOL.md §4.1.2): which game content a client was built for and which a
//! host runs.
//!
//! A content version is a dotted number (`1`, `1.4`, `1.4.0`): components of ASCII digits
//! separated by `.`, at most 64 bytes, compared numerically component by component with missing
//! components counting as 0 (`1.4` = `1.4.0` < `1.10` < `2`). A host may require a minimum
//! ([`ServerConfig::min_content_version`](crate::ServerConfig::min_content_version)): it then
//! answers a Hello from older content with `Kick(CONTENT_OUTDATED)`, and one below protocol
//! version 5 (which could not read that code) with `Kick(VERSION_MISMATCH)`, right after
//! negotiating the protocol version and before the ticket is verified or spent. Welcome (version 5)
//! tells every client the content the host runs
//! ([`ServerConfig::content_version`](crate::ServerConfig::content_version)).

use std::cmp::Ordering;
use std::fmt;

use zonekeep_protocol::limits::MAX_CONTENT_VERSION;
use zonekeep_protocol::messages::{KickCode, CONTENT_VERSION_PROTOCOL};

/// A valid content version: a dotted number.
///
/// Equality and order are numeric (`1.4` == `1.4.0`, `1.9` < `1.10`, `01` == `1`);
/// [`as_str`](Self::as_str) keeps the text as given.
#[derive(Debug, Clone)]
pub struct ContentVersion {
    text: String,
    /// Each component without its leading zeros (`""` is 0), trailing zero components dropped:
    /// the form in which numeric equality is string equality.
    parts: Vec<String>,
}

/// Why a text is not a content version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentVersionError {
    /// The text is empty.
    #[error("must not be empty")]
    Empty,
    /// The text is longer than the protocol allows (64 bytes).
    #[error("is {0} bytes long, more than the {max} the protocol allows", max = MAX_CONTENT_VERSION)]
    TooLong(usize),
    /// The text is not components of digits separated by single dots.
    #[error("{0:?} is not a dotted number such as 1.4.0")]
    NotDotted(String),
}

impl ContentVersion {
    /// Parses a dotted number (`1`, `1.4`, `1.4.0`).
    pub fn parse(text: &str) -> Result<Self, ContentVersionError> {
        if text.is_empty() {
            return Err(ContentVersionError::Empty);
        }
        if text.len() > MAX_CONTENT_VERSION {
            return Err(ContentVersionError::TooLong(text.len()));
        }
        let mut parts = Vec::new();
        for part in text.split('.') {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ContentVersionError::NotDotted(text.to_owned()));
            }
            parts.push(part.trim_start_matches('0').to_owned());
        }
        while parts.last().is_some_and(String::is_empty) {
            parts.pop();
        }
        Ok(Self {
            text: text.to_owned(),
            parts,
        })
    }

    /// The text as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ContentVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for ContentVersion {
    type Err = ContentVersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl PartialEq for ContentVersion {
    fn eq(&self, other: &Self) -> bool {
        self.parts == other.parts
    }
}

impl Eq for ContentVersion {}

impl PartialOrd for ContentVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ContentVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.parts.len().max(other.parts.len());
        for i in 0..n {
            let a = self.parts.get(i).map_or("", String::as_str);
            let b = other.parts.get(i).map_or("", String::as_str);
            // Without leading zeros, a longer run of digits is the larger number.
            match a.len().cmp(&b.len()).then_with(|| a.cmp(b)) {
                Ordering::Equal => {}
                unequal => return unequal,
            }
        }
        Ordering::Equal
    }
}

/// Why a host refused a Hello for its content version (PROTOCOL.md §4.1.2). Each reason names
/// the version the host needs first, so it survives the Kick reason's 256-byte limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentRefusal {
    /// The client negotiated a protocol version below 5: it could not read CONTENT_OUTDATED.
    #[error(
        "this host needs content version {min} or newer, which takes protocol version 5 \
         (the client speaks {version}): update the client"
    )]
    OldProtocol {
        /// The negotiated protocol version.
        version: u32,
        /// The oldest content version the host accepts.
        min: String,
    },
    /// The Hello carries no content version.
    #[error(
        "this host needs content version {min} or newer; the client sent none: reload the client"
    )]
    Missing {
        /// The oldest content version the host accepts.
        min: String,
    },
    /// The Hello's content version is not a dotted number.
    #[error(
        "this host needs content version {min} or newer; the client's {given:?} is not a dotted \
         number: reload the client"
    )]
    Malformed {
        /// The oldest content version the host accepts.
        min: String,
        /// What the client sent.
        given: String,
    },
    /// The Hello's content version is older than the host accepts.
    #[error(
        "this host needs content version {min} or newer; the client has {given}: reload the client"
    )]
    Older {
        /// The oldest content version the host accepts.
        min: String,
        /// What the client sent.
        given: String,
    },
}

impl ContentRefusal {
    /// The Kick code: VERSION_MISMATCH below protocol version 5, CONTENT_OUTDATED otherwise.
    pub fn code(&self) -> KickCode {
        match self {
            ContentRefusal::OldProtocol { .. } => KickCode::VERSION_MISMATCH,
            _ => KickCode::CONTENT_OUTDATED,
        }
    }
}

/// What a host does with content versions: the one it runs, which a version 5 Welcome carries,
/// and the oldest a client may have (none: every client is admitted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentPolicy {
    current: Option<ContentVersion>,
    min: Option<ContentVersion>,
}

impl ContentPolicy {
    /// A policy running `current` (None: Welcome says none) and admitting `min` or newer.
    pub fn new(current: Option<ContentVersion>, min: Option<ContentVersion>) -> Self {
        Self { current, min }
    }

    /// The content version the host runs, if any.
    pub fn current(&self) -> Option<&ContentVersion> {
        self.current.as_ref()
    }

    /// The oldest content version the host admits, if it checks.
    pub fn min(&self) -> Option<&ContentVersion> {
        self.min.as_ref()
    }

    /// The content version a Welcome of protocol `version` carries: the host's from version 5,
    /// none before (an older Welcome cannot carry one).
    pub fn welcome_content_version(&self, version: u32) -> String {
        match &self.current {
            Some(c) if version >= CONTENT_VERSION_PROTOCOL => c.as_str().to_owned(),
            _ => String::new(),
        }
    }

    /// Checks a Hello that negotiated protocol `version` and carries `content_version`
    /// (PROTOCOL.md §4.1.2). Without a minimum every Hello passes.
    pub fn admit(&self, version: u32, content_version: &str) -> Result<(), ContentRefusal> {
        let Some(min) = &self.min else {
            return Ok(());
        };
        let needs = || min.as_str().to_owned();
        if version < CONTENT_VERSION_PROTOCOL {
            return Err(ContentRefusal::OldProtocol {
                version,
                min: needs(),
            });
        }
        let given = match ContentVersion::parse(content_version) {
            Ok(v) => v,
            Err(ContentVersionError::Empty) => {
                return Err(ContentRefusal::Missing { min: needs() })
            }
            Err(_) => {
                return Err(ContentRefusal::Malformed {
                    min: needs(),
                    given: content_version.to_owned(),
                })
            }
        };
        if given < *min {
            return Err(ContentRefusal::Older {
                min: needs(),
                given: given.as_str().to_owned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn v(s: &str) -> ContentVersion {
        ContentVersion::parse(s).unwrap()
    }

    #[test]
    fn dotted_numbers_compare_component_by_component() {
        assert_eq!(v("1.4"), v("1.4.0"));
        assert_eq!(v("1.4"), v("1.4.0.0"));
        assert_eq!(v("01.004"), v("1.4"));
        assert_eq!(v("0"), v("0.0"));
        assert!(v("1.4") < v("1.4.1"));
        assert!(v("1.9") < v("1.10"));
        assert!(v("1.10") < v("2"));
        assert!(v("2") > v("1.99.99"));
        assert!(v("0.1") > v("0"));
        // Beyond any integer type: compared as numbers all the same.
        let big = "1".repeat(40);
        assert!(v(&big) > v(&"9".repeat(39)));
        assert!(v(&format!("1.{big}")) > v(&format!("1.{}", "9".repeat(39))));
        assert_eq!(v("1.4.0").as_str(), "1.4.0");
        assert_eq!(v("1.4.0").to_string(), "1.4.0");
        assert_eq!("1.4".parse::<ContentVersion>().unwrap(), v("1.4.0"));
    }

    #[test]
    fn only_dotted_numbers_are_content_versions() {
        assert_eq!(ContentVersion::parse(""), Err(ContentVersionError::Empty));
        for bad in [
            "v1", "1.", ".1", "1..2", "1.4-beta", " 1", "1,4", "+1", "-1", "1.x", "١",
        ] {
            assert_eq!(
                ContentVersion::parse(bad),
                Err(ContentVersionError::NotDotted(bad.to_owned())),
                "{bad}"
            );
        }
        let long = "1".repeat(MAX_CONTENT_VERSION + 1);
        assert_eq!(
            ContentVersion::parse(&long),
            Err(ContentVersionError::TooLong(65))
        );
        assert!(ContentVersion::parse(&"1".repeat(MAX_CONTENT_VERSION)).is_ok());
        let e = ContentVersion::parse("abc").unwrap_err().to_string();
        assert!(e.contains("\"abc\"") && e.contains("dotted"), "{e}");
    }

    #[test]
    fn a_minimum_refuses_older_missing_and_malformed_content() {
        let p = ContentPolicy::new(Some(v("1.5.2")), Some(v("1.4")));
        for ok in ["1.4", "1.4.0", "1.4.1", "1.10", "2"] {
            assert_eq!(p.admit(5, ok), Ok(()), "{ok}");
            assert_eq!(p.admit(6, ok), Ok(()), "{ok} with a later protocol");
        }
        let older = p.admit(5, "1.3.9").unwrap_err();
        assert_eq!(older.code(), KickCode::CONTENT_OUTDATED);
        assert_eq!(
            older.to_string(),
            "this host needs content version 1.4 or newer; the client has 1.3.9: reload the client"
        );
        let missing = p.admit(5, "").unwrap_err();
        assert_eq!(missing, ContentRefusal::Missing { min: "1.4".into() });
        assert_eq!(missing.code(), KickCode::CONTENT_OUTDATED);
        let malformed = p.admit(5, "1.4-beta").unwrap_err();
        assert!(matches!(malformed, ContentRefusal::Malformed { .. }));
        assert_eq!(malformed.code(), KickCode::CONTENT_OUTDATED);
        // Below protocol version 5 the client could not read CONTENT_OUTDATED: VERSION_MISMATCH,
        // whatever its content.
        for version in [2, 3, 4] {
            let e = p.admit(version, "9.9").unwrap_err();
            assert_eq!(e.code(), KickCode::VERSION_MISMATCH);
            assert!(e.to_string().contains("1.4"), "{e}");
        }
        // Every reason fits a Kick even with the longest versions.
        let long = ContentPolicy::new(None, Some(v(&"9".repeat(64))));
        for e in [
            long.admit(4, "").unwrap_err(),
            long.admit(5, "").unwrap_err(),
            long.admit(5, &"\u{1}".repeat(64)).unwrap_err(),
            long.admit(5, &"8".repeat(64)).unwrap_err(),
        ] {
            let reason = e.to_string();
            assert!(
                reason.starts_with("this host needs content version 999"),
                "{reason}"
            );
        }
    }

    #[test]
    fn without_a_minimum_everyone_is_admitted() {
        let p = ContentPolicy::new(Some(v("2.0")), None);
        for (version, content) in [(2, ""), (4, "x"), (5, ""), (5, "not a version"), (5, "0.1")] {
            assert_eq!(p.admit(version, content), Ok(()));
        }
        assert_eq!(ContentPolicy::default().admit(5, ""), Ok(()));
    }

    #[test]
    fn welcome_carries_the_hosts_content_from_version_5() {
        let p = ContentPolicy::new(Some(v("1.5.2")), None);
        assert_eq!(p.welcome_content_version(5), "1.5.2");
        assert_eq!(p.welcome_content_version(6), "1.5.2");
        assert_eq!(p.welcome_content_version(4), "");
        assert_eq!(ContentPolicy::default().welcome_content_version(5), "");
    }
}
