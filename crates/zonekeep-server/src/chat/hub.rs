//! The sessions of this host that hear chat, by zone and by principal, and the delivery of a
//! line to those of them that hear its channel.
//!
//! A session hears lines from when it registers; the history of its zone's channels is sent
//! first. Lines that arrive while that history is on its way wait in the member (bounded), and
//! only those newer than the history follow it, so a page never hears a line twice or out of
//! order.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use zonekeep_protocol::messages::{ChatLine, ChatLines, ServerMessage};

use super::channel::{Channel, Seat};
use crate::metrics::ChatMetrics;
use crate::net::conn::{ConnHandle, Offer};
use crate::sim::ZoneEntry;

/// Most live lines a member keeps while its history is on its way; older ones are dropped
/// (counted), as a slow reader's would be.
const MAX_WAITING: usize = 256;

/// A line as the hub delivers it: its channel and what the store kept.
#[derive(Debug, Clone)]
pub(crate) struct Heard {
    pub channel: Channel,
    pub seq: u64,
    pub sender: String,
    pub sent_at_ms: u64,
    pub body: String,
}

impl Heard {
    fn wire(&self) -> ChatLine {
        ChatLine {
            seq: self.seq,
            sender: self.sender.clone(),
            sent_at_ms: self.sent_at_ms,
            body: self.body.clone(),
        }
    }
}

/// A session that hears chat.
pub(crate) struct Member {
    pub id: u64,
    pub principal: String,
    pub entry: Arc<ZoneEntry>,
    pub conn: ConnHandle,
    /// Live lines held back while the history is on its way (`None` once it was sent), with the
    /// newest seq the history held per channel key.
    waiting: Mutex<Option<Vec<Heard>>>,
    sent_through: Mutex<HashMap<String, u64>>,
}

impl Member {
    /// The groups of its zone now.
    pub fn groups(&self) -> Vec<String> {
        self.entry
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether it hears `channel` (its zone's, a group of its zone, its own direct ones).
    pub fn hears(&self, channel: &Channel) -> bool {
        let groups = self.groups();
        let seat = Seat {
            principal: &self.principal,
            zone: &self.entry.zone_id,
            groups: &groups,
        };
        seat.hears(channel)
    }

    /// Sends `frame` to the session; false when it could not take it.
    pub fn send(&self, frame: Bytes, metrics: &ChatMetrics) -> bool {
        match self.conn.offer(frame) {
            Offer::Queued => true,
            Offer::Overflowed | Offer::Closed => {
                metrics.dropped("slow");
                false
            }
        }
    }

    /// Hands a live line to the session, or holds it while the history is on its way.
    fn hear(&self, line: &Heard, frame: &Bytes, metrics: &ChatMetrics) {
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(w) = waiting.as_mut() {
                if w.len() >= MAX_WAITING {
                    w.remove(0);
                    metrics.dropped("waiting");
                }
                w.push(line.clone());
                return;
            }
        }
        let through = self
            .sent_through
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&line.channel.key())
            .copied()
            .unwrap_or(0);
        if line.seq > through {
            self.send(frame.clone(), metrics);
        }
    }

    /// The history was sent, through `through` (newest seq per channel key): what waited and is
    /// newer follows it, and live lines go straight out from here.
    pub fn history_sent(&self, through: HashMap<String, u64>, metrics: &ChatMetrics) {
        let waiting = {
            let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            *self.sent_through.lock().unwrap_or_else(|p| p.into_inner()) = through;
            w.take().unwrap_or_default()
        };
        for line in waiting {
            let frame = live_frame(&line, &self.principal);
            self.hear(&line, &frame, metrics);
        }
    }
}

/// The frame of one live line as `viewer` hears it.
pub(crate) fn live_frame(line: &Heard, viewer: &str) -> Bytes {
    lines_frame(&line.channel.wire_name(viewer), false, 0, vec![line.wire()])
}

/// A ChatLines frame.
pub(crate) fn lines_frame(
    channel: &str,
    history: bool,
    reference: u32,
    lines: Vec<ChatLine>,
) -> Bytes {
    let msg = ServerMessage::ChatLines(ChatLines {
        channel: channel.to_owned(),
        history,
        reference,
        lines,
    });
    match msg.to_bytes(None) {
        Ok(b) => Bytes::from(b),
        // Every part was checked against the wire's limits before the store kept it.
        Err(e) => {
            tracing::warn!(error = %e, "a chat line does not encode");
            Bytes::new()
        }
    }
}

/// Removes member `id` from `key`'s set, and the set once empty.
fn forget(map: &mut HashMap<String, BTreeMap<u64, Arc<Member>>>, key: &str, id: u64) {
    if let Some(set) = map.get_mut(key) {
        set.remove(&id);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

/// The members of this host.
#[derive(Default)]
pub(crate) struct Hub {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_zone: HashMap<String, BTreeMap<u64, Arc<Member>>>,
    by_principal: HashMap<String, BTreeMap<u64, Arc<Member>>>,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session; it hears live lines once its history was sent (see
    /// [`Member::history_sent`]).
    pub fn register(
        &self,
        principal: &str,
        entry: Arc<ZoneEntry>,
        conn: ConnHandle,
    ) -> Arc<Member> {
        let m = Arc::new(Member {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            principal: principal.to_owned(),
            entry,
            conn,
            waiting: Mutex::new(Some(Vec::new())),
            sent_through: Mutex::new(HashMap::new()),
        });
        let mut inner = self.lock();
        inner
            .by_zone
            .entry(m.entry.zone_id.clone())
            .or_default()
            .insert(m.id, Arc::clone(&m));
        inner
            .by_principal
            .entry(m.principal.clone())
            .or_default()
            .insert(m.id, Arc::clone(&m));
        m
    }

    /// Forgets a session.
    pub fn unregister(&self, m: &Member) {
        let mut inner = self.lock();
        forget(&mut inner.by_zone, &m.entry.zone_id, m.id);
        forget(&mut inner.by_principal, &m.principal, m.id);
    }

    /// Every member now.
    pub fn members(&self) -> Vec<Arc<Member>> {
        self.lock()
            .by_zone
            .values()
            .flat_map(|s| s.values().cloned())
            .collect()
    }

    /// The members that hear `channel`.
    fn audience(&self, channel: &Channel) -> Vec<Arc<Member>> {
        let inner = self.lock();
        match channel {
            Channel::Zone(z) => inner
                .by_zone
                .get(z)
                .map(|s| s.values().cloned().collect())
                .unwrap_or_default(),
            Channel::Group(g) => inner
                .by_zone
                .values()
                .filter(|s| {
                    s.values().next().is_some_and(|m| {
                        m.entry
                            .groups
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .iter()
                            .any(|x| x == g)
                    })
                })
                .flat_map(|s| s.values().cloned())
                .collect(),
            Channel::Direct { a, b } => [a, b]
                .into_iter()
                .filter_map(|p| inner.by_principal.get(p))
                .flat_map(|s| s.values().cloned())
                .collect(),
        }
    }

    /// Delivers a line to every member here that hears its channel; answers how many.
    pub fn deliver(&self, line: &Heard, metrics: &ChatMetrics) -> usize {
        let audience = self.audience(&line.channel);
        let shared_frame = match line.channel {
            Channel::Direct { .. } => None,
            _ => Some(live_frame(line, "")),
        };
        for m in &audience {
            match &shared_frame {
                Some(f) => m.hear(line, f, metrics),
                None => m.hear(line, &live_frame(line, &m.principal), metrics),
            }
        }
        metrics.fanned_out(audience.len());
        audience.len()
    }
}
