//! Builds the example zone modules (and the guest SDK's example module) for
//! `wasm32-unknown-unknown` (profile `module`), once per test process, into `target/modules` (a
//! target directory of their own, so the build never waits on the one running the tests). Needs
//! the target: `rustup target add wasm32-unknown-unknown`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The tag example (`examples/module-tag`) as a `.wasm` file.
pub fn tag_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("zonekeep-module-tag")).clone()
}

/// The doors kind as a module (`examples/doors-module`) as a `.wasm` file.
pub fn doors_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("zonekeep-doors-module")).clone()
}

/// The demo arena as a module (`examples/arena-module`) as a `.wasm` file.
pub fn arena_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("zonekeep-arena-module")).clone()
}

/// The arena workload as a module (`examples/workload-module`) as a `.wasm` file.
pub fn workload_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| build("zonekeep-workload-module"))
        .clone()
}

/// The guest SDK's example module with characters (`crates/zonekeep-guest/examples/characters.rs`)
/// as a `.wasm` file.
pub fn characters_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            build_with("zonekeep-guest", &["--example", "characters"])
                .join("examples")
                .join("characters.wasm")
        })
        .clone()
}

/// The guest SDK's example module making durable calls (`crates/zonekeep-guest/examples/calls.rs`)
/// as a `.wasm` file.
pub fn calls_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            build_with("zonekeep-guest", &["--example", "calls"])
                .join("examples")
                .join("calls.wasm")
        })
        .clone()
}

/// Builds `package` for wasm32 with the `module` profile; the path of its `.wasm`.
fn build(package: &str) -> PathBuf {
    build_with(package, &[]).join(format!("{}.wasm", package.replace('-', "_")))
}

/// Builds `package` (with `extra` arguments) for wasm32 with the `module` profile; the directory
/// its artifacts are in.
fn build_with(package: &str, extra: &[&str]) -> PathBuf {
    let root = workspace();
    let target = root.join("target").join("modules");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "-p",
            package,
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "module",
        ])
        .args(extra)
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("running cargo to build a module");
    assert!(
        out.status.success(),
        "building {package} {extra:?} failed (is the wasm32-unknown-unknown target installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("wasm32-unknown-unknown").join("module")
}
