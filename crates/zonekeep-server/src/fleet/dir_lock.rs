//! Proof that this host's earlier process has exited, for a host on the embedded SQLite store.
//!
//! A host restarting under an id the directory still counts alive must normally wait until the
//! earlier process has been silent for the takeover bound: it cannot tell a killed process from
//! a live one on another machine. A host on the embedded SQLite file can: every such host holds
//! an exclusive lock on [`LOCK_FILE`] in its data directory while it runs, and the operating
//! system releases it when the process exits, however it exits. Holding the lock, the host knows
//! no earlier process runs on this data directory, so it takes its id at once.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

/// The file in the data directory a running host on the embedded store keeps locked.
pub const LOCK_FILE: &str = "host.lock";

/// Whether the store spec names the embedded SQLite store (whose data directory is this host's).
pub(crate) fn is_embedded(store: &str) -> bool {
    let s = store.trim();
    s.is_empty() || s.eq_ignore_ascii_case("sqlite")
}

/// Takes the data directory's lock: `Some(file)` (keep it open for the process's life) when no
/// other process holds it, `None` when another process does or the file cannot be made (then the
/// host follows the takeover rule, logged here).
pub(crate) fn acquire(data_dir: &Path) -> Option<File> {
    let path = data_dir.join(LOCK_FILE);
    let file = match OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot open the data directory's lock file; a restart under this id waits out the takeover bound");
            return None;
        }
    };
    match file.try_lock() {
        Ok(()) => Some(file),
        Err(TryLockError::WouldBlock) => {
            tracing::info!(path = %path.display(), "another process uses this data directory; a restart under this id waits out the takeover bound");
            None
        }
        Err(TryLockError::Error(e)) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot lock the data directory; a restart under this id waits out the takeover bound");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_released_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path()).expect("the first holder locks");
        assert!(acquire(dir.path()).is_none(), "a second open cannot lock");
        drop(held);
        assert!(acquire(dir.path()).is_some(), "closed: free again");
    }

    #[test]
    fn only_the_embedded_store_has_a_data_directory_lock() {
        assert!(is_embedded("sqlite"));
        assert!(is_embedded(" SQLite "));
        assert!(is_embedded(""));
        assert!(!is_embedded("postgres://db/zonekeep"));
    }
}
