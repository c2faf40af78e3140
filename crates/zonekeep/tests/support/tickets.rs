//! Tickets as the tests' hosts accept them (signed with [`SECRET`]), and a suffix unique to a
//! test run that keeps their ids, and the zones and principals of a shared database, apart.

use serde_json::{json, Value};

pub const SECRET: &str = "persist-test-secret-0123456789abcdef";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A signed ledger-test ticket.
pub fn ticket(sub: &str, zone: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let claims = json!({
        "sub": sub, "zone": zone, "exp": now() + 120, "kind": "ledger-test",
        "jti": format!("persist-{}-{n}", unique_run()),
    });
    sign(&claims)
}

/// A signed ticket for `sub` to zone `zone` of kind `kind`, single-use.
pub fn ticket_for(sub: &str, zone: &str, kind: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    sign(&json!({
        "sub": sub, "zone": zone, "kind": kind, "exp": now() + 120,
        "jti": format!("{kind}-{}-{n}", unique_run()),
    }))
}

/// A suffix unique to this test run (process id and clock), for zone ids and principals in a
/// database shared between runs.
pub fn unique_run() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// `claims` signed with [`SECRET`] under the default key id.
pub fn sign(claims: &Value) -> String {
    zonekeep_server::ticket::sign_parts(
        SECRET.as_bytes(),
        &json!({"alg": "HS256", "kid": "default"}),
        claims,
    )
}
