//! A running `zonekeep relay` for tests: started on a free port of loopback in front of a host,
//! and killed (`kill -9`) on demand or when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The relay credential the relay tests start hosts and relays with.
pub const RELAY_TOKEN: &str = "relay-token-0123456789abcdef";

/// A running `zonekeep relay`.
pub struct Relay {
    child: Option<Child>,
    /// Where its clients connect (`host:port`).
    pub addr: String,
}

impl Relay {
    /// Starts a relay of the host at `origin` (`host:port`) with relay credential `token`,
    /// logging to `log`, with `extra` flags.
    pub fn start(origin: &str, token: &str, log: &Path, extra: &[&str]) -> Relay {
        let log_file = std::fs::File::create(log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_zonekeep"))
            .args([
                "relay",
                "--origin",
                &format!("http://{origin}"),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env("ZONEKEEP_RELAY_TOKEN", token)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("zonekeep relay listening on http://")
            .unwrap_or_else(|| panic!("relay did not start: {line:?}"))
            .to_owned();
        Relay {
            child: Some(child),
            addr,
        }
    }

    /// Asks it to shut down (SIGTERM), as an operator does.
    pub fn terminate(&self) {
        super::send_signal(self.child.as_ref().unwrap().id(), "-TERM");
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill();
    }
}
