//! Chat over HTTP: lines said and read by the application's back end (its credential, the
//! lobby's), and moderation by the back end or by a moderator (a ticket with `role`
//! `"moderator"`, single use, whose `zone` claim bounds what it moderates).
//!
//! | route | who |
//! | --- | --- |
//! | `POST /chat/lines` `{channel \| to, sender, body}` | back end |
//! | `GET /chat/lines?channel=…` or `?between=A&and=B`, `before`, `limit` | back end; a moderator of the channel (not direct ones) |
//! | `POST /chat/sanctions` `{principal, action, scope, seconds, reason}` | back end; a moderator of the scope |
//! | `DELETE /chat/sanctions/{id}` | back end; a moderator of its scope |
//! | `GET /chat/sanctions?principal=P` | back end; any moderator |
//! | `GET /chat/reports?after=&limit=`, `GET /chat/audit?after=&limit=` | back end; a moderator of every zone (`*`) |

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use zonekeep_store::{ChatScope, NewSanction, Sanction, SanctionAction, StoredLine};

use super::channel::{check_body, Channel};
use super::scope;
use super::Chat;
use crate::host::{json_error, Shared, StoreCallError};
use crate::sim::now_ms;

/// Largest request body, bytes.
const MAX_BODY: usize = 4096;
/// Longest reason a sanction keeps, bytes.
const MAX_REASON: usize = 500;
/// Longest a sanction lasts: ten years.
const MAX_SECONDS: u64 = 10 * 365 * 24 * 3600;
/// Most rows one read answers.
const MAX_PAGE: u32 = 200;

/// The routes (every host; those of a host without a store answer `chat_off`).
pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/chat/lines", get(read_lines).post(post_line))
        .route("/chat/sanctions", get(list_sanctions).post(sanction))
        .route("/chat/sanctions/{id}", delete(lift))
        .route("/chat/reports", get(reports))
        .route("/chat/audit", get(audit))
}

/// Why a chat request was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChatFailure {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("chat needs a store: this host keeps none")]
    Off,
    #[error("{0}")]
    Unavailable(String),
}

impl IntoResponse for ChatFailure {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            ChatFailure::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ChatFailure::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ChatFailure::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ChatFailure::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ChatFailure::Off => (StatusCode::NOT_FOUND, "chat_off"),
            ChatFailure::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        };
        json_error(status, code, self.to_string())
    }
}

impl From<StoreCallError> for ChatFailure {
    fn from(e: StoreCallError) -> Self {
        match e {
            StoreCallError::Store(e @ zonekeep_store::StoreError::InvalidArgument(_)) => {
                ChatFailure::BadRequest(e.to_string())
            }
            StoreCallError::Store(e) => ChatFailure::Unavailable(format!("the store: {e}")),
            StoreCallError::Timeout(why) => ChatFailure::Unavailable(why),
        }
    }
}

fn chat_of(shared: &Shared) -> Result<Arc<Chat>, ChatFailure> {
    shared.chat.get().cloned().ok_or(ChatFailure::Off)
}

/// Who asks.
enum Caller {
    /// The application's back end.
    Backend,
    /// A moderator: its principal and the zones its ticket admits.
    Moderator { principal: String, zones: String },
}

impl Caller {
    fn name(&self) -> String {
        match self {
            Caller::Backend => "@backend".into(),
            Caller::Moderator { principal, .. } => principal.clone(),
        }
    }

    /// Refuses a moderator whose ticket does not reach `scope`.
    fn may(&self, scope: &ChatScope) -> Result<(), ChatFailure> {
        match self {
            Caller::Backend => Ok(()),
            Caller::Moderator { zones, .. } if scope::within(scope, zones) => Ok(()),
            Caller::Moderator { zones, .. } => Err(ChatFailure::Forbidden(format!(
                "a moderator of zones {zones:?} does not moderate {scope}"
            ))),
        }
    }
}

/// The caller: the back end's credential, or a moderator ticket for `target` (a zone id, or `*`
/// for what only a moderator of every zone may do), spent on use.
async fn caller(shared: &Shared, headers: &HeaderMap, target: &str) -> Result<Caller, ChatFailure> {
    if shared.lobby_token_hash.is_some()
        && crate::admin::check_bearer(headers, shared.lobby_token_hash.as_ref()).is_ok()
    {
        return Ok(Caller::Backend);
    }
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ChatFailure::Unauthorized(
                "send the back end's credential or a moderator ticket as a bearer token".into(),
            )
        })?;
    let t = shared
        .verifier
        .verify(token, target, crate::ticket::unix_now())
        .map_err(|e| match e {
            // A good ticket for other zones: who it is is known, what it may do is not this.
            crate::ticket::TicketError::WrongZone(_) => ChatFailure::Forbidden(format!(
                "the ticket does not moderate {}",
                if target == "*" { "every zone" } else { target }
            )),
            e => ChatFailure::Unauthorized(format!("ticket: {e}")),
        })?;
    if !t.moderator {
        return Err(ChatFailure::Forbidden(
            "the ticket's role is not \"moderator\"".into(),
        ));
    }
    crate::session::spend_ticket(shared, &t)
        .await
        .map_err(|e| match e {
            crate::error::SessionError::Ticket(e) => {
                ChatFailure::Unauthorized(format!("ticket: {e}"))
            }
            e => ChatFailure::Unavailable(format!("spending the ticket: {e}")),
        })?;
    Ok(Caller::Moderator {
        principal: t.sub.as_str().to_owned(),
        zones: t.zone.clone(),
    })
}

/// Refuses anyone but the back end (`why` says what only it may do).
fn backend_only(shared: &Shared, headers: &HeaderMap, why: &str) -> Result<(), ChatFailure> {
    match shared.lobby_token_hash {
        None => Err(ChatFailure::Unauthorized(format!(
            "{why}: start the host with --lobby-token"
        ))),
        Some(ref hash) => crate::admin::check_bearer(headers, Some(hash))
            .map_err(|_| ChatFailure::Unauthorized(format!("{why} (its credential)"))),
    }
}

/// The zone a moderator ticket must admit to act in `scope` (`*`: every zone).
fn target_of(scope: &ChatScope) -> String {
    match scope {
        ChatScope::Zone(z) => z.clone(),
        ChatScope::Group(_) | ChatScope::Fleet => "*".into(),
    }
}

fn body_json<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ChatFailure> {
    if body.len() > MAX_BODY {
        return Err(ChatFailure::BadRequest(format!(
            "the body is over {MAX_BODY} bytes"
        )));
    }
    serde_json::from_slice(body).map_err(|e| ChatFailure::BadRequest(format!("body: {e}")))
}

fn check_principal(p: &str, what: &str) -> Result<(), ChatFailure> {
    if p.is_empty() || p.len() > crate::ticket::MAX_SUB_LEN || p.chars().any(char::is_control) {
        return Err(ChatFailure::BadRequest(format!(
            "{what} must be 1..=256 bytes without control characters"
        )));
    }
    Ok(())
}

fn line_json(l: &StoredLine, channel: &str) -> Value {
    json!({
        "channel": channel,
        "seq": l.seq,
        "sender": l.sender,
        "sent_at_ms": l.sent_at_ms,
        "body": l.body,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LineBody {
    channel: Option<String>,
    to: Option<String>,
    sender: String,
    body: String,
}

async fn post_line(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ChatFailure> {
    let chat = chat_of(&shared)?;
    backend_only(
        &shared,
        &headers,
        "lines are said over HTTP by the back end only",
    )?;
    let b: LineBody = body_json(&body)?;
    check_principal(&b.sender, "sender")?;
    let channel = match (&b.channel, &b.to) {
        (Some(c), None) => {
            Channel::shared(c).map_err(|e| ChatFailure::BadRequest(e.to_string()))?
        }
        (None, Some(to)) => {
            check_principal(to, "to")?;
            Channel::direct(&b.sender, to).map_err(|e| ChatFailure::BadRequest(e.to_string()))?
        }
        _ => {
            return Err(ChatFailure::BadRequest(
                "name either a `channel` (zone:<id>, group:<name>) or `to` (a principal)".into(),
            ))
        }
    };
    check_body(&b.body, chat.config.max_line).map_err(ChatFailure::BadRequest)?;
    let line = chat
        .say_as(&channel, &b.sender, &b.body)
        .await
        .map_err(ChatFailure::Unavailable)?;
    let name = channel.wire_name(&b.sender);
    Ok((StatusCode::CREATED, Json(line_json(&line, &name))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinesQuery {
    channel: Option<String>,
    between: Option<String>,
    and: Option<String>,
    before: Option<u64>,
    limit: Option<u32>,
}

async fn read_lines(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<LinesQuery>,
) -> Result<Response, ChatFailure> {
    let chat = chat_of(&shared)?;
    let limit = page(q.limit)?;
    let channel = match (&q.channel, &q.between, &q.and) {
        (Some(c), None, None) => {
            Channel::shared(c).map_err(|e| ChatFailure::BadRequest(e.to_string()))?
        }
        (None, Some(a), Some(b)) => {
            Channel::direct(a, b).map_err(|e| ChatFailure::BadRequest(e.to_string()))?
        }
        _ => {
            return Err(ChatFailure::BadRequest(
                "name a `channel`, or two principals as `between` and `and`".into(),
            ))
        }
    };
    match &channel {
        Channel::Zone(z) => {
            caller(&shared, &headers, z).await?;
        }
        Channel::Group(_) => {
            caller(&shared, &headers, "*").await?;
        }
        // Nobody's private lines but the back end's to read.
        Channel::Direct { .. } => backend_only(
            &shared,
            &headers,
            "direct messages are read by the back end only",
        )?,
    }
    let lines =
        crate::host::bounded_store_call(chat.store.lines(&channel.key(), q.before, limit)).await?;
    let name = channel.to_string();
    let lines: Vec<Value> = lines.iter().map(|l| line_json(l, &name)).collect();
    Ok(Json(json!({ "channel": name, "lines": lines })).into_response())
}

fn page(limit: Option<u32>) -> Result<u32, ChatFailure> {
    match limit.unwrap_or(50) {
        0 => Err(ChatFailure::BadRequest("limit must be 1..=200".into())),
        n if n > MAX_PAGE => Err(ChatFailure::BadRequest("limit must be 1..=200".into())),
        n => Ok(n),
    }
}

fn sanction_json(s: &Sanction) -> Value {
    json!({
        "id": s.id,
        "principal": s.principal,
        "action": s.action.as_str(),
        "scope": s.scope.to_string(),
        "until_ms": s.until_ms,
        "reason": s.reason,
        "actor": s.actor,
        "created_ms": s.created_ms,
        "lifted_ms": s.lifted_ms,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SanctionBody {
    principal: String,
    action: String,
    scope: String,
    seconds: u64,
    #[serde(default)]
    reason: String,
}

async fn sanction(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ChatFailure> {
    let chat = chat_of(&shared)?;
    let b: SanctionBody = body_json(&body)?;
    check_principal(&b.principal, "principal")?;
    let action = match b.action.as_str() {
        "mute" => SanctionAction::Mute,
        "ban" => SanctionAction::Ban,
        _ => {
            return Err(ChatFailure::BadRequest(
                "action must be \"mute\" or \"ban\"".into(),
            ))
        }
    };
    let scope = scope::parse(&b.scope).map_err(ChatFailure::BadRequest)?;
    if b.seconds == 0 || b.seconds > MAX_SECONDS {
        return Err(ChatFailure::BadRequest(format!(
            "seconds must be 1..={MAX_SECONDS}"
        )));
    }
    if b.reason.len() > MAX_REASON || b.reason.chars().any(char::is_control) {
        return Err(ChatFailure::BadRequest(format!(
            "reason must be at most {MAX_REASON} bytes without control characters"
        )));
    }
    let who = caller(&shared, &headers, &target_of(&scope)).await?;
    who.may(&scope)?;
    let now = now_ms();
    let s = NewSanction {
        principal: b.principal,
        action,
        scope: scope.clone(),
        until_ms: now.saturating_add(b.seconds.saturating_mul(1000)),
        reason: b.reason,
        actor: who.name(),
        created_ms: now,
    };
    let stored = crate::host::bounded_store_call(chat.store.add_sanction(&s)).await?;
    tracing::info!(id = stored.id, principal = %stored.principal, action = stored.action.as_str(), scope = %stored.scope, actor = %stored.actor, "chat sanction");
    chat.metrics.sanctioned(stored.action.as_str());
    chat.sanctions.add(stored.clone());
    chat.metrics.set_sanctions(chat.sanctions.len());
    super::sanctions::enforce(&chat);
    Ok((StatusCode::CREATED, Json(sanction_json(&stored))).into_response())
}

async fn lift(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Result<Response, ChatFailure> {
    let chat = chat_of(&shared)?;
    let known = chat.sanctions.by_id(id);
    let target = known
        .as_ref()
        .map_or_else(|| "*".to_owned(), |s| target_of(&s.scope));
    let who = caller(&shared, &headers, &target).await?;
    if let Some(s) = &known {
        who.may(&s.scope)?;
    }
    let lifted =
        crate::host::bounded_store_call(chat.store.lift_sanction(id, &who.name(), now_ms()))
            .await?
            .ok_or_else(|| ChatFailure::NotFound(format!("no sanction {id} in force")))?;
    chat.sanctions.lift(id);
    chat.metrics.set_sanctions(chat.sanctions.len());
    Ok(Json(sanction_json(&lifted)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalQuery {
    principal: String,
}

async fn list_sanctions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<PrincipalQuery>,
) -> Result<Response, ChatFailure> {
    let chat = chat_of(&shared)?;
    check_principal(&q.principal, "principal")?;
    caller(&shared, &headers, "*").await?;
    let list =
        crate::host::bounded_store_call(chat.store.sanctions_of(&q.principal, now_ms())).await?;
    let list: Vec<Value> = list.iter().map(sanction_json).collect();
    Ok(Json(json!({ "principal": q.principal, "sanctions": list })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    after: Option<u64>,
    limit: Option<u32>,
}

/// A page of what the back end and moderators of every zone read (reports, the audit log):
/// chat, where the page starts, and its length.
async fn fleet_page(
    shared: &Shared,
    headers: &HeaderMap,
    q: &PageQuery,
) -> Result<(Arc<Chat>, u64, u32), ChatFailure> {
    let chat = chat_of(shared)?;
    let limit = page(q.limit)?;
    caller(shared, headers, "*").await?;
    Ok((chat, q.after.unwrap_or(0), limit))
}

async fn reports(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Result<Response, ChatFailure> {
    let (chat, after, limit) = fleet_page(&shared, &headers, &q).await?;
    let list = crate::host::bounded_store_call(chat.store.reports(after, limit)).await?;
    let list: Vec<Value> = list
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "reporter": r.reporter,
                "channel": Channel::from_key(&r.channel).map_or_else(|| r.channel.clone(), |c| c.to_string()),
                "reason": r.reason,
                "created_ms": r.created_ms,
                "lines": r.lines.iter().map(|l| json!({
                    "seq": l.seq, "sender": l.sender, "sent_at_ms": l.sent_at_ms, "body": l.body,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(Json(json!({ "reports": list })).into_response())
}

async fn audit(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Result<Response, ChatFailure> {
    let (chat, after, limit) = fleet_page(&shared, &headers, &q).await?;
    let list = crate::host::bounded_store_call(chat.store.audit(after, limit)).await?;
    let list: Vec<Value> = list
        .iter()
        .map(|a| {
            json!({
                "id": a.id, "at_ms": a.at_ms, "actor": a.actor, "action": a.action.as_str(),
                "target": a.target, "scope": a.scope.to_string(), "detail": a.detail,
            })
        })
        .collect();
    Ok(Json(json!({ "audit": list })).into_response())
}
