//! The HTTP client the benches that speak HTTP share (`bench match`, `bench boards`, and
//! `bench chat` for its zone paths): one pooled HTTP/1 client, one call with a time limit and a
//! bound on the answer read, which refusals are worth another try, and the percent-encoding of a
//! path segment or query value.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Method;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde_json::Value;

/// Largest answer read.
const MAX_ANSWER: usize = 64 << 10;
/// How long an idle pooled connection is kept: under the host's default
/// `--header-read-timeout-ms` (5 s), after which it closes a kept-alive connection itself.
const POOL_IDLE: Duration = Duration::from_secs(4);

/// The pooled HTTP/1 client the HTTP benches (`bench match`, `bench boards`) share.
pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A pooled client for many requests in flight at once: no Nagle delay, a connect timeout, and
/// idle connections dropped before the host closes them itself.
pub(crate) fn http_client() -> HttpClient {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .build(http)
}

/// One answer: its status and JSON body (`Null` when it was not JSON).
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

impl Reply {
    /// `"STAGE STATUS CODE"` for a refusal.
    pub(crate) fn failure(&self, stage: &str) -> String {
        let code = self.body["error"]["code"].as_str().unwrap_or("-");
        format!("{stage} {} {code}", self.status)
    }
}

/// One call; `Err` names why there was no answer (`"STAGE 0 WHY"` is made of it).
pub(crate) async fn call(
    client: &HttpClient,
    method: Method,
    url: &str,
    bearer: Option<&str>,
    body: Option<&Value>,
    limit: Duration,
) -> Result<Reply, &'static str> {
    let mut req = hyper::Request::builder().method(method).uri(url);
    if let Some(b) = bearer {
        req = req.header("authorization", format!("Bearer {b}"));
    }
    let body = match body {
        Some(b) => {
            req = req.header("content-type", "application/json");
            Full::new(Bytes::from(b.to_string()))
        }
        None => Full::new(Bytes::new()),
    };
    let req = req.body(body).map_err(|_| "bad_request")?;
    let exchange = async {
        let resp = client.request(req).await.map_err(|e| {
            if e.is_connect() {
                "connect"
            } else {
                "transport"
            }
        })?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|_| "read")?
            .to_bytes();
        Ok(Reply {
            status,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        })
    };
    tokio::time::timeout(limit, exchange)
        .await
        .unwrap_or(Err("timeout"))
}

/// Whether a refused long poll or heartbeat is worth another try (no answer, 429, 5xx).
pub(crate) fn retryable(status: u16) -> bool {
    status == 0 || status == 429 || status >= 500
}

/// What is percent-encoded in a path segment or query value: all but the unreserved characters.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A path segment or query value, percent-encoded.
pub(crate) fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}
