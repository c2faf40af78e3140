//! The matchmaker (docs/MATCHMAKING.md): players ask for a match, the server measures how far
//! each is from each region, forms matches of players who play well in one region, creates the
//! match's zone on a host of that region with room, and hands each player a join ticket.
//!
//! A host started with `--match-queue` is a matchmaker replica. The state lives in the store
//! ([`zonekeep_store::MatchStore`]), so any replica answers any request; every replica forms
//! matches (`worker`), and the store's queue lock and conditional writes make sure a search is
//! taken into one match at most. Redis, when configured, is the candidate index (`index`):
//! only an index, rebuilt from the store, never needed for correctness.
//!
//! Every host with a store answers probes (`probe`) for its region, matchmaker or not: a
//! region's hosts are where a player's round trip to that region is measured.
//!
//! | route | auth | answer |
//! | --- | --- | --- |
//! | `POST /match/searches` | a ticket for `@match` | 201 `Search` (`probing`, with its `token` and probes) |
//! | `POST /match/probe?challenge=C[&echo=E]` | the challenge | `{"echo", "rounds_left"}`, at last `{"rtt_ms"}` |
//! | `POST /match/searches/{id}/queue` | the search's token | `Search` (`queued`) |
//! | `POST /match/searches/{id}/heartbeat` | token | `Search` |
//! | `GET /match/searches/{id}[?wait_ms=N&state=S]` | token | `Search`, when its state is not `S` or after `N` ms |
//! | `DELETE /match/searches/{id}` | token | `Search` |
//! | `GET /admin/match/keys` | admin | the ticket keys and the live matches referencing each |

mod form;
mod index;
mod probe;
mod queue;
mod waiters;
mod worker;

pub(crate) use probe::Probes;
pub use queue::QueueSpec;
pub(crate) use worker::{check_keys, start};

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zonekeep_store::{NewSearch, Probe, SearchChange, SearchRecord, SearchState, StoreError};

use crate::host::{json_error, Shared};
use crate::ticket::unix_now;

/// The ticket `zone` claim that admits its principal to the matchmaker. Not a valid zone id (a
/// zone id has no `@`), so such a ticket never admits anyone to a zone.
pub const MATCH_AUDIENCE: &str = "@match";
/// Longest a long poll waits, ms.
pub const MAX_WAIT_MS: u64 = 30_000;
/// How long after its creation a search's probes may be answered, ms.
pub const PROBE_WINDOW_MS: u64 = 30_000;
pub use crate::host::STORE_TIMEOUT;

/// One store call, bounded by [`STORE_TIMEOUT`].
pub(crate) async fn stored<T>(
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, MatchFailure> {
    crate::host::bounded_store_call(call)
        .await
        .map_err(|e| match e {
            crate::host::StoreCallError::Store(e) => MatchFailure::from(e),
            crate::host::StoreCallError::Timeout(m) => MatchFailure::Unavailable(m),
        })
}

/// True for a region, queue or kind name: 1..=64 bytes of `[A-Za-z0-9_.:-]`.
pub fn valid_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// A matchmaker replica: its queues, the store its searches live in, the candidate index, and
/// the long polls waiting here.
pub(crate) struct Matchmaker {
    /// The queues it serves.
    pub queues: Vec<QueueSpec>,
    /// The store.
    pub store: zonekeep_store::Store,
    /// The Redis candidate index, when configured.
    pub index: Option<index::CandidateIndex>,
    /// Long polls waiting for a search to change.
    pub waiters: waiters::Waiters,
}

impl Matchmaker {
    fn queue(&self, name: &str) -> Option<&QueueSpec> {
        self.queues.iter().find(|q| q.name == name)
    }
}

/// The matchmaker's routes (every host: probes are answered by any host with a store; the rest
/// answer `match_off` where the matchmaker is off), open to any origin.
pub(crate) fn router(shared: &Arc<Shared>) -> Router<Arc<Shared>> {
    Router::new()
        .route("/match/searches", post(create))
        .route("/match/searches/{id}", get(read).delete(cancel))
        .route("/match/searches/{id}/queue", post(enqueue))
        .route("/match/searches/{id}/heartbeat", post(heartbeat))
        .route("/match/probe", post(probe::answer))
        .layer(axum::middleware::from_fn(any_origin))
        .route(
            "/admin/match/keys",
            get(keys).layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                crate::admin::auth,
            )),
        )
}

/// Lets a game page on any origin call the matchmaker: answers preflights, and marks every
/// answer readable by any origin. The credentials are bearer tokens, never cookies.
pub(crate) async fn any_origin(req: Request, next: Next) -> Response {
    let preflight = req.method() == Method::OPTIONS;
    let mut r = if preflight {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(req).await
    };
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    if preflight {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, DELETE"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    r
}

/// Why the matchmaker refused a request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MatchFailure {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("no queue {0:?} here")]
    UnknownQueue(String),
    #[error("no search {0:?}")]
    NoSearch(String),
    #[error("none of the search's probes was answered: probe at least one region first")]
    NoProbeResult,
    #[error("the search is {0}")]
    WrongState(&'static str),
    #[error("this host answers probes of region {mine:?}; the challenge is for {theirs:?}")]
    WrongRegion { mine: String, theirs: String },
    #[error("{0}")]
    ChallengeSpent(String),
    #[error("{0}")]
    Outdated(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    ProbeUnavailable(String),
    #[error("the matchmaker is off on this host (start it with --match-queue)")]
    Off,
}

impl MatchFailure {
    pub(crate) fn code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::UnknownQueue(_) => (StatusCode::NOT_FOUND, "unknown_queue"),
            Self::NoSearch(_) => (StatusCode::NOT_FOUND, "no_search"),
            Self::NoProbeResult => (StatusCode::CONFLICT, "no_probe_result"),
            Self::WrongState(_) => (StatusCode::CONFLICT, "wrong_state"),
            Self::WrongRegion { .. } => (StatusCode::CONFLICT, "wrong_region"),
            Self::ChallengeSpent(_) => (StatusCode::GONE, "challenge_spent"),
            Self::Outdated(_) => (StatusCode::UPGRADE_REQUIRED, "client_outdated"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::ProbeUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "probe_unavailable"),
            Self::Off => (StatusCode::NOT_FOUND, "match_off"),
        }
    }
}

impl From<StoreError> for MatchFailure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::InvalidArgument(m) => Self::BadRequest(m),
            e => Self::Unavailable(format!("store: {e}")),
        }
    }
}

/// A refusal as the client reads it, counted by its code.
struct Refusal(MatchFailure, crate::metrics::MatchMetrics);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, code) = self.0.code();
        self.1.refused(code);
        json_error(status, code, self.0.to_string())
    }
}

type Answer = Result<Response, Refusal>;

/// Turns a failure into the refusal this host counts.
fn refuse(shared: &Shared) -> impl Fn(MatchFailure) -> Refusal + '_ {
    move |f| Refusal(f, shared.metrics.matchmaker().clone())
}

fn matchmaker(shared: &Shared) -> Result<&Arc<Matchmaker>, MatchFailure> {
    shared.matchmaker.get().ok_or(MatchFailure::Off)
}

/// Hex SHA-256 of a search token, as the store keeps it.
fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// The search as its client sees it (`token` only when it was just created).
pub(crate) fn view(shared: &Shared, rec: &SearchRecord, token: Option<&str>) -> Value {
    json!({
        "search": rec.search_id,
        "queue": rec.queue,
        "state": rec.state.as_str(),
        "reason": rec.reason,
        "rtt_ms": rec.rtt_ms,
        "region": rec.region,
        "heartbeat_secs": shared.config.match_heartbeat_secs,
        "probes": rec.probes.iter().map(|p| json!({
            "region": p.region, "url": p.url, "challenge": p.challenge, "rtt_ms": p.rtt_ms,
        })).collect::<Vec<_>>(),
        "assignment": rec.assignment,
        "token": token,
    })
}

/// Reads search `id` and checks the request's bearer token against it, in constant time.
async fn authorized(
    mm: &Matchmaker,
    id: &str,
    headers: &HeaderMap,
) -> Result<SearchRecord, MatchFailure> {
    if !valid_label(id) {
        return Err(MatchFailure::NoSearch(id.chars().take(64).collect()));
    }
    let rec = stored(mm.store.matches.search(id))
        .await?
        .ok_or_else(|| MatchFailure::NoSearch(id.to_owned()))?;
    let given = bearer(headers).map(token_hash).unwrap_or_default();
    if !bool::from(given.as_bytes().ct_eq(rec.token_hash.as_bytes())) {
        return Err(MatchFailure::Unauthorized(
            "missing or wrong search token".into(),
        ));
    }
    Ok(rec)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    queue: String,
    protocol_version: u32,
    #[serde(default)]
    content_version: Option<String>,
}

/// `POST /match/searches`: verifies the ticket, checks the client's versions, and creates the
/// search with one probe challenge per region.
async fn create(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Answer {
    let refuse = refuse(&shared);
    let mm = matchmaker(&shared).map_err(&refuse)?;
    let ticket = verify_ticket(&shared, &headers).await.map_err(&refuse)?;
    let b: CreateBody = serde_json::from_slice(&body)
        .map_err(|e| refuse(MatchFailure::BadRequest(format!("body: {e}"))))?;
    let q = mm.queue(&b.queue).ok_or_else(|| {
        refuse(MatchFailure::UnknownQueue(
            b.queue.chars().take(64).collect(),
        ))
    })?;
    admit_versions(&shared, b.protocol_version, b.content_version.as_deref()).map_err(&refuse)?;
    let search_id = format!("s-{}", hex(12).map_err(&refuse)?);
    let token = hex(24).map_err(&refuse)?;
    let mut probes = Vec::new();
    for (region, url) in probe::regions(&shared, &search_id).await.map_err(&refuse)? {
        probes.push(Probe {
            challenge: format!("{search_id}.{}", hex(12).map_err(&refuse)?),
            region,
            url,
            rtt_ms: None,
        });
    }
    let name = ticket
        .claims
        .get("name")
        .and_then(Value::as_str)
        .map(|n| zonekeep_protocol::limits::clip(n, 64).to_owned());
    let rec = stored(mm.store.matches.create_search(&NewSearch {
        search_id,
        queue: q.name.clone(),
        principal: ticket.sub.to_string(),
        name,
        token_hash: token_hash(&token),
        probes,
    }))
    .await
    .map_err(&refuse)?;
    shared.metrics.matchmaker().search("created");
    Ok((StatusCode::CREATED, Json(view(&shared, &rec, Some(&token)))).into_response())
}

/// The request's ticket, verified for the matchmaker and spent (single use, fleet-wide).
async fn verify_ticket(
    shared: &Shared,
    headers: &HeaderMap,
) -> Result<crate::ticket::VerifiedTicket, MatchFailure> {
    verify_audience_ticket(shared, headers, MATCH_AUDIENCE).await
}

/// The request's bearer ticket, verified for `audience` (a ticket `zone` claim starting with
/// `@`, which no zone has: `@match`, `@presence`) and spent (single use, fleet-wide).
pub(crate) async fn verify_audience_ticket(
    shared: &Shared,
    headers: &HeaderMap,
    audience: &str,
) -> Result<crate::ticket::VerifiedTicket, MatchFailure> {
    let token = bearer(headers).ok_or_else(|| {
        MatchFailure::Unauthorized(format!("no ticket: send a ticket for {audience}"))
    })?;
    let t = shared
        .verifier
        .verify(token, audience, unix_now())
        .map_err(|e| MatchFailure::Unauthorized(format!("ticket: {e}")))?;
    if t.zone != audience {
        return Err(MatchFailure::Unauthorized(format!(
            "the ticket is for zones {:?}, not for {audience}",
            t.zone
        )));
    }
    crate::session::spend_ticket(shared, &t)
        .await
        .map_err(|e| match e {
            crate::error::SessionError::Ticket(e) => {
                MatchFailure::Unauthorized(format!("ticket: {e}"))
            }
            // The fleet's record of spent tickets could not be reached: not the ticket's fault.
            e => MatchFailure::Unavailable(format!("spending the ticket: {e}")),
        })?;
    Ok(t)
}

/// The version floor: `--min-protocol-version` and the host's `--min-content-version`.
fn admit_versions(
    shared: &Shared,
    protocol: u32,
    content: Option<&str>,
) -> Result<(), MatchFailure> {
    use zonekeep_protocol::limits::{MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};
    let floor = shared.config.min_protocol_version.max(MIN_PROTOCOL_VERSION);
    if protocol < floor {
        return Err(MatchFailure::Outdated(format!(
            "this game needs protocol version {floor} or newer; the client speaks {protocol}: \
             update to keep playing"
        )));
    }
    if protocol > PROTOCOL_VERSION {
        return Err(MatchFailure::BadRequest(format!(
            "protocol version {protocol} is newer than this host speaks ({PROTOCOL_VERSION})"
        )));
    }
    shared
        .sim
        .content
        .admit(protocol, content.unwrap_or(""))
        .map_err(|e| MatchFailure::Outdated(format!("{e}; update to keep playing")))
}

fn hex(bytes: usize) -> Result<String, MatchFailure> {
    crate::fleet::random_hex(bytes)
        .map_err(|e| MatchFailure::Unavailable(format!("random source: {e}")))
}

/// A state change a search's client asks for.
enum Act {
    Queue,
    Heartbeat,
    Cancel,
}

/// Checks the request's token against search `id` and asks the store for `act`: this replica and
/// what the store did.
async fn act<'a>(
    shared: &'a Shared,
    id: &str,
    headers: &HeaderMap,
    act: Act,
) -> Result<(&'a Arc<Matchmaker>, SearchChange), MatchFailure> {
    let mm = matchmaker(shared)?;
    authorized(mm, id, headers).await?;
    let searches = &mm.store.matches;
    let change = match act {
        Act::Queue => stored(searches.queue_search(id)).await?,
        Act::Heartbeat => stored(searches.heartbeat(id)).await?,
        Act::Cancel => stored(searches.cancel_search(id)).await?,
    };
    Ok((mm, change))
}

/// The answer for a state change asked of a search.
fn changed(change: SearchChange, id: &str) -> Result<SearchRecord, MatchFailure> {
    match change {
        SearchChange::Changed(r) => Ok(r),
        SearchChange::NoProbeResult(_) => Err(MatchFailure::NoProbeResult),
        SearchChange::WrongState(r) => Err(MatchFailure::WrongState(r.state.as_str())),
        SearchChange::NoSearch => Err(MatchFailure::NoSearch(id.to_owned())),
    }
}

/// `POST /match/searches/{id}/queue`.
async fn enqueue(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Answer {
    let refuse = refuse(&shared);
    let (mm, change) = act(&shared, &id, &headers, Act::Queue)
        .await
        .map_err(&refuse)?;
    let rec = changed(change, &id).map_err(&refuse)?;
    if let Some(index) = &mm.index {
        index.add(&rec, &shared.metrics).await;
    }
    shared.metrics.matchmaker().search("queued");
    Ok(Json(view(&shared, &rec, None)).into_response())
}

/// `POST /match/searches/{id}/heartbeat`.
async fn heartbeat(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Answer {
    let refuse = refuse(&shared);
    let (mm, change) = act(&shared, &id, &headers, Act::Heartbeat)
        .await
        .map_err(&refuse)?;
    let rec = match change {
        // A search that is over still answers what became of it.
        SearchChange::WrongState(r) => r,
        other => changed(other, &id).map_err(&refuse)?,
    };
    if rec.state == SearchState::Queued {
        if let Some(index) = &mm.index {
            index.touch(&rec, &shared.metrics).await;
        }
    }
    Ok(Json(view(&shared, &rec, None)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQuery {
    #[serde(default)]
    wait_ms: Option<u64>,
    #[serde(default)]
    state: Option<String>,
}

/// `GET /match/searches/{id}`: the search, or a long poll until it leaves a state.
async fn read(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
) -> Answer {
    let refuse = refuse(&shared);
    let mm = matchmaker(&shared).map_err(&refuse)?;
    let mut rec = authorized(mm, &id, &headers).await.map_err(&refuse)?;
    let wait = q
        .wait_ms
        .unwrap_or(0)
        .min(MAX_WAIT_MS)
        .min(shared.config.request_timeout_ms.saturating_sub(1_000));
    let from = match q.state.as_deref() {
        None => rec.state,
        Some(s) => SearchState::parse(s)
            .ok_or_else(|| refuse(MatchFailure::BadRequest(format!("no state {s:?}"))))?,
    };
    if wait > 0 && rec.state == from && !rec.state.is_final() {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
        while rec.state == from && !rec.state.is_final() {
            // Registered before the re-read, so a change between the two still wakes it.
            let Some(woken) = mm.waiters.wait(&id) else {
                break;
            };
            match stored(mm.store.matches.search(&id)).await {
                Ok(Some(r)) if r.state != from => {
                    rec = r;
                    break;
                }
                Ok(_) => {}
                Err(e) => return Err(refuse(e)),
            }
            if tokio::time::timeout_at(deadline, woken.woken())
                .await
                .is_err()
            {
                break;
            }
            if let Ok(Some(r)) = stored(mm.store.matches.search(&id)).await {
                rec = r;
            }
        }
    }
    Ok(Json(view(&shared, &rec, None)).into_response())
}

/// `DELETE /match/searches/{id}`.
async fn cancel(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Answer {
    let refuse = refuse(&shared);
    let (mm, change) = act(&shared, &id, &headers, Act::Cancel)
        .await
        .map_err(&refuse)?;
    let rec = match change {
        SearchChange::Changed(r) => {
            shared.metrics.matchmaker().search("cancelled");
            if let Some(index) = &mm.index {
                index
                    .remove(
                        &r.queue,
                        std::slice::from_ref(&r.search_id),
                        &shared.metrics,
                    )
                    .await;
            }
            r
        }
        SearchChange::WrongState(r) | SearchChange::NoProbeResult(r) => r,
        SearchChange::NoSearch => return Err(refuse(MatchFailure::NoSearch(id))),
    };
    mm.waiters.wake(&rec.search_id);
    Ok(Json(view(&shared, &rec, None)).into_response())
}

/// `GET /admin/match/keys`: each ticket key, and how many live matches reference it (a key may
/// be retired once none does).
async fn keys(State(shared): State<Arc<Shared>>) -> Answer {
    let refuse = refuse(&shared);
    let live = match shared.sim.persist.as_ref() {
        Some(p) => stored(p.store().matches.live_keys())
            .await
            .map_err(&refuse)?,
        None => Vec::new(),
    };
    let ring = shared.verifier.keys();
    let primary = ring.primary().map(|k| k.kid.clone());
    let keys: Vec<Value> = ring
        .keys()
        .iter()
        .map(|k| {
            let n = live
                .iter()
                .find(|(kid, _)| *kid == k.kid)
                .map_or(0, |x| x.1);
            json!({
                "kid": k.kid,
                "primary": primary.as_deref() == Some(k.kid.as_str()),
                "retired": k.retired,
                "live_matches": n,
                "retirable": n == 0,
            })
        })
        .collect();
    let unknown: Vec<Value> = live
        .iter()
        .filter(|(kid, _)| !ring.keys().iter().any(|k| k.kid == *kid))
        .map(|(kid, n)| json!({"kid": kid, "live_matches": n}))
        .collect();
    Ok(Json(json!({"keys": keys, "unknown": unknown})).into_response())
}

/// A ticket key live matches still reference that this host would refuse (retired, or not
/// configured): running so would refuse their players. Answers the first such key and its
/// match count.
pub(crate) async fn retired_in_use(
    store: &zonekeep_store::Store,
    ring: &crate::ticket::KeyRing,
) -> Result<Option<(String, u64)>, StoreError> {
    let live = store.matches.live_keys().await?;
    Ok(live.into_iter().find(|(kid, _)| ring.active(kid).is_none()))
}
