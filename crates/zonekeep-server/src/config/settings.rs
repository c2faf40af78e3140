//! The settings a [`ServerConfig`]'s raw values are turned into for the parts of the host that
//! run on them: a zone kind's limits under the host's ceilings, the parsed matchmaking queues and
//! leaderboards, the content policy, the persistence settings, the ticket keys and time rules,
//! and the thread counts resolved against the cores. Deriving one checks its values, so
//! [`ServerConfig::validate`] derives each fallible one.

use std::time::Duration;

use super::{invalid, ConfigError, ServerConfig};
use crate::ticket::{KeyRing, TicketKey, TicketPolicy};

impl ServerConfig {
    /// `config` (a zone kind's) under this host's per-zone ceilings (`zone_max_entities`,
    /// `zone_max_fact_bytes`, `zone_max_facts_per_second`).
    pub fn zone_limits(&self, mut config: zonekeep_core::ZoneConfig) -> zonekeep_core::ZoneConfig {
        config.max_entities = config.max_entities.min(self.zone_max_entities);
        config.max_fact_bytes = config.max_fact_bytes.min(self.zone_max_fact_bytes);
        config.max_facts_per_second = config
            .max_facts_per_second
            .min(self.zone_max_facts_per_second);
        config
    }

    /// The matchmaking queues, parsed (docs/MATCHMAKING.md).
    pub fn match_queues(&self) -> Result<Vec<crate::matchmaker::QueueSpec>, ConfigError> {
        let mut out: Vec<crate::matchmaker::QueueSpec> = Vec::new();
        for text in &self.match_queues {
            let q = crate::matchmaker::QueueSpec::parse(text)
                .map_err(|why| invalid("match_queues", &why))?;
            if out.iter().any(|o| o.name == q.name) {
                return Err(invalid("match_queues", "names a queue twice"));
            }
            out.push(q);
        }
        Ok(out)
    }

    /// The configured leaderboards, parsed (docs/LEADERBOARDS.md).
    pub fn boards(&self) -> Result<Vec<zonekeep_store::BoardDef>, ConfigError> {
        let mut out: Vec<zonekeep_store::BoardDef> = Vec::new();
        for text in &self.boards {
            let b = crate::boards::spec::parse(text).map_err(|why| invalid("boards", &why))?;
            if out.iter().any(|o| o.name == b.name) {
                return Err(invalid("boards", "names a board twice"));
            }
            out.push(b);
        }
        Ok(out)
    }

    /// The content versions (`content_version`, `min_content_version`), checked: each must be a
    /// dotted number (PROTOCOL.md §4.1.2), and the host's own must not be older than the minimum
    /// it requires of clients.
    pub fn content_policy(&self) -> Result<crate::content::ContentPolicy, ConfigError> {
        use crate::content::{ContentPolicy, ContentVersion};
        let current = match self.content_version.as_str() {
            "" => None,
            v => Some(
                ContentVersion::parse(v).map_err(|error| ConfigError::ContentVersion {
                    key: "content_version",
                    flag: "content-version",
                    error,
                })?,
            ),
        };
        let min = match &self.min_content_version {
            None => None,
            Some(v) => {
                Some(
                    ContentVersion::parse(v).map_err(|error| ConfigError::ContentVersion {
                        key: "min_content_version",
                        flag: "min-content-version",
                        error,
                    })?,
                )
            }
        };
        if let (Some(c), Some(m)) = (&current, &min) {
            if c < m {
                return Err(invalid(
                    "content_version",
                    format!(
                        "{c} is older than min_content_version {m}: the host would refuse its own clients"
                    ),
                ));
            }
        }
        Ok(ContentPolicy::new(current, min))
    }

    /// The persistence settings (`store`, `data_dir`, `save_every`,
    /// `fact_sink`, `store_delay_ms`), checked. Final saves at shutdown are
    /// bounded by the host's one shutdown deadline (`shutdown_timeout_ms`).
    pub fn persist_config(&self) -> Result<crate::persist::PersistConfig, ConfigError> {
        use crate::persist::{parse_duration, FactSinkSpec, PersistConfig};
        let store = self.store.expose().trim();
        let known = store.is_empty()
            || store.eq_ignore_ascii_case("sqlite")
            || store.starts_with("postgres://")
            || store.starts_with("postgresql://");
        if !known {
            // Only the scheme: the rest may hold credentials.
            let scheme: String = store
                .split(':')
                .next()
                .unwrap_or("")
                .chars()
                .take(32)
                .collect();
            return Err(invalid(
                "store",
                format!("must be \"sqlite\" or a postgres:// URL, not {scheme:?}..."),
            ));
        }
        let save_every =
            parse_duration(&self.save_every).map_err(|e| invalid("save_every", e.to_string()))?;
        if save_every.is_zero() {
            return Err(invalid("save_every", "must be greater than 0"));
        }
        let lasting_halt_after = self
            .lasting_halt_after
            .as_deref()
            .map(|s| {
                parse_duration(s)
                    .map_err(|e| invalid("lasting_halt_after", e.to_string()))
                    .and_then(|d| {
                        if d.is_zero() {
                            Err(invalid("lasting_halt_after", "must be greater than 0"))
                        } else {
                            Ok(d)
                        }
                    })
            })
            .transpose()?;
        let fact_sink: FactSinkSpec = self
            .fact_sink
            .parse()
            .map_err(|e: crate::persist::ConfigError| invalid("fact_sink", e.to_string()))?;
        if let FactSinkSpec::Webhook(url) = &fact_sink {
            if !url.starts_with("http://") {
                return Err(invalid(
                    "fact_sink",
                    "the webhook URL must start with http:// (https is not supported)",
                ));
            }
        }
        let call_webhook = match self.call_webhook.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(url) if url.starts_with("http://") => Some(url.to_owned()),
            Some(_) => {
                return Err(invalid(
                    "call_webhook",
                    "the webhook URL must start with http:// (https is not supported)",
                ))
            }
        };
        let keep = parse_duration(&self.call_results_keep)
            .map_err(|e| invalid("call_results_keep", e.to_string()))?;
        if keep < Duration::from_secs(60) {
            return Err(invalid("call_results_keep", "must be at least 1m"));
        }
        Ok(PersistConfig {
            store: store.to_owned(),
            call_webhook,
            calls: crate::persist::CallWorkerConfig {
                keep,
                ..crate::persist::CallWorkerConfig::default()
            },
            data_dir: self.data_dir.clone(),
            save_every,
            lasting_halt_after,
            fact_sink,
            store_delay: (self.store_delay_ms > 0)
                .then(|| Duration::from_millis(self.store_delay_ms)),
            ..PersistConfig::default()
        })
    }

    /// The configured ticket keys, or `None` when no key is configured.
    pub fn key_ring(&self) -> Result<Option<KeyRing>, ConfigError> {
        let mut keys = Vec::new();
        if let Some(s) = &self.ticket_secret {
            keys.push(TicketKey::new(
                self.ticket_kid.clone(),
                s.expose().as_bytes(),
                false,
            )?);
        }
        for k in &self.ticket_keys {
            keys.push(TicketKey::new(
                k.kid.clone(),
                k.secret.expose().as_bytes(),
                k.retired,
            )?);
        }
        if keys.is_empty() {
            return Ok(None);
        }
        Ok(Some(KeyRing::new(keys)?))
    }

    /// Ticket time rules.
    pub fn ticket_policy(&self) -> TicketPolicy {
        TicketPolicy {
            leeway_secs: self.ticket_leeway_secs,
            max_lifetime_secs: self.ticket_max_lifetime_secs,
        }
    }

    /// Simulation threads to start (resolving 0 to the core count).
    pub fn sim_thread_count(&self) -> usize {
        if self.sim_threads > 0 {
            self.sim_threads
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    }

    /// The WebSocket I/O threads to start: as configured, else one per two cores (at least one):
    /// on two cores one I/O thread writing every socket was cheaper than two (BENCHMARKS.md).
    pub fn ws_io_thread_count(&self) -> usize {
        io_thread_count(self.ws_io_threads)
    }

    /// The WebTransport endpoint's runtime threads: as configured, else one per two cores (at
    /// least one), as [`ServerConfig::ws_io_thread_count`].
    pub fn webtransport_thread_count(&self) -> usize {
        io_thread_count(self.webtransport_threads)
    }

    /// `ms` as a duration (helper for the `*_ms` fields).
    pub fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }
}

/// WebSocket I/O threads for a `configured` count (a host's or a relay's): that many, or with 0
/// one per two cores, at least one.
pub(crate) fn io_thread_count(configured: usize) -> usize {
    if configured > 0 {
        configured
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get() / 2)
            .unwrap_or(1)
            .max(1)
    }
}
