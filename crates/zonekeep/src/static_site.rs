//! `serve --static DIR`: a game's own page, served from a directory at `/`.
//!
//! A file of DIR is served at its path (`DIR/index.html` at `/` and at `/index.html`, a
//! directory's `index.html` at the directory's path with a trailing `/`). A path DIR does not
//! hold falls through to the embedded arena and gallery pages, so a module's page can load the
//! SDK the arena page ships (`/sdk/index.js`) without copying it. The host's own routes
//! (`/zones/..`, `/dev/..`, `/admin/..`, `/metrics`, ...) come first and are never shadowed.
//!
//! Only safe paths are served: every segment is percent-decoded and must be a plain name (no
//! `..`, `.`, empty segment, backslash, NUL or leading dot — dotfiles such as `.git` stay
//! private), and the file, symlinks resolved, must lie inside DIR.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;

/// Largest file served, bytes: a page's assets, not a download server.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Why a request path is not served from the directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A segment is `.`, `..`, empty, or holds a backslash or NUL.
    #[error("path segment {0:?} is not a plain file name")]
    Unsafe(String),
    /// A segment starts with a dot (hidden files are not served).
    #[error("hidden path segment {0:?}")]
    Hidden(String),
    /// Percent-encoding that is not UTF-8.
    #[error("path is not UTF-8 once decoded")]
    NotUtf8,
}

/// The relative file path a request path names inside the directory: `index.html` for `/` and
/// for paths ending in `/`.
pub fn relative_path(url_path: &str) -> Result<PathBuf, PathError> {
    let trimmed = url_path.strip_prefix('/').unwrap_or(url_path);
    let mut rel = PathBuf::new();
    let mut segments: Vec<&str> = trimmed.split('/').collect();
    // A trailing slash (or the root) names the directory's index page.
    if segments.last() == Some(&"") {
        segments.pop();
        segments.push("index.html");
    }
    for raw in segments {
        let seg = percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| PathError::NotUtf8)?;
        if seg.is_empty()
            || seg == "."
            || seg == ".."
            || seg.contains(['/', '\\', '\0'])
            || seg.contains(':')
        {
            return Err(PathError::Unsafe(seg.chars().take(64).collect()));
        }
        if seg.starts_with('.') {
            return Err(PathError::Hidden(seg.chars().take(64).collect()));
        }
        rel.push(seg.as_ref());
    }
    Ok(rel)
}

/// The `Content-Type` of a file by its extension.
fn mime(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("wasm") => "application/wasm",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("ico") => "image/x-icon",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The directory being served, resolved once at start.
#[derive(Debug)]
struct Site {
    root: PathBuf,
}

/// Routes serving `dir` at `/`, over the embedded pages (see the module docs). Fails when `dir`
/// is not a readable directory.
pub fn router(dir: &Path) -> Result<Router> {
    let root = std::fs::canonicalize(dir)
        .with_context(|| format!("--static {}: no such directory", dir.display()))?;
    anyhow::ensure!(root.is_dir(), "--static {}: not a directory", dir.display());
    Ok(Router::new()
        .fallback(serve)
        .with_state(Arc::new(Site { root })))
}

async fn serve(State(site): State<Arc<Site>>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let rel = match relative_path(uri.path()) {
        Ok(rel) => rel,
        Err(e) => return (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    };
    let root = site.root.clone();
    let file = tokio::task::spawn_blocking(move || read_inside(&root, &rel))
        .await
        .unwrap_or(None);
    if let Some((bytes, mime)) = file {
        return ([(CONTENT_TYPE, mime), (CACHE_CONTROL, "no-cache")], bytes).into_response();
    }
    match zonekeep_arena::embedded(uri.path()) {
        Some(f) => (
            [(CONTENT_TYPE, f.mime), (CACHE_CONTROL, "no-cache")],
            f.bytes,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The file `rel` under `root` and its type, when it exists, is a regular file no larger than
/// [`MAX_FILE_BYTES`], and lies inside `root` once symlinks are resolved.
fn read_inside(root: &Path, rel: &Path) -> Option<(Vec<u8>, &'static str)> {
    let real = std::fs::canonicalize(root.join(rel)).ok()?;
    if !real.starts_with(root) {
        tracing::warn!(path = %rel.display(), "--static: a link leads outside the directory; not served");
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(&real).ok()?;
    Some((bytes, mime(&real)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn plain_paths_map_into_the_directory() {
        assert_eq!(relative_path("/").unwrap(), PathBuf::from("index.html"));
        assert_eq!(
            relative_path("/game/").unwrap(),
            PathBuf::from("game/index.html")
        );
        assert_eq!(
            relative_path("/js/app.js").unwrap(),
            PathBuf::from("js/app.js")
        );
        assert_eq!(
            relative_path("/my%20map.json").unwrap(),
            PathBuf::from("my map.json")
        );
    }

    #[test]
    fn traversal_and_hidden_files_are_refused() {
        for bad in [
            "/../etc/passwd",
            "/a/../../x",
            "/%2e%2e/secret",
            "/a/%2E%2E/%2e%2e/x",
            "/a%2f..%2fb",
            "/a%5c..%5cb",
            "/a//b",
            "/./a",
            "/a%00b",
            "/c:/x",
        ] {
            assert!(
                matches!(relative_path(bad), Err(PathError::Unsafe(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            relative_path("/.git/config"),
            Err(PathError::Hidden(_))
        ));
        assert_eq!(relative_path("/%ff"), Err(PathError::NotUtf8));
    }

    #[test]
    fn a_link_out_of_the_directory_is_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "no").unwrap();
        let site = tempfile::tempdir().unwrap();
        std::fs::write(site.path().join("page.html"), "yes").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path(), site.path().join("out")).unwrap();
        let root = std::fs::canonicalize(site.path()).unwrap();
        let (bytes, mime) = read_inside(&root, Path::new("page.html")).unwrap();
        assert_eq!(
            (bytes.as_slice(), mime),
            (&b"yes"[..], "text/html; charset=utf-8")
        );
        assert!(read_inside(&root, Path::new("out/secret.txt")).is_none());
        assert!(read_inside(&root, Path::new("missing.html")).is_none());
    }
}
