//! The webhook sink: an app's own backend receives facts over HTTP.
//!
//! Each fact is `POST`ed as JSON (`{"key", "zone_id", "kind", "principal",
//! "payload", "tick"}`) with an `Idempotency-Key` header equal to the fact's
//! key, the same on every retry and re-send, so the backend can deduplicate.
//! The answer decides the outcome:
//!
//! | response | outcome |
//! | --- | --- |
//! | 2xx | settled; the result is the JSON body (`null` if empty, a string if not JSON) |
//! | 408, 429 | retried (the standard "try again later" codes) |
//! | other 4xx | refused, with the status and the start of the body as the reason |
//! | 1xx, 3xx, 5xx, timeout, connection error | retried |
//!
//! Only `http://` URLs are supported (hyper-util's client without TLS, to keep
//! the build small); put a TLS-terminating proxy in front for `https`.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use zonekeep_core::FactOutcome;

use super::sink::{FactSink, OutboundFact, SinkError};

/// The header carrying the fact's key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Largest response body read, in bytes; a longer one is a (retried) error.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest part of a refusal body quoted in the refusal reason.
const REASON_BODY_CHARS: usize = 200;

/// Why a webhook sink could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// The URL does not parse.
    #[error("invalid webhook URL: {0}")]
    InvalidUrl(String),
    /// Not an `http://` URL.
    #[error("webhook URL must be http:// (https is not supported; use a TLS proxy): {0}")]
    UnsupportedScheme(String),
}

/// Posts facts to a URL. See the module docs for the protocol.
#[derive(Clone)]
pub struct WebhookSink {
    client: Client<HttpConnector, Full<Bytes>>,
    url: Uri,
    timeout: Duration,
}

impl std::fmt::Debug for WebhookSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSink")
            .field("url", &self.describe())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl WebhookSink {
    /// A sink posting to `url`, giving each attempt `timeout` (request and
    /// response body together).
    pub fn new(url: &str, timeout: Duration) -> Result<Self, WebhookError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| WebhookError::InvalidUrl(format!("{e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(WebhookError::UnsupportedScheme(
                uri.scheme_str().unwrap_or("none").to_owned(),
            ));
        }
        if uri.host().is_none() {
            return Err(WebhookError::InvalidUrl("missing host".into()));
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(WebhookSink {
            client,
            url: uri,
            timeout,
        })
    }

    /// POSTs `body` as JSON with the `Idempotency-Key` header `key`, within the timeout; answers
    /// the status and the body (at most [`MAX_RESPONSE_BYTES`]). A failed attempt (no answer,
    /// timeout, a body too long) is [`SinkError::Unavailable`]: the caller retries it.
    pub(crate) async fn post_json(
        &self,
        key: HeaderValue,
        body: &Value,
    ) -> Result<(u16, Bytes), SinkError> {
        let req = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_KEY, key)
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| SinkError::Unavailable(format!("building webhook request: {e}")))?;
        tokio::time::timeout(self.timeout, self.post(req))
            .await
            .map_err(|_| {
                SinkError::Unavailable(format!("webhook timed out after {:?}", self.timeout))
            })?
    }

    async fn post(&self, req: Request<Full<Bytes>>) -> Result<(u16, Bytes), SinkError> {
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| SinkError::Unavailable(format!("webhook request failed: {e}")))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| SinkError::Unavailable(format!("webhook response body: {e}")))?
            .to_bytes();
        Ok((status, body))
    }
}

/// The start of a response body, quoted in a refusal.
pub(crate) fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .take(REASON_BODY_CHARS)
        .collect()
}

#[async_trait]
impl FactSink for WebhookSink {
    async fn commit(&self, out: &OutboundFact) -> Result<FactOutcome, SinkError> {
        let f = &out.fact;
        let Ok(key_header) = HeaderValue::from_str(f.key.as_str()) else {
            return Ok(FactOutcome::Refused(
                "fact key cannot be sent as an Idempotency-Key header".into(),
            ));
        };
        let body = json!({
            "key": f.key.as_str(),
            "zone_id": out.zone_id,
            "kind": f.kind,
            "principal": f.principal,
            "payload": f.payload,
            "tick": f.tick,
        });
        let (status, body) = self.post_json(key_header, &body).await?;
        match status {
            200..=299 => {
                let result = if body.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(snippet(&body)))
                };
                Ok(FactOutcome::Ok(result))
            }
            408 | 429 => Err(SinkError::Unavailable(format!("webhook answered {status}"))),
            400..=499 => Ok(FactOutcome::Refused(format!(
                "webhook answered {status}: {}",
                snippet(&body)
            ))),
            _ => Err(SinkError::Unavailable(format!(
                "webhook answered {status}: {}",
                snippet(&body)
            ))),
        }
    }

    fn describe(&self) -> String {
        // Scheme, authority and path only: a query string may carry a token.
        format!(
            "webhook:http://{}{}",
            self.url.authority().map_or("", |a| a.as_str()),
            self.url.path()
        )
    }
}
