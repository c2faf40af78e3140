//! Long polls waiting for a search to change, on this replica: woken when this replica changes
//! the search, or when the store's feed of changed searches names it (a change made by another
//! replica). Bounded: past [`MAX_WAITING`] searches a long poll answers at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Most searches with a long poll waiting on one replica.
pub const MAX_WAITING: usize = 100_000;

/// Each waited-on search's wake-up and how many long polls wait on it.
type WaitMap = Arc<Mutex<HashMap<String, (Arc<Notify>, usize)>>>;

/// The searches long polls wait on.
#[derive(Default)]
pub(crate) struct Waiters {
    map: WaitMap,
}

/// One long poll's wait; leaving it (dropping) forgets the search when nobody else waits on it.
pub(crate) struct Waiting {
    id: String,
    notify: Arc<Notify>,
    map: WaitMap,
}

impl Waiting {
    /// Resolves when the search was woken after this wait began.
    pub async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, n)) = map.get_mut(&self.id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.id);
            }
        }
    }
}

impl Waiters {
    /// Starts waiting on search `id`; `None` when too many searches are waited on.
    pub fn wait(&self, id: &str) -> Option<Waiting> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_WAITING && !map.contains_key(id) {
            return None;
        }
        let entry = map
            .entry(id.to_owned())
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        Some(Waiting {
            id: id.to_owned(),
            notify: Arc::clone(&entry.0),
            map: Arc::clone(&self.map),
        })
    }

    /// Wakes every long poll waiting on search `id` (a permit is kept for one that is between
    /// registering and waiting).
    pub fn wake(&self, id: &str) {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((n, _)) = map.get(id) {
            n.notify_waiters();
            n.notify_one();
        }
    }

    /// Whether any long poll waits here (the feed is read only then).
    pub fn any(&self) -> bool {
        !self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_between_registering_and_waiting_is_not_lost() {
        let w = Waiters::default();
        let waiting = w.wait("s1").unwrap_or_else(|| panic!("refused"));
        w.wake("s1");
        waiting.woken().await;
        drop(waiting);
        assert!(!w.any(), "a finished wait forgets its search");
    }

    #[tokio::test]
    async fn every_wait_on_a_search_is_woken() {
        let w = Waiters::default();
        let (a, b) = (w.wait("s1").unwrap(), w.wait("s1").unwrap());
        let both = tokio::spawn(async move {
            tokio::join!(a.woken(), b.woken());
        });
        tokio::task::yield_now().await;
        // Keep waking until both waits have seen it: a wake before one registered leaves a permit.
        while !both.is_finished() {
            w.wake("s1");
            tokio::task::yield_now().await;
        }
        both.await.unwrap();
    }
}
