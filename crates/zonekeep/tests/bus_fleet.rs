//! The cross-zone bus end to end: two real `zonekeep serve` hosts on one PostgreSQL store, with
//! `--bus` on NATS JetStream, running `courier` zones (a dev kind that sends numbered messages on
//! command and keeps, in its save, exactly what it received). Messages between hosts arrive in
//! order and once; a group send reaches each member once; a child on one host reports to its
//! parent on the other; a receiver whose host is killed gets every message applied exactly once
//! after failover; a NATS outage makes sends undeliverable without stopping the zones and
//! delivery resumes when NATS is back; the operator's message arrives as `MessageFrom::Admin`.
//!
//! Each test runs in a PostgreSQL schema of its own and uses zone and group names of its own run.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use support::courier::{command, post_message, runs, TOPIC_NUMBERED};
use support::{host_id_for, Server, StoreSpec, ADMIN_TOKEN};

/// Longest wait for any one thing a test expects (a takeover alone takes over 10 s, and the
/// redelivery of what the dead host had not acknowledged another ack wait of 10 s).
const WAIT: Duration = Duration::from_secs(90);

/// Two hosts, `a` and `b`, on one store and one NATS.
struct Fleet {
    store: StoreSpec,
    a: Server,
    b: Server,
    a_id: String,
    b_id: String,
    run: String,
    _dir: tempfile::TempDir,
}

/// Host flags for a fleet on `nats` saving every `save_every`.
fn host_args<'a>(nats: &'a str, save_every: &'a str) -> Vec<&'a str> {
    vec![
        "--admin-token",
        ADMIN_TOKEN,
        "--save-every",
        save_every,
        "--bus",
        nats,
    ]
}

impl Fleet {
    /// Two hosts on a fresh schema of `pg`, with the bus on `nats`, saving every 200 ms.
    async fn start(pg: &str, nats: &str) -> Fleet {
        Fleet::start_saving(pg, nats, "200ms").await
    }

    /// Two hosts saving every `save_every`.
    async fn start_saving(pg: &str, nats: &str, save_every: &str) -> Fleet {
        let run = support::unique_run();
        let store = StoreSpec::postgres_isolated(pg, &run).await;
        let dir = tempfile::tempdir().unwrap();
        let args = host_args(nats, save_every);
        let (a_log, b_log) = (dir.path().join("a.log"), dir.path().join("b.log"));
        let a = Server::start(&store, &args, &a_log).await;
        let b = Server::start(&store, &args, &b_log).await;
        Fleet {
            store,
            a,
            b,
            a_id: host_id_for(&a_log),
            b_id: host_id_for(&b_log),
            run,
            _dir: dir,
        }
    }

    /// A zone name of this run.
    fn name(&self, what: &str) -> String {
        format!("{what}-{}", self.run)
    }

    /// The last saved report of courier `zone` (`Value::Null` before its first save).
    async fn report(&self, zone: &str) -> Value {
        match self.store.last_save(zone).await {
            Some((_, state)) => state["report"].clone(),
            None => Value::Null,
        }
    }

    /// Polls `zone`'s saved report until `f` holds; returns it.
    async fn report_until(&self, zone: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = self.report(zone).await;
            if f(&r) {
                return r;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {zone}: {what}; its report: {r}\n{}",
                logs(&[&self.a, &self.b])
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn logs(hosts: &[&Server]) -> String {
    hosts
        .iter()
        .map(|h| {
            let text = std::fs::read_to_string(&h.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("--- {}\n{}", h.log.display(), tail.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Creates courier `zone` with `params` on `host` (whose id is `host_id`).
async fn create(host: &Server, host_id: &str, zone: &str, params: Value) {
    let (status, body) = host
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": zone, "kind": "courier", "params": params, "host": host_id})),
        )
        .await;
    assert_eq!(status, 201, "creating {zone}: {body}");
}

/// How many messages `report` holds from `source` on `topic` (duplicates included).
fn count(report: &Value, source: &str, topic: u16) -> u64 {
    report["received"][format!("{source}/{topic}")]["count"]
        .as_u64()
        .unwrap_or(0)
}

/// Every undeliverable report of `report`, summed.
fn undeliverable(report: &Value) -> u64 {
    report["undeliverable"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

/// Both services, or `None` after reporting `test` skipped.
fn services(test: &str) -> Option<(String, String)> {
    let pg = support::service_url("ZONEKEEP_TEST_POSTGRES", test)?;
    let nats = support::service_url("ZONEKEEP_TEST_NATS", test)?;
    Some((pg, nats))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_messages_cross_hosts_in_order_and_once() {
    let Some((pg, nats)) = services("a_thousand_messages_cross_hosts_in_order_and_once") else {
        return;
    };
    let f = Fleet::start(&pg, &nats).await;
    let (tx, rx) = (f.name("tx"), f.name("rx"));
    create(&f.b, &f.b_id, &rx, json!({})).await;
    create(&f.a, &f.a_id, &tx, json!({})).await;
    command(&f.a, &tx, json!({"send": 1000, "zone": rx})).await;

    let source = format!("zone:{tx}");
    let r = f
        .report_until(&rx, "1,000 messages", |r| {
            count(r, &source, TOPIC_NUMBERED) >= 1000
        })
        .await;
    assert_eq!(
        runs(&r, &source, TOPIC_NUMBERED),
        vec![(1, 1000)],
        "every number, in order, once: {r}"
    );
    assert_eq!(count(&r, &source, TOPIC_NUMBERED), 1000, "{r}");
    let sent = f
        .report_until(&tx, "the sender's report", |r| r["sent"] == 1000)
        .await;
    assert_eq!(undeliverable(&sent), 0, "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_send_reaches_each_member_once_on_both_hosts() {
    let Some((pg, nats)) = services("a_group_send_reaches_each_member_once_on_both_hosts") else {
        return;
    };
    let f = Fleet::start(&pg, &nats).await;
    let group = f.name("grp");
    let (sender, m_a, m_b) = (f.name("sender"), f.name("member-a"), f.name("member-b"));
    create(&f.a, &f.a_id, &m_a, json!({"groups": [group]})).await;
    create(&f.b, &f.b_id, &m_b, json!({"groups": [group]})).await;
    create(&f.a, &f.a_id, &sender, json!({})).await;
    let source = format!("zone:{sender}");

    // Membership reaches the sender's host through NATS's key-value watch, so probe (topic 3)
    // until both members hear one: from then on the sender's host knows both.
    let probe = 3;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut n = 0;
    loop {
        n += 1;
        command(
            &f.a,
            &sender,
            json!({"send": 1, "group": group, "topic": probe, "from": n}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (ra, rb) = (f.report(&m_a).await, f.report(&m_b).await);
        if count(&ra, &source, probe) > 0 && count(&rb, &source, probe) > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the group never reached both members: {ra} {rb}"
        );
    }

    command(&f.a, &sender, json!({"send": 200, "group": group})).await;
    for member in [&m_a, &m_b] {
        let r = f
            .report_until(member, "200 group messages", |r| {
                count(r, &source, TOPIC_NUMBERED) >= 200
            })
            .await;
        assert_eq!(
            runs(&r, &source, TOPIC_NUMBERED),
            vec![(1, 200)],
            "{member} got each group message once, in order: {r}"
        );
        assert_eq!(count(&r, &source, TOPIC_NUMBERED), 200, "{r}");
    }
    let s = f.report(&sender).await;
    assert_eq!(undeliverable(&s), 0, "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_on_one_host_reports_to_its_parent_on_the_other() {
    let Some((pg, nats)) = services("a_child_on_one_host_reports_to_its_parent_on_the_other")
    else {
        return;
    };
    let f = Fleet::start(&pg, &nats).await;
    let (parent, child) = (f.name("parent"), f.name("child"));
    create(&f.a, &f.a_id, &parent, json!({})).await;
    create(&f.b, &f.b_id, &child, json!({"parent": parent})).await;
    command(&f.b, &child, json!({"send": 50, "parent": true})).await;

    let source = format!("child:{child}");
    let r = f
        .report_until(&parent, "the child's messages and its idle tier", |r| {
            count(r, &source, TOPIC_NUMBERED) >= 50
                && r["tiers"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|l| l == &json!(format!("{child} Hot->Idle"))))
        })
        .await;
    assert_eq!(runs(&r, &source, TOPIC_NUMBERED), vec![(1, 50)], "{r}");
    assert!(
        r["received"]
            .get(format!("zone:{child}/{TOPIC_NUMBERED}"))
            .is_none(),
        "to_parent messages reach on_child, not on_message: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_receivers_host_is_killed_every_message_is_applied_exactly_once() {
    let Some((pg, nats)) =
        services("after_the_receivers_host_is_killed_every_message_is_applied_exactly_once")
    else {
        return;
    };
    // Saves every 4 s make the consumer's ack wait 12 s, longer than the takeover (about 10 s):
    // the new owner binds the consumer while what the dead host held is still pending. The
    // stream (120 a second, for 25 s) keeps that under the consumer's 1,024 pending, so new
    // messages are there to be delivered too.
    let f = Fleet::start_saving(&pg, &nats, "4s").await;
    let (tx, rx) = (f.name("tx"), f.name("rx"));
    create(&f.b, &f.b_id, &rx, json!({})).await;
    create(&f.a, &f.a_id, &tx, json!({})).await;
    let total = 3000;
    command(&f.a, &tx, json!({"send": total, "zone": rx, "per_tick": 4})).await;
    let source = format!("zone:{tx}");
    f.report_until(&rx, "a first part of the stream", |r| {
        count(r, &source, TOPIC_NUMBERED) >= 100
    })
    .await;
    // Mid-way between two saves.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // kill -9: the receiver's host leaves no final save; the first host takes the zone over.
    f.b.signal("-KILL");
    let r = f
        .report_until(&rx, "every message after the takeover", |r| {
            runs(r, &source, TOPIC_NUMBERED).last().map(|l| l.1) == Some(total)
        })
        .await;
    assert_eq!(
        runs(&r, &source, TOPIC_NUMBERED),
        vec![(1, total)],
        "each message applied exactly once, in order, across the failover: {r}"
    );
    assert_eq!(count(&r, &source, TOPIC_NUMBERED), total, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_message_reaches_the_zone_from_either_host() {
    let Some((pg, nats)) = services("the_operators_message_reaches_the_zone_from_either_host")
    else {
        return;
    };
    let f = Fleet::start(&pg, &nats).await;
    let zone = f.name("ops");
    create(&f.b, &f.b_id, &zone, json!({})).await;
    let (status, body) = post_message(&f.b, &zone, TOPIC_NUMBERED, &1u64.to_le_bytes()).await;
    assert_eq!(status, 202, "on the owner: {body}");
    f.report_until(&zone, "the owner's admin message", |r| {
        runs(r, "admin", TOPIC_NUMBERED) == vec![(1, 1)]
    })
    .await;
    let (status, body) = post_message(&f.a, &zone, TOPIC_NUMBERED, &2u64.to_le_bytes()).await;
    assert_eq!(status, 202, "on the other host: {body}");
    let r = f
        .report_until(&zone, "the other host's admin message", |r| {
            runs(r, "admin", TOPIC_NUMBERED) == vec![(1, 2)]
        })
        .await;
    assert_eq!(r["received"].as_object().unwrap().len(), 1, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_a_stopped_zone_wakes_it_and_arrives_in_order() {
    let Some((pg, nats)) = services("a_message_to_a_stopped_zone_wakes_it_and_arrives_in_order")
    else {
        return;
    };
    let f = Fleet::start(&pg, &nats).await;
    let (tx, rx) = (f.name("tx"), f.name("rx"));
    create(&f.b, &f.b_id, &rx, json!({})).await;
    create(&f.a, &f.a_id, &tx, json!({})).await;
    let source = format!("zone:{tx}");
    command(&f.a, &tx, json!({"send": 10, "zone": rx})).await;
    f.report_until(&rx, "the first 10", |r| {
        count(r, &source, TOPIC_NUMBERED) >= 10
    })
    .await;
    // Stopped: saved and released, as a dormant zone is. No host runs it now.
    let (status, body) =
        f.b.admin_request("POST", &format!("/admin/zones/{rx}/stop"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    for host in [&f.a, &f.b] {
        let detail = host.admin(&format!("/admin/zones/{rx}")).await;
        assert_ne!(detail["running"], true, "{detail}");
    }
    // Messages to it wake it (from its save, on whichever host placement picks) and arrive after
    // the ones it had, in order and once.
    command(&f.a, &tx, json!({"send": 20, "from": 11, "zone": rx})).await;
    let r = f
        .report_until(&rx, "30 messages", |r| {
            count(r, &source, TOPIC_NUMBERED) >= 30
        })
        .await;
    assert_eq!(runs(&r, &source, TOPIC_NUMBERED), vec![(1, 30)], "{r}");
    assert_eq!(count(&r, &source, TOPIC_NUMBERED), 30, "{r}");
    let sent = f
        .report_until(&tx, "the sender's report", |r| r["sent"] == 30)
        .await;
    assert_eq!(undeliverable(&sent), 0, "{sent}");
    // The operator's message to a zone the fleet never made is refused at once.
    let (status, body) = post_message(&f.a, &f.name("nobody"), TOPIC_NUMBERED, b"x").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
}

/// A NATS server of this test's own, on a free port, storing in `dir`.
struct PrivateNats {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    dir: PathBuf,
}

impl PrivateNats {
    /// The `nats-server` binary: `ZONEKEEP_NATS_SERVER`, or the one on PATH; `None` after
    /// reporting `test` skipped (under `CI=true`, a failure).
    fn binary(test: &str) -> Option<PathBuf> {
        if let Ok(p) = std::env::var("ZONEKEEP_NATS_SERVER") {
            if !p.is_empty() {
                return Some(PathBuf::from(p));
            }
        }
        let found = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("nats-server"))
                .find(|p| p.is_file())
        });
        if found.is_none() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: no nats-server (ZONEKEEP_NATS_SERVER or PATH), and CI=true requires it"
            );
            eprintln!(
                "SKIPPED: zonekeep {test}: no nats-server on PATH or in ZONEKEEP_NATS_SERVER"
            );
        }
        found
    }

    fn start(bin: PathBuf, dir: &Path) -> PrivateNats {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut n = PrivateNats {
            child: None,
            bin,
            port,
            dir: dir.to_path_buf(),
        };
        n.up();
        n
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server and waits until it takes connections.
    fn up(&mut self) {
        let child = Command::new(&self.bin)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nats-server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (SIGKILL) and waits for it to be gone.
    fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.down();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_nats_is_down_sends_are_undeliverable_and_delivery_resumes_after() {
    let test = "while_nats_is_down_sends_are_undeliverable_and_delivery_resumes_after";
    let Some(pg) = support::service_url("ZONEKEEP_TEST_POSTGRES", test) else {
        return;
    };
    let Some(bin) = PrivateNats::binary(test) else {
        return;
    };
    let nats_dir = tempfile::tempdir().unwrap();
    let mut nats = PrivateNats::start(bin, nats_dir.path());
    let f = Fleet::start(&pg, &nats.url()).await;
    let (tx, rx) = (f.name("tx"), f.name("rx"));
    create(&f.b, &f.b_id, &rx, json!({})).await;
    create(&f.a, &f.a_id, &tx, json!({})).await;
    // 240 a second for 25 s: the outage falls inside the stream.
    let total = 6000;
    command(&f.a, &tx, json!({"send": total, "zone": rx, "per_tick": 8})).await;
    let source = format!("zone:{tx}");
    f.report_until(&rx, "the stream flowing", |r| {
        count(r, &source, TOPIC_NUMBERED) >= 300
    })
    .await;

    nats.down();
    let tick_at = |d: &Value| d["tick"].as_u64().unwrap_or(0);
    let (tx_before, rx_before) = (
        tick_at(&f.a.admin(&format!("/admin/zones/{tx}")).await),
        tick_at(&f.b.admin(&format!("/admin/zones/{rx}")).await),
    );
    // The sender hears of sends that failed while NATS is away.
    let during = f
        .report_until(&tx, "undeliverable sends", |r| undeliverable(r) >= 20)
        .await;
    assert!(
        during["undeliverable"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("bus unavailable")),
        "{during}"
    );
    // Both zones kept ticking through the outage.
    let (tx_after, rx_after) = (
        tick_at(&f.a.admin(&format!("/admin/zones/{tx}")).await),
        tick_at(&f.b.admin(&format!("/admin/zones/{rx}")).await),
    );
    assert!(
        tx_after > tx_before && rx_after > rx_before,
        "ticks {tx_before}->{tx_after}, {rx_before}->{rx_after}"
    );
    assert_eq!(f.b.metric("zonekeep_bus_connected").await, 0.0);

    nats.up();
    let r = f
        .report_until(&rx, "delivery after NATS is back", |r| {
            runs(r, &source, TOPIC_NUMBERED).last().map(|l| l.1) == Some(total)
        })
        .await;
    let got = runs(&r, &source, TOPIC_NUMBERED);
    // Numbers only ever rise and none arrives twice: the gaps are the sends that failed.
    assert!(
        got.windows(2).all(|w| w[0].1 < w[1].0),
        "numbers arrive in order, each once: {r}"
    );
    let received: u64 = got.iter().map(|(a, b)| b - a + 1).sum();
    assert_eq!(count(&r, &source, TOPIC_NUMBERED), received, "{r}");
    let s = f.report(&tx).await;
    assert!(
        received + undeliverable(&s) >= total,
        "every send arrived or was reported undeliverable: {received} + {s}"
    );
    assert!(got.len() >= 2, "the outage left a gap: {r}");
}

/// The tick-duration histogram of every zone of `host` (or of zone `only`), summed: `(le,
/// cumulative count)` by bucket bound, and the total count.
async fn tick_histogram(host: &Server, only: Option<&str>) -> (Vec<(f64, u64)>, u64) {
    let text = host.get("/metrics").await;
    let mut buckets: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    let mut total = 0;
    let label = only.map(|z| format!("zone=\"{z}\""));
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("zonekeep_tick_duration_seconds_") else {
            continue;
        };
        if label.as_ref().is_some_and(|l| !rest.contains(l.as_str())) {
            continue;
        }
        let value = rest
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0) as u64;
        if rest.starts_with("count") {
            total += value;
        } else if let Some(le) = rest.split("le=\"").nth(1).and_then(|s| s.split('"').next()) {
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(0.0)
            };
            *buckets.entry(bound.to_bits()).or_default() += value;
        }
    }
    let mut out: Vec<(f64, u64)> = buckets
        .into_iter()
        .map(|(b, n)| (f64::from_bits(b), n))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    (out, total)
}

/// The bucket bound under which 99 % of the ticks between two snapshots fell.
fn tick_p99(before: &(Vec<(f64, u64)>, u64), after: &(Vec<(f64, u64)>, u64)) -> (f64, u64) {
    let ticks = after.1 - before.1;
    let want = (ticks as f64 * 0.99).ceil() as u64;
    let bound = after
        .0
        .iter()
        .zip(&before.0)
        .find(|((_, a), (_, b))| a - b >= want)
        .map_or(f64::INFINITY, |((le, _), _)| *le);
    (bound, ticks)
}

/// CPU seconds (user + system) `host`'s process has used, from `/proc` (0 where there is none).
fn cpu_seconds(host: &Server) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", host.pid())).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// A counter of `host`'s `/metrics` (summed over its label sets).
async fn counter(host: &Server, name: &str) -> u64 {
    let text = host.get("/metrics").await;
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Messages between zones on two hosts through NATS, end to end, with the zones ticking: 8
/// courier zones on one host each send to their own receiver on the other, `BENCH_PER_TICK`
/// messages a tick (default 210, so 50,400 a second at 30 Hz; at most 256, the most a zone may
/// send), while the ticks of both hosts are timed. Measured, not asserted; BENCHMARKS.md
/// records it. Run it on an optimized build:
///
/// ```text
/// ZONEKEEP_TEST_POSTGRES=… ZONEKEEP_TEST_NATS=… cargo test --release -p zonekeep \
///     --test bus_fleet bench_zone_messages -- --ignored --nocapture
/// ```
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --ignored --nocapture"]
async fn bench_zone_messages_between_ticking_zones() {
    const PAIRS: usize = 8;
    const PER_ZONE: u64 = 40_000;
    const QUIET: Duration = Duration::from_secs(5);
    let Some((pg, nats)) = services("bench_zone_messages_between_ticking_zones") else {
        return;
    };
    let per_tick: u64 = std::env::var("BENCH_PER_TICK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(210);
    let f = Fleet::start_saving(&pg, &nats, "1s").await;
    let (tx, rx): (Vec<String>, Vec<String>) = (0..PAIRS)
        .map(|i| (f.name(&format!("tx{i}")), f.name(&format!("rx{i}"))))
        .unzip();
    for i in 0..PAIRS {
        create(&f.b, &f.b_id, &rx[i], json!({})).await;
        create(&f.a, &f.a_id, &tx[i], json!({})).await;
    }
    // A bystander on each host that sends and receives nothing: its ticks show what the bus
    // costs the zones beside it, apart from the senders' and receivers' own work.
    let (idle_a, idle_b) = (f.name("idle-a"), f.name("idle-b"));
    create(&f.a, &f.a_id, &idle_a, json!({})).await;
    create(&f.b, &f.b_id, &idle_b, json!({})).await;
    let snapshot = || async {
        [
            tick_histogram(&f.a, None).await,
            tick_histogram(&f.b, None).await,
            tick_histogram(&f.a, Some(&idle_a)).await,
            tick_histogram(&f.b, Some(&idle_b)).await,
        ]
    };
    // The zones tick with nothing to send: the ticks' baseline.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s0 = snapshot().await;
    tokio::time::sleep(QUIET).await;
    let s1 = snapshot().await;

    let delivered0 = counter(&f.b, "zonekeep_bus_delivered").await;
    let cpu0 = (cpu_seconds(&f.a), cpu_seconds(&f.b));
    let start = tokio::time::Instant::now();
    for i in 0..PAIRS {
        command(
            &f.a,
            &tx[i],
            json!({"send": PER_ZONE, "zone": rx[i], "per_tick": per_tick}),
        )
        .await;
    }
    let want = delivered0 + PAIRS as u64 * PER_ZONE;
    let mut samples = Vec::new();
    let deadline = start + Duration::from_secs(120);
    loop {
        let d = counter(&f.b, "zonekeep_bus_delivered").await;
        let refused = counter(&f.a, "zonekeep_bus_undeliverable_total").await;
        samples.push((start.elapsed(), d - delivered0));
        // Done when every message arrived or was refused to its sender.
        if d + refused >= want || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let took = start.elapsed();
    let cpu = (cpu_seconds(&f.a) - cpu0.0, cpu_seconds(&f.b) - cpu0.1);
    let s2 = snapshot().await;
    let delivered = samples.last().map_or(0, |s| s.1);
    let metrics = f.a.get("/metrics").await;
    let undeliverable: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("zonekeep_bus_undeliverable_total") && !l.ends_with(" 0"))
        .collect();
    // The steady rate: between a tenth and nine tenths of the messages.
    let at = |share: f64| {
        samples
            .iter()
            .find(|(_, n)| *n as f64 >= share * (PAIRS as u64 * PER_ZONE) as f64)
            .copied()
    };
    let steady = match (at(0.1), at(0.9)) {
        (Some((t0, n0)), Some((t1, n1))) if t1 > t0 => (n1 - n0) as f64 / (t1 - t0).as_secs_f64(),
        _ => 0.0,
    };
    println!(
        "zone messages across hosts, {per_tick} a tick from each of {PAIRS} zones: {delivered} of {} delivered in {:.2} s = {:.0} msgs/s overall, {steady:.0} msgs/s steady; undeliverable: {undeliverable:?}",
        PAIRS as u64 * PER_ZONE,
        took.as_secs_f64(),
        delivered as f64 / took.as_secs_f64(),
    );
    println!(
        "host CPU while sending: sender {:.2} cores, receiver {:.2} cores ({} CPUs here, shared with NATS and PostgreSQL)",
        cpu.0 / took.as_secs_f64(),
        cpu.1 / took.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for (i, host) in [
        "sender host",
        "receiver host",
        "sender host's bystander",
        "receiver host's bystander",
    ]
    .into_iter()
    .enumerate()
    {
        let (quiet, loaded) = (tick_p99(&s0[i], &s1[i]), tick_p99(&s1[i], &s2[i]));
        println!(
            "{host}: tick p99 under {:.2} ms quiet ({} ticks), under {:.2} ms while sending ({} ticks)",
            quiet.0 * 1000.0,
            quiet.1,
            loaded.0 * 1000.0,
            loaded.1
        );
    }
}
