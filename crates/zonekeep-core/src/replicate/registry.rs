//! The replicator's subscribers: adding, changing and removing them, parking one whose client
//! dropped and bringing it back (with an ordinary Delta when its client still holds what it was
//! sent, a BASELINE otherwise), and what each one's client holds.

use super::subscriber::{Entry, Subscriber};
use super::{ReplicateError, Replicator, SubscriberConfig, SubscriberId};
use std::sync::Arc;
use zonekeep_protocol::ResumeFrom;

/// A sent state (by its shared entries) and its known-set check.
type Hashed<'a> = (&'a Arc<Vec<Entry>>, (u32, u32));

/// How a parked subscriber came back ([`Replicator::unpark_subscriber`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeOutcome {
    /// The client holds what it was last sent: its next frame is an ordinary Delta.
    Delta,
    /// Its next frame is a BASELINE (no resume point, a mismatched one, or no state kept).
    Baseline,
}

impl Replicator {
    /// Adds a subscriber; its first frame is a BASELINE.
    pub fn add_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
    ) -> Result<(), ReplicateError> {
        if self.parked.binary_search_by_key(&id, |s| s.id).is_ok() {
            return Err(ReplicateError::DuplicateSubscriber(id));
        }
        match self.subs.binary_search_by_key(&id, |s| s.id) {
            Ok(_) => Err(ReplicateError::DuplicateSubscriber(id)),
            Err(at) => {
                self.subs.insert(at, Subscriber::new(id, cfg));
                Ok(())
            }
        }
    }

    /// Changes a subscriber's settings (radius, focus, budget, control); takes effect next build.
    pub fn update_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
    ) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        self.subs[i].cfg = cfg;
        Ok(())
    }

    /// Removes a subscriber, active or parked, with everything kept for it.
    pub fn remove_subscriber(&mut self, id: SubscriberId) -> Result<(), ReplicateError> {
        if let Ok(i) = self.parked.binary_search_by_key(&id, |s| s.id) {
            self.parked.remove(i);
            return Ok(());
        }
        let i = self.find(id)?;
        self.subs.remove(i);
        Ok(())
    }

    /// Stops building frames for a subscriber whose client dropped, keeping what it was sent
    /// for [`Replicator::unpark_subscriber`]. Until then it is not among the subscribers
    /// ([`Replicator::len`], [`Replicator::known`] and the like do not see it).
    pub fn park_subscriber(&mut self, id: SubscriberId) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        let sub = self.subs.remove(i);
        let at = self
            .parked
            .binary_search_by_key(&id, |s| s.id)
            .unwrap_or_else(|at| at);
        self.parked.insert(at, sub);
        Ok(())
    }

    /// Builds frames for a parked subscriber again, with settings `cfg`. With a `from` that
    /// matches what it was last sent (see [`ResumeFrom`] and the [module docs](super)) its next
    /// frame is an ordinary Delta against that state; otherwise it is reset and its next frame
    /// is a BASELINE. An unknown or active subscriber is an error.
    pub fn unpark_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
        from: Option<&ResumeFrom>,
    ) -> Result<ResumeOutcome, ReplicateError> {
        let i = self
            .parked
            .binary_search_by_key(&id, |s| s.id)
            .map_err(|_| ReplicateError::UnknownSubscriber(id))?;
        let mut sub = self.parked.remove(i);
        // The new connection chooses its own path: frames against acknowledged states are
        // switched on again by whoever serves a datagram path.
        sub.acked = None;
        let outcome = if from.is_some_and(|f| sub.resumes_from(f)) {
            sub.cfg = cfg;
            ResumeOutcome::Delta
        } else {
            // Exactly as if it had never been here.
            sub = Subscriber::new(id, cfg);
            ResumeOutcome::Baseline
        };
        let at = self
            .subs
            .binary_search_by_key(&id, |s| s.id)
            .unwrap_or_else(|at| at);
        self.subs.insert(at, sub);
        Ok(outcome)
    }

    /// Builds frames for a parked subscriber again, continuing from what it was sent: its client
    /// kept it (the connection stayed open while the subscriber was parked, say during a
    /// transfer that came back), so its next frame is an ordinary Delta. Settings become `cfg`;
    /// a subscriber on acknowledged states stays on them. An unknown or active subscriber is an
    /// error.
    pub fn resume_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
    ) -> Result<(), ReplicateError> {
        let i = self
            .parked
            .binary_search_by_key(&id, |s| s.id)
            .map_err(|_| ReplicateError::UnknownSubscriber(id))?;
        let mut sub = self.parked.remove(i);
        sub.cfg = cfg;
        let at = self
            .subs
            .binary_search_by_key(&id, |s| s.id)
            .unwrap_or_else(|at| at);
        self.subs.insert(at, sub);
        Ok(())
    }

    /// Whether a subscriber is parked.
    pub fn is_parked(&self, id: SubscriberId) -> bool {
        self.parked.binary_search_by_key(&id, |s| s.id).is_ok()
    }

    /// Forgets what the subscriber was sent: its next frame is a BASELINE (e.g. after a reconnect).
    pub fn reset_subscriber(&mut self, id: SubscriberId) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        self.subs[i].reset();
        Ok(())
    }

    /// The subscriber's settings.
    pub fn subscriber(&self, id: SubscriberId) -> Result<&SubscriberConfig, ReplicateError> {
        Ok(&self.subs[self.find(id)?].cfg)
    }

    /// Number of subscribers.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether there are no subscribers.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Ids the subscriber's client holds (sent and not despawned), ascending.
    pub fn known(&self, id: SubscriberId) -> Result<Vec<u32>, ReplicateError> {
        let s = &self.subs[self.find(id)?];
        Ok(s.entries.iter().filter(|e| e.sent).map(|e| e.id).collect())
    }

    /// The count and [`known_set_hash`](zonekeep_protocol::known_set_hash) of the ids the
    /// subscriber's client holds: what a KnownSetCheck (PROTOCOL.md §5.7) carries. Walks the
    /// entries without allocating, so a periodic check costs one pass over the known set.
    pub fn known_check(&self, id: SubscriberId) -> Result<(u32, u32), ReplicateError> {
        Ok(self.subs[self.find(id)?].known_check())
    }

    /// [`known_check`](Self::known_check) for each of `ids`, in order. Subscribers in the same
    /// sent state share its entries (see `share`), so a run of checks hashes each such state
    /// once: in an arena where everyone sees everyone, one pass serves every check due that
    /// patch. Only the last few states are remembered, so a run where every subscriber's state
    /// is its own searches almost nothing.
    pub fn known_checks<'a, I>(
        &'a self,
        ids: I,
    ) -> impl Iterator<Item = Result<(u32, u32), ReplicateError>> + 'a
    where
        I: IntoIterator<Item = SubscriberId>,
        I::IntoIter: 'a,
    {
        let mut recent: [Option<Hashed<'a>>; 4] = [None; 4];
        let mut next = 0;
        ids.into_iter().map(move |id| {
            let s = &self.subs[self.find(id)?];
            let seen = recent
                .iter()
                .flatten()
                .find(|(entries, _)| Arc::ptr_eq(entries, &s.entries));
            if let Some(&(_, check)) = seen {
                return Ok(check);
            }
            let check = s.known_check();
            recent[next] = Some((&s.entries, check));
            next = (next + 1) % recent.len();
            Ok(check)
        })
    }
}
