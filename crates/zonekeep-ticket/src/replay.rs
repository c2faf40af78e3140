//! The `jti` replay cache: each ticket id is admitted once.
//!
//! An id is remembered until its ticket expires (plus the leeway); after that
//! the ticket itself is refused as expired, so forgetting the id is safe.
//! The cache is bounded. When it is full of unexpired ids it refuses NEW
//! tickets ([`ReplayError::Full`]) instead of evicting a remembered id:
//! evicting would let a captured ticket be replayed, while refusing only makes
//! a client retry later. Short ticket lifetimes keep the working set small:
//! capacity must cover (admissions per second × max ticket lifetime).

use std::collections::{BTreeSet, HashMap};

/// Why an id was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The id was already used.
    #[error("ticket id already used")]
    Replayed,
    /// The cache holds `capacity` unexpired ids.
    #[error("replay cache full")]
    Full,
}

/// Seen ticket ids with their forget-after time (UNIX seconds).
#[derive(Debug)]
pub struct ReplayCache {
    capacity: usize,
    seen: HashMap<String, u64>,
    by_expiry: BTreeSet<(u64, String)>,
}

impl ReplayCache {
    /// An empty cache holding at most `capacity` ids.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            seen: HashMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }

    /// Admit `jti` (remembered until `forget_after`), or refuse it.
    pub fn admit(&mut self, jti: &str, forget_after: u64, now: u64) -> Result<(), ReplayError> {
        self.prune(now);
        if self.seen.contains_key(jti) {
            return Err(ReplayError::Replayed);
        }
        if self.seen.len() >= self.capacity {
            return Err(ReplayError::Full);
        }
        self.seen.insert(jti.to_owned(), forget_after);
        self.by_expiry.insert((forget_after, jti.to_owned()));
        Ok(())
    }

    /// Ids currently remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Forget ids whose tickets expired before `now`.
    fn prune(&mut self, now: u64) {
        while let Some((t, _)) = self.by_expiry.first() {
            if *t >= now {
                break;
            }
            if let Some((_, jti)) = self.by_expiry.pop_first() {
                self.seen.remove(&jti);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_is_refused_until_expiry() {
        let mut c = ReplayCache::new(4);
        assert_eq!(c.admit("a", 100, 10), Ok(()));
        assert_eq!(c.admit("a", 100, 50), Err(ReplayError::Replayed));
        assert_eq!(c.admit("a", 100, 100), Err(ReplayError::Replayed));
        // Past its expiry the id is forgotten (the ticket is refused as expired anyway).
        assert_eq!(c.admit("a", 200, 101), Ok(()));
    }

    #[test]
    fn full_cache_refuses_new_ids_and_keeps_old_ones() {
        let mut c = ReplayCache::new(2);
        assert_eq!(c.admit("a", 100, 0), Ok(()));
        assert_eq!(c.admit("b", 100, 0), Ok(()));
        assert_eq!(c.admit("c", 100, 0), Err(ReplayError::Full));
        assert_eq!(c.admit("a", 100, 0), Err(ReplayError::Replayed));
        assert_eq!(c.len(), 2);
        // Once entries expire, room comes back.
        assert_eq!(c.admit("c", 300, 150), Ok(()));
        assert_eq!(c.len(), 1);
    }
}
