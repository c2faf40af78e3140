//! A minimal HTTP/1 GET over plain TCP (hyper's client), for `/metrics` scrapes and the `--join`
//! ticket endpoint. Bodies are capped so a misbehaving endpoint cannot exhaust memory.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::error::BenchError;

/// Largest response body read.
pub const MAX_BODY: usize = 16 << 20;

/// A reusable HTTP client.
#[derive(Clone)]
pub struct Http {
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    timeout: Duration,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Default for Http {
    fn default() -> Self {
        Self::new(Duration::from_secs(10))
    }
}

impl Http {
    /// A client whose requests fail after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            client: Client::builder(TokioExecutor::new()).build_http(),
            timeout,
        }
    }

    /// `GET url`, returning the body of a 2xx answer as text.
    pub async fn get_text(&self, url: &str) -> Result<String, BenchError> {
        let err = |reason: String| BenchError::Http {
            url: url.to_owned(),
            reason,
        };
        let uri: hyper::Uri = url.parse().map_err(|e| err(format!("bad url: {e}")))?;
        let fut = async {
            let resp = self.client.get(uri).await.map_err(|e| err(e.to_string()))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| err(e.to_string()))?
                .to_bytes();
            let text = String::from_utf8_lossy(&body).into_owned();
            if !status.is_success() {
                return Err(err(format!(
                    "status {status}: {}",
                    text.chars().take(200).collect::<String>()
                )));
            }
            Ok(text)
        };
        tokio::time::timeout(self.timeout, fut)
            .await
            .map_err(|_| err("timed out".into()))?
    }
}

/// `http://host:port/metrics` for a `ws://host:port` server URL.
pub fn metrics_url_for(ws_url: &str) -> String {
    http_url_for(ws_url, "/metrics")
}

/// `http://host:port{path}` for a `ws://host:port` server URL (`wss` gives `https`).
pub fn http_url_for(ws_url: &str, path: &str) -> String {
    let base = ws_url.trim_end_matches('/');
    let base = base
        .strip_prefix("ws://")
        .map(|r| format!("http://{r}"))
        .or_else(|| base.strip_prefix("wss://").map(|r| format!("https://{r}")))
        .unwrap_or_else(|| base.to_owned());
    format!("{base}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_url_follows_the_ws_url() {
        assert_eq!(
            metrics_url_for("ws://127.0.0.1:7350/"),
            "http://127.0.0.1:7350/metrics"
        );
        assert_eq!(metrics_url_for("wss://h:1"), "https://h:1/metrics");
    }
}
