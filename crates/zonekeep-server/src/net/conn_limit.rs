//! Connection caps: a total and a per-IP limit, checked at accept.
//!
//! Up to `per_ip` connections from one address are served normally. The next
//! `per_ip` are "courtesy" connections: they are served just long enough to be
//! told why (`Kick(TOO_MANY_CONNECTIONS)` on a WebSocket, HTTP 429 otherwise).
//! Beyond that, and beyond the total cap, sockets are closed at accept without
//! a word, so a flood costs the host no more than an accept and a close.
//!
//! The WebTransport endpoint keeps a second limiter of this kind for its handshakes in progress,
//! apart from the connection slots (there only the normal tier is served).
//!
//! Every admitted socket is counted in the `zonekeep_connections` gauge from
//! accept until its guard drops (HTTP requests, WebSocket sessions and sockets
//! that have not yet sent a request head alike), so a silent connection shows
//! up in metrics while it holds its slots.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::gauge::Gauge;

/// What accept decided for one connection.
#[derive(Debug)]
pub enum Admission {
    /// Serve it normally.
    Normal(ConnGuard),
    /// Serve it only to refuse it politely.
    OverIpCap(ConnGuard),
    /// Close it now (`reason` for metrics).
    Refuse(&'static str),
}

#[derive(Debug)]
struct State {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Tracks open connections.
#[derive(Debug, Clone)]
pub struct ConnLimiter {
    max_total: usize,
    max_per_ip: usize,
    state: Arc<Mutex<State>>,
    open: Gauge,
}

impl ConnLimiter {
    /// Caps of `max_total` connections and `max_per_ip` per address; `open` follows the count.
    pub fn new(max_total: usize, max_per_ip: usize, open: Gauge) -> Self {
        Self {
            max_total,
            max_per_ip,
            state: Arc::new(Mutex::new(State {
                total: 0,
                per_ip: HashMap::new(),
            })),
            open,
        }
    }

    /// Decide for a new connection from `ip`.
    pub fn admit(&self, ip: IpAddr) -> Admission {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.total >= self.max_total {
            return Admission::Refuse("total");
        }
        let n = s.per_ip.get(&ip).copied().unwrap_or(0);
        if n >= self.max_per_ip.saturating_mul(2) {
            return Admission::Refuse("per_ip");
        }
        s.total += 1;
        s.per_ip.insert(ip, n + 1);
        self.open.inc();
        let guard = ConnGuard {
            limiter: self.clone(),
            ip,
            per_ip: AtomicBool::new(true),
        };
        if n >= self.max_per_ip {
            Admission::OverIpCap(guard)
        } else {
            Admission::Normal(guard)
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    fn release(&self, ip: IpAddr, per_ip: bool) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if per_ip {
            Self::release_ip(&mut s, ip);
        }
        s.total = s.total.saturating_sub(1);
        self.open.dec();
    }

    fn release_ip(s: &mut State, ip: IpAddr) {
        if let Some(n) = s.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                s.per_ip.remove(&ip);
            }
        }
    }
}

/// Releases the connection's slots when dropped.
#[derive(Debug)]
pub struct ConnGuard {
    limiter: ConnLimiter,
    ip: IpAddr,
    /// Still counted against its address's cap.
    per_ip: AtomicBool,
}

impl ConnGuard {
    /// The connection proved it is a trusted peer that multiplexes many clients (a relay's link,
    /// with the relay credential): it stops counting against its address's cap, which is there
    /// for clients, while it keeps its slot in the total. A relay holds one link per zone, so
    /// with the cap it could serve no more zones of a host than the cap.
    pub fn leave_ip_cap(&self) {
        if self.per_ip.swap(false, Ordering::AcqRel) {
            let mut s = self.limiter.state.lock().unwrap_or_else(|p| p.into_inner());
            ConnLimiter::release_ip(&mut s, self.ip);
        }
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.limiter
            .release(self.ip, self.per_ip.load(Ordering::Acquire));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_release() {
        let gauge = Gauge::default();
        let l = ConnLimiter::new(5, 2, gauge.clone());
        let ip: IpAddr = [10, 0, 0, 1].into();
        let other: IpAddr = [10, 0, 0, 2].into();
        let a = l.admit(ip);
        let b = l.admit(ip);
        assert!(matches!(a, Admission::Normal(_)) && matches!(b, Admission::Normal(_)));
        let c = l.admit(ip);
        let d = l.admit(ip);
        assert!(matches!(c, Admission::OverIpCap(_)) && matches!(d, Admission::OverIpCap(_)));
        assert!(matches!(l.admit(ip), Admission::Refuse("per_ip")));
        let e = l.admit(other);
        assert!(matches!(l.admit(other), Admission::Refuse("total")));
        assert_eq!(gauge.get(), 5, "every admitted socket is counted");
        drop((a, c, d, e));
        assert_eq!(l.open(), 1);
        assert_eq!(gauge.get(), 1);
        assert!(matches!(l.admit(ip), Admission::Normal(_)));
        drop(b);
    }

    #[test]
    fn a_trusted_link_leaves_its_address_cap_but_keeps_its_slot() {
        let gauge = Gauge::default();
        let l = ConnLimiter::new(4, 1, gauge.clone());
        let ip: IpAddr = [10, 0, 0, 1].into();
        let Admission::Normal(link) = l.admit(ip) else {
            panic!("the first connection is served");
        };
        assert!(matches!(l.admit(ip), Admission::OverIpCap(_)));
        link.leave_ip_cap();
        link.leave_ip_cap();
        // The address has room again (once: leaving twice released one count).
        let Admission::Normal(second) = l.admit(ip) else {
            panic!("the link no longer counts against its address");
        };
        assert!(matches!(l.admit(ip), Admission::OverIpCap(_)));
        assert_eq!(l.open(), 2, "the link still holds its slot in the total");
        drop(link);
        assert_eq!(l.open(), 1);
        assert!(
            matches!(l.admit(ip), Admission::OverIpCap(_)),
            "the second connection still counts"
        );
        drop(second);
        assert_eq!((l.open(), gauge.get()), (0, 0));
        assert!(matches!(l.admit(ip), Admission::Normal(_)));
    }
}
