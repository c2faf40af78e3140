//! Tests that need an outside service (PostgreSQL) find it through an environment variable. When it
//! is missing the test is reported as skipped — never as passed in silence — and under `CI=true`,
//! where the service must be there, the test fails instead.

use std::io::Write as _;

/// The service URL in `var`, or `None` after reporting `test` as skipped.
///
/// Rust's test harness has no "skipped" outcome, so a skipped test prints a `SKIPPED:` line to
/// stderr and, when `ZONEKEEP_SKIPPED_LOG` names a file, appends the same line to it so that
/// `scripts/test-all.sh` can list every skipped test at the end of a run (the harness hides the
/// output of tests that pass).
///
/// # Panics
/// When `CI` is `true` and `var` is unset or empty: a CI run must not pass without its services.
pub fn service_url(var: &str, test: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: {var} is not set, and CI=true requires the service"
            );
            let line = format!("SKIPPED: {} {test}: {var} not set", env!("CARGO_PKG_NAME"));
            eprintln!("{line}");
            if let Ok(path) = std::env::var("ZONEKEEP_SKIPPED_LOG") {
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = writeln!(f, "{line}");
                }
            }
            None
        }
    }
}
