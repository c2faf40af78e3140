//! Board reads for zones: the durable-call functions `board.top` and `board.around`, so a zone
//! module can show a ranking to its players (`ctx.call(key, "board.top", args)`; the ranking
//! comes back as the call's result on a later tick).
//!
//! A call's result is journaled under its key like any call's, so a zone asks each time under a
//! fresh key (e.g. the tick's number): the same key answers the same ranking again.
//!
//! - `board.top` `{"board": "score", "limit": 10, "offset": 0, "period": "current"}`
//! - `board.around` `{"board": "score", "principal": "p", "radius": 5, "period": "current"}`
//!
//! The answer is the HTTP route's `Ranking` object. A board that does not exist is the error
//! `NO_BOARD`, malformed arguments `INVALID_ARGS`; a store that does not answer is retried by
//! the call worker.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use zonekeep_core::CallResult;

use super::{BoardFailure, Boards, PeriodAsk, DEFAULT_LIMIT, DEFAULT_RADIUS};
use crate::persist::{CallHandler, CallSinks, OutboundCall, SinkError};

/// The most entries a zone's top read takes (a zone shows a handful, not a page of 1000).
pub const MAX_ZONE_LIMIT: usize = 100;
/// The most entries on each side a zone's around read takes.
pub const MAX_ZONE_RADIUS: usize = 50;

/// Registers `board.top` and `board.around` on the host's call sinks.
pub(crate) fn register(sinks: &CallSinks, boards: &Arc<Boards>) {
    sinks.register(
        "board.top",
        Arc::new(BoardCall {
            boards: Arc::clone(boards),
            around: false,
        }),
    );
    sinks.register(
        "board.around",
        Arc::new(BoardCall {
            boards: Arc::clone(boards),
            around: true,
        }),
    );
}

struct BoardCall {
    boards: Arc<Boards>,
    around: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    board: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    principal: Option<String>,
    #[serde(default)]
    radius: Option<usize>,
    #[serde(default)]
    period: Option<Value>,
}

fn refused(code: &str, message: impl Into<String>) -> CallResult {
    CallResult::Err {
        code: code.to_owned(),
        message: message.into(),
    }
}

impl BoardCall {
    async fn answer(&self, args: Args) -> Result<Value, BoardFailure> {
        let def = self.boards.def(&args.board).await?;
        let period_text = match &args.period {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(_) => {
                return Err(BoardFailure::BadRequest(
                    "period is \"current\", \"previous\" or a period's start".into(),
                ))
            }
        };
        let period = PeriodAsk::parse(period_text.as_deref())?.resolve(def.period)?;
        if self.around {
            let principal = args
                .principal
                .ok_or_else(|| BoardFailure::BadRequest("board.around needs a principal".into()))?;
            let radius = args.radius.unwrap_or(DEFAULT_RADIUS);
            if radius > MAX_ZONE_RADIUS {
                return Err(BoardFailure::BadRequest(format!(
                    "radius is at most {MAX_ZONE_RADIUS}"
                )));
            }
            let r = self
                .boards
                .around(&def, period, &principal, radius, false)
                .await?;
            let mut v = super::routes::ranking_json(&def, period, &r);
            if let Some(o) = v.as_object_mut() {
                o.insert("me".into(), json!(r.me));
            }
            Ok(v)
        } else {
            let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
            if limit == 0 || limit > MAX_ZONE_LIMIT {
                return Err(BoardFailure::BadRequest(format!(
                    "limit is 1..={MAX_ZONE_LIMIT}"
                )));
            }
            let r = self
                .boards
                .top(&def, period, args.offset.unwrap_or(0), limit, false)
                .await?;
            Ok(super::routes::ranking_json(&def, period, &r))
        }
    }
}

#[async_trait]
impl CallHandler for BoardCall {
    async fn handle(&self, call: &OutboundCall) -> Result<CallResult, SinkError> {
        let args: Args = match serde_json::from_value(call.call.args.clone()) {
            Ok(a) => a,
            Err(e) => return Ok(refused("INVALID_ARGS", e.to_string())),
        };
        match self.answer(args).await {
            Ok(v) => Ok(CallResult::Ok(v)),
            Err(BoardFailure::NoBoard(b)) => Ok(refused("NO_BOARD", format!("no board {b:?}"))),
            Err(BoardFailure::Unavailable(m)) => Err(SinkError::Unavailable(m)),
            Err(e) => Ok(refused("INVALID_ARGS", e.to_string())),
        }
    }
}
