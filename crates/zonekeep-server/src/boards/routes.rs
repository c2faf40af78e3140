//! The leaderboards' HTTP routes (the table in the module docs above): reads for anyone,
//! submissions for the back end, declarations, resets and deletes for operators.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use zonekeep_store::{
    BoardDef, BoardDefined, BoardOp, BoardOrder, BoardPeriod, FactRecord, MAX_BOARD_PAGE,
};

use super::{
    boards_of, stored, BoardFailure, PeriodAsk, Ranking, DEFAULT_LIMIT, DEFAULT_RADIUS, MAX_BODY,
    MAX_SCORE_KEY,
};
use crate::host::Shared;

/// The routes (every host; those of a host without a store answer `boards_off`).
pub(crate) fn router(shared: &Arc<Shared>) -> Router<Arc<Shared>> {
    Router::new()
        .route("/boards", get(list))
        .route("/boards/{name}", get(top))
        .route("/boards/{name}/around/{principal}", get(around))
        .layer(axum::middleware::from_fn(crate::matchmaker::any_origin))
        .route(
            "/boards/{name}/scores",
            post(submit).layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                crate::lobby::backend_auth,
            )),
        )
        .route(
            "/admin/boards/{name}",
            put(define)
                .delete(delete)
                .layer(axum::middleware::from_fn_with_state(
                    shared.clone(),
                    crate::admin::auth,
                )),
        )
        .route(
            "/admin/boards/{name}/reset",
            post(reset).layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                crate::admin::auth,
            )),
        )
}

/// The period starts a board may hold now: the current one and those it keeps.
fn held_periods(def: &BoardDef) -> Vec<u64> {
    let current = def
        .period
        .start_of(crate::ticket::unix_now().saturating_mul(1000));
    let mut out = vec![current];
    let mut p = current;
    for _ in 0..def.keep_periods {
        match def.period.previous(p) {
            Some(prev) => {
                out.push(prev);
                p = prev;
            }
            None => break,
        }
    }
    out
}

fn def_json(def: &BoardDef) -> Value {
    let now = crate::ticket::unix_now().saturating_mul(1000);
    json!({
        "name": def.name,
        "order": def.order,
        "op": def.op,
        "period": def.period,
        "total": def.total,
        "keep_periods": def.keep_periods,
        "current_period": def.period.start_of(now),
    })
}

pub(super) fn ranking_json(def: &BoardDef, period: u64, r: &Ranking) -> Value {
    json!({
        "board": def.name,
        "order": def.order,
        "period": period,
        "size": r.size,
        "source": r.source,
        "entries": r.entries,
    })
}

async fn list(State(shared): State<Arc<Shared>>) -> Result<Json<Value>, BoardFailure> {
    let boards = boards_of(&shared)?;
    let defs = stored(boards.store.boards.boards()).await?;
    Ok(Json(
        json!({ "boards": defs.iter().map(def_json).collect::<Vec<_>>() }),
    ))
}

#[derive(Debug, Deserialize)]
struct ReadQuery {
    limit: Option<String>,
    offset: Option<String>,
    radius: Option<String>,
    period: Option<String>,
    from: Option<String>,
}

fn number(
    name: &str,
    text: Option<&str>,
    default: u64,
    (min, max): (u64, u64),
) -> Result<u64, BoardFailure> {
    match text {
        None => Ok(default),
        Some(t) => t
            .parse::<u64>()
            .ok()
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| {
                BoardFailure::BadRequest(format!("{name} must be a number {min}..={max}"))
            }),
    }
}

fn from_store(q: &ReadQuery) -> Result<bool, BoardFailure> {
    match q.from.as_deref() {
        None => Ok(false),
        Some("store") => Ok(true),
        Some(_) => Err(BoardFailure::BadRequest(
            "from is `store` (or absent: the index when it has the period)".into(),
        )),
    }
}

fn query(
    q: Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<ReadQuery, BoardFailure> {
    q.map(|Query(q)| q)
        .map_err(|e| BoardFailure::BadRequest(format!("query: {e}")))
}

async fn top(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    q: Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, BoardFailure> {
    let q = query(q)?;
    let boards = boards_of(&shared)?;
    let limit = number(
        "limit",
        q.limit.as_deref(),
        DEFAULT_LIMIT as u64,
        (1, MAX_BOARD_PAGE as u64),
    )?;
    let offset = number("offset", q.offset.as_deref(), 0, (0, i64::MAX as u64))?;
    let from_store = from_store(&q)?;
    let def = boards.def(&name).await?;
    let period = PeriodAsk::parse(q.period.as_deref())?.resolve(def.period)?;
    let limit = usize::try_from(limit).unwrap_or(DEFAULT_LIMIT);
    let r = boards.top(&def, period, offset, limit, from_store).await?;
    Ok(Json(ranking_json(&def, period, &r)))
}

async fn around(
    State(shared): State<Arc<Shared>>,
    Path((name, principal)): Path<(String, String)>,
    q: Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, BoardFailure> {
    let q = query(q)?;
    let boards = boards_of(&shared)?;
    if principal.is_empty() || principal.len() > crate::ticket::MAX_SUB_LEN {
        return Err(BoardFailure::BadRequest(
            "principal must be 1..=256 bytes".into(),
        ));
    }
    let radius = number(
        "radius",
        q.radius.as_deref(),
        DEFAULT_RADIUS as u64,
        (0, (MAX_BOARD_PAGE / 2) as u64),
    )?;
    let from_store = from_store(&q)?;
    let def = boards.def(&name).await?;
    let period = PeriodAsk::parse(q.period.as_deref())?.resolve(def.period)?;
    let radius = usize::try_from(radius).unwrap_or(DEFAULT_RADIUS);
    let r = boards
        .around(&def, period, &principal, radius, from_store)
        .await?;
    let mut v = ranking_json(&def, period, &r);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("me".into(), json!(r.me));
    }
    Ok(Json(v))
}

/// A board's settings as the admin route takes them (the name is the path's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefBody {
    #[serde(default = "desc")]
    order: BoardOrder,
    #[serde(default = "incr")]
    op: BoardOp,
    #[serde(default = "all")]
    period: BoardPeriod,
    #[serde(default)]
    total: Option<String>,
    #[serde(default = "keep")]
    keep_periods: u32,
}

fn desc() -> BoardOrder {
    BoardOrder::Desc
}
fn incr() -> BoardOp {
    BoardOp::Incr
}
fn all() -> BoardPeriod {
    BoardPeriod::All
}
fn keep() -> u32 {
    8
}

fn body_json<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, BoardFailure> {
    if body.len() > MAX_BODY {
        return Err(BoardFailure::BadRequest(format!(
            "the body is over {MAX_BODY} bytes"
        )));
    }
    serde_json::from_slice(body).map_err(|e| BoardFailure::BadRequest(format!("body: {e}")))
}

async fn define(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, BoardFailure> {
    let boards = boards_of(&shared)?;
    let b: DefBody = body_json(&body)?;
    let def = BoardDef {
        name,
        order: b.order,
        op: b.op,
        period: b.period,
        total: b.total,
        keep_periods: b.keep_periods,
    };
    let status = match stored(boards.store.boards.define_board(&def)).await? {
        BoardDefined::Created => StatusCode::CREATED,
        BoardDefined::Unchanged => StatusCode::OK,
    };
    Ok((status, Json(def_json(&def))).into_response())
}

async fn delete(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, BoardFailure> {
    let boards = boards_of(&shared)?;
    let def = boards.def(&name).await?;
    stored(boards.store.boards.delete_board(&name)).await?;
    boards.forget(&def, &held_periods(&def)).await;
    tracing::info!(board = %name, "board deleted");
    Ok(Json(json!({ "deleted": name })))
}

async fn reset(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    q: Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, BoardFailure> {
    let q = query(q)?;
    let boards = boards_of(&shared)?;
    let def = boards.def(&name).await?;
    let period = PeriodAsk::parse(q.period.as_deref())?.resolve(def.period)?;
    let deleted = stored(boards.store.boards.reset_board(&name, period)).await?;
    boards.forget(&def, &[period]).await;
    tracing::info!(board = %name, period, deleted, "board period reset");
    Ok(Json(
        json!({ "board": name, "period": period, "deleted": deleted }),
    ))
}

/// A score a back end submits.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScoreBody {
    /// Whose score.
    principal: String,
    /// The value, applied with the board's operator.
    value: i64,
    /// The back end's idempotency key: the same key never counts twice.
    key: String,
}

async fn submit(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, BoardFailure> {
    let boards = boards_of(&shared)?;
    let b: ScoreBody = body_json(&body)?;
    if b.key.is_empty() || b.key.len() > MAX_SCORE_KEY {
        return Err(BoardFailure::BadRequest(format!(
            "key must be 1..={MAX_SCORE_KEY} bytes"
        )));
    }
    if b.principal.is_empty() || b.principal.len() > crate::ticket::MAX_SUB_LEN {
        return Err(BoardFailure::BadRequest(
            "principal must be 1..=256 bytes".into(),
        ));
    }
    let def = boards.def(&name).await?;
    let fact = FactRecord {
        // Its own key space: a back end's key never meets a zone's fact key.
        key: format!("board:{name}:{}", b.key),
        zone_id: "@boards".into(),
        kind: "board_score".into(),
        principal: Some(b.principal.clone()),
        payload: json!({ "boards": { name.clone(): b.value } }),
        epoch: None,
    };
    let recorded = match stored(boards.store.facts.record(&fact)).await {
        Ok(r) => r,
        Err(e) => {
            if matches!(e, BoardFailure::Refused(_) | BoardFailure::BadRequest(_)) {
                boards.metrics.boards().submit("refused");
            }
            return Err(e);
        }
    };
    boards.metrics.boards().submit(if recorded.first {
        "recorded"
    } else {
        "repeated"
    });
    let period = def
        .period
        .start_of(crate::ticket::unix_now().saturating_mul(1000));
    let me = boards.entry_now(&def, period, &b.principal).await?;
    let status = if recorded.first {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({
            "board": name,
            "period": period,
            "recorded": recorded.first,
            "me": me,
        })),
    )
        .into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn held_periods_are_the_current_and_the_kept() {
        let def = super::super::spec::parse("d:period=daily:keep=2").unwrap();
        let held = held_periods(&def);
        assert_eq!(held.len(), 3);
        assert_eq!(held[0] - held[1], 86_400_000);
        let all = super::super::spec::parse("a").unwrap();
        assert_eq!(held_periods(&all), vec![0]);
    }
}
