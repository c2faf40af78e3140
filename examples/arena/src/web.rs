//! The demo pages (the arena at `/`, the shooting gallery at `/gallery`, the cells at `/cells`,
//! the matchmaking Play page at `/play`), embedded in the binary so `cargo run` needs no Node.
//!
//! `web/dist/` is built by `npm run build` in `examples/arena/web` and committed; the page's test
//! checks it is fresh, and the tests below check that every built file is listed here.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::routing::get;
use axum::Router;

/// One embedded file of the page.
#[derive(Debug, Clone, Copy)]
pub struct WebFile {
    /// URL path, starting with `/`.
    pub path: &'static str,
    /// `Content-Type`.
    pub mime: &'static str,
    /// Contents.
    pub bytes: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";

macro_rules! file {
    ($path:literal, $mime:expr) => {
        WebFile {
            path: concat!("/", $path),
            mime: $mime,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/dist/", $path)),
        }
    };
}

/// Every file of the built page.
pub const WEB_FILES: &[WebFile] = &[
    file!("index.html", "text/html; charset=utf-8"),
    file!("gallery.html", "text/html; charset=utf-8"),
    file!("cells.html", "text/html; charset=utf-8"),
    file!("play.html", "text/html; charset=utf-8"),
    file!("style.css", "text/css; charset=utf-8"),
    file!("arena-rules.wasm", "application/wasm"),
    file!("arena-play.js", JS),
    file!("cells.js", JS),
    file!("chat.js", JS),
    file!("gallery.js", JS),
    file!("gallery-view.js", JS),
    file!("guest.js", JS),
    file!("hud.js", JS),
    file!("keys.js", JS),
    file!("leaderboard.js", JS),
    file!("generated/arena.js", JS),
    file!("main.js", JS),
    file!("movement.js", JS),
    file!("play.js", JS),
    file!("render.js", JS),
    file!("sdk/boards.js", JS),
    file!("sdk/cells.js", JS),
    file!("sdk/chat.js", JS),
    file!("sdk/chatcodec.js", JS),
    file!("sdk/clock.js", JS),
    file!("sdk/connection.js", JS),
    file!("sdk/connectionerrors.js", JS),
    file!("sdk/connectiontypes.js", JS),
    file!("sdk/contentversions.js", JS),
    file!("sdk/datagrams.js", JS),
    file!("sdk/delta.js", JS),
    file!("sdk/entryroute.js", JS),
    file!("sdk/index.js", JS),
    file!("sdk/inputs.js", JS),
    file!("sdk/kickcodes.js", JS),
    file!("sdk/lobby.js", JS),
    file!("sdk/match.js", JS),
    file!("sdk/matchmaker.js", JS),
    file!("sdk/messagecodec.js", JS),
    file!("sdk/messages.js", JS),
    file!("sdk/mirror.js", JS),
    file!("sdk/payload.js", JS),
    file!("sdk/playout.js", JS),
    file!("sdk/predictor.js", JS),
    file!("sdk/presence.js", JS),
    file!("sdk/protocol.js", JS),
    file!("sdk/quant.js", JS),
    file!("sdk/reconnect.js", JS),
    file!("sdk/refusal.js", JS),
    file!("sdk/rejoin.js", JS),
    file!("sdk/replica.js", JS),
    file!("sdk/scheduler.js", JS),
    file!("sdk/schema.js", JS),
    file!("sdk/sockets.js", JS),
    file!("sdk/states.js", JS),
    file!("sdk/tickets.js", JS),
    file!("sdk/traffic.js", JS),
    file!("sdk/transfers.js", JS),
    file!("sdk/transports.js", JS),
    file!("sdk/updaterecord.js", JS),
    file!("sdk/webtransport.js", JS),
    file!("sdk/wire.js", JS),
    file!("sdk/zoneview.js", JS),
];

/// The site icon browsers ask for at `/favicon.ico` (an SVG: every current browser takes one
/// there), kept outside `web/dist/` because the page build does not make it.
pub const FAVICON: WebFile = WebFile {
    path: "/favicon.ico",
    mime: "image/svg+xml",
    bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/favicon.svg")),
};

/// The embedded file served at the URL path `path` (`/` is the arena page, `/gallery` the
/// gallery's, `/cells` the cells', `/play` the Play page's, `/favicon.ico` the icon), as
/// [`web_routes`] serves them.
pub fn embedded(path: &str) -> Option<&'static WebFile> {
    let path = match path {
        "/" => "/index.html",
        "/gallery" => "/gallery.html",
        "/cells" => "/cells.html",
        "/play" => "/play.html",
        "/favicon.ico" => return Some(&FAVICON),
        p => p,
    };
    WEB_FILES.iter().find(|f| f.path == path)
}

/// Routes serving the pages: `/` (index.html, the arena), `/gallery` (gallery.html), `/cells`
/// (cells.html), `/play` (play.html) and every file
/// of [`WEB_FILES`] at its path. Merge
/// them into the host's router (`Host::serve_with`). `no-cache` makes browsers revalidate, so a
/// rebuilt binary never serves a stale mix of old and new modules.
pub fn web_routes() -> Router {
    let mut router = Router::new();
    for f in WEB_FILES {
        let f = *f;
        let handler = move || async move {
            (
                [(CONTENT_TYPE, f.mime), (CACHE_CONTROL, "no-cache")],
                f.bytes,
            )
        };
        match f.path {
            "/index.html" => router = router.route("/", get(handler)),
            "/gallery.html" => router = router.route("/gallery", get(handler)),
            "/cells.html" => router = router.route("/cells", get(handler)),
            "/play.html" => router = router.route("/play", get(handler)),
            _ => {}
        }
        router = router.route(f.path, get(handler));
    }
    router.route(
        FAVICON.path,
        get(|| async {
            (
                [(CONTENT_TYPE, FAVICON.mime), (CACHE_CONTROL, "no-cache")],
                FAVICON.bytes,
            )
        }),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::path::Path;

    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{prefix}{name}/"), out);
            } else {
                out.push(format!("/{prefix}{name}"));
            }
        }
    }

    #[test]
    fn every_built_file_is_embedded() {
        let mut on_disk = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("web/dist"),
            "",
            &mut on_disk,
        );
        on_disk.sort();
        let mut listed: Vec<String> = WEB_FILES.iter().map(|f| f.path.to_owned()).collect();
        listed.sort();
        assert_eq!(listed, on_disk, "update WEB_FILES in src/web.rs");
    }

    #[tokio::test]
    async fn routes_serve_the_page_with_types() {
        use tower::ServiceExt;
        for (path, mime, body) in [
            ("/", "text/html", WEB_FILES[0].bytes),
            (
                "/gallery",
                "text/html",
                file!("gallery.html", "text/html").bytes,
            ),
            ("/play", "text/html", file!("play.html", "text/html").bytes),
            ("/main.js", "text/javascript", file!("main.js", JS).bytes),
            (
                "/sdk/index.js",
                "text/javascript",
                file!("sdk/index.js", JS).bytes,
            ),
            ("/favicon.ico", "image/svg+xml", FAVICON.bytes),
        ] {
            let req = axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            let res = web_routes().oneshot(req).await.unwrap();
            assert_eq!(res.status(), 200, "{path}");
            let ct = res.headers()[CONTENT_TYPE].to_str().unwrap().to_owned();
            assert!(ct.starts_with(mime), "{path}: {ct}");
            let got = axum::body::to_bytes(res.into_body(), 1 << 20)
                .await
                .unwrap();
            assert_eq!(&got[..], body);
        }
        let req = axum::http::Request::get("/nope.js")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(web_routes().oneshot(req).await.unwrap().status(), 404);
    }
}
