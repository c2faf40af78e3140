//! The HTTP side of a WebSocket: checking the upgrade request, answering 101, and taking the
//! upgraded TCP socket back from the HTTP layer so that an I/O thread can own it.

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A refused upgrade request: its status and why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused(StatusCode, &'static str);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

/// Check a WebSocket upgrade request (RFC 6455 §4.2.1): the `101 Switching Protocols` answer and
/// the upgrade to await, or the error response.
pub(crate) fn accept(
    method: &Method,
    headers: &HeaderMap,
    on_upgrade: Option<OnUpgrade>,
) -> Result<(Response, OnUpgrade), Refused> {
    let refuse = |status: StatusCode, why: &'static str| Refused(status, why);
    if method != Method::GET {
        return Err(refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "a WebSocket upgrade is a GET",
        ));
    }
    if !has_token(headers, header::CONNECTION, "upgrade") {
        return Err(refuse(
            StatusCode::UPGRADE_REQUIRED,
            "Connection header did not include 'upgrade'",
        ));
    }
    if !has_token(headers, header::UPGRADE, "websocket") {
        return Err(refuse(
            StatusCode::UPGRADE_REQUIRED,
            "`Upgrade` header did not include 'websocket'",
        ));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "WebSocket version 13 is required (Sec-WebSocket-Version)",
        ));
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "`Sec-WebSocket-Key` header missing",
        ));
    };
    let Some(on_upgrade) = on_upgrade else {
        return Err(refuse(
            StatusCode::UPGRADE_REQUIRED,
            "this connection cannot be upgraded",
        ));
    };
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let Ok(accept) = HeaderValue::from_str(&accept) else {
        return Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, "accept key"));
    };
    let response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, HeaderValue::from_static("upgrade"))
        .header(header::UPGRADE, HeaderValue::from_static("websocket"))
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(axum::body::Body::empty());
    match response {
        Ok(r) => Ok((r, on_upgrade)),
        Err(_) => Err(refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "upgrade response",
        )),
    }
}

/// Whether a comma-separated header holds `token` (case-insensitive).
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// The TCP socket under an upgraded connection and the bytes HTTP had read past the request;
/// `None` when the connection is not a plain TCP socket served by this host's listener.
pub(crate) fn into_tcp(upgraded: Upgraded) -> Option<(TcpStream, Bytes)> {
    match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => Some((parts.io.into_inner(), parts.read_buf)),
        Err(_) => None,
    }
}
