//! A game's own page from the stock binary: `serve --static DIR` serves DIR at `/` (over the
//! built-in pages, which stay reachable for what DIR lacks), never a file outside DIR, and in dev
//! mode `/dev/ticket` answers a page of another origin. The site icon is served.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One raw HTTP/1.1 GET (the path is sent exactly as given): status, head (lower-cased) and body.
async fn get(addr: &str, path: &str, extra_head: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra_head}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_static_serves_the_games_page_and_nothing_outside_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    std::fs::create_dir_all(site.join("js")).unwrap();
    std::fs::write(site.join("index.html"), "<h1>my module game</h1>").unwrap();
    std::fs::write(site.join("js/game.js"), "export const game = 1;").unwrap();
    std::fs::write(site.join(".env"), "SECRET=1").unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "outside").unwrap();
    let data = tmp.path().join("data");
    let (_host, _log, addr) =
        support::serve_piped(&data, &["--dev", "--static", site.to_str().unwrap()]).await;

    let (status, head, body) = get(&addr, "/", "").await;
    assert_eq!((status, body.as_str()), (200, "<h1>my module game</h1>"));
    assert!(head.contains("content-type: text/html"), "{head}");
    let (status, head, body) = get(&addr, "/js/game.js", "").await;
    assert_eq!((status, body.as_str()), (200, "export const game = 1;"));
    assert!(head.contains("content-type: text/javascript"), "{head}");

    // What the directory lacks comes from the built-in pages (the SDK a page imports).
    let (status, head, _) = get(&addr, "/sdk/index.js", "").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/javascript"), "{head}");
    assert_eq!(get(&addr, "/no-such-file.js", "").await.0, 404);

    for path in [
        "/../secret.txt",
        "/js/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/js/%2E%2E/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/.env",
    ] {
        let (status, _, body) = get(&addr, path, "").await;
        assert_ne!(status, 200, "{path}: {body}");
        assert!(
            !body.contains("outside") && !body.contains("SECRET"),
            "{path}: {body}"
        );
    }

    // The host's own routes are not shadowed by the directory.
    let (status, _, body) = get(&addr, "/healthz", "").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_ticket_is_readable_by_a_page_of_another_origin() {
    let data = tempfile::tempdir().unwrap();
    let (_host, _log, addr) = support::serve_piped(data.path(), &["--dev"]).await;
    let (status, head, body) = get(
        &addr,
        "/dev/ticket?zone=tag-1&name=ann&kind=arena",
        "Origin: http://localhost:5173\r\n",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("access-control-allow-origin: *"), "{head}");
    assert!(body.contains("\"ticket\""), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_site_icon_is_served() {
    let data = tempfile::tempdir().unwrap();
    let (_host, _log, addr) = support::serve_piped(data.path(), &["--dev"]).await;
    let (status, head, body) = get(&addr, "/favicon.ico", "").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: image/svg+xml"), "{head}");
    assert!(body.contains("<svg"), "{body}");
}
