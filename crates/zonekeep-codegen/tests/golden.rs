//! The code written for the sample kind, pinned: each language's output is committed where that
//! SDK's tests compile and run it against `tests/fixtures/codegen/vectors.json`. A change to a
//! generator fails here until the files are rewritten with `ZONEKEEP_BLESS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sample;

use std::path::PathBuf;

use zonekeep_codegen::{generate, Lang, Options};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn options() -> Options {
    Options {
        command: "zonekeep codegen --kind sample".into(),
        ts_import: "../../src/index.js".into(),
        cs_namespace: "Zonekeep.Generated.Sample".into(),
    }
}

fn check(lang: Lang, path: &str) {
    let text = generate(&sample::sample_api(), lang, &options()).unwrap();
    let path = repo().join(path);
    if std::env::var_os("ZONEKEEP_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is stale: rewrite it with ZONEKEEP_BLESS=1 cargo test -p zonekeep-codegen --test golden",
        path.display()
    );
}

#[test]
fn typescript_of_the_sample_is_committed() {
    check(Lang::Ts, "clients/js/test/generated/sample.ts");
}

#[test]
fn csharp_of_the_sample_is_committed() {
    check(Lang::Cs, "clients/csharp/Tests/Generated/Sample.g.cs");
}

#[test]
fn rust_of_the_sample_is_committed() {
    check(
        Lang::Rust,
        "crates/zonekeep-codegen/tests/generated/sample.rs",
    );
}

#[test]
fn the_same_api_gives_the_same_text() {
    for lang in [Lang::Ts, Lang::Cs, Lang::Rust] {
        let a = generate(&sample::sample_api(), lang, &options()).unwrap();
        let b = generate(&sample::sample_api(), lang, &options()).unwrap();
        assert_eq!(a, b);
        assert!(a.ends_with('\n') && !a.ends_with("\n\n"));
        assert!(!a.lines().any(|l| l.ends_with(' ')), "trailing spaces");
    }
}
