//! `serve` flags for persistence, layered over the config file like the others
//! (flag > environment > TOML key > default).

use std::path::PathBuf;

use clap::Args;
use zonekeep_server::{Secret, ServerConfig};

/// Where zones and facts are kept.
#[derive(Debug, Args)]
pub struct PersistArgs {
    /// Store for zone saves and the fact ledger: "sqlite" (a file in --data-dir) or a
    /// postgres:// URL [default: sqlite]. TOML key `store`.
    #[arg(long, env = "ZONEKEEP_STORE", hide_env_values = true)]
    store: Option<String>,
    /// Directory of the SQLite database [default: ./data]. TOML key `data_dir`.
    #[arg(long, env = "ZONEKEEP_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Periodic zone save interval, e.g. 5s, 500ms, 2m [default: 5s]. TOML key `save_every`.
    #[arg(long, env = "ZONEKEEP_SAVE_EVERY")]
    save_every: Option<String>,
    /// How long a lasting world's newest state may wait unsaved (its saves failing or hung)
    /// before the world halts, e.g. 15s [default: three of its kind's save intervals]. TOML key
    /// `lasting_halt_after`.
    #[arg(long, env = "ZONEKEEP_LASTING_HALT_AFTER", value_name = "DURATION")]
    lasting_halt_after: Option<String>,
    /// Where facts are committed: "ledger" or "webhook:http://host/path" [default: ledger].
    /// TOML key `fact_sink`.
    #[arg(long, env = "ZONEKEEP_FACT_SINK")]
    fact_sink: Option<String>,
    /// Where durable calls no in-process handler takes are POSTed: an http:// URL [default:
    /// none]. TOML key `call_webhook`.
    #[arg(long, env = "ZONEKEEP_CALL_WEBHOOK", value_name = "URL")]
    call_webhook: Option<String>,
    /// How long answered durable calls stay in the call journal, e.g. 168h [default: 168h, 7
    /// days]. TOML key `call_results_keep`.
    #[arg(long, env = "ZONEKEEP_CALL_RESULTS_KEEP", value_name = "DURATION")]
    call_results_keep: Option<String>,
    /// Dev/bench: delay every store call by this many ms (simulates slow storage) [default: 0].
    /// TOML key `store_delay_ms`.
    #[arg(long, env = "ZONEKEEP_STORE_DELAY_MS", value_name = "MS")]
    store_delay: Option<u64>,
}

impl PersistArgs {
    /// Writes the given flags over `cfg` (validated afterwards with the rest).
    pub fn apply(&self, cfg: &mut ServerConfig) {
        if let Some(s) = &self.store {
            cfg.store = Secret::new(s.clone());
        }
        if let Some(d) = &self.data_dir {
            cfg.data_dir = d.clone();
        }
        if let Some(s) = &self.save_every {
            cfg.save_every = s.clone();
        }
        if let Some(s) = &self.lasting_halt_after {
            cfg.lasting_halt_after = Some(s.clone());
        }
        if let Some(s) = &self.fact_sink {
            cfg.fact_sink = s.clone();
        }
        if let Some(s) = &self.call_webhook {
            cfg.call_webhook = Some(s.clone());
        }
        if let Some(s) = &self.call_results_keep {
            cfg.call_results_keep = s.clone();
        }
        if let Some(ms) = self.store_delay {
            cfg.store_delay_ms = ms;
        }
    }
}
