//! [`Matchmaker`]: one method per route of the matchmaker's HTTP API (docs/MATCHMAKING.md, "API"),
//! over hyper's client on plain TCP. Every request has a timeout and every answer body a size cap,
//! so a stalled or misbehaving matchmaker cannot hang or exhaust the game.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::{MatchError, Probe, Search, SearchState};

/// Largest answer body read; a `Search` is a few hundred bytes per region.
pub const MAX_BODY: usize = 256 << 10;

/// Most probe calls made for one region: the first and three echoes, plus slack for a host that
/// asks for more rounds. More is a malformed answer, not a loop.
const MAX_PROBE_LEGS: usize = 8;

/// Longest long poll the matchmaker holds (docs/MATCHMAKING.md: `wait_ms` is at most 30,000).
pub const MAX_WAIT_MS: u32 = 30_000;

/// A client of one matchmaker. Plain `http://` only: it speaks HTTP/1.1 over TCP without TLS,
/// so the matchmaker (and every region's probe URL) must be reached without it, e.g. on a private
/// network or behind a TLS-terminating proxy on the game's side. Cheap to clone; clones share
/// their connection pool.
#[derive(Clone)]
pub struct Matchmaker {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl std::fmt::Debug for Matchmaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matchmaker")
            .field("base", &self.base)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// One HTTP answer: its status and (capped) body.
struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl Matchmaker {
    /// A client of the matchmaker at `base_url` (e.g. `http://127.0.0.1:7350`, the host serving
    /// `/match`), whose requests time out after 10 s (a long poll: after its wait plus 10 s).
    /// A URL that is not `http://` is [`MatchError::Malformed`].
    pub fn new(base_url: &str) -> Result<Self, MatchError> {
        let base = http_base(base_url)?;
        Ok(Self {
            base,
            client: Client::builder(TokioExecutor::new()).build_http(),
            timeout: Duration::from_secs(10),
        })
    }

    /// Sets the time allowed for one request, answer body included (a long poll is allowed its
    /// wait on top of this).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The base URL requests go to, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `POST /match/searches` with a ticket whose `zone` claim is `@match`: a new search in state
    /// `probing`, with its `token` and one probe per region. An answer without a token is
    /// [`MatchError::Malformed`]; a client below the matchmaker's version floor is
    /// [`MatchError::Outdated`].
    pub async fn create_search(
        &self,
        ticket: &str,
        queue: &str,
        protocol_version: u32,
        content_version: Option<&str>,
    ) -> Result<Search, MatchError> {
        let mut body = serde_json::json!({"queue": queue, "protocol_version": protocol_version});
        if let Some(v) = content_version {
            body["content_version"] = Value::from(v);
        }
        let req = Request::builder()
            .method(Method::POST)
            .uri(self.uri("/match/searches")?)
            .header(AUTHORIZATION, format!("Bearer {ticket}"))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| MatchError::Malformed(format!("request: {e}")))?;
        let search = search_answer(self.send(req, self.timeout).await?)?;
        if search.token.as_deref().is_none_or(str::is_empty) {
            return Err(MatchError::Malformed("the new search has no token".into()));
        }
        Ok(search)
    }

    /// Measures the round trip to one region: `POST {url}/match/probe?challenge=C`, then at once
    /// `POST {url}/match/probe?challenge=C&echo=E` with each `echo` the region's host answers,
    /// until it answers `{"rtt_ms": N}` (after three measured round trips). The calls carry no
    /// body and no headers of their own. Returns `N`, the round trip the host recorded.
    pub async fn probe(&self, probe: &Probe) -> Result<u32, MatchError> {
        let base = http_base(&probe.url)?;
        let challenge = encode(&probe.challenge);
        let mut echo: Option<String> = None;
        for _ in 0..MAX_PROBE_LEGS {
            let target = match &echo {
                None => format!("{base}/match/probe?challenge={challenge}"),
                Some(e) => format!(
                    "{base}/match/probe?challenge={challenge}&echo={}",
                    encode(e)
                ),
            };
            let uri: Uri = target
                .parse()
                .map_err(|e| MatchError::Malformed(format!("probe URL {target}: {e}")))?;
            let req = Request::builder()
                .method(Method::POST)
                .uri(uri)
                .body(Full::new(Bytes::new()))
                .map_err(|e| MatchError::Malformed(format!("request: {e}")))?;
            let answer = self.send(req, self.timeout).await?;
            if !answer.status.is_success() {
                return Err(refusal(answer.status, &answer.body));
            }
            let v: Value = serde_json::from_slice(&answer.body)
                .map_err(|e| MatchError::Malformed(format!("probe answer: {e}")))?;
            if let Some(rtt) = v.get("rtt_ms").and_then(Value::as_f64) {
                return super::search::rtt_from_f64(rtt)
                    .ok_or_else(|| MatchError::Malformed(format!("probe rtt_ms {rtt}")));
            }
            echo = Some(match v.get("echo") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(MatchError::Malformed(
                        "a probe answer with neither echo nor rtt_ms".into(),
                    ))
                }
            });
        }
        Err(MatchError::Malformed(format!(
            "no rtt_ms after {MAX_PROBE_LEGS} probe calls"
        )))
    }

    /// `POST /match/searches/{id}/queue`: the search, probed, joins its queue (state `queued`).
    pub async fn queue(&self, id: &str, token: &str) -> Result<Search, MatchError> {
        let path = format!("/match/searches/{}/queue", encode(id));
        self.call(Method::POST, &path, token, self.timeout).await
    }

    /// `POST /match/searches/{id}/heartbeat`: the search is still wanted.
    pub async fn heartbeat(&self, id: &str, token: &str) -> Result<Search, MatchError> {
        let path = format!("/match/searches/{}/heartbeat", encode(id));
        self.call(Method::POST, &path, token, self.timeout).await
    }

    /// `GET /match/searches/{id}`; with `wait_ms` (capped at 30,000) a long poll that answers once
    /// the state is no longer `state`, or after `wait_ms`.
    pub async fn read(
        &self,
        id: &str,
        token: &str,
        wait_ms: Option<u32>,
        state: Option<SearchState>,
    ) -> Result<Search, MatchError> {
        let mut path = format!("/match/searches/{}", encode(id));
        let mut timeout = self.timeout;
        let mut sep = '?';
        if let Some(ms) = wait_ms {
            let ms = ms.min(MAX_WAIT_MS);
            path.push_str(&format!("{sep}wait_ms={ms}"));
            sep = '&';
            timeout += Duration::from_millis(u64::from(ms));
        }
        if let Some(s) = state {
            path.push_str(&format!("{sep}state={}", s.as_str()));
        }
        self.call(Method::GET, &path, token, timeout).await
    }

    /// `DELETE /match/searches/{id}`: the search in state `cancelled`, or the state it reached if
    /// it was already over.
    pub async fn cancel(&self, id: &str, token: &str) -> Result<Search, MatchError> {
        let path = format!("/match/searches/{}", encode(id));
        self.call(Method::DELETE, &path, token, self.timeout).await
    }

    fn uri(&self, path: &str) -> Result<Uri, MatchError> {
        let target = format!("{}{path}", self.base);
        target
            .parse()
            .map_err(|e| MatchError::Malformed(format!("URL {target}: {e}")))
    }

    /// A bodiless call with the search's token, answered with a `Search`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: &str,
        timeout: Duration,
    ) -> Result<Search, MatchError> {
        let req = Request::builder()
            .method(method)
            .uri(self.uri(path)?)
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| MatchError::Malformed(format!("request: {e}")))?;
        search_answer(self.send(req, timeout).await?)
    }

    async fn send(
        &self,
        req: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Answer, MatchError> {
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| MatchError::Network(describe(&e)))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| MatchError::Network(format!("answer body: {e}")))?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| MatchError::Network(format!("no answer within {timeout:?}")))?
    }
}

/// A successful answer read as a `Search`, anything else as the refusal it stands for.
fn search_answer(answer: Answer) -> Result<Search, MatchError> {
    if answer.status.is_success() {
        Search::from_json(&answer.body)
    } else {
        Err(refusal(answer.status, &answer.body))
    }
}

/// The refusal an answer of `status` with JSON `body` stands for. The body is read as the
/// contract's `{"error": CODE, "message": TEXT}`; the `{"error": {"code", "message"}}` shape of the
/// host's other routes is read too.
pub(super) fn refusal(status: StatusCode, body: &[u8]) -> MatchError {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (code, message) = match &json["error"] {
        Value::String(code) => (Some(code.as_str()), json["message"].as_str()),
        Value::Object(o) => (
            o.get("code").and_then(Value::as_str),
            o.get("message").and_then(Value::as_str),
        ),
        _ => (None, json["message"].as_str()),
    };
    let status = status.as_u16();
    let message = message.map_or_else(
        || format!("the matchmaker answered {status}"),
        str::to_owned,
    );
    if status == 426 || code == Some("client_outdated") {
        return MatchError::Outdated { message };
    }
    let code = code.map_or_else(
        || match status {
            401 => "unauthorized".to_owned(),
            500.. => "unavailable".to_owned(),
            _ => format!("http_{status}"),
        },
        str::to_owned,
    );
    let retryable = status >= 500 || super::search::RETRYABLE_CODES.contains(&code.as_str());
    MatchError::Refused {
        status,
        code,
        message,
        retryable,
    }
}

/// `url` without a trailing `/`, if it is an `http://` URL.
fn http_base(url: &str) -> Result<String, MatchError> {
    let base = url.trim_end_matches('/');
    match base.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() => Ok(base.to_owned()),
        _ => Err(MatchError::Malformed(format!(
            "{url} is not an http:// URL (this client speaks plain HTTP only)"
        ))),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters (for a path segment or a query
/// value).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A hyper client error with its causes (hyper's own text is often just "client error").
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_are_taken() {
        assert_eq!(
            http_base("http://127.0.0.1:7350/").ok().as_deref(),
            Some("http://127.0.0.1:7350")
        );
        for bad in ["https://mm.example", "ws://h:1", "http://", "h:1", ""] {
            assert!(
                matches!(http_base(bad), Err(MatchError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(Matchmaker::new("https://mm.example").is_err());
    }

    #[test]
    fn query_values_and_path_segments_are_encoded() {
        assert_eq!(encode("s-1_a.b~c"), "s-1_a.b~c");
        assert_eq!(encode("a b/c?d&e=f+"), "a%20b%2Fc%3Fd%26e%3Df%2B");
        assert_eq!(encode("é"), "%C3%A9");
    }

    #[test]
    fn refusals_read_both_error_shapes() {
        let flat = refusal(
            StatusCode::CONFLICT,
            br#"{"error":"no_probe_result","message":"probe first"}"#,
        );
        let MatchError::Refused {
            status,
            code,
            message,
            retryable,
        } = flat
        else {
            panic!("{flat:?}");
        };
        assert_eq!(
            (status, code.as_str(), message.as_str()),
            (409, "no_probe_result", "probe first")
        );
        assert!(retryable);

        let nested = refusal(
            StatusCode::NOT_FOUND,
            br#"{"error":{"code":"unknown_queue","message":"no queue x"}}"#,
        );
        assert!(
            matches!(&nested, MatchError::Refused { code, retryable: false, .. } if code == "unknown_queue")
        );

        let outdated = refusal(
            StatusCode::UPGRADE_REQUIRED,
            br#"{"error":"client_outdated","message":"update the game"}"#,
        );
        assert!(outdated.is_outdated() && !outdated.retryable());
        assert!(outdated.to_string().contains("update the game"));

        let html = refusal(StatusCode::BAD_GATEWAY, b"<html>");
        assert!(matches!(&html, MatchError::Refused { code, .. } if code == "unavailable"));
        assert!(html.retryable());
        let denied = refusal(StatusCode::UNAUTHORIZED, b"");
        assert!(
            matches!(&denied, MatchError::Refused { code, retryable: false, .. } if code == "unauthorized")
        );
    }
}
