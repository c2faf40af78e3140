//! `zonekeep module push` tells its user why a host refused: the status and the host's reason,
//! from a JSON error or, when the answer is not JSON, from its text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;

/// Serves one request on a local port with `status_line` and `body` (of `content_type`); the
/// address to push to.
fn answer_once(
    status_line: &'static str,
    content_type: &'static str,
    body: &'static str,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        // Read the request to its end, so the client never meets a reset.
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut request_body = vec![0u8; length];
        reader.read_exact(&mut request_body).unwrap();
        let mut stream = reader.into_inner();
        write!(
            stream,
            "HTTP/1.1 {status_line}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    });
    format!("http://{addr}")
}

/// Runs `zonekeep module push` of a small module to `url`: exit code, stdout, stderr.
fn push(url: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("game.wasm");
    std::fs::write(&file, b"\0asm\x01\0\0\0").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .args(["module", "push"])
        .arg(&file)
        .args([
            "--kind",
            "tag",
            "--url",
            url,
            "--admin-token",
            "a-token-of-some-length",
        ])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_refusal_in_plain_text_is_printed_with_its_status() {
    let url = answer_once(
        "413 Payload Too Large",
        "text/plain; charset=utf-8",
        "Failed to buffer the request body: length limit exceeded",
    );
    let (code, stdout, stderr) = push(&url);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("refused (413 Payload Too Large): Failed to buffer the request body: length limit exceeded"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("null"),
        "nothing but JSON on stdout: {stdout}"
    );
}

#[test]
fn a_json_refusal_is_printed_with_the_hosts_reason() {
    let url = answer_once(
        "413 Payload Too Large",
        "application/json",
        r#"{"error": "too_large", "reason": "a module is at most 32 MiB"}"#,
    );
    let (code, _, stderr) = push(&url);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("refused (413 Payload Too Large): a module is at most 32 MiB (too_large)"),
        "{stderr}"
    );
    assert!(!stderr.contains("no reason given"), "{stderr}");
}
