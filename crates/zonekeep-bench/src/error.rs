//! The bench crate's one error enum.

use thiserror::Error;

/// What can stop a bench run or one of its parts.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The configuration is unusable (the message says which flag).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A ticket could not be minted or fetched.
    #[error("ticket: {0}")]
    Ticket(String),
    /// An HTTP request (`--join`, `/metrics`) failed.
    #[error("http {url}: {reason}")]
    Http {
        /// The URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// Reading or writing a report file failed.
    #[error("report file {path}: {reason}")]
    ReportFile {
        /// The path.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Reports could not be merged.
    #[error(transparent)]
    Merge(#[from] crate::report::MergeError),
}
