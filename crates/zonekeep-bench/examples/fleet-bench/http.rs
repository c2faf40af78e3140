//! A minimal HTTP/1.1 client for the host's admin API and `/metrics`: one request per connection
//! (`Connection: close`), a bearer token, an optional JSON body. The bench talks only to hosts it
//! started on loopback, so nothing more (TLS, keep-alive, redirects) is needed.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest a request may take, connect to last byte.
const TIMEOUT: Duration = Duration::from_secs(15);
/// Largest response read (the admin zone list of a thousand zones is well under it).
const MAX_RESPONSE: u64 = 16 << 20;

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body, de-chunked.
    pub body: String,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_str(&self.body).map_err(|e| format!("{e}: {}", self.body))
    }
}

/// Sends `method path` to `addr` (`host:port`) with `token` as bearer and `body` as JSON.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<Response, String> {
    let what = format!("{method} http://{addr}{path}");
    tokio::time::timeout(TIMEOUT, send(addr, method, path, token, body))
        .await
        .map_err(|_| format!("{what}: timed out"))?
        .map_err(|e| format!("{what}: {e}"))
}

async fn send(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<Response, String> {
    let mut s = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if body.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", payload.len()));
    s.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    s.write_all(payload.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .await
        .map_err(|e| format!("read: {e}"))?;
    parse(&String::from_utf8_lossy(&raw))
}

/// Splits a whole response into status and body, decoding a chunked body.
fn parse(text: &str) -> Result<Response, String> {
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no response head in {} bytes", text.len()))?;
    let status = head
        .split_ascii_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {head:?}"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Ok(Response { status, body })
}

/// The payload of a chunked body.
fn dechunk(mut rest: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").ok_or("truncated chunked body")?;
        let size = size.split(';').next().unwrap_or_default().trim();
        let n = usize::from_str_radix(size, 16).map_err(|e| format!("chunk size {size:?}: {e}"))?;
        if n == 0 {
            return Ok(out);
        }
        let chunk = after.get(..n).ok_or("truncated chunk")?;
        out.push_str(chunk);
        rest = after
            .get(n..)
            .unwrap_or_default()
            .trim_start_matches("\r\n");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_the_status_and_a_plain_or_chunked_body() {
        let plain = parse("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((plain.status, plain.body.as_str()), (201, "{}"));
        let chunked = parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nzone\r\n5;x=1\r\nkeep!\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((chunked.status, chunked.body.as_str()), (200, "zonekeep!"));
        assert!(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab").is_err());
        assert!(parse("no head").is_err());
    }
}
