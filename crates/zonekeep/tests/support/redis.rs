//! A private `redis-server` for tests of a Redis index (the matchmaker's candidates, the
//! leaderboards' rankings): on a port of its own, with nothing saved to disk, so a test can
//! flush it and stop it. The binary comes from `ZONEKEEP_REDIS_SERVER` (see `service_url`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A private `redis-server` on a port of its own, killed when dropped.
pub struct Redis {
    child: Option<Child>,
    port: u16,
}

impl Redis {
    /// Starts `bin` on a free port, working in `dir`; waits until it answers PING.
    pub async fn start(bin: &str, dir: &Path) -> Redis {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let r = Redis {
            child: Some(child),
            port,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while r.command(&["PING"]).await.is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        r
    }

    /// `redis://127.0.0.1:PORT`, for the host's flags.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one command (RESP) and answers its reply's first line; `None` when nothing answers.
    pub async fn command(&self, args: &[&str]) -> Option<String> {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .ok()?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = vec![0u8; 512];
        let n = s.read(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        Some(text.lines().next().unwrap_or_default().to_owned())
    }

    /// Kills the server (it is not restarted).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}
