//! The starter a user copies out of the repository (`examples/starter`) builds and plays outside the
//! workspace: it is copied to a temporary directory, its path dependencies are pointed at this
//! checkout's crates, it is built and its tests run (sharing this workspace's target directory, so
//! only the starter itself compiles), then it is served and joined with the Rust client, whose
//! player walks.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;
use zonekeep_client::{connect, ConnectOptions, Event};

/// Bound on each wait on the running starter (its start, a reply, the player's first steps).
const WAIT: Duration = Duration::from_secs(30);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This workspace's target directory (integration tests get `<target>/tmp`).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR has a parent")
        .to_path_buf()
}

/// Copies the starter's own files (not build output or installed packages; its lock file is one
/// of its own files).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if ["target", "node_modules"].iter().any(|skip| name == *skip) {
            continue;
        }
        let dest = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// Runs cargo on the copied manifest; panics with its output when it fails.
fn cargo(manifest: &Path, args: &[&str]) {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .arg("--manifest-path")
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {args:?} failed for the copied starter:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A plain HTTP/1.1 GET; returns the status code and body.
async fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, body.to_owned())
}

/// The starter copied into `dir/my-game` with its path dependencies pointed at this checkout, as
/// its manifest's comment tells a user to: (the copy, its manifest).
fn copy_starter(dir: &Path) -> (PathBuf, PathBuf) {
    let root = repo_root();
    let starter = dir.join("my-game");
    copy_tree(&root.join("examples/starter"), &starter);
    // Point the path dependencies at this checkout, as the manifest's comment tells a user to.
    let manifest = starter.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let crates = root.join("crates").canonicalize().unwrap();
    let rewritten = text.replace(
        "path = \"../../crates/",
        &format!("path = \"{}/", crates.display()),
    );
    assert_eq!(
        rewritten.matches(&*crates.display().to_string()).count(),
        3,
        "the starter depends on zonekeep-core, -protocol and -server by path:\n{text}"
    );
    std::fs::write(&manifest, rewritten).unwrap();
    (starter, manifest)
}

/// A copied starter resolves every dependency from the lock file it ships: nothing is left to
/// resolve afresh (a copy without one rebuilt the whole tree at whatever versions were newest).
#[test]
fn the_starter_ships_a_current_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let (starter, manifest) = copy_starter(dir.path());
    assert!(
        starter.join("Cargo.lock").is_file(),
        "the starter has a Cargo.lock"
    );
    cargo(&manifest, &["tree", "--locked", "--quiet", "-e", "normal"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_starter_builds_outside_the_workspace_serves_its_zone_and_a_client_plays() {
    let dir = tempfile::tempdir().unwrap();
    let (starter, manifest) = copy_starter(dir.path());

    // `--locked`: the starter builds the versions its own lock file names, as a copy would.
    cargo(&manifest, &["build", "--quiet", "--locked"]);
    cargo(&manifest, &["test", "--quiet", "--locked"]);

    let bin = target_dir().join("debug").join("zonekeep-starter");
    let mut child = Command::new(&bin)
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(&starter)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("listening on http://") {
                return url.trim_end_matches('/').to_owned();
            }
        }
        panic!("the starter exited without a listening line");
    })
    .await
    .expect("the starter printed its listening line");

    let (status, page) = http_get(&addr, "/").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("@zonekeep/client"),
        "the page imports the SDK"
    );

    let (status, body) = http_get(&addr, "/dev/ticket?zone=walkers-1&name=tester").await;
    assert_eq!(status, 200, "{body}");
    let ticket: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ticket = ticket["ticket"].as_str().expect("a ticket").to_owned();

    let (mut conn, welcome) = connect(
        &format!("ws://{addr}/zones/walkers-1"),
        ConnectOptions::new(ticket),
    )
    .await
    .unwrap();
    assert_eq!(welcome.schema.kinds[0].name, "walker");

    // Find the controlled walker, then walk right until the host reports it moved.
    let walked = tokio::time::timeout(WAIT, async {
        let mut me = None;
        let mut start_x = None;
        while let Some(ev) = conn.recv().await {
            let Event::Delta(patch) = ev else { continue };
            if let Some(control) = patch.control {
                me = control;
            }
            let Some(id) = me else { continue };
            if let Some(s) = patch.spawns.iter().find(|s| s.id == id) {
                start_x = Some(s.x);
                conn.send_input(&[1, 0]).unwrap();
            }
            let moved = patch
                .updates
                .iter()
                .filter(|u| u.id == id)
                .find_map(|u| u.pos);
            if let (Some((x, _)), Some(x0)) = (moved, start_x) {
                return (x0, x);
            }
        }
        panic!("the connection ended before the walker moved");
    })
    .await
    .expect("the walker moved");
    assert!(walked.1 > walked.0, "walked right: {walked:?}");

    conn.close().await;
    child.kill().await.unwrap();
}
