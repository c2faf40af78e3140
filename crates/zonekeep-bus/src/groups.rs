//! Group membership as this host knows it: which zones a group send expands to.
//!
//! In process this map is the membership. Over NATS it is a copy of the fleet's `*_groups`
//! key-value bucket, kept current by a watch, with this host's own joins applied at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// Group → member zones.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    members: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl Groups {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeSet<String>>> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn join(&self, group: &str, zone: &str) {
        self.lock()
            .entry(group.to_string())
            .or_default()
            .insert(zone.to_string());
    }

    pub(crate) fn leave(&self, group: &str, zone: &str) {
        let mut members = self.lock();
        if let Some(set) = members.get_mut(group) {
            set.remove(zone);
            if set.is_empty() {
                members.remove(group);
            }
        }
    }

    /// The group's members now, in a fixed (sorted) order.
    pub(crate) fn members(&self, group: &str) -> Vec<String> {
        self.lock()
            .get(group)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}
