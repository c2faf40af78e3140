//! Presence on one host with its SQLite store: the back end asks who is online and where, a
//! watcher named by its ticket is sent a snapshot and then each change (a player arriving, a
//! player gone once its reconnect grace ended), and every refusal is a clear one.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use serde_json::{json, Value};
use zonekeep_core::ZoneConfig;
use zonekeep_server::config::Secret;
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::{Host, ServerConfig};

use crate::common::*;
use crate::tally::{join_tally, Tally};

const BACKEND: &str = "backend-token-0123456789";

async fn host(dir: &Path) -> TestServer {
    let p = Persistence::open(PersistConfig {
        data_dir: dir.to_path_buf(),
        ..PersistConfig::default()
    })
    .await
    .unwrap();
    let zone = ZoneConfig {
        reconnect_grace: Duration::from_millis(200),
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(ServerConfig {
            data_dir: dir.to_path_buf(),
            lobby_token: Some(Secret::new(BACKEND.to_owned())),
            ..base_config()
        })
        .zone_with::<Tally>("tally", zone, Value::Null)
        .persistence(Arc::clone(&p))
        .build()
        .unwrap();
    TestServer::serve(host).await
}

async fn presence(server: &TestServer, principals: &str) -> Vec<Value> {
    let (status, body) = http(
        server,
        "GET",
        &format!("/presence?principals={principals}"),
        Some(BACKEND),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["presence"].as_array().unwrap().clone()
}

/// Re-reads `principal`'s presence until `f` holds of it (presence is written about once a
/// second and has no notification to wait on here; the wait is bounded by [`HANG_GUARD`]).
async fn presence_until(server: &TestServer, principal: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let p = presence(server, principal).await.remove(0);
        if f(&p) {
            return p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "presence of {principal} still {p}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn watch_ticket(sub: &str, params: Value) -> String {
    sign(&json!({
        "sub": sub, "zone": "@presence", "params": params,
        "exp": now() + 60, "nbf": now() - 1, "jti": jti()
    }))
}

/// An open watch stream: server-sent events read as they come.
struct Watch {
    body: hyper::body::Incoming,
    buf: String,
}

impl Watch {
    /// Opens `/presence/watch` with `ticket`; answers the status, and the stream when 200.
    async fn open(server: &TestServer, ticket: Option<&str>) -> (u16, Option<Watch>, String) {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<Bytes>>();
        let mut req = hyper::Request::get(format!("http://{}/presence/watch", server.addr));
        if let Some(t) = ticket {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let res = client
            .request(req.body(Empty::new()).unwrap())
            .await
            .unwrap();
        let status = res.status().as_u16();
        if status != 200 {
            let body = res.into_body().collect().await.unwrap().to_bytes();
            return (status, None, String::from_utf8_lossy(&body).into_owned());
        }
        (
            status,
            Some(Watch {
                body: res.into_body(),
                buf: String::new(),
            }),
            String::new(),
        )
    }

    /// The next event (its name and JSON data), keep-alive comments skipped.
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut name = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = n.to_owned();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                if name.is_empty() {
                    continue;
                }
                return (name, serde_json::from_str(&data).unwrap());
            }
            let frame = tokio::time::timeout(HANG_GUARD, self.body.frame())
                .await
                .expect("no event within the hang guard")
                .expect("the stream ended")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buf.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }
}

fn online(p: &Value) -> bool {
    p["online"].as_bool().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_back_end_and_a_watcher_see_players_arrive_and_leave_after_their_grace() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;

    let all = presence(&server, "ann,bob").await;
    assert!(all.iter().all(|p| !online(p)), "{all:?}");

    // A watcher of ann and bob: a snapshot first.
    let t = watch_ticket("cat", json!({"watch": ["ann", "bob"]}));
    let (status, watch, body) = Watch::open(&server, Some(&t)).await;
    assert_eq!(status, 200, "{body}");
    let mut watch = watch.unwrap();
    let (name, snap) = watch.next().await;
    assert_eq!(name, "snapshot");
    let snap = snap["presence"].as_array().unwrap().clone();
    assert_eq!(snap.len(), 2);
    assert!(snap.iter().all(|p| !online(p)), "{snap:?}");

    // ann arrives in t-1.
    let (ws, _, _) = join_tally(&server, "t-1", "ann").await;
    let ann = presence_until(&server, "ann", online).await;
    let zones = ann["zones"].as_array().unwrap();
    assert_eq!(zones.len(), 1);
    assert_eq!(zones[0]["zone"], "t-1");
    assert!(zones[0]["since_ms"].as_u64().unwrap() > 0);
    let (name, change) = watch.next().await;
    assert_eq!(name, "presence");
    assert_eq!(change["principal"], "ann");
    assert!(online(&change));
    assert_eq!(change["zones"], ann["zones"]);

    // ann's connection drops: present through the grace, then gone, and the watcher is told.
    drop(ws);
    let (name, change) = watch.next().await;
    assert_eq!(name, "presence");
    assert_eq!(change["principal"], "ann");
    assert!(!online(&change), "{change}");
    assert!(!online(&presence(&server, "ann").await[0]));
    assert!(metric(&server, "zonekeep_presence_written_total").await >= 2.0);
    assert_eq!(metric(&server, "zonekeep_presence_watchers").await, 1.0);

    drop(watch);
    eventually("the watcher unregistered", || async {
        metric(&server, "zonekeep_presence_watchers").await == 0.0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn presence_routes_refuse_hostile_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path()).await;

    // The back end's route.
    let (status, _) = http(&server, "GET", "/presence?principals=a", None, None).await;
    assert_eq!(status, 401);
    let (status, _) = http(&server, "GET", "/presence?principals=a", Some(ADMIN), None).await;
    assert_eq!(status, 401, "the admin token is not the back end's");
    let many: Vec<String> = (0..501).map(|i| format!("p{i}")).collect();
    for q in [
        String::new(),
        "?principals=".to_owned(),
        "?principals=a,,b".to_owned(),
        format!("?principals={}", "p".repeat(257)),
        format!("?principals={}", many.join(",")),
    ] {
        let (status, body) = http(
            &server,
            "GET",
            &format!("/presence{q}"),
            Some(BACKEND),
            None,
        )
        .await;
        assert_eq!(status, 400, "{q}: {body}");
        assert!(body.contains("bad_request"), "{body}");
    }

    // The watch: tickets and their lists.
    let code = |body: &str| -> String {
        serde_json::from_str::<Value>(body).unwrap()["error"]["code"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (status, _, body) = Watch::open(&server, None).await;
    assert_eq!((status, code(&body).as_str()), (401, "unauthorized"));
    let zone_ticket = ticket("cat", "t-1");
    let (status, _, body) = Watch::open(&server, Some(&zone_ticket)).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (401, "unauthorized"),
        "{body}"
    );
    let watchers: Vec<String> = (0..201).map(|i| format!("p{i}")).collect();
    for params in [
        json!(null),
        json!({}),
        json!({"watch": []}),
        json!({"watch": "ann"}),
        json!({"watch": [1, 2]}),
        json!({"watch": [""]}),
        json!({ "watch": watchers }),
    ] {
        let t = watch_ticket("cat", params.clone());
        let (status, _, body) = Watch::open(&server, Some(&t)).await;
        assert_eq!(
            (status, code(&body).as_str()),
            (400, "bad_request"),
            "{params}: {body}"
        );
    }
    let t = watch_ticket("cat", json!({"watch": ["ann"]}));
    let (status, w, _) = Watch::open(&server, Some(&t)).await;
    assert_eq!(status, 200);
    drop(w);
    let (status, _, body) = Watch::open(&server, Some(&t)).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (401, "unauthorized"),
        "a replayed ticket: {body}"
    );

    // Still serving.
    assert_eq!(presence(&server, "ann").await.len(), 1);
    server.stop().await;
}
