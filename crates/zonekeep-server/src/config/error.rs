//! What can be wrong with a configuration: [`ConfigError`] names the offending key (and, for a
//! content version, the `zonekeep serve` flag that sets it), and `invalid` is the shorthand every
//! range check builds its error with.

use crate::ticket::KeyError;

/// A configuration error, with the offending key named.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML file could not be parsed (includes unknown keys).
    #[error("config file: {0}")]
    Toml(String),
    /// A value is out of range.
    #[error("config: {key} {problem}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A ticket key is unusable.
    // Displayed with its message and no `source`: an error chain printed in full (`{:#}`) would
    // otherwise say the same thing twice.
    #[error("config: {0}")]
    Key(KeyError),
    /// A content version (`content_version`, `min_content_version`) is not a dotted number.
    #[error("config: {key} (--{flag}) {error}")]
    ContentVersion {
        /// The key.
        key: &'static str,
        /// The `zonekeep serve` flag that sets it.
        flag: &'static str,
        /// What is wrong.
        error: crate::content::ContentVersionError,
    },
}

impl From<KeyError> for ConfigError {
    fn from(e: KeyError) -> Self {
        ConfigError::Key(e)
    }
}

pub(crate) fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        problem: problem.into(),
    }
}
