//! The webhook fact sink against a real local axum server: 2xx settles, 4xx
//! refuses, 5xx is retried then settles, and the Idempotency-Key header is the
//! fact's key on every attempt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::Notify;
use zonekeep_core::{Fact, FactKey, FactOutcome, Settlement};
use zonekeep_server::persist::{
    Backoff, FactSink, FactWorker, FactWorkerConfig, FenceAlarm, OutboundFact, PersistMetrics,
    SettlementInbox, WebhookSink,
};

/// Each request's Idempotency-Key header and JSON body.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// Answers with the scripted (status, body) pairs in order, then 200 `{}`;
/// records each request's Idempotency-Key and JSON body.
#[derive(Clone, Default)]
struct Backend {
    script: Arc<Mutex<VecDeque<(u16, String)>>>,
    seen: Seen,
}

async fn handle(State(b): State<Backend>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    b.seen.lock().unwrap().push((key, json));
    let (status, body) = b
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or((200, "{}".into()));
    (StatusCode::from_u16(status).unwrap(), body)
}

async fn serve(script: Vec<(u16, &str)>) -> (String, Backend) {
    let backend = Backend::default();
    backend
        .script
        .lock()
        .unwrap()
        .extend(script.into_iter().map(|(s, b)| (s, b.to_owned())));
    let app = Router::new()
        .route("/facts", post(handle))
        .with_state(backend.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/facts"), backend)
}

fn fact(key: &str) -> OutboundFact {
    OutboundFact {
        zone_id: "arena-1".into(),
        fact: Fact {
            key: FactKey(key.into()),
            kind: "pickup".into(),
            payload: json!({"add": {"score": 5}}),
            principal: Some("alice".into()),
            tick: 12,
        },
        epoch: None,
    }
}

#[tokio::test]
async fn a_2xx_settles_with_the_json_body() {
    let (url, backend) = serve(vec![(201, r#"{"score": 5}"#)]).await;
    let sink = WebhookSink::new(&url, Duration::from_secs(10)).unwrap();
    let outcome = sink.commit(&fact("arena-1:1:0")).await.unwrap();
    assert_eq!(outcome, FactOutcome::Ok(json!({"score": 5})));
    let seen = backend.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.as_deref(), Some("arena-1:1:0"));
    assert_eq!(
        seen[0].1,
        json!({
            "key": "arena-1:1:0",
            "zone_id": "arena-1",
            "kind": "pickup",
            "principal": "alice",
            "payload": {"add": {"score": 5}},
            "tick": 12,
        })
    );
}

#[tokio::test]
async fn a_4xx_refuses_with_the_reason() {
    let (url, _backend) = serve(vec![(422, "unknown player")]).await;
    let sink = WebhookSink::new(&url, Duration::from_secs(10)).unwrap();
    match sink.commit(&fact("k")).await.unwrap() {
        FactOutcome::Refused(why) => {
            assert!(
                why.contains("422") && why.contains("unknown player"),
                "{why}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_5xx_or_429_is_an_error_to_retry() {
    let (url, _backend) = serve(vec![(503, "busy"), (429, "")]).await;
    let sink = WebhookSink::new(&url, Duration::from_secs(10)).unwrap();
    assert!(sink.commit(&fact("k")).await.is_err());
    assert!(sink.commit(&fact("k")).await.is_err());
    assert_eq!(
        sink.commit(&fact("k")).await.unwrap(),
        FactOutcome::Ok(json!({}))
    );
}

#[tokio::test]
async fn an_unreachable_backend_is_an_error_to_retry() {
    // Bind then drop a listener: nothing accepts on that port any more.
    let addr = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let sink = WebhookSink::new(&format!("http://{addr}/f"), Duration::from_secs(10)).unwrap();
    assert!(sink.commit(&fact("k")).await.is_err());
}

#[derive(Default)]
struct Inbox {
    got: Mutex<Vec<Settlement>>,
    arrived: Notify,
}

impl SettlementInbox for Inbox {
    fn deliver(&self, _zone_id: &str, s: Settlement) -> bool {
        self.got.lock().unwrap().push(s);
        self.arrived.notify_one();
        true
    }
}

#[tokio::test]
async fn the_worker_retries_5xx_with_a_stable_idempotency_key_then_settles() {
    let (url, backend) = serve(vec![(500, "oops"), (502, ""), (200, r#"{"ok": true}"#)]).await;
    let sink = Arc::new(WebhookSink::new(&url, Duration::from_secs(10)).unwrap());
    let inbox = Arc::new(Inbox::default());
    let metrics = PersistMetrics::new();
    let config = FactWorkerConfig {
        backoff: Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
        },
        ..FactWorkerConfig::default()
    };
    let worker = FactWorker::start(sink, inbox.clone(), config, metrics.clone());
    let q = worker.open_zone("arena-1", None, FenceAlarm::new());
    q.try_send(fact("arena-1:4:17").fact).unwrap();
    inbox.arrived.notified().await;
    let got = inbox.got.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![Settlement {
            key: FactKey("arena-1:4:17".into()),
            outcome: FactOutcome::Ok(json!({"ok": true})),
        }]
    );
    let keys: Vec<Option<String>> = backend
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.0.clone())
        .collect();
    assert_eq!(keys, vec![Some("arena-1:4:17".to_owned()); 3]);
    assert_eq!(metrics.fact_retries.get(), 2);
    assert_eq!(metrics.facts_settled.get(), 1);
}

#[test]
fn only_http_urls_are_accepted() {
    assert!(WebhookSink::new("https://example.invalid/f", Duration::from_secs(1)).is_err());
    assert!(WebhookSink::new("not a url", Duration::from_secs(1)).is_err());
    let s = WebhookSink::new("http://127.0.0.1:9/f?token=secret", Duration::from_secs(1)).unwrap();
    assert_eq!(s.describe(), "webhook:http://127.0.0.1:9/f");
}
