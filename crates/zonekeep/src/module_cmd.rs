//! `zonekeep module push FILE --kind KIND --url URL`: deploy a zone module through a host's admin
//! API (`POST /admin/modules/{kind}`). The module is kept in the store, reaches the host's running
//! zones through the freeze barrier, and every host of the fleet follows. Exit 0 when deployed, 1
//! when a zone refused its save and the deploy was rolled back (or only partly applied), 2 when
//! the module or the request was refused.
//!
//! `zonekeep module rollback --kind KIND --url URL [--to-version N]`: take the kind back to the
//! module it ran before its last deploy on that host, or to the module of its stored deploy `N`
//! (`POST /admin/modules/{kind}/rollback`), everywhere. Exit 0 when done, 1 when a zone refused,
//! 2 when there was nothing to go back to (or no such version).
//!
//! `zonekeep module history --kind KIND --url URL`: the kind's newest deploys from the store
//! (`GET /admin/modules/{kind}/history`), newest first, with why each was made. Exit 0, or 2
//! when the host refused.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Largest answer read from the host.
const MAX_ANSWER: usize = 4 << 20;

/// `zonekeep module ...`.
#[derive(Debug, Args)]
pub(crate) struct ModuleArgs {
    #[command(subcommand)]
    command: ModuleCommand,
}

#[derive(Debug, Subcommand)]
enum ModuleCommand {
    /// Deploy a module (a .wasm file) as the game code of a zone kind.
    Push(PushArgs),
    /// Take a zone kind back to the module it ran before its last deploy (or to an earlier
    /// deploy of its history).
    Rollback(RollbackArgs),
    /// List a zone kind's recent deploys, newest first.
    History(HistoryArgs),
}

/// Where the admin API is and how to reach it.
#[derive(Debug, Args)]
struct HostArgs {
    /// Any host of the fleet, e.g. http://127.0.0.1:7350.
    #[arg(long, env = "ZONEKEEP_URL", default_value = "http://127.0.0.1:7350")]
    url: String,
    /// The host's admin token.
    #[arg(long, env = "ZONEKEEP_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
    /// How long to wait for the host's answer, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
}

#[derive(Debug, Args)]
struct RollbackArgs {
    /// The zone kind.
    #[arg(long)]
    kind: String,
    /// Go back to the module of this deploy of the kind's history (`zonekeep module history`)
    /// instead of the one before the last deploy.
    #[arg(long)]
    to_version: Option<u64>,
    #[command(flatten)]
    host: HostArgs,
}

#[derive(Debug, Args)]
struct HistoryArgs {
    /// The zone kind.
    #[arg(long)]
    kind: String,
    /// Most deploys to list (the store keeps the newest 64).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    host: HostArgs,
}

#[derive(Debug, Args)]
struct PushArgs {
    /// The module, built for wasm32-unknown-unknown.
    file: PathBuf,
    /// The zone kind it runs (the host must serve it as a module kind: `serve --module KIND`).
    #[arg(long)]
    kind: String,
    /// When a running zone's new module refuses its save: roll every zone back (roll_back), or
    /// keep the zones that upgraded (keep_upgraded).
    #[arg(long, default_value = "roll_back", value_parser = ["roll_back", "keep_upgraded"])]
    on_refusal: String,
    #[command(flatten)]
    host: HostArgs,
}

/// Runs `zonekeep module ...`.
pub(crate) fn run(args: ModuleArgs) -> Result<ExitCode> {
    match args.command {
        ModuleCommand::Push(p) => push(p),
        ModuleCommand::Rollback(r) => rollback(r),
        ModuleCommand::History(h) => history(h),
    }
}

/// The host's answer: its status, and its body as JSON (`Value::Null` when the body is not JSON)
/// and as it came.
struct Answer {
    status: hyper::StatusCode,
    json: Value,
    body: Bytes,
}

/// POSTs `body` to `path` of the host's admin API; prints a JSON answer on stdout.
fn post(host: &HostArgs, path: &str, body: Vec<u8>) -> Result<Answer> {
    request(host, hyper::Method::POST, path, body)
}

/// Sends `method` `path` (with `body`) to the host's admin API; prints a JSON answer on stdout.
fn request(host: &HostArgs, method: hyper::Method, path: &str, body: Vec<u8>) -> Result<Answer> {
    let url = format!("{}{path}", host.url.trim_end_matches('/'));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, answer) = runtime.block_on(async {
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let req = hyper::Request::builder()
            .method(method.clone())
            .uri(&url)
            .header("authorization", format!("Bearer {}", host.admin_token))
            .header("content-type", "application/wasm")
            .body(Full::new(Bytes::from(body)))
            .context("building the request")?;
        let resp =
            tokio::time::timeout(Duration::from_secs(host.timeout_secs), client.request(req))
                .await
                .context("the host did not answer in time")?
                .with_context(|| format!("{method} {url}"))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
            .to_bytes();
        anyhow::Ok((status, body))
    })?;
    let json = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    // Only a JSON answer goes to stdout (for scripts); any other body is the refusal's reason.
    if !json.is_null() {
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(Answer {
        status,
        json,
        body: answer,
    })
}

/// Zones whose upgrade was refused.
fn refused(answer: &Value) -> usize {
    answer["upgrade"]["zones"]
        .as_array()
        .map_or(0, |z| z.iter().filter(|z| z["upgraded"] == false).count())
}

/// Longest stretch of a non-JSON answer quoted as the reason.
const MAX_REASON: usize = 1000;

/// Why the host refused, from its answer's body: the JSON error's message or reason (the admin
/// API answers `{"error": {"code", "message"}}`; `{"error", "reason"}` is read too), else the
/// body's text as it came (a proxy's or the HTTP stack's own answer), else a note that the host
/// gave none.
fn refusal_reason(body: &[u8]) -> String {
    let text = |v: &Value| {
        v.as_str()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    if let Ok(json) = serde_json::from_slice::<Value>(body) {
        let error = &json["error"];
        let reason = text(&error["message"])
            .or_else(|| text(&error["reason"]))
            .or_else(|| text(&json["reason"]))
            .or_else(|| text(&json["message"]));
        let code = text(&error["code"]).or_else(|| text(error));
        match (reason, code) {
            (Some(r), Some(c)) => return format!("{r} ({c})"),
            (Some(r), None) | (None, Some(r)) => return r,
            (None, None) => {}
        }
    }
    let plain = String::from_utf8_lossy(body);
    let plain = plain.trim();
    if plain.is_empty() {
        return "the host gave no reason (empty answer)".into();
    }
    match plain.char_indices().nth(MAX_REASON) {
        Some((cut, _)) => format!("{}…", &plain[..cut]),
        None => plain.to_owned(),
    }
}

/// Prints why the request was refused: the status and the host's reason. Exit 2.
fn refused_request(answer: &Answer) -> ExitCode {
    eprintln!(
        "refused ({}): {}",
        answer.status,
        refusal_reason(&answer.body)
    );
    ExitCode::from(2)
}

fn rollback(args: RollbackArgs) -> Result<ExitCode> {
    let query = args
        .to_version
        .map(|v| format!("?version={v}"))
        .unwrap_or_default();
    let reply = post(
        &args.host,
        &format!("/admin/modules/{}/rollback{query}", args.kind),
        Vec::new(),
    )?;
    if !reply.status.is_success() {
        return Ok(refused_request(&reply));
    }
    let answer = reply.json;
    let refused = refused(&answer);
    if refused > 0 {
        eprintln!(
            "rolled back; {refused} zone(s) refused the earlier module and stay as they were"
        );
        return Ok(ExitCode::from(1));
    }
    eprintln!(
        "{} runs {} again (version {})",
        args.kind,
        answer["sha256"].as_str().unwrap_or("?"),
        answer["version"]
    );
    Ok(ExitCode::SUCCESS)
}

fn history(args: HistoryArgs) -> Result<ExitCode> {
    let reply = request(
        &args.host,
        hyper::Method::GET,
        &format!("/admin/modules/{}/history?limit={}", args.kind, args.limit),
        Vec::new(),
    )?;
    if !reply.status.is_success() {
        return Ok(refused_request(&reply));
    }
    let deploys = reply.json["history"].as_array().map_or(0, Vec::len);
    eprintln!("{} deploy(s) of {}, newest first", deploys, args.kind);
    Ok(ExitCode::SUCCESS)
}

fn push(args: PushArgs) -> Result<ExitCode> {
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let path = format!(
        "/admin/modules/{}?on_refusal={}",
        args.kind, args.on_refusal
    );
    let reply = post(&args.host, &path, bytes)?;
    if !reply.status.is_success() {
        return Ok(refused_request(&reply));
    }
    let answer = reply.json;
    let refused = refused(&answer);
    if answer["rolled_back"] == true {
        eprintln!("rolled back: {refused} zone(s) refused their save in the new module");
        return Ok(ExitCode::from(1));
    }
    if refused > 0 {
        eprintln!("deployed; {refused} zone(s) refused their save and stay on the old module");
        return Ok(ExitCode::from(1));
    }
    eprintln!(
        "deployed {} as {} (version {}); {} zone(s) upgraded, {} input(s) frozen",
        answer["sha256"].as_str().unwrap_or("?"),
        args.kind,
        answer["version"],
        answer["upgrade"]["zones"].as_array().map_or(0, Vec::len),
        answer["upgrade"]["zones"].as_array().map_or(0, |z| z
            .iter()
            .filter_map(|z| z["frozen_inputs"].as_u64())
            .sum::<u64>()),
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::refusal_reason;

    #[test]
    fn the_reason_of_a_json_refusal_is_the_hosts_message() {
        // The admin API's errors.
        let body = br#"{"error": {"code": "too_large", "message": "a module is at most 32 MiB (33554432 bytes)"}}"#;
        assert_eq!(
            refusal_reason(body),
            "a module is at most 32 MiB (33554432 bytes) (too_large)"
        );
        // An error named by a string, its reason beside it.
        let body = br#"{"error": "too_large", "reason": "the body is over the 32 MiB limit"}"#;
        assert_eq!(
            refusal_reason(body),
            "the body is over the 32 MiB limit (too_large)"
        );
        let body = br#"{"error": "module is empty"}"#;
        assert_eq!(refusal_reason(body), "module is empty");
    }

    #[test]
    fn the_reason_of_any_other_answer_is_its_text() {
        // What the HTTP stack answers on its own, before any handler.
        let body = b"Failed to buffer the request body: length limit exceeded";
        assert_eq!(
            refusal_reason(body),
            "Failed to buffer the request body: length limit exceeded"
        );
        // JSON without a reason in it is quoted as it came, not as `null`.
        assert_eq!(refusal_reason(b"null"), "null");
        assert_eq!(refusal_reason(b"{\"ok\": false}"), "{\"ok\": false}");
        assert_eq!(
            refusal_reason(b"  \n"),
            "the host gave no reason (empty answer)"
        );
        let long = "x".repeat(5000);
        let quoted = refusal_reason(long.as_bytes());
        assert_eq!(quoted.chars().count(), super::MAX_REASON + 1);
        assert!(quoted.ends_with('…'));
        // Bytes that are not UTF-8 still say something.
        assert_eq!(refusal_reason(b"bad \xff gateway"), "bad \u{fffd} gateway");
    }
}
