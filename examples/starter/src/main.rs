//! Serves the starter zone with `Host::builder` and its page, in dev mode: the page gets guest
//! tickets from `/dev/ticket`. A real game mints tickets in its own backend instead (see the
//! repository README's "Tickets") and drops `dev: true`.
//!
//!   cargo run                                # http://127.0.0.1:7350/
//!   cargo run -- --listen 127.0.0.1:0        # any free port; the listening line says which
#![forbid(unsafe_code)]

mod zone;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tracing_subscriber::EnvFilter;
use zonekeep_server::{Host, ServerConfig};

use crate::zone::Walkers;

/// The page, built into the binary.
const INDEX_HTML: &str = include_str!("../web/index.html");
/// The page's script.
const MAIN_JS: &str = include_str!("../web/main.js");
/// Where `npm install` in `web/` puts the SDK's built modules (served at `/sdk/`).
const SDK_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/web/node_modules/@zonekeep/client/dist/src"
);

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let listen = listen_arg(std::env::args().skip(1))?;

    let host = Host::builder()
        .config(ServerConfig {
            dev: true,
            ..ServerConfig::default()
        })
        .zone::<Walkers>("walkers")
        .build()?;
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("listen on {listen}"))?;
    // Tools and tests read this line to learn the port (`--listen 127.0.0.1:0`).
    println!("listening on http://{}/", listener.local_addr()?);
    host.serve_with(listener, page_routes(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}

/// `--listen <addr>` (default `127.0.0.1:7350`).
fn listen_arg(mut args: impl Iterator<Item = String>) -> Result<String> {
    let mut listen = "127.0.0.1:7350".to_owned();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().context("--listen needs an address")?,
            other => bail!("unknown argument {other:?} (usage: zonekeep-starter [--listen ADDR])"),
        }
    }
    Ok(listen)
}

/// `/` and `/main.js` from the binary; `/sdk/*.js` from the SDK installed in `web/`.
fn page_routes() -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/main.js",
            get(|| async { page(MAIN_JS, "text/javascript; charset=utf-8") }),
        )
        .route("/sdk/{file}", get(sdk_file))
}

fn page(body: &'static str, mime: &'static str) -> impl IntoResponse {
    ([(CONTENT_TYPE, mime), (CACHE_CONTROL, "no-cache")], body)
}

/// One module of the SDK. Only plain module names are served (no paths), so nothing outside the
/// SDK's directory can be read.
async fn sdk_file(Path(file): Path<String>) -> impl IntoResponse {
    let plain = file
        .strip_suffix(".js")
        .is_some_and(|stem| !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_lowercase()));
    if !plain {
        return Err((StatusCode::NOT_FOUND, "not found".to_owned()));
    }
    let dir =
        std::env::var_os("STARTER_SDK_DIR").map_or_else(|| PathBuf::from(SDK_DIR), PathBuf::from);
    match tokio::fs::read(dir.join(&file)).await {
        Ok(bytes) => Ok((
            [
                (CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )),
        Err(_) => Err((
            StatusCode::NOT_FOUND,
            format!("{file}: the SDK is not installed; run `npm install` in web/"),
        )),
    }
}
