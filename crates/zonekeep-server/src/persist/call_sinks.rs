//! Where durable calls go: the in-process handler registered for the call's function, else the
//! call webhook, else an immediate [`NO_HANDLER`] error (see [`super::calls`] for the worker that
//! journals and retries them).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use hyper::header::HeaderValue;
use serde_json::{json, Value};
use zonekeep_core::CallResult;

use super::calls::OutboundCall;
use super::sink::{FactSink, SinkError};
use super::webhook::{snippet, WebhookSink};

/// The error code of a call whose function has no handler and no webhook to go to.
pub const NO_HANDLER: &str = "NO_HANDLER";
/// The error code of a call the journal refused as malformed (it never reached the sink).
pub const INVALID_CALL: &str = "INVALID_CALL";

/// An in-process handler of one call function, registered with
/// [`HostBuilder::call_handler`](crate::HostBuilder::call_handler).
///
/// The worker calls it at least once per key (again after a failed attempt, and after a crash
/// between the effect and the journal's record of its answer), so it must apply a key at most
/// once, e.g. by recording the key in the same transaction as the effect.
#[async_trait]
pub trait CallHandler: Send + Sync {
    /// Performs `call`: `Ok(CallResult::Ok(value))` when the effect took place (now or on an
    /// earlier attempt), `Ok(CallResult::Err { .. })` when it never will, `Err` when this
    /// attempt failed and should be retried.
    async fn handle(&self, call: &OutboundCall) -> Result<CallResult, SinkError>;
}

/// Where a zone's calls go: the in-process handler registered for the function, else the call
/// webhook, else an immediate [`NO_HANDLER`] error.
#[derive(Clone, Default)]
pub struct CallSinks {
    handlers: Arc<RwLock<HashMap<String, Arc<dyn CallHandler>>>>,
    webhook: Option<WebhookSink>,
}

impl std::fmt::Debug for CallSinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSinks")
            .field("handlers", &self.handler_names())
            .field("webhook", &self.webhook)
            .finish()
    }
}

impl CallSinks {
    /// Sinks posting to `webhook` the calls no handler takes.
    pub fn new(webhook: Option<WebhookSink>) -> Self {
        CallSinks {
            handlers: Arc::default(),
            webhook,
        }
    }

    /// Registers `handler` for calls of `function`, replacing an earlier one.
    pub fn register(&self, function: &str, handler: Arc<dyn CallHandler>) {
        self.handlers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(function.to_owned(), handler);
    }

    /// The functions with an in-process handler, sorted.
    pub fn handler_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// A printable description for logs (no secrets).
    pub fn describe(&self) -> String {
        let webhook = self
            .webhook
            .as_ref()
            .map_or_else(|| "none".to_owned(), FactSink::describe);
        format!("handlers {:?}, webhook {webhook}", self.handler_names())
    }

    /// One attempt at `call`.
    pub(crate) async fn invoke(&self, call: &OutboundCall) -> Result<CallResult, SinkError> {
        let handler = self
            .handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&call.call.function)
            .cloned();
        if let Some(h) = handler {
            return h.handle(call).await;
        }
        match &self.webhook {
            Some(w) => post_call(w, call).await,
            None => Ok(CallResult::Err {
                code: NO_HANDLER.into(),
                message: format!(
                    "no handler for call function {:?} and no call webhook",
                    call.call.function
                ),
            }),
        }
    }
}

/// One attempt at `call` through the call webhook.
///
/// The body is `{"zone_id", "key", "function", "args", "tick"}` with the header
/// `Idempotency-Key: <zone_id>/<key>`. A 2xx answer is the call's result: a body
/// `{"error": {"code", "message"}}` is an error result, `{"ok": value}` or any other JSON the
/// success value (an empty body is `null`). 408, 429, 5xx, timeouts and connection errors are
/// retried; another 4xx is an error result `HTTP_<status>` quoting the start of the body.
async fn post_call(w: &WebhookSink, out: &OutboundCall) -> Result<CallResult, SinkError> {
    let c = &out.call;
    let Ok(key) = HeaderValue::from_str(&format!("{}/{}", out.zone_id, c.key)) else {
        return Ok(CallResult::Err {
            code: INVALID_CALL.into(),
            message: "the call key cannot be sent as an Idempotency-Key header".into(),
        });
    };
    let body = json!({
        "zone_id": out.zone_id,
        "key": c.key.as_str(),
        "function": c.function,
        "args": c.args,
        "tick": c.tick,
    });
    let (status, body) = w.post_json(key, &body).await?;
    match status {
        200..=299 => {
            let v: Value = if body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(snippet(&body)))
            };
            if let Some(e) = v
                .get("error")
                .filter(|_| v.as_object().is_some_and(|o| o.len() == 1))
            {
                return Ok(CallResult::Err {
                    code: e["code"]
                        .as_str()
                        .unwrap_or("ERROR")
                        .chars()
                        .take(64)
                        .collect(),
                    message: e["message"].as_str().unwrap_or_default().to_owned(),
                });
            }
            match v {
                Value::Object(mut o) if o.len() == 1 && o.contains_key("ok") => {
                    Ok(CallResult::Ok(o.remove("ok").unwrap_or(Value::Null)))
                }
                v => Ok(CallResult::Ok(v)),
            }
        }
        408 | 429 => Err(SinkError::Unavailable(format!(
            "call webhook answered {status}"
        ))),
        400..=499 => Ok(CallResult::Err {
            code: format!("HTTP_{status}"),
            message: snippet(&body),
        }),
        _ => Err(SinkError::Unavailable(format!(
            "call webhook answered {status}: {}",
            snippet(&body)
        ))),
    }
}
