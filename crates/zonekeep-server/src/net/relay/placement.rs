//! Placing new players on relays: each relay link reports its relay's clients and room, and a
//! host that places (`relay_placement`) redirects a new WebSocket client of a relayed zone to the
//! relay with the most room, counting those it sent there that have not arrived yet.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::LinkOut;

/// How long a player sent to a relay counts against its room before it arrives.
const SENT_FOR: Duration = Duration::from_secs(10);

/// One relay link's report.
#[derive(Debug)]
struct Place {
    link: Arc<LinkOut>,
    /// Where the relay's clients connect (`ws://host:port`).
    url: String,
    clients: u32,
    max: u32,
    /// When each player sent there and not yet arrived was sent, oldest first.
    sent: VecDeque<Instant>,
}

impl Place {
    fn room(&self, now: Instant) -> i64 {
        let pending = self
            .sent
            .iter()
            .filter(|t| now.duration_since(**t) < SENT_FOR)
            .count();
        i64::from(self.max) - i64::from(self.clients) - pending as i64
    }
}

/// Every relay link's report, by zone.
#[derive(Debug, Default)]
pub(crate) struct Places {
    zones: Mutex<HashMap<String, Vec<Place>>>,
}

impl Places {
    /// A link's relay reports its clients, room and URL.
    pub(crate) fn report(
        &self,
        zone: &str,
        link: &Arc<LinkOut>,
        url: &str,
        clients: u32,
        max: u32,
    ) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let places = zones.entry(zone.to_owned()).or_default();
        match places.iter_mut().find(|p| p.link.id() == link.id()) {
            Some(p) => {
                p.url = url.to_owned();
                p.clients = clients;
                p.max = max;
            }
            None => places.push(Place {
                link: Arc::clone(link),
                url: url.to_owned(),
                clients,
                max,
                sent: VecDeque::new(),
            }),
        }
    }

    /// A client arrived at the link's relay (its Hello came over the link): one fewer on its
    /// way, one more there until the relay's next report says how many it holds (reports and
    /// Hellos come in the order the relay sent them).
    pub(crate) fn arrived(&self, zone: &str, link: u64) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = zones
            .get_mut(zone)
            .and_then(|ps| ps.iter_mut().find(|p| p.link.id() == link))
        {
            p.sent.pop_front();
            p.clients = p.clients.saturating_add(1);
        }
    }

    /// The link closed: its relay places no one.
    pub(crate) fn forget(&self, zone: &str, link: u64) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(places) = zones.get_mut(zone) {
            places.retain(|p| p.link.id() != link);
            if places.is_empty() {
                zones.remove(zone);
            }
        }
    }

    /// Where a new player of `zone` goes: the relay with the most room among those following
    /// the zone (a relayed player was admitted over the link, so the zone is one relays serve),
    /// counted as sent there. `None`: no relay has room; the host takes the player itself.
    pub(crate) fn pick(&self, zone: &str) -> Option<String> {
        let now = Instant::now();
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let places = zones.get_mut(zone)?;
        for p in places.iter_mut() {
            while p
                .sent
                .front()
                .is_some_and(|t| now.duration_since(*t) >= SENT_FOR)
            {
                p.sent.pop_front();
            }
        }
        // The most room; on a tie the relay that reported first.
        let best = places
            .iter_mut()
            .rev()
            .filter(|p| p.link.is_followed() && !p.link.is_closed())
            .max_by_key(|p| p.room(now))?;
        if best.room(now) <= 0 {
            return None;
        }
        best.sent.push_back(now);
        Some(best.url.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn link(id: u64) -> Arc<LinkOut> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        std::mem::forget(rx);
        let l = Arc::new(LinkOut::new(id, tx));
        l.mark_followed();
        l
    }

    #[test]
    fn players_go_to_the_relay_with_the_most_room_counting_those_on_their_way() {
        let places = Places::default();
        let (a, b) = (link(1), link(2));
        places.report("z", &a, "ws://a", 8, 10);
        places.report("z", &b, "ws://b", 9, 10);
        // a has 2 places, b one: a, a, then b, then none.
        assert_eq!(places.pick("z").as_deref(), Some("ws://a"));
        assert_eq!(places.pick("z").as_deref(), Some("ws://a"));
        assert_eq!(places.pick("z").as_deref(), Some("ws://b"));
        assert_eq!(places.pick("z"), None);
        // One sent to a arrived: a holds 9 and awaits one more, so it is still full, and its
        // next report says the same.
        places.arrived("z", 1);
        assert_eq!(places.pick("z"), None);
        places.report("z", &a, "ws://a", 9, 10);
        assert_eq!(places.pick("z"), None);
        // A client of a left: its room is one again.
        places.report("z", &a, "ws://a", 8, 10);
        assert_eq!(places.pick("z").as_deref(), Some("ws://a"));
        assert_eq!(places.pick("z"), None);
        // Another zone, or a relay gone: nobody is placed.
        assert_eq!(places.pick("other"), None);
        places.forget("z", 1);
        places.forget("z", 2);
        assert_eq!(places.pick("z"), None);
    }

    #[test]
    fn a_link_that_serves_no_relayed_player_yet_places_no_one() {
        let places = Places::default();
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        std::mem::forget(rx);
        let l = Arc::new(LinkOut::new(3, tx));
        places.report("z", &l, "ws://c", 0, 100);
        assert_eq!(places.pick("z"), None);
        l.mark_followed();
        assert_eq!(places.pick("z").as_deref(), Some("ws://c"));
        l.close();
        assert_eq!(places.pick("z"), None);
    }
}
