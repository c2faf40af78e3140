//! Whose messages a NetSim setting delays: the host-wide setting, each subject's own, and the
//! handle one connection reads its setting through and counts what NetSim held back of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Serialize;

use super::{NetSimConfig, NetSimError};

/// Why [`NetSim::set_own`] refused a new subject.
pub const TOO_MANY_OWN: &str = "too many subjects hold their own setting; clear one first";

/// Subjects that may hold their own setting at once (those with live connections come on top).
pub const MAX_OWN_SETTINGS: usize = 1024;

/// The runtime-switchable settings: the host-wide one and each subject's own.
#[derive(Debug, Clone, Default)]
pub struct NetSim {
    cfg: Arc<RwLock<NetSimConfig>>,
    subjects: Arc<Mutex<HashMap<Arc<str>, Arc<SubjectSim>>>>,
    /// Whether any setting, host-wide or a subject's own, was ever made. Until then every
    /// message's lookup is one load instead of two lock round trips: a host that never uses
    /// NetSim (any host outside dev mode) pays nothing per message for it.
    used: Arc<AtomicBool>,
}

/// One subject's own setting and what NetSim did to its connections' messages.
#[derive(Debug, Default)]
struct SubjectSim {
    own: RwLock<Option<NetSimConfig>>,
    /// Messages and datagrams held back (or dropped) on their way to the client.
    held_to_client: AtomicU64,
    /// Messages and datagrams held back (or dropped) on their way from the client.
    held_from_client: AtomicU64,
    /// The longest delay applied towards the client since the last round-trip report, µs.
    worst_to_client_us: AtomicU64,
    /// The longest delay applied from the client since the last round-trip report, µs.
    worst_from_client_us: AtomicU64,
}

/// What NetSim does for one subject (`GET /dev/netsim?sub=`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubjectReport {
    /// The subject.
    pub sub: String,
    /// Its own setting, if it set one.
    pub own: Option<NetSimConfig>,
    /// The setting its connections' messages go through: its own, else the host-wide one.
    pub applies: NetSimConfig,
    /// Its live connections.
    pub connections: usize,
    /// Messages and datagrams NetSim held back or dropped on their way to its client.
    pub held_to_client: u64,
    /// Messages and datagrams NetSim held back or dropped on their way from its client.
    pub held_from_client: u64,
}

impl NetSim {
    /// The host-wide setting.
    pub fn get(&self) -> NetSimConfig {
        if !self.used.load(Ordering::Acquire) {
            return NetSimConfig::default();
        }
        *self.cfg.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replace the host-wide setting (validated).
    pub fn set(&self, cfg: NetSimConfig) -> Result<(), NetSimError> {
        cfg.validate()?;
        *self.cfg.write().unwrap_or_else(|p| p.into_inner()) = cfg;
        self.used.store(true, Ordering::Release);
        Ok(())
    }

    fn subjects(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<SubjectSim>>> {
        self.subjects.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give `sub` its own setting (validated), or take it away (`None`: back to the host-wide
    /// one). Refused when [`MAX_OWN_SETTINGS`] subjects already hold one.
    pub fn set_own(&self, sub: &str, cfg: Option<NetSimConfig>) -> Result<(), NetSimError> {
        if let Some(cfg) = &cfg {
            cfg.validate()?;
        }
        let mut subjects = self.subjects();
        let has_own = |s: &SubjectSim| s.own.read().unwrap_or_else(|p| p.into_inner()).is_some();
        match subjects.get(sub) {
            Some(entry) => {
                if cfg.is_some()
                    && !has_own(entry)
                    && subjects.values().filter(|s| has_own(s)).count() >= MAX_OWN_SETTINGS
                {
                    return Err(NetSimError(TOO_MANY_OWN));
                }
                *entry.own.write().unwrap_or_else(|p| p.into_inner()) = cfg;
                // Nobody connected and nothing of its own: nothing to keep.
                if cfg.is_none() && Arc::strong_count(entry) == 1 {
                    subjects.remove(sub);
                }
            }
            None if cfg.is_none() => {}
            None => {
                if subjects.values().filter(|s| has_own(s)).count() >= MAX_OWN_SETTINGS {
                    return Err(NetSimError(TOO_MANY_OWN));
                }
                let entry = SubjectSim {
                    own: RwLock::new(cfg),
                    ..SubjectSim::default()
                };
                subjects.insert(Arc::from(sub), Arc::new(entry));
            }
        }
        if cfg.is_some() {
            self.used.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// What NetSim does for `sub`'s connections.
    pub fn report(&self, sub: &str) -> SubjectReport {
        // Read under the lock: a connection's end (which takes it too) then never sees this
        // reader's reference and keeps an entry nobody needs.
        let subjects = self.subjects();
        let entry = subjects.get(sub);
        let own = entry.and_then(|e| *e.own.read().unwrap_or_else(|p| p.into_inner()));
        let count =
            |f: fn(&SubjectSim) -> &AtomicU64| entry.map_or(0, |e| f(e).load(Ordering::Relaxed));
        SubjectReport {
            sub: sub.to_owned(),
            own,
            applies: own.unwrap_or_else(|| self.get()),
            // Less the map's own reference.
            connections: entry.map_or(0, |e| Arc::strong_count(e) - 1),
            held_to_client: count(|e| &e.held_to_client),
            held_from_client: count(|e| &e.held_from_client),
        }
    }

    /// Whether any setting was ever made (host-wide or a subject's own): until then no message
    /// of any connection is held back, so a connection's frames may skip the queue NetSim keeps.
    pub fn in_use(&self) -> bool {
        self.used.load(Ordering::Acquire)
    }

    /// The NetSim of a new connection of `sub`.
    pub fn connection(&self, sub: &str) -> ConnNetSim {
        let subject = self.subjects().entry(Arc::from(sub)).or_default().clone();
        ConnNetSim {
            sim: self.clone(),
            sub: Arc::from(sub),
            subject,
        }
    }
}

/// Which way a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host → client.
    ToClient,
    /// Client → host.
    FromClient,
}

/// The NetSim one connection's messages go through: its subject's own setting, else the
/// host-wide one. Dropping the last connection of a subject without its own setting forgets it.
#[derive(Debug)]
pub struct ConnNetSim {
    sim: NetSim,
    sub: Arc<str>,
    subject: Arc<SubjectSim>,
}

impl ConnNetSim {
    /// The setting that applies to this connection's next message.
    pub fn get(&self) -> NetSimConfig {
        if !self.sim.used.load(Ordering::Acquire) {
            return NetSimConfig::default();
        }
        let own = *self.subject.own.read().unwrap_or_else(|p| p.into_inner());
        own.unwrap_or_else(|| self.sim.get())
    }

    /// NetSim held back (or dropped) a message going `dir`, by `delay` when it is known.
    pub fn held(&self, dir: Direction, delay: Option<Duration>) {
        let (count, worst) = match dir {
            Direction::ToClient => (
                &self.subject.held_to_client,
                &self.subject.worst_to_client_us,
            ),
            Direction::FromClient => (
                &self.subject.held_from_client,
                &self.subject.worst_from_client_us,
            ),
        };
        count.fetch_add(1, Ordering::Relaxed);
        if let Some(d) = delay {
            let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
            worst.fetch_max(us, Ordering::Relaxed);
        }
    }

    /// What NetSim added to this connection's round trip since the last call: per direction, the
    /// longest delay it applied (retransmission stalls included) or, when it held nothing back
    /// that way, the setting's mean one-way delay. Zero when NetSim is off.
    pub fn take_added_round_trip(&self) -> Duration {
        let cfg = self.get();
        let mean_us = (u64::from(cfg.latency_ms) * 1000 + u64::from(cfg.jitter_ms) * 500)
            * u64::from(!cfg.is_off());
        let to = self.subject.worst_to_client_us.swap(0, Ordering::Relaxed);
        let from = self.subject.worst_from_client_us.swap(0, Ordering::Relaxed);
        Duration::from_micros(to.max(mean_us).saturating_add(from.max(mean_us)))
    }
}

impl Drop for ConnNetSim {
    fn drop(&mut self) {
        let mut subjects = self.sim.subjects();
        let own = self
            .subject
            .own
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        // The map's reference and this one: the last connection of a subject with no setting.
        if !own && Arc::strong_count(&self.subject) == 2 {
            subjects.remove(&self.sub);
        }
    }
}
