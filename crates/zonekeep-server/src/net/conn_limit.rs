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

    fn release(&self, ip: IpAddr) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.total = s.total.saturating_sub(1);
        self.open.dec();
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
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.limiter.release(self.ip);
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
}
