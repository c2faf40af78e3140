//! The hosts under test: real `zonekeep serve` processes sharing one PostgreSQL schema, each with
//! its own `--host-id`, the admin API, the dev kinds and one simulation thread, logging to a file
//! of its own. Also their admin API and metrics, and the two ways a host ends: `kill -9` and
//! SIGTERM (a drain).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use zonekeep_bench::prom::Scrape;

use crate::http;

/// The admin token every host is started with.
pub const ADMIN_TOKEN: &str = "fleet-bench-admin-token-0123456789";

/// What every host of one run shares.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    /// The `zonekeep` binary.
    pub binary: PathBuf,
    /// The store URL (PostgreSQL, with the run's schema as search path).
    pub store: String,
    /// The ticket secret hosts verify and the bench mints with.
    pub secret: String,
    /// Directory for the hosts' logs.
    pub log_dir: PathBuf,
    /// A prefix making host ids unique to the run.
    pub run: String,
}

/// One running `zonekeep serve`.
#[derive(Debug)]
pub struct Host {
    /// Short name (`a`, `b`, `c`).
    pub name: String,
    /// Its `--host-id`.
    pub id: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Its log (stderr).
    pub log: PathBuf,
    child: Option<Child>,
}

impl FleetSpec {
    /// Starts hosts named `names`, one after the other (each registers before the next starts).
    pub async fn start(&self, names: &[&str]) -> Result<Vec<Host>, String> {
        let mut hosts = Vec::new();
        for name in names {
            hosts.push(self.start_one(name).await?);
        }
        Ok(hosts)
    }

    async fn start_one(&self, name: &str) -> Result<Host, String> {
        let id = format!("{}-{name}", self.run);
        let log = self.log_dir.join(format!("host-{name}.log"));
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut child = Command::new(&self.binary)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--sim-threads",
                "1",
                "--dev-kinds",
            ])
            .args(["--store", &self.store, "--host-id", &id])
            .args(["--admin-token", ADMIN_TOKEN])
            // Every client of the bench comes from 127.0.0.1.
            .args(["--max-connections-per-ip", "100000"])
            .env("ZONEKEEP_TICKET_SECRET", &self.secret)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| format!("{}: {e}", self.binary.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err("no stdout pipe".into());
        };
        let mut host = Host {
            name: name.to_owned(),
            id,
            addr: String::new(),
            log,
            child: Some(child),
        };
        // The host prints `zonekeep listening on http://ADDR` once it has joined the fleet.
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        match line.trim().strip_prefix("zonekeep listening on http://") {
            Some(addr) => host.addr = addr.to_owned(),
            None => {
                return Err(format!(
                    "host {name} did not start ({line:?}); its log:\n{}",
                    host.log_text()
                ))
            }
        }
        Ok(host)
    }
}

impl Host {
    /// The entry URL of `zone` at this host.
    pub fn zone_url(&self, zone: &str) -> String {
        format!("ws://{}/zones/{zone}", self.addr)
    }

    /// `GET path` on the admin API, as JSON.
    pub async fn admin_get(&self, path: &str) -> Result<Value, String> {
        let r = http::request(&self.addr, "GET", path, Some(ADMIN_TOKEN), None).await?;
        if r.status != 200 {
            return Err(format!("GET {path}: {} {}", r.status, r.body));
        }
        r.json()
    }

    /// Creates `zone` of `kind` with `params` on host `on` (an id) through this host's admin API.
    pub async fn create_zone(
        &self,
        zone: &str,
        kind: &str,
        params: &serde_json::Value,
        on: &str,
    ) -> Result<(), String> {
        let mut body = json!({"id": zone, "kind": kind, "host": on});
        if !params.is_null() {
            body["params"] = params.clone();
        }
        let r = http::request(
            &self.addr,
            "POST",
            "/admin/zones",
            Some(ADMIN_TOKEN),
            Some(&body),
        )
        .await?;
        if r.status != 201 {
            return Err(format!("create {zone} on {on}: {} {}", r.status, r.body));
        }
        Ok(())
    }

    /// Ids of the zones running on this host (from its own `/admin/zones`).
    pub async fn running_zones(&self) -> Result<Vec<String>, String> {
        let v = self.admin_get("/admin/zones").await?;
        Ok(v["zones"]
            .as_array()
            .map(|zs| {
                zs.iter()
                    .filter(|z| z["running"] == true)
                    .filter_map(|z| z["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// One scrape of `/metrics`.
    pub async fn metrics(&self) -> Result<Scrape, String> {
        let r = http::request(&self.addr, "GET", "/metrics", None, None).await?;
        if r.status != 200 {
            return Err(format!("GET /metrics: {}", r.status));
        }
        Ok(Scrape::parse(&r.body))
    }

    /// `kill -9`: the process dies at once, without a word to anyone.
    pub fn kill(&mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        child
            .kill()
            .map_err(|e| format!("kill {}: {e}", self.name))?;
        child.wait().map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Sends SIGTERM (the host drains and exits).
    pub fn sigterm(&self) -> Result<(), String> {
        let Some(child) = &self.child else {
            return Err(format!("host {} is not running", self.name));
        };
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .map_err(|e| format!("kill -TERM: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -TERM {}: {status}", child.id()))
        }
    }

    /// Waits up to `bound` for the process to exit; its status, or `None` if it is still running
    /// (it is then killed).
    pub async fn wait_exit(&mut self, bound: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The host's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Lines of the log containing `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log_text()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Stops the host with SIGTERM and waits (bounded) for it; a host that does not exit in time
    /// is killed.
    pub async fn stop(&mut self) {
        if self.child.is_some() && self.sigterm().is_ok() {
            let _ = self.wait_exit(Duration::from_secs(20)).await;
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Whatever happened to the run, no host outlives it.
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Where a run keeps its logs: `dir`, created.
pub fn log_dir(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir.to_path_buf())
}
