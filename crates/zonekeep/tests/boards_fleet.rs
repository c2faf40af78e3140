//! Leaderboards on real `zonekeep serve` processes, with a private `redis-server` as their
//! ranking index (one the test can flush and stop).
//!
//! An application back end submits scores over HTTP under its own idempotency keys, many at
//! once, and the host is killed with SIGKILL halfway through. Restarted on the same data, the
//! host is sent every key again (at-least-once delivery: those answered, those in flight when it
//! died, and those never sent): each key counts exactly once, so each principal's total is the
//! sum of its keys' values and its best the smallest, and every repeated key is answered 200
//! `recorded:false`. The ranking read from the store is exactly the expected one; the Redis
//! index catches up to it; Redis flushed, it is rebuilt; Redis stopped, reads answer from the
//! store with the same ranks and scores are still taken.
//!
//! With PostgreSQL (`ZONEKEEP_TEST_POSTGRES`), two hosts share the store and the index: scores
//! submitted through one are read through the other with the same ranks.
//!
//! Set `ZONEKEEP_BOARDS_SEED` to replay other values and orders.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use support::redis::Redis;
use support::{unique_run, Server, StoreSpec, ADMIN_TOKEN, LOBBY_TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// Principals with scores, and the keys (matches) each one's scores are submitted under.
const PRINCIPALS: usize = 40;
const KEYS_EACH: usize = 25;
/// Requests the back end has in flight at once.
const AT_ONCE: usize = 16;
/// The boards: `score` adds every value (incr, higher first), `laps` keeps the best (lowest).
const BOARD_FLAGS: [&str; 4] = [
    "--board",
    "score:total=score",
    "--board",
    "laps:op=best:order=asc",
];
const BOARDS: [&str; 2] = ["score", "laps"];
/// How long the index may take to catch up with the store.
const INDEX_WITHIN: Duration = Duration::from_secs(30);
const REBUILT: &str = "zonekeep_board_index_total{event=\"rebuilt\"}";
const FAILED: &str = "zonekeep_board_index_total{event=\"failed\"}";

fn seed() -> u64 {
    std::env::var("ZONEKEEP_BOARDS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xb0a2_d5ee_d000_0001)
}

/// xorshift64*: enough for seeded values and orders.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn shuffle<T>(items: &mut [T], rng: &mut u64) {
    for i in (1..items.len()).rev() {
        let j = usize::try_from(next(rng) % (i as u64 + 1)).unwrap();
        items.swap(i, j);
    }
}

/// One score the back end submits: `value` for `principal` on `board` under `key`.
#[derive(Debug, Clone)]
struct Submission {
    board: &'static str,
    principal: String,
    key: String,
    value: i64,
}

impl Submission {
    fn body(&self) -> Value {
        json!({"principal": self.principal, "value": self.value, "key": self.key})
    }
}

/// `principals` × `keys_each` keys, each submitted to both boards with one value, in a seeded
/// order. Principal names mix cases and punctuation so ties order by bytes (`B` < `_` < `a` <
/// `c`); principal 1 repeats principal 0's values (a tie on both boards), and the last principal
/// scores below zero.
fn plan(rng: &mut u64, principals: usize, keys_each: usize, tag: &str) -> Vec<Submission> {
    let names: Vec<String> = (0..principals)
        .map(|i| format!("{}-{i:02}", ["ace", "Bob", "c.d", "_x"][i % 4]))
        .collect();
    let mut values: Vec<Vec<i64>> = Vec::new();
    for i in 0..principals {
        let v: Vec<i64> = if i == 1 {
            values[0].clone()
        } else if i + 1 == principals {
            (0..keys_each)
                .map(|_| -1 - i64::try_from(next(rng) % 1000).unwrap())
                .collect()
        } else {
            (0..keys_each)
                .map(|_| 1 + i64::try_from(next(rng) % 1000).unwrap())
                .collect()
        };
        values.push(v);
    }
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        for (j, value) in values[i].iter().enumerate() {
            for board in BOARDS {
                out.push(Submission {
                    board,
                    principal: name.clone(),
                    key: format!("{tag}-{i}-{j}"),
                    value: *value,
                });
            }
        }
    }
    shuffle(&mut out, rng);
    out
}

/// The ranking `board` must hold after every submission of `plan` counted once: its entries
/// (`rank`, `principal`, `score`), better first, ties by principal in byte order.
fn expected(plan: &[Submission], board: &str) -> Value {
    let mut scores: BTreeMap<&str, i64> = BTreeMap::new();
    for s in plan.iter().filter(|s| s.board == board) {
        scores
            .entry(&s.principal)
            .and_modify(|v| {
                *v = match board {
                    "laps" => (*v).min(s.value),
                    _ => *v + s.value,
                }
            })
            .or_insert(s.value);
    }
    let mut ranked: Vec<(&str, i64)> = scores.into_iter().collect();
    match board {
        "laps" => ranked.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0))),
        _ => ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0))),
    }
    Value::Array(
        ranked
            .iter()
            .zip(1u64..)
            .map(|((p, s), rank)| json!({"rank": rank, "principal": p, "score": s}))
            .collect(),
    )
}

/// One HTTP exchange with the host at `addr` (`HOST:PORT`): the status and the body as JSON, or
/// `None` when no whole answer came back (the host is gone, or died answering).
async fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(req.as_bytes()).await.ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.ok()?;
        Some(out)
    };
    let out = tokio::time::timeout(Duration::from_secs(20), io)
        .await
        .ok()??;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let json = serde_json::from_slice(&out[split + 4..]).ok()?;
    Some((status, json))
}

/// A read of the host, which must be answered 200: the ranking.
async fn read(h: &Server, path: &str) -> Value {
    let (status, v) = exchange(&h.addr, "GET", path, None, None)
        .await
        .unwrap_or_else(|| panic!("GET {path}: no answer"));
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

/// What the back end was answered for one submission (`None`: no answer).
type Answer = Option<(u16, Value)>;

/// Submits `plan[i]` for each `i` of `order` to the host at `addr`, [`AT_ONCE`] at a time,
/// counting answers in `answered`. With `stop_on_loss`, a sender stops at its first request that
/// gets no answer (the host is gone) and the rest of `order` is left unsent. Answers in the
/// order they came.
async fn submit_all(
    addr: String,
    plan: Arc<Vec<Submission>>,
    order: Vec<usize>,
    answered: watch::Sender<usize>,
    stop_on_loss: bool,
) -> Vec<(usize, Answer)> {
    let queue = Arc::new(Mutex::new(VecDeque::from(order)));
    let results = Arc::new(Mutex::new(Vec::new()));
    let answered = Arc::new(answered);
    let mut senders = Vec::new();
    for _ in 0..AT_ONCE {
        let (queue, results, answered) = (queue.clone(), results.clone(), answered.clone());
        let (addr, plan) = (addr.clone(), plan.clone());
        senders.push(tokio::spawn(async move {
            loop {
                let Some(i) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let s = &plan[i];
                let path = format!("/boards/{}/scores", s.board);
                let a = exchange(&addr, "POST", &path, Some(LOBBY_TOKEN), Some(&s.body())).await;
                let lost = a.is_none();
                if !lost {
                    answered.send_modify(|n| *n += 1);
                }
                results.lock().unwrap().push((i, a));
                if lost && stop_on_loss {
                    return;
                }
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    let out = std::mem::take(&mut *results.lock().unwrap());
    out
}

/// Checks one answer to a submission: 201 `recorded:true` the first time, 200 `recorded:false`
/// after; the answer names the board and the principal's entry. Answers whether it was recorded.
fn recorded(s: &Submission, status: u16, v: &Value) -> bool {
    assert!(status == 200 || status == 201, "{s:?}: {status} {v}");
    assert_eq!(v["board"], s.board, "{v}");
    assert_eq!(v["period"], 0, "a board of all time has one period: {v}");
    assert_eq!(
        v["me"]["principal"].as_str(),
        Some(s.principal.as_str()),
        "{v}"
    );
    assert_eq!(v["recorded"], json!(status == 201), "{s:?}: {status} {v}");
    status == 201
}

/// Polls `board` at `h` (no `from`) until it answers from the index with `want`'s entries;
/// the answer.
async fn until_index(h: &Server, board: &str, want: &Value) -> Value {
    let path = format!("/boards/{board}?limit=1000");
    let deadline = tokio::time::Instant::now() + INDEX_WITHIN;
    loop {
        let v = read(h, &path).await;
        if v["source"] == "index" && v["entries"] == *want {
            assert_eq!(v["size"], json!(want.as_array().unwrap().len()), "{v}");
            return v;
        }
        // Until then it answers from the store, which is the truth at once.
        if v["source"] == "store" {
            assert_eq!(v["entries"], *want, "the store's ranking");
        }
        if tokio::time::Instant::now() >= deadline {
            let metrics = h.get("/metrics").await;
            let index: Vec<&str> = metrics
                .lines()
                .filter(|l| l.starts_with("zonekeep_board_index_total"))
                .collect();
            panic!("{board}: the index never caught up with the store; {index:?}; last answer {v}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The store's ranking of `board` read at `h` (`from=store`), checked against `want`.
async fn store_ranking(h: &Server, board: &str, want: &Value) {
    let v = read(h, &format!("/boards/{board}?limit=1000&from=store")).await;
    assert_eq!(v["source"], "store", "{v}");
    assert_eq!(v["board"], board);
    assert_eq!(v["period"], 0);
    assert_eq!(v["size"], json!(want.as_array().unwrap().len()), "{v}");
    assert_eq!(v["entries"], *want, "{board}: the store's ranking");
    // A page further down answers the same entries.
    let page = read(h, &format!("/boards/{board}?limit=7&offset=5&from=store")).await;
    assert_eq!(
        page["entries"],
        json!(want.as_array().unwrap()[5..12]),
        "{page}"
    );
}

/// `around/{p}` for a few principals (the top, a tie, the middle, the last, one without a
/// score): the store's answer is `want`'s slice, and the default read (from `source`, when
/// given) answers the same.
async fn around_agree(h: &Server, board: &str, want: &Value, source: Option<&str>) {
    const RADIUS: usize = 3;
    let list = want.as_array().unwrap();
    let mut who: Vec<String> = [0, 1, list.len() / 2, list.len() - 1]
        .iter()
        .map(|&i| list[i]["principal"].as_str().unwrap().to_owned())
        .collect();
    who.push("nobody-here".into());
    for p in &who {
        let path = format!("/boards/{board}/around/{p}?radius={RADIUS}");
        let store = read(h, &format!("{path}&from=store")).await;
        assert_eq!(store["source"], "store", "{store}");
        assert_eq!(store["size"], json!(list.len()));
        match list.iter().position(|e| e["principal"] == json!(p)) {
            Some(at) => {
                assert_eq!(store["me"], list[at], "{board} around {p}: {store}");
                let from = at.saturating_sub(RADIUS);
                let to = (at + RADIUS).min(list.len() - 1);
                assert_eq!(
                    store["entries"],
                    json!(list[from..=to]),
                    "{board} around {p}"
                );
            }
            None => {
                assert_eq!(store["me"], Value::Null, "{store}");
                assert_eq!(store["entries"], json!([]), "{store}");
            }
        }
        let mut read_default = read(h, &path).await;
        if let Some(src) = source {
            assert_eq!(
                read_default["source"], src,
                "{board} around {p}: {read_default}"
            );
        }
        let mut store = store;
        store["source"] = Value::Null;
        read_default["source"] = Value::Null;
        assert_eq!(
            read_default, store,
            "{board} around {p}: both sources agree"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leaderboard_counts_each_score_once_across_kill_9_and_is_rebuilt_after_redis_is_flushed() {
    let test =
        "leaderboard_counts_each_score_once_across_kill_9_and_is_rebuilt_after_redis_is_flushed";
    let Some(redis_bin) = support::service_url("ZONEKEEP_REDIS_SERVER", test) else {
        return;
    };
    let began = std::time::Instant::now();
    let seed = seed();
    eprintln!("{test}: seed {seed} (ZONEKEEP_BOARDS_SEED)");
    let mut rng = seed;
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(&redis_bin, dir.path()).await;
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let url = redis.url();
    let mut args = vec![
        "--admin-token",
        ADMIN_TOKEN,
        "--lobby-token",
        LOBBY_TOKEN,
        "--board-redis",
        url.as_str(),
    ];
    args.extend(BOARD_FLAGS);
    let log = dir.path().join("host.log");
    let host = Server::start(&store, &args, &log).await;

    let mut plan = plan(&mut rng, PRINCIPALS, KEYS_EACH, "match");
    let total = plan.len();
    let shared = Arc::new(plan.clone());

    // The back end sends everything; the host is killed once half of it was answered.
    let (tx, mut rx) = watch::channel(0usize);
    let first = tokio::spawn(submit_all(
        host.addr.clone(),
        shared.clone(),
        (0..total).collect(),
        tx,
        true,
    ));
    tokio::time::timeout(Duration::from_secs(120), rx.wait_for(|n| *n >= total / 2))
        .await
        .expect("half the scores answered within 2 min")
        .expect("the back end stopped before half was answered");
    host.kill().await;
    let first = first.await.unwrap();
    let mut answered = BTreeSet::new();
    let mut in_flight = BTreeSet::new();
    for (i, a) in &first {
        match a {
            Some((status, v)) => {
                assert!(recorded(&shared[*i], *status, v), "sent once: {v}");
                answered.insert(*i);
            }
            None => {
                in_flight.insert(*i);
            }
        }
    }
    let unsent: BTreeSet<usize> = (0..total)
        .filter(|i| !answered.contains(i) && !in_flight.contains(i))
        .collect();
    eprintln!(
        "killed with {} answered, {} in flight, {} unsent",
        answered.len(),
        in_flight.len(),
        unsent.len()
    );
    assert!(!unsent.is_empty(), "the kill came before the end");

    // Restarted on the same data, the host is sent every key again; those it may not have
    // recorded twice at once (two senders race on the same key).
    let host = Server::start(&store, &args, &log).await;
    let mut order: Vec<usize> = (0..total).collect();
    shuffle(&mut order, &mut rng);
    let order: Vec<usize> = order
        .into_iter()
        .flat_map(|i| {
            if answered.contains(&i) {
                vec![i]
            } else {
                vec![i, i]
            }
        })
        .collect();
    let (tx, _rx) = watch::channel(0usize);
    let second = submit_all(host.addr.clone(), shared.clone(), order, tx, false).await;
    let mut firsts: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, a) in &second {
        let (status, v) = a
            .as_ref()
            .unwrap_or_else(|| panic!("{:?}: no answer from the restarted host", shared[*i]));
        if recorded(&shared[*i], *status, v) {
            *firsts.entry(*i).or_default() += 1;
        }
    }
    let mut committed_in_flight = 0;
    for i in 0..total {
        let n = firsts.get(&i).copied().unwrap_or(0);
        if answered.contains(&i) {
            assert_eq!(n, 0, "{:?}: recorded again after restart", shared[i]);
        } else if unsent.contains(&i) {
            assert_eq!(n, 1, "{:?}: recorded once when first sent", shared[i]);
        } else {
            assert!(n <= 1, "{:?}: recorded {n} times", shared[i]);
            committed_in_flight += usize::from(n == 0);
        }
    }
    eprintln!(
        "{committed_in_flight} of {} requests in flight at the kill had been recorded",
        in_flight.len()
    );
    assert_eq!(
        host.metric("zonekeep_board_submits_total{outcome=\"recorded\"}")
            .await,
        (unsent.len() + in_flight.len() - committed_in_flight) as f64
    );

    // The store's ranking is exactly the expected one; the index catches up with it and
    // answers the same, around any principal too.
    let mut want: BTreeMap<&str, Value> = BTreeMap::new();
    for board in BOARDS {
        want.insert(board, expected(&plan, board));
        store_ranking(&host, board, &want[board]).await;
    }
    // Principals 0 and 1 tie, the one first in byte order ranked better.
    let w = want["score"].as_array().unwrap();
    let at = |p: &str| w.iter().position(|e| e["principal"] == p).unwrap();
    assert_eq!(at("Bob-01") + 1, at("ace-00"), "{w:?}");
    assert_eq!(w[at("Bob-01")]["score"], w[at("ace-00")]["score"]);
    for board in BOARDS {
        until_index(&host, board, &want[board]).await;
        around_agree(&host, board, &want[board], Some("index")).await;
    }

    // Redis flushed: reads answer from the store until the index is rebuilt, then from it.
    let rebuilt = host.metric(REBUILT).await;
    assert_eq!(redis.command(&["FLUSHALL"]).await.as_deref(), Some("+OK"));
    for board in BOARDS {
        let v = read(&host, &format!("/boards/{board}?limit=1000")).await;
        assert_eq!(
            v["entries"], want[board],
            "{board} right after the flush: {v}"
        );
        until_index(&host, board, &want[board]).await;
        around_agree(&host, board, &want[board], Some("index")).await;
    }
    let after = host.metric(REBUILT).await;
    assert!(
        after > rebuilt,
        "the flushed index was rebuilt ({rebuilt} → {after})"
    );

    // Redis stopped: reads answer from the store, with the same ranks.
    redis.stop();
    let failed = host.metric(FAILED).await;
    for _ in 0..3 {
        for board in BOARDS {
            let v = read(&host, &format!("/boards/{board}?limit=1000")).await;
            assert_eq!(v["source"], "store", "{v}");
            assert_eq!(v["entries"], want[board], "{board} without Redis");
            around_agree(&host, board, &want[board], Some("store")).await;
        }
    }
    assert!(host.metric(FAILED).await > failed);
    // Scores are still taken, and the store's ranking shows them at once.
    let last = want["score"].as_array().unwrap()[PRINCIPALS - 1]["principal"]
        .as_str()
        .unwrap()
        .to_owned();
    let late = Submission {
        board: "score",
        principal: last,
        key: "late-0".into(),
        value: 1_000_000,
    };
    let (status, v) = exchange(
        &host.addr,
        "POST",
        "/boards/score/scores",
        Some(LOBBY_TOKEN),
        Some(&late.body()),
    )
    .await
    .unwrap();
    assert!(recorded(&late, status, &v));
    assert_eq!(v["me"]["rank"], 1, "{v}");
    plan.push(late);
    let now = expected(&plan, "score");
    let v = read(&host, "/boards/score?limit=1000").await;
    assert_eq!(v["source"], "store", "{v}");
    assert_eq!(v["entries"], now);
    host.terminate().await;
    eprintln!("{test}: {:.1}s", began.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scores_submitted_through_one_host_rank_the_same_through_another() {
    let test = "scores_submitted_through_one_host_rank_the_same_through_another";
    let Some(pg) = support::service_url("ZONEKEEP_TEST_POSTGRES", test) else {
        return;
    };
    let Some(redis_bin) = support::service_url("ZONEKEEP_REDIS_SERVER", test) else {
        return;
    };
    let began = std::time::Instant::now();
    let mut rng = seed() ^ 0x2;
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(&redis_bin, dir.path()).await;
    let store = StoreSpec::postgres_isolated(&pg, &unique_run()).await;
    let url = redis.url();
    let mut args = vec![
        "--admin-token",
        ADMIN_TOKEN,
        "--lobby-token",
        LOBBY_TOKEN,
        "--board-redis",
        url.as_str(),
    ];
    args.extend(BOARD_FLAGS);
    let a = Server::start(&store, &args, &dir.path().join("a.log")).await;
    let b = Server::start(&store, &args, &dir.path().join("b.log")).await;

    // Everything through A.
    let mut all = plan(&mut rng, 12, 8, "a");
    let shared = Arc::new(all.clone());
    let (tx, _rx) = watch::channel(0usize);
    let sent = submit_all(
        a.addr.clone(),
        shared.clone(),
        (0..all.len()).collect(),
        tx,
        false,
    )
    .await;
    for (i, ans) in &sent {
        let (status, v) = ans.as_ref().expect("every score answered");
        assert!(recorded(&shared[*i], *status, v));
    }
    // A key is the fleet's: sent again through B, it is a repeat.
    for s in shared.iter().take(10) {
        let (status, v) = exchange(
            &b.addr,
            "POST",
            &format!("/boards/{}/scores", s.board),
            Some(LOBBY_TOKEN),
            Some(&s.body()),
        )
        .await
        .unwrap();
        assert!(!recorded(s, status, &v));
    }
    // B and A answer the same ranks, from the store and from the index.
    for board in BOARDS {
        let want = expected(&all, board);
        for h in [&b, &a] {
            store_ranking(h, board, &want).await;
            until_index(h, board, &want).await;
            around_agree(h, board, &want, Some("index")).await;
        }
    }

    // More through B: A's index follows.
    let more = plan(&mut rng, 12, 3, "b");
    let shared = Arc::new(more.clone());
    let (tx, _rx) = watch::channel(0usize);
    let sent = submit_all(
        b.addr.clone(),
        shared.clone(),
        (0..more.len()).collect(),
        tx,
        false,
    )
    .await;
    for (i, ans) in &sent {
        let (status, v) = ans.as_ref().expect("every score answered");
        assert!(recorded(&shared[*i], *status, v));
    }
    all.extend(more);
    for board in BOARDS {
        let want = expected(&all, board);
        store_ranking(&a, board, &want).await;
        until_index(&a, board, &want).await;
        until_index(&b, board, &want).await;
    }
    a.terminate().await;
    b.terminate().await;
    eprintln!("{test}: {:.1}s", began.elapsed().as_secs_f64());
}
