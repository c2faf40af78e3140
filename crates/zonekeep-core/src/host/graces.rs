//! Reconnect graces: when each dropped participant dropped, in the order their graces end.
//!
//! Every advance asks which graces have run out. Kept only by participant, that question walks
//! every dropped participant each tick — a thousand of them for the length of a grace after a
//! network blip. Kept also in order of the drop, it reads only the ones that ended, plus one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::player::PlayerId;

/// The dropped participants of one zone and when each dropped (zone clock time).
#[derive(Debug, Default)]
pub(crate) struct Graces {
    since: BTreeMap<PlayerId, Duration>,
    ending: BTreeSet<(Duration, PlayerId)>,
}

impl Graces {
    /// `id` dropped at `at` (a later drop replaces an earlier one).
    pub(crate) fn insert(&mut self, id: PlayerId, at: Duration) {
        if let Some(old) = self.since.insert(id, at) {
            self.ending.remove(&(old, id));
        }
        self.ending.insert((at, id));
    }

    /// `id` is back or gone; when it had dropped.
    pub(crate) fn remove(&mut self, id: PlayerId) -> Option<Duration> {
        let at = self.since.remove(&id)?;
        self.ending.remove(&(at, id));
        Some(at)
    }

    /// When `id` dropped, if it is in its grace.
    pub(crate) fn get(&self, id: PlayerId) -> Option<Duration> {
        self.since.get(&id).copied()
    }

    /// Forget every grace.
    pub(crate) fn clear(&mut self) {
        self.since.clear();
        self.ending.clear();
    }

    /// Whether `id`'s grace of length `grace` has run out at `now`.
    pub(crate) fn expired(&self, id: PlayerId, now: Duration, grace: Duration) -> bool {
        self.get(id)
            .is_some_and(|at| now.saturating_sub(at) >= grace)
    }

    /// Every participant whose grace of length `grace` has run out at `now`, by id.
    pub(crate) fn all_expired(&self, now: Duration, grace: Duration) -> Vec<PlayerId> {
        let mut out: Vec<PlayerId> = self
            .ending
            .iter()
            .take_while(|(at, _)| now.saturating_sub(*at) >= grace)
            .map(|&(_, id)| id)
            .collect();
        out.sort_unstable();
        out
    }
}

impl FromIterator<(PlayerId, Duration)> for Graces {
    fn from_iter<I: IntoIterator<Item = (PlayerId, Duration)>>(iter: I) -> Self {
        let mut graces = Graces::default();
        for (id, at) in iter {
            graces.insert(id, at);
        }
        graces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(10);

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn only_the_graces_that_ran_out_are_read_and_they_come_by_id() {
        let mut g: Graces = [
            (PlayerId(7), s(3)),
            (PlayerId(2), s(5)),
            (PlayerId(9), s(1)),
        ]
        .into_iter()
        .collect();
        assert!(g.all_expired(s(10), GRACE).is_empty());
        assert_eq!(g.all_expired(s(13), GRACE), vec![PlayerId(7), PlayerId(9)]);
        assert!(g.expired(PlayerId(9), s(11), GRACE));
        assert!(!g.expired(PlayerId(2), s(14), GRACE));
        // Back before its grace ended: no longer in one.
        assert_eq!(g.remove(PlayerId(7)), Some(s(3)));
        assert_eq!(g.all_expired(s(15), GRACE), vec![PlayerId(2), PlayerId(9)]);
    }

    #[test]
    fn a_second_drop_starts_the_grace_again() {
        let mut g = Graces::default();
        g.insert(PlayerId(1), s(0));
        g.insert(PlayerId(1), s(8));
        assert!(g.all_expired(s(12), GRACE).is_empty());
        assert_eq!(g.get(PlayerId(1)), Some(s(8)));
        assert_eq!(g.all_expired(s(18), GRACE), vec![PlayerId(1)]);
        g.clear();
        assert!(g.all_expired(s(100), GRACE).is_empty());
        assert_eq!(g.remove(PlayerId(1)), None);
    }
}
