//! Pushing a module to a host's admin API, as `zonekeep module push` does, and the small modules
//! the tests push.

use serde_json::Value;

use super::ADMIN_TOKEN;

/// POSTs `module` to `/admin/modules/{kind}{query}` at `addr` with `Content-Length: declared`
/// (the module's length when `None`): the status and the answer (`null` when not JSON).
pub async fn push_module(
    addr: &str,
    kind: &str,
    query: &str,
    module: &[u8],
    declared: Option<usize>,
) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /admin/modules/{kind}{query} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/wasm\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        declared.unwrap_or(module.len())
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The host may answer (and close) before the whole body is sent.
    let _ = s.write_all(module).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {}", String::from_utf8_lossy(&out)));
    let status = String::from_utf8_lossy(&out[..split])
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    (
        status,
        serde_json::from_slice(&out[split + 4..]).unwrap_or(Value::Null),
    )
}

/// A module of the ABI that keeps no state and traps in call `op` (1 CREATE, 11 RESTORE, ...):
/// every other call answers nothing.
pub fn trapping_in(op: u32) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const {op})) (then unreachable))
                i64.const 0))"#
    ))
    .unwrap()
}
