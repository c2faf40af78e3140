//! The zone module rules both backends share (see [`crate::ModuleStore`] for the contract): how a
//! module's address is computed, which modules and kind names are accepted, and the check of
//! stored bytes against their address.

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::traits::{MAX_DEPLOY_HISTORY, MAX_MODULE_BYTES};

/// Longest module kind name accepted, in bytes.
pub(crate) const MAX_KIND_LEN: usize = 64;

/// Length of a digest in lowercase hex.
const DIGEST_HEX_LEN: usize = 64;

/// Modules up to this size are hashed where they are (well under a millisecond); larger ones are
/// hashed on the blocking pool, so a 32 MiB module never holds up an async worker thread.
const HASH_INLINE_MAX: usize = 256 * 1024;

/// Refuses an empty module or one over [`MAX_MODULE_BYTES`].
pub(crate) fn check_module(bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Err(StoreError::InvalidModule("the module is empty".into()));
    }
    if bytes.len() > MAX_MODULE_BYTES {
        return Err(StoreError::InvalidModule(format!(
            "the module is {} bytes, over the limit of {MAX_MODULE_BYTES}",
            bytes.len()
        )));
    }
    Ok(())
}

/// Refuses a kind name that is empty or longer than [`MAX_KIND_LEN`].
pub(crate) fn check_kind(kind: &str) -> Result<()> {
    if kind.is_empty() || kind.len() > MAX_KIND_LEN {
        return Err(StoreError::InvalidArgument(format!(
            "module kind must be 1..={MAX_KIND_LEN} bytes, got {}",
            kind.len()
        )));
    }
    Ok(())
}

/// Refuses a deploy of a kind name out of bounds ([`check_kind`]) or of a malformed digest (which
/// names no stored module), before any database work.
pub(crate) fn check_deploy(kind: &str, sha256: &str) -> Result<()> {
    check_kind(kind)?;
    if !is_digest(sha256) {
        return Err(not_stored(sha256));
    }
    Ok(())
}

/// How many deploys a history query asks for: `limit`, within 1..=[`MAX_DEPLOY_HISTORY`].
pub(crate) fn history_limit(limit: usize) -> i64 {
    // Both bounds are small constants: the cast cannot wrap.
    limit.clamp(1, MAX_DEPLOY_HISTORY) as i64
}

/// The refusal of a deploy whose module is not stored.
pub(crate) fn not_stored(sha256: &str) -> StoreError {
    StoreError::InvalidModule(format!("no module is stored under {sha256:?}"))
}

/// Whether `sha256` has the form of a module address: 64 lowercase hex digits.
pub(crate) fn is_digest(sha256: &str) -> bool {
    sha256.len() == DIGEST_HEX_LEN
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The module's address: the SHA-256 of `bytes` in lowercase hex.
pub(crate) fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// [`digest`] without blocking an async worker thread on a large module.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) async fn digest_off_thread(bytes: &[u8]) -> Result<String> {
    if bytes.len() <= HASH_INLINE_MAX {
        return Ok(digest(bytes));
    }
    let owned = bytes.to_vec();
    tokio::task::spawn_blocking(move || digest(&owned))
        .await
        .map_err(|e| StoreError::Backend(format!("hashing a module failed: {e}")))
}

/// Refuses stored bytes that do not hash to the address they are stored under.
pub(crate) fn verify(sha256: &str, bytes: &[u8]) -> Result<()> {
    let actual = digest(bytes);
    if actual != sha256 {
        return Err(StoreError::Corrupt(format!(
            "module {sha256} holds {} bytes whose SHA-256 is {actual}",
            bytes.len()
        )));
    }
    Ok(())
}

/// [`verify`] without blocking an async worker thread on a large module; hands the bytes back.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) async fn verify_off_thread(sha256: &str, bytes: Vec<u8>) -> Result<Vec<u8>> {
    if bytes.len() <= HASH_INLINE_MAX {
        verify(sha256, &bytes)?;
        return Ok(bytes);
    }
    let sha256 = sha256.to_owned();
    tokio::task::spawn_blocking(move || verify(&sha256, &bytes).map(|()| bytes))
        .await
        .map_err(|e| StoreError::Backend(format!("checking a module failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_lowercase_hex_sha256() {
        // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        let abc = digest(b"abc");
        assert_eq!(
            abc,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_digest(&abc));
        assert!(!is_digest(&abc.to_uppercase()));
        assert!(!is_digest(&abc[1..]));
        assert!(!is_digest(&format!("{abc}0")));
        assert!(!is_digest(&abc.replace('a', "g")));
        assert!(!is_digest(""));
    }

    #[test]
    fn modules_and_kinds_are_bounded() {
        assert!(matches!(
            check_module(b""),
            Err(StoreError::InvalidModule(_))
        ));
        assert!(check_module(b"\0asm").is_ok());
        assert!(check_module(&vec![0; MAX_MODULE_BYTES]).is_ok());
        assert!(matches!(
            check_module(&vec![0; MAX_MODULE_BYTES + 1]),
            Err(StoreError::InvalidModule(_))
        ));
        assert!(matches!(
            check_kind(""),
            Err(StoreError::InvalidArgument(_))
        ));
        assert!(check_kind(&"k".repeat(MAX_KIND_LEN)).is_ok());
        assert!(matches!(
            check_kind(&"k".repeat(MAX_KIND_LEN + 1)),
            Err(StoreError::InvalidArgument(_))
        ));
    }

    #[tokio::test]
    async fn stored_bytes_are_checked_against_their_address() {
        let small = b"module".to_vec();
        let large = vec![7u8; HASH_INLINE_MAX + 1];
        for bytes in [small, large] {
            let sha = digest_off_thread(&bytes).await.unwrap_or_default();
            assert_eq!(sha, digest(&bytes));
            assert_eq!(
                verify_off_thread(&sha, bytes.clone()).await,
                Ok(bytes.clone())
            );
            let mut changed = bytes.clone();
            changed[0] ^= 1;
            assert!(matches!(
                verify_off_thread(&sha, changed).await,
                Err(StoreError::Corrupt(_))
            ));
        }
    }
}
