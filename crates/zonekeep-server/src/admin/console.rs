//! The operator console: a page every host serves at `/console`, embedded in the binary.
//!
//! `console/dist/` is built by `npm run build` in `crates/zonekeep-server/console` and committed;
//! the console's own test checks it is fresh, and the tests below check that every built file is
//! listed here. The page holds no data: loading it needs no credential, and every call it makes
//! goes to this host's admin API with the operator's bearer token (another host's through this
//! host's fleet proxy), so the Content-Security-Policy lets it reach its own origin only.
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /console`, `GET /console/` | the page (`index.html`) |
//! | `GET /console/{file}` | a file of the page (its modules, CSS, the vendored Preact, htm and uPlot) |
//! | `GET /console/state.json` | `{"admin_api": bool}`: whether this host's admin API is on (the page says so when it is off) |
//!
//! Every answer has `Cache-Control: no-cache` (a rebuilt binary never serves a stale mix of
//! modules), `X-Content-Type-Options: nosniff` and the policy in [`CSP`].

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::host::{json_error, Shared};

/// One embedded file of the console.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConsoleFile {
    /// Path under `/console/`, without the leading slash.
    pub path: &'static str,
    /// `Content-Type`.
    pub mime: &'static str,
    /// Contents.
    pub bytes: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

macro_rules! file {
    ($path:literal, $mime:expr) => {
        ConsoleFile {
            path: $path,
            mime: $mime,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/dist/", $path)),
        }
    };
}

/// Every file of the built console.
pub(crate) const CONSOLE_FILES: &[ConsoleFile] = &[
    file!("index.html", "text/html; charset=utf-8"),
    file!("style.css", CSS),
    file!("api.js", JS),
    file!("app.js", JS),
    file!("chart.js", JS),
    file!("fleet.js", JS),
    file!("format.js", JS),
    file!("hosts.js", JS),
    file!("html.js", JS),
    file!("login.js", JS),
    file!("modules.js", JS),
    file!("parts.js", JS),
    file!("poll.js", JS),
    file!("types.js", JS),
    file!("zone.js", JS),
    file!("zones.js", JS),
    file!("vendor/preact.js", JS),
    file!("vendor/hooks.js", JS),
    file!("vendor/htm.js", JS),
    file!("vendor/uplot.js", JS),
    file!("vendor/uplot.css", CSS),
    file!("vendor/LICENSE-preact.txt", TEXT),
    file!("vendor/LICENSE-htm.txt", TEXT),
    file!("vendor/LICENSE-uplot.txt", TEXT),
];

/// The page's Content-Security-Policy: scripts, styles and calls from this origin only (the fleet
/// is reached through this host's proxy), no plugins, no framing, no form posts.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The console's routes, served whether or not the admin API is on.
pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/console", get(index))
        .route("/console/", get(index))
        .route("/console/state.json", get(state))
        .route("/console/{*file}", get(file))
}

/// The embedded file at `path` (relative to `/console/`).
pub(crate) fn embedded(path: &str) -> Option<&'static ConsoleFile> {
    CONSOLE_FILES.iter().find(|f| f.path == path)
}

/// `r` with the headers every console answer carries.
fn guarded(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    r
}

fn serve(f: &'static ConsoleFile) -> Response {
    guarded(([(CONTENT_TYPE, f.mime)], f.bytes).into_response())
}

async fn index() -> Response {
    file(Path("index.html".to_owned())).await
}

async fn file(Path(path): Path<String>) -> Response {
    match embedded(&path) {
        Some(f) => serve(f),
        None => guarded(json_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such file in the console",
        )),
    }
}

async fn state(State(shared): State<Arc<Shared>>) -> Response {
    guarded(Json(json!({"admin_api": shared.admin_token_hash.is_some()})).into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::path::Path as FsPath;
    use tower::ServiceExt;

    use crate::config::{Secret, ServerConfig};
    use crate::host::Host;

    fn walk(dir: &FsPath, prefix: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{prefix}{name}/"), out);
            } else {
                out.push(format!("{prefix}{name}"));
            }
        }
    }

    #[test]
    fn every_built_file_is_embedded() {
        let mut on_disk = Vec::new();
        walk(
            &FsPath::new(env!("CARGO_MANIFEST_DIR")).join("console/dist"),
            "",
            &mut on_disk,
        );
        on_disk.sort();
        let mut listed: Vec<String> = CONSOLE_FILES.iter().map(|f| f.path.to_owned()).collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "update CONSOLE_FILES in src/admin/console.rs"
        );
    }

    fn host(admin_token: Option<&str>) -> Host {
        Host::builder()
            .config(ServerConfig {
                admin_token: admin_token.map(Secret::new),
                ticket_secret: Some(Secret::new("console-test-ticket-secret-0123456789abcdef")),
                ..ServerConfig::default()
            })
            .zone::<crate::examples::Dots>("dots")
            .build()
            .unwrap()
    }

    async fn get(host: &Host, path: &str) -> Response {
        let req = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        host.router().oneshot(req).await.unwrap()
    }

    async fn body(r: Response) -> Vec<u8> {
        axum::body::to_bytes(r.into_body(), 1 << 20)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn the_page_and_its_files_are_served_with_types_and_a_strict_policy() {
        let host = host(Some("console-test-admin-token"));
        let index = embedded("index.html").unwrap();
        for (path, mime, want) in [
            ("/console", "text/html", index.bytes),
            ("/console/", "text/html", index.bytes),
            (
                "/console/app.js",
                "text/javascript",
                embedded("app.js").unwrap().bytes,
            ),
            (
                "/console/vendor/preact.js",
                "text/javascript",
                embedded("vendor/preact.js").unwrap().bytes,
            ),
            (
                "/console/vendor/uplot.css",
                "text/css",
                embedded("vendor/uplot.css").unwrap().bytes,
            ),
        ] {
            let r = get(&host, path).await;
            assert_eq!(r.status(), 200, "{path}");
            let h = r.headers();
            assert!(
                h[CONTENT_TYPE].to_str().unwrap().starts_with(mime),
                "{path}"
            );
            assert_eq!(h[CACHE_CONTROL], "no-cache", "{path}");
            assert_eq!(h[X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
            let csp = h[CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
            assert!(csp.contains("connect-src 'self';"), "{path}: {csp}");
            assert!(!csp.contains("unsafe"), "{path}: {csp}");
            assert_eq!(body(r).await, want, "{path}");
        }
        for path in [
            "/console/nope.js",
            "/console/../Cargo.toml",
            "/console/vendor",
        ] {
            let r = get(&host, path).await;
            assert_eq!(r.status(), 404, "{path}");
            assert_eq!(r.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        }
        let r = get(&host, "/console/state.json").await;
        assert_eq!(r.status(), 200);
        let state: serde_json::Value = serde_json::from_slice(&body(r).await).unwrap();
        assert_eq!(state, json!({"admin_api": true}));
    }

    #[tokio::test]
    async fn the_page_is_served_with_the_admin_api_off_and_says_so() {
        let host = host(None);
        let r = get(&host, "/console").await;
        assert_eq!(r.status(), 200);
        assert_eq!(body(r).await, embedded("index.html").unwrap().bytes);
        let r = get(&host, "/console/state.json").await;
        let state: serde_json::Value = serde_json::from_slice(&body(r).await).unwrap();
        assert_eq!(state, json!({"admin_api": false}));
        // The admin API itself stays off.
        assert_eq!(get(&host, "/admin/zones").await.status(), 404);
    }
}
