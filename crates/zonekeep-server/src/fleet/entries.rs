//! Where else a client may enter: the base URLs a Welcome lists (PROTOCOL.md §5.3.1), this host
//! first, then the fleet's other live hosts that take zones. The reconcile pass refreshes them
//! from the directory, so a Welcome never waits for a query; a client learns them in every
//! Welcome (a resume included), and anew in an Entries message whenever they change, and falls
//! back to them when its entry URL is unreachable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use zonekeep_protocol::limits::MAX_ENTRIES;

/// The advertised base URLs (`ws://host:port`) a Welcome names, this host's first. Empty outside
/// a fleet: a client then knows only its entry URL.
#[derive(Debug, Default)]
pub(crate) struct EntryUrls {
    urls: RwLock<Vec<String>>,
    /// Bumped on every change, so zones know when to tell their clients.
    generation: AtomicU64,
}

impl EntryUrls {
    /// Replaces the list: `own` first, then `others` (without `own`), at most [`MAX_ENTRIES`].
    pub(crate) fn set<'a>(&self, own: &str, others: impl IntoIterator<Item = &'a str>) {
        let mut urls = vec![own.to_owned()];
        for u in others {
            if urls.len() >= MAX_ENTRIES {
                break;
            }
            if !urls.iter().any(|x| x == u) {
                urls.push(u.to_owned());
            }
        }
        // A poisoned lock only means a writer panicked mid-assignment of a Vec: replace it.
        let mut g = match self.urls.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if *g != urls {
            *g = urls;
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Which version of the list is current: read it before [`zone_urls`](Self::zone_urls), so
    /// a change in between is seen as a newer generation later.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The zone's WebSocket URL at every listed host, in order (no hop count: each is the start
    /// of a connection attempt).
    pub(crate) fn zone_urls(&self, zone_id: &str) -> Vec<String> {
        let g = match self.urls.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.iter().map(|b| format!("{b}/zones/{zone_id}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_url_first_then_the_others_once_each_up_to_the_limit() {
        let e = EntryUrls::default();
        assert!(e.zone_urls("z").is_empty());
        e.set("ws://a:1", ["ws://b:1", "ws://a:1", "ws://b:1", "ws://c:1"]);
        let g = e.generation();
        e.set("ws://a:1", ["ws://b:1", "ws://c:1"]);
        assert_eq!(e.generation(), g, "the same list is no change");
        assert_eq!(
            e.zone_urls("z"),
            ["ws://a:1/zones/z", "ws://b:1/zones/z", "ws://c:1/zones/z"]
        );
        let many: Vec<String> = (0..20).map(|i| format!("ws://h{i}:1")).collect();
        e.set("ws://a:1", many.iter().map(String::as_str));
        assert_eq!(e.generation(), g + 1);
        let urls = e.zone_urls("z");
        assert_eq!(urls.len(), MAX_ENTRIES);
        assert_eq!(urls[0], "ws://a:1/zones/z");
    }
}
