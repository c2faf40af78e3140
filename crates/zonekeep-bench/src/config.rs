//! What one `zonekeep bench` run does: target, bots, workload, timing, authentication, decoding,
//! network simulation and where the server's cost is read from.

use std::time::Duration;

use zonekeep_client::NetSimConfig;

use crate::arena::ArenaParams;
use crate::template::{InputFormat, Template};

/// Where bots get their tickets.
#[derive(Clone)]
pub enum Auth {
    /// Mint HS256 tickets locally with the host's secret.
    Secret {
        /// The shared secret (at least 32 bytes).
        secret: String,
        /// Key id the host knows it by.
        kid: String,
    },
    /// `GET <url>?bot=<b>&zone=<zone>` returns `{"zone": "...", "ticket": "..."}`: for apps with
    /// their own authentication in front of the host.
    Join {
        /// The endpoint (plain `http://`).
        url: String,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is a credential: never printed.
        match self {
            Auth::Secret { kid, .. } => f
                .debug_struct("Secret")
                .field("kid", kid)
                .finish_non_exhaustive(),
            Auth::Join { url } => f.debug_struct("Join").field("url", url).finish(),
        }
    }
}

/// Which bots decode what they receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeMode {
    /// Bot 0 decodes (and, in the arena, validates); the others count bytes and read only each
    /// Delta's header (tick and ack), so one bots process does not saturate a core.
    Probe,
    /// Every bot decodes into a replica with interpolation (the real client cost).
    All,
    /// Nobody decodes beyond Delta headers.
    None,
}

impl DecodeMode {
    /// `probe`, `all` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            DecodeMode::Probe => "probe",
            DecodeMode::All => "all",
            DecodeMode::None => "none",
        }
    }

    /// Whether bot number `i` (0-based within this run) decodes.
    pub fn decodes(self, i: u32) -> bool {
        match self {
            DecodeMode::Probe => i == 0,
            DecodeMode::All => true,
            DecodeMode::None => false,
        }
    }
}

/// What the bots do once joined.
#[derive(Debug, Clone)]
pub enum Workload {
    /// Send `templates` in turn at `rate` inputs per second.
    Generic {
        /// Input templates (at least one).
        templates: Vec<Template>,
        /// Encoding of rendered inputs.
        format: InputFormat,
    },
    /// The arena workload: inputs per WORKLOADS.md arena §3, probe checks per §5.
    Arena(ArenaParams),
    /// Shots at `rate` per second at an entity as each bot draws it (every bot decodes); the
    /// zone's verdicts are counted ([`crate::aim`]).
    Aim(crate::aim::AimTarget),
    /// Idle connections: no inputs, a Ping every `ping_every` to stay within the idle timeout.
    Idle {
        /// Interval between keep-alive Pings.
        ping_every: Duration,
    },
}

impl Workload {
    /// `generic`, `arena`, `aim` or `idle`.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Generic { .. } => "generic",
            Workload::Arena(_) => "arena",
            Workload::Aim(_) => "aim",
            Workload::Idle { .. } => "idle",
        }
    }
}

/// Which zones the bots join: `pattern` with `{i}` replaced by `b % count`, or one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneTarget {
    /// Zone id or pattern containing `{i}`.
    pub pattern: String,
    /// Number of zones the pattern spreads over (1 without `{i}`).
    pub count: u32,
}

impl ZoneTarget {
    /// The zone of bot `b`.
    pub fn zone_of(&self, b: u32) -> String {
        if self.pattern.contains("{i}") {
            self.pattern
                .replace("{i}", &(b % self.count.max(1)).to_string())
        } else {
            self.pattern.clone()
        }
    }

    /// Number of distinct zones.
    pub fn distinct(&self) -> u32 {
        if self.pattern.contains("{i}") {
            self.count.max(1)
        } else {
            1
        }
    }
}

/// Where the server's CPU and memory come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSource {
    /// Read `/proc/<pid>/stat` and `status` (the server runs on this machine).
    pub pid: Option<u32>,
    /// Scrape this `/metrics` URL (tick figures always; CPU and RSS when no pid is given).
    pub metrics_url: Option<String>,
}

/// One run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Server base URL (`ws://host:port`); zones are at `/zones/{id}`.
    pub url: String,
    /// Zones joined.
    pub zones: ZoneTarget,
    /// Bots in this process.
    pub bots: u32,
    /// Index of the first bot (distinct identities across machines).
    pub bot_offset: u32,
    /// Inputs per second per bot (generic, aim and arena workloads; the arena is defined at 10).
    pub rate: f64,
    /// Warm-up after every bot joined.
    pub warmup: Duration,
    /// Measured window.
    pub duration: Duration,
    /// Tickets.
    pub auth: Auth,
    /// What bots do.
    pub workload: Workload,
    /// Who decodes.
    pub decode: DecodeMode,
    /// Client-side network simulation for every bot.
    pub netsim: NetSimConfig,
    /// Server cost source.
    pub server: ServerSource,
    /// Joins in flight at once.
    pub join_concurrency: usize,
    /// Warm-up starts at this deadline even if some bots have not joined.
    pub join_deadline: Duration,
    /// Handshake timeout per join.
    pub handshake_timeout: Duration,
    /// Reconnect attempts per drop. The default outlives a fleet's takeover of a dead host's
    /// zones (10 s): about a minute of attempts.
    pub reconnect_attempts: u32,
    /// Longest wait between two reconnect attempts (the wait doubles from 100 ms up to it).
    pub reconnect_backoff_max: Duration,
    /// Where the server's CPU, memory and tick figures are read when the bots' zone runs on
    /// another host than the entry URL's (a fleet): at the owner's `/metrics`, which the bots
    /// learn from the Redirect they follow.
    pub follow_owner: bool,
    /// Show the live progress line.
    pub progress: bool,
    /// Zone kind tickets ask for when they create a zone (generic workloads; the arena sets its own).
    pub zone_kind: Option<String>,
    /// Create params tickets carry (generic workloads; the arena sends its [`ArenaParams`]).
    pub zone_params: Option<serde_json::Value>,
    /// How bots reach the host.
    pub transport: Transport,
    /// When WebTransport bots acknowledge States.
    pub state_acks: StateAcks,
    /// Bots join as observers (with minted tickets): they watch and send no inputs.
    pub observers: bool,
}

/// When a WebTransport bot acknowledges the States it applied (PROTOCOL.md §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateAcks {
    /// As the SDKs do: held up to [`zonekeep_client::connection::webtransport::STATE_ACK_HOLD`]
    /// for an input to carry it, then sent in an Inputs datagram of its own.
    #[default]
    Held,
    /// An Inputs datagram at once for every newer State: what the hold saves, measured by not
    /// holding.
    EveryState,
    /// Only in the Inputs datagrams its own inputs go in: what acknowledging each State costs
    /// the host, measured by leaving it out (the host then deltas against older States).
    WithInputs,
}

impl StateAcks {
    /// `held`, `every-state` or `with-inputs`.
    pub fn name(self) -> &'static str {
        match self {
            StateAcks::Held => "held",
            StateAcks::EveryState => "every-state",
            StateAcks::WithInputs => "with-inputs",
        }
    }
}

/// How bots reach the host (PROTOCOL.md §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Deltas in order over WebSocket.
    #[default]
    WebSocket,
    /// States in datagrams over WebTransport (light bots only: they read each State's header,
    /// acknowledge its tick and repeat their unacknowledged inputs).
    WebTransport,
}

impl Transport {
    /// `websocket` or `webtransport`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::WebTransport => "webtransport",
        }
    }
}

impl BenchConfig {
    /// A config with the arena workload's defaults around `url`, `zone`, `bots` and `auth`.
    pub fn new(url: impl Into<String>, zone: impl Into<String>, bots: u32, auth: Auth) -> Self {
        Self {
            url: url.into(),
            zones: ZoneTarget {
                pattern: zone.into(),
                count: 1,
            },
            bots,
            bot_offset: 0,
            rate: 10.0,
            warmup: Duration::from_secs(5),
            duration: Duration::from_secs(20),
            auth,
            workload: Workload::Idle {
                ping_every: Duration::from_secs(10),
            },
            decode: DecodeMode::Probe,
            netsim: NetSimConfig::default(),
            server: ServerSource::default(),
            join_concurrency: 10,
            join_deadline: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            reconnect_attempts: 60,
            reconnect_backoff_max: Duration::from_secs(1),
            follow_owner: true,
            progress: false,
            zone_kind: None,
            zone_params: None,
            transport: Transport::WebSocket,
            state_acks: StateAcks::default(),
            observers: false,
        }
    }

    /// The WebSocket URL of `zone`.
    pub fn zone_url(&self, zone: &str) -> String {
        format!("{}/zones/{}", self.url.trim_end_matches('/'), zone)
    }

    /// Interval between one bot's inputs (`None`: the workload sends none).
    pub fn input_interval(&self) -> Option<Duration> {
        match &self.workload {
            Workload::Generic { .. } | Workload::Aim(_) | Workload::Arena(_)
                if self.rate > 0.0 && self.rate.is_finite() =>
            {
                Some(Duration::from_secs_f64(1.0 / self.rate))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_patterns_spread_bots() {
        let z = ZoneTarget {
            pattern: "many-{i}".into(),
            count: 1000,
        };
        assert_eq!(z.zone_of(0), "many-0");
        assert_eq!(z.zone_of(1999), "many-999");
        assert_eq!(z.distinct(), 1000);
        let one = ZoneTarget {
            pattern: "arena-1".into(),
            count: 7,
        };
        assert_eq!(one.zone_of(5), "arena-1");
        assert_eq!(one.distinct(), 1);
    }

    #[test]
    fn secrets_are_not_printed() {
        let a = Auth::Secret {
            secret: "super-secret-value-that-is-32-bytes!".into(),
            kid: "k1".into(),
        };
        assert!(!format!("{a:?}").contains("super-secret"));
        let c = BenchConfig::new("ws://127.0.0.1:7350/", "z", 1, a);
        assert_eq!(c.zone_url("z"), "ws://127.0.0.1:7350/zones/z");
        assert_eq!(c.input_interval(), None);
    }
}
