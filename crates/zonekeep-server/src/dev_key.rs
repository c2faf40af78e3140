//! The dev-mode ticket key, kept in the data directory.
//!
//! A host started with `--dev` and no configured ticket key signs guest tickets with a key of its
//! own. It is created once (random, readable by the owner only) and reused by every later start
//! with the same data directory, so a page or client that was playing before a restart presents
//! a ticket the restarted host still verifies: it then only has to rejoin, not to start over.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// File name of the dev key inside the data directory.
pub const DEV_KEY_FILE: &str = "dev-ticket.key";

/// Random bytes behind a dev key; written as hex, and the hex text is the secret (as every
/// configured secret is: its bytes are the text as given).
const DEV_KEY_RANDOM_BYTES: usize = 32;

/// Why the dev key could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum DevKeyError {
    /// Reading, creating or writing the key file failed.
    #[error("dev ticket key {}: {source}", path.display())]
    Io {
        /// The key file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// The file exists but does not hold a key this host wrote.
    #[error(
        "dev ticket key {}: not a key written by zonekeep (expected {} hex digits); delete the file \
         to have a new one made",
        path.display(),
        DEV_KEY_RANDOM_BYTES * 2
    )]
    Invalid {
        /// The key file.
        path: PathBuf,
    },
    /// The OS random source failed.
    #[error("dev ticket key: random source unavailable: {0}")]
    Random(String),
}

/// The dev key of `data_dir`: read from [`DEV_KEY_FILE`], or created there (mode 0600 on Unix,
/// the directory too if missing) when it does not exist yet. Returns the secret's bytes.
pub fn load_or_create(data_dir: &Path) -> Result<Vec<u8>, DevKeyError> {
    let path = data_dir.join(DEV_KEY_FILE);
    let io_err = |source| DevKeyError::Io {
        path: path.clone(),
        source,
    };
    match read(&path) {
        Ok(secret) => return Ok(secret),
        Err(DevKeyError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::create_dir_all(data_dir).map_err(io_err)?;
    let mut random = [0u8; DEV_KEY_RANDOM_BYTES];
    getrandom::fill(&mut random).map_err(|e| DevKeyError::Random(e.to_string()))?;
    let text: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = match create_private(&path) {
        Ok(f) => f,
        // Another host on the same directory made it first: use that one.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return read(&path),
        Err(e) => return Err(io_err(e)),
    };
    file.write_all(format!("{text}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err)?;
    tracing::info!(path = %path.display(), "created the dev ticket key");
    Ok(text.into_bytes())
}

fn read(path: &Path) -> Result<Vec<u8>, DevKeyError> {
    let text = fs::read_to_string(path).map_err(|source| DevKeyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let key = text.trim();
    if key.len() != DEV_KEY_RANDOM_BYTES * 2 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DevKeyError::Invalid {
            path: path.to_path_buf(),
        });
    }
    warn_if_shared(path);
    Ok(key.as_bytes().to_vec())
}

#[cfg(unix)]
fn create_private(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Anyone who can read the key can mint tickets this host accepts: say so when others can.
#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "the dev ticket key is readable by other users (chmod 600 it)");
        }
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path) {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn created_once_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let first = load_or_create(&data).unwrap();
        assert_eq!(first.len(), 64);
        let second = load_or_create(&data).unwrap();
        assert_eq!(first, second, "a restart reuses the key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(data.join(DEV_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            load_or_create(other.path()).unwrap(),
            first,
            "each data directory has its own key"
        );
    }

    #[test]
    fn a_damaged_key_is_refused_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DEV_KEY_FILE);
        fs::write(&path, "short\n").unwrap();
        let err = load_or_create(dir.path()).unwrap_err();
        assert!(matches!(err, DevKeyError::Invalid { .. }), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "short\n");
    }
}
