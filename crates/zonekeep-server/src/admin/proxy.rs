//! The fleet proxy: `ANY /admin/hosts/{host_id}/api/{*path}` answers what host `host_id`'s
//! `/{path}` answers, so one page (the operator console) reaches every host of the fleet through
//! the host that served it.
//!
//! The request goes out with its method, its body (at most [`MAX_REQUEST_BODY`]), its query
//! string, and its `Authorization` and `Content-Type` headers, to the host's advertised URL
//! (`ws://` read as `http://`; a `wss://` host is not reached: the proxy speaks plain HTTP only);
//! the answer comes back with its status, its body (at most [`MAX_RESPONSE_BODY`]) and its
//! `Content-Type`, `Content-Disposition` and `WWW-Authenticate` headers, all within
//! [`TIMEOUT`]. `{path}` must be an admin route (`admin/...`), never the proxy itself again, and
//! have no `.` or `..` segment, so the proxy reaches nothing but admin routes. This host's own id
//! is served here, through the same routes, without a network hop (and without the body bound on
//! the answer: a recording downloads whole).
//!
//! Errors: 404 `not_found` for a host the directory does not list; 400 `bad_request` for a path
//! that is not an admin route; 413 `too_large` for a request body over 1 MiB; 502 `unreachable`
//! when the host does not answer (refused, timed out after 10 s, or a `wss://` URL); 502
//! `too_large` when its answer is over 4 MiB. The target host checks the token again.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::ServiceExt;

use crate::host::{json_error, valid_zone_id, Shared};

/// The largest request body forwarded.
pub(super) const MAX_REQUEST_BODY: usize = 1 << 20;
/// The largest answer body brought back from another host.
pub(super) const MAX_RESPONSE_BODY: usize = 4 << 20;
/// Longest a forwarded request may take, connect and answer body included.
pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

/// The request headers forwarded.
const REQUEST_HEADERS: [header::HeaderName; 2] = [header::AUTHORIZATION, header::CONTENT_TYPE];
/// The answer headers brought back.
const RESPONSE_HEADERS: [header::HeaderName; 3] = [
    header::CONTENT_TYPE,
    header::CONTENT_DISPOSITION,
    header::WWW_AUTHENTICATE,
];

/// Where the proxied request goes: `/admin/hosts/{host}/api/{rest}` split into the host id and
/// `rest`, both as the client wrote them (not percent-decoded, so the path goes on unchanged).
fn split(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix("/admin/hosts/")?.split_once("/api/")
}

/// Why `rest` (the proxied path, without its leading `/`) may not be forwarded, if it may not.
fn refusal(rest: &str) -> Option<&'static str> {
    if !rest.starts_with("admin/") {
        return Some(
            "the proxy reaches admin routes only: the path after /api/ must start with admin/",
        );
    }
    if split(&format!("/{rest}")).is_some() {
        return Some("the proxy does not forward to the proxy");
    }
    let dots = |seg: &str| {
        let s = seg.to_ascii_lowercase().replace("%2e", ".");
        s == "." || s == ".."
    };
    if rest.split('/').any(dots) {
        return Some("the path may not have . or .. segments");
    }
    None
}

/// `ANY /admin/hosts/{host_id}/api/{*path}` (behind the admin token).
pub(super) async fn forward(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Some((host, rest)) = split(parts.uri.path()) else {
        return bad_request("the proxy's path is /admin/hosts/{host_id}/api/admin/...");
    };
    if let Some(why) = refusal(rest) {
        return bad_request(why);
    }
    let target = match parts.uri.query() {
        Some(q) => format!("/{rest}?{q}"),
        None => format!("/{rest}"),
    };
    let Some(host) = percent_decoded(host).filter(|h| valid_zone_id(h)) else {
        return not_found(host);
    };
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the proxy forwards a body of at most {} MiB",
                    MAX_REQUEST_BODY >> 20
                ),
            )
        }
    };
    if host == super::local_host_id(&shared) {
        return local(&shared, parts.method, &target, &parts.headers, body).await;
    }
    let Some(fleet) = shared.fleet() else {
        return not_found(&host);
    };
    let hosts = match crate::fleet::query(&fleet.metrics, "hosts", fleet.directory.hosts()).await {
        Ok(h) => h,
        Err(e) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("fleet directory: {e}"),
            )
        }
    };
    let Some(record) = hosts.into_iter().find(|h| h.host_id == host) else {
        return not_found(&host);
    };
    let Some(base) = http_base(&record.url) else {
        return unreachable(
            &host,
            &format!(
                "its URL {:?} is not plain HTTP (ws:// or http://); the proxy does not speak TLS",
                record.url
            ),
        );
    };
    match remote(
        &format!("{base}{target}"),
        parts.method,
        &parts.headers,
        body,
    )
    .await
    {
        Ok(r) => r,
        Err(Failure::Unreachable(why)) => unreachable(&host, &why),
        Err(Failure::TooLarge) => json_error(
            StatusCode::BAD_GATEWAY,
            "too_large",
            format!(
                "host {host:?} answered with a body over {} MiB, more than the proxy brings back",
                MAX_RESPONSE_BODY >> 20
            ),
        ),
    }
}

/// `s` with its `%XX` escapes decoded (a page writes a host id with `encodeURIComponent`, which
/// escapes its `:`); `None` when an escape is malformed or the result is not UTF-8.
fn percent_decoded(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// `ws://host:port` as `http://host:port` (an `http://` URL as it is); `None` for anything else.
fn http_base(url: &str) -> Option<String> {
    let url = url.trim_end_matches('/');
    if let Some(rest) = url.strip_prefix("ws://") {
        return Some(format!("http://{rest}"));
    }
    url.starts_with("http://").then(|| url.to_owned())
}

/// The request served by this host's own admin routes.
async fn local(
    shared: &Arc<Shared>,
    method: Method,
    target: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let mut req = Request::new(Body::from(body));
    *req.method_mut() = method;
    *req.uri_mut() = match target.parse::<Uri>() {
        Ok(u) => u,
        Err(e) => return bad_request(&format!("the path is not a URI path: {e}")),
    };
    copy_headers(headers, req.headers_mut(), &REQUEST_HEADERS);
    match local_routes(shared).oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// Every admin route of this host (`Host::router`'s, under `/admin`).
fn local_routes(shared: &Arc<Shared>) -> Router {
    super::router(shared)
        .route(
            "/admin/zones/{id}/messages",
            axum::routing::post(crate::bus::post_message).layer(
                axum::middleware::from_fn_with_state(shared.clone(), super::auth),
            ),
        )
        .with_state(Arc::clone(shared))
}

/// Why another host's answer did not come back.
enum Failure {
    /// No answer (connect refused, timed out, a broken connection).
    Unreachable(String),
    /// The answer's body is over [`MAX_RESPONSE_BODY`].
    TooLarge,
}

/// The request sent to `url` (plain HTTP), answered as it was, within [`TIMEOUT`].
async fn remote(
    url: &str,
    method: Method,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, Failure> {
    let uri: Uri = url
        .parse()
        .map_err(|e| Failure::Unreachable(format!("its URL {url:?} does not parse: {e}")))?;
    let mut req = hyper::Request::new(Full::new(body));
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    copy_headers(headers, req.headers_mut(), &REQUEST_HEADERS);
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(TIMEOUT));
    // A client per request: admin calls are rare, and no pooled connection outlives the call.
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector);
    let call = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| Failure::Unreachable(format!("no answer: {e}")))?;
        let (parts, body) = resp.into_parts();
        let body = Limited::new(body, MAX_RESPONSE_BODY)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    Failure::TooLarge
                } else {
                    Failure::Unreachable(format!("its answer broke off: {e}"))
                }
            })?
            .to_bytes();
        let mut out = Response::new(Body::from(body));
        *out.status_mut() = parts.status;
        copy_headers(&parts.headers, out.headers_mut(), &RESPONSE_HEADERS);
        Ok(out)
    };
    tokio::time::timeout(TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            Err(Failure::Unreachable(format!(
                "no answer within {} s",
                TIMEOUT.as_secs()
            )))
        })
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap, names: &[header::HeaderName]) {
    for name in names {
        if let Some(v) = from.get(name) {
            to.insert(name.clone(), HeaderValue::clone(v));
        }
    }
}

fn bad_request(why: &str) -> Response {
    json_error(StatusCode::BAD_REQUEST, "bad_request", why)
}

fn not_found(host: &str) -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no host {host:?} in the fleet"),
    )
}

fn unreachable(host: &str, why: &str) -> Response {
    json_error(
        StatusCode::BAD_GATEWAY,
        "unreachable",
        format!("host {host:?} was not reached: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::{http_base, percent_decoded, refusal, split};

    #[test]
    fn a_host_id_is_read_percent_decoded() {
        assert_eq!(percent_decoded("eu%3A1").as_deref(), Some("eu:1"));
        assert_eq!(percent_decoded("h-1.b").as_deref(), Some("h-1.b"));
        assert_eq!(percent_decoded("bad%3"), None);
        assert_eq!(percent_decoded("bad%zz"), None);
    }

    #[test]
    fn the_path_splits_into_host_and_the_rest_as_written() {
        assert_eq!(
            split("/admin/hosts/h-1/api/admin/zones/a%2Fb"),
            Some(("h-1", "admin/zones/a%2Fb"))
        );
        assert_eq!(split("/admin/hosts/h-1/zones"), None);
    }

    #[test]
    fn only_admin_routes_are_reached() {
        assert_eq!(refusal("admin/zones"), None);
        assert_eq!(refusal("admin/zones/z/recording/file"), None);
        assert!(refusal("metrics").is_some());
        assert!(refusal("zones/z").is_some());
        assert!(refusal("administrator").is_some());
        assert!(refusal("admin/../metrics").is_some());
        assert!(refusal("admin/%2E%2e/metrics").is_some());
        assert!(refusal("admin/./zones").is_some());
        assert!(
            refusal("admin/hosts/h2/api/admin/zones").is_some(),
            "no proxy chains"
        );
        assert_eq!(refusal("admin/hosts"), None);
    }

    #[test]
    fn a_websocket_url_is_reached_over_http_and_tls_is_not_spoken() {
        assert_eq!(
            http_base("ws://10.0.0.1:7000/").as_deref(),
            Some("http://10.0.0.1:7000")
        );
        assert_eq!(http_base("http://a:1").as_deref(), Some("http://a:1"));
        assert_eq!(http_base("wss://a:1"), None);
    }
}
