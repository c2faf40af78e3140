//! A host process of one build: finding and checking the binary, a fresh directory and ticket
//! secret for each run, starting `serve` and reading its address, stopping it with SIGTERM.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// How long a host may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a host may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of a host's log shown when it fails.
const LOG_TAIL_LINES: usize = 25;
/// The line a host prints once it listens (see `serve` in cli/serve.rs).
const LISTENING: &str = "zonekeep listening on http://";

/// One of the two builds.
#[derive(Debug)]
pub(super) struct Binary {
    pub(super) path: PathBuf,
    pub(super) version: String,
}

/// Finds `given` (a path, or a name on PATH) and checks it is an executable `zonekeep`.
pub(super) fn resolve(flag: &str, given: &Path) -> Result<Binary> {
    let bare = given.components().count() == 1 && !given.exists();
    let path = if bare {
        std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(given))
                    .find(|p| p.is_file())
            })
            .ok_or_else(|| {
                anyhow!(
                    "{flag} {}: no such file, nor a program of that name on PATH",
                    given.display()
                )
            })?
    } else {
        given.to_path_buf()
    };
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("{flag} {}: no such file", path.display()),
        _ => anyhow!("{flag} {}: {e}", path.display()),
    })?;
    if meta.is_dir() {
        bail!(
            "{flag} {}: a directory, not a zonekeep binary (e.g. target/release/zonekeep)",
            path.display()
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            bail!(
                "{flag} {}: not executable (its mode is {:o}); point it at a built zonekeep binary",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
    }
    let path = path.canonicalize().unwrap_or(path);
    let version = version_of(&path).map_err(|e| anyhow!("{flag} {}: {e}", path.display()))?;
    Ok(Binary { path, version })
}

/// `BIN --version`, which must name zonekeep.
fn version_of(path: &Path) -> Result<String> {
    let mut child = std::process::Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow!("cannot run it: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`--version` did not answer within 20 s: not a zonekeep binary?");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    let out = out.lines().next().unwrap_or_default().trim().to_owned();
    if !status.success() || !out.starts_with("zonekeep") {
        bail!(
            "not a zonekeep binary (`--version` {status}: {:?})",
            out.chars().take(80).collect::<String>()
        );
    }
    Ok(out)
}

/// A fresh ticket secret (64 hex digits).
pub(super) fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        use std::hash::{BuildHasher, Hasher};
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(nanos);
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The last lines of a host's log.
pub(super) fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES);
    let tail = lines.get(from..).unwrap_or_default().join("\n");
    if tail.is_empty() {
        "(its log is empty)".to_owned()
    } else {
        format!("its log ({}) ends:\n{tail}", log.display())
    }
}

/// A fresh directory for one run's host: its data directory and its log. Removed after a run
/// that went well, kept (its log named in the error) after one that did not.
pub(super) struct RunDir(pub(super) PathBuf);

impl RunDir {
    pub(super) fn new(run: usize) -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "zonekeep-bench-ab-{}-{run}-{nanos:09}",
            std::process::id()
        ));
        std::fs::create_dir_all(dir.join("data"))
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl RunDir {
    pub(super) fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One build's host, killed if dropped while running.
pub(super) struct Host {
    pub(super) child: tokio::process::Child,
    pub(super) pid: u32,
    pub(super) addr: String,
    pub(super) log: PathBuf,
}

impl Host {
    /// Starts `bin serve` on a port it picks and waits for it to print its address.
    pub(super) async fn start(
        bin: &Path,
        serve: &[String],
        secret: &str,
        dir: &Path,
    ) -> Result<Host> {
        let log = dir.join("host.log");
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = tokio::process::Command::new(bin)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--dev-kinds"])
            .args(["--max-connections-per-ip", "100000"])
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(serve)
            .env("ZONEKEEP_TICKET_SECRET", secret)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("the host exited at once"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(addr) = text.lines().find_map(|l| l.trim().strip_prefix(LISTENING)) {
                let addr = addr.trim_end_matches('/').to_owned();
                return Ok(Host {
                    child,
                    pid,
                    addr,
                    log,
                });
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the host did not start: `{} serve` exited ({status}) before it listened; {}",
                    bin.display(),
                    log_tail(&log)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the host did not start: `{} serve` printed no \"{LISTENING}…\" line within \
                     {} s; {}",
                    bin.display(),
                    START_TIMEOUT.as_secs(),
                    log_tail(&log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then waits for the exit (kills it after [`STOP_TIMEOUT`]).
    pub(super) async fn stop(mut self) -> Result<ExitStatus> {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => {
                self.child.kill().await?;
                bail!(
                    "the host did not exit within {} s of SIGTERM and was killed; {}",
                    STOP_TIMEOUT.as_secs(),
                    log_tail(&self.log)
                )
            }
        }
    }
}
