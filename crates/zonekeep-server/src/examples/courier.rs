//! [`Courier`]: a zone that sends numbered zone messages when told to and writes down exactly
//! what it receives, the smallest zone kind that exercises the cross-zone bus (docs/ARCHITECTURE.md
//! "Zone messages"), for tests, benchmarks and trying the bus by hand.
//!
//! Params: `{"groups": ["g", ...], "parent": "zone"}`, both optional: the groups it joins and
//! the parent it names when created (both are then saved with it by the host).
//!
//! A command is a JSON object, given as a player's input or as an operator's message of topic
//! [`TOPIC_COMMAND`] (`POST /admin/zones/{id}/messages`):
//! `{"send": N, "zone": Z}`, `{"send": N, "group": G}` or `{"send": N, "parent": true}` sends
//! N messages numbered from `"from"` (default 1), each an 8-byte little-endian number, on
//! `"topic"` (default [`TOPIC_NUMBERED`]), at most `"per_tick"` (1..=256, default 64) a tick, in
//! order. Commands queue behind each other.
//!
//! What it receives is kept in its [`Report`] (part of its save, so a test reads it from the
//! store) and sent to every participant as JSON in an event of topic [`TOPIC_REPORT`] on each
//! tick where it changed: per source and topic, the runs of consecutive numbers received (a
//! stream delivered in order and once is one run `[first, last]`), the events of its children
//! (tier changes and `to_parent` messages, kept the same way) and the sends that came back
//! undeliverable, by reason.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use zonekeep_core::{
    ChildEvent, Ctx, EventTarget, IdlePolicy, InputRefusal, MessageFrom, MessageTarget, PlayerId,
    SendError, Zone, ZoneConfig, ZoneError, ZoneInit,
};

/// Topic of an operator's command message (a JSON command).
pub const TOPIC_COMMAND: u16 = 1;
/// Default topic of the numbered messages a courier sends.
pub const TOPIC_NUMBERED: u16 = 2;
/// Event topic of the report (JSON), sent to everyone when it changed.
pub const TOPIC_REPORT: u16 = 1;
/// Most runs kept per source; past it the source is marked `truncated`.
const MAX_RUNS: usize = 256;
/// Most sources (and undeliverable reasons, and tier lines) kept.
const MAX_KEYS: usize = 64;
/// Most commands waiting.
const MAX_JOBS: usize = 64;
/// Longest undeliverable reason kept, in bytes.
const MAX_REASON: usize = 120;

/// The settings a host registers the kind with: the defaults, except that an empty courier goes
/// Idle after 2 s (so its parent hears a tier change soon) and keeps ticking at full rate there.
pub fn zone_config() -> ZoneConfig {
    ZoneConfig {
        idle_after: Duration::from_secs(2),
        idle_policy: IdlePolicy::Slow(1),
        ..ZoneConfig::default()
    }
}

/// A command, as JSON.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    send: u64,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    parent: bool,
    #[serde(default = "default_topic")]
    topic: u16,
    #[serde(default = "default_from")]
    from: u64,
    #[serde(default = "default_per_tick")]
    per_tick: u32,
}

fn default_topic() -> u16 {
    TOPIC_NUMBERED
}
fn default_from() -> u64 {
    1
}
fn default_per_tick() -> u32 {
    64
}

/// Where a job sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Dest {
    Zone(String),
    Group(String),
    Parent,
}

/// A command read from a player's input or an operator's message: messages still to send.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    to: Dest,
    topic: u16,
    next: u64,
    last: u64,
    per_tick: u32,
}

/// A parsed command: a job to queue.
fn parse_command(bytes: &[u8]) -> Result<Job, String> {
    let c: Command = serde_json::from_slice(bytes).map_err(|e| format!("bad command: {e}"))?;
    let to = match (c.zone, c.group, c.parent) {
        (Some(z), None, false) => Dest::Zone(z),
        (None, Some(g), false) => Dest::Group(g),
        (None, None, true) => Dest::Parent,
        _ => return Err("a command names exactly one of zone, group or parent".into()),
    };
    if c.topic == zonekeep_core::TIER_TOPIC {
        return Err("topic 65535 is reserved".into());
    }
    if !(1..=256).contains(&c.per_tick) {
        return Err("per_tick must be in 1..=256".into());
    }
    if c.send == 0 {
        return Err("send must be at least 1".into());
    }
    let last = c
        .from
        .checked_add(c.send - 1)
        .ok_or("the numbers overflow")?;
    Ok(Job {
        to,
        topic: c.topic,
        next: c.from,
        last,
        per_tick: c.per_tick,
    })
}

/// The runs of numbers received from one source on one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runs {
    /// How many messages arrived (duplicates and all).
    pub count: u64,
    /// `[first, last]` runs of consecutive numbers, in arrival order.
    pub runs: Vec<[u64; 2]>,
    /// More runs arrived than are kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Payloads that were no 8-byte number.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Runs {
    fn note(&mut self, payload: &[u8]) {
        self.count = self.count.saturating_add(1);
        let Ok(bytes) = <[u8; 8]>::try_from(payload) else {
            self.other = self.other.saturating_add(1);
            return;
        };
        let n = u64::from_le_bytes(bytes);
        let full = self.runs.len() >= MAX_RUNS;
        match self.runs.last_mut() {
            Some(run) if run[1].checked_add(1) == Some(n) => run[1] = n,
            _ if full => self.truncated = true,
            _ => self.runs.push([n, n]),
        }
    }
}

/// What a courier has received and sent: its save, and the JSON of its report event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Per `"<source>/<topic>"` (source `zone:<id>`, `admin` or `child:<id>`), what arrived.
    pub received: BTreeMap<String, Runs>,
    /// Tier changes of children, in arrival order: `"<child> <from>-><to>"`.
    pub tiers: Vec<String>,
    /// Messages handed to the host for sending.
    pub sent: u64,
    /// Sends the core refused (over its limits), retried at the next tick.
    pub refused: u64,
    /// Sends that came back undeliverable, per reason.
    pub undeliverable: BTreeMap<String, u64>,
    /// Commands that could not be read (the last reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_command: Option<String>,
}

impl Report {
    /// The runs received from `source` on `topic` (e.g. `("zone:a", 2)`), if any arrived.
    pub fn runs(&self, source: &str, topic: u16) -> Option<&Runs> {
        self.received.get(&format!("{source}/{topic}"))
    }

    fn note(&mut self, source: String, topic: u16, payload: &[u8]) {
        let key = format!("{source}/{topic}");
        if !self.received.contains_key(&key) && self.received.len() >= MAX_KEYS {
            return;
        }
        self.received.entry(key).or_default().note(payload);
    }
}

/// The saved state: the report and the commands not yet done.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Saved {
    report: Report,
    jobs: VecDeque<Job>,
}

/// The zone: sends what it is told to, and writes down what arrives.
#[derive(Debug)]
pub struct Courier {
    state: Saved,
    changed: bool,
}

impl Courier {
    /// What it has received and sent so far.
    pub fn report(&self) -> &Report {
        &self.state.report
    }

    fn queue(&mut self, job: Result<Job, String>) {
        match job {
            Ok(job) if self.state.jobs.len() < MAX_JOBS => self.state.jobs.push_back(job),
            Ok(_) => self.state.report.bad_command = Some("too many commands waiting".into()),
            Err(e) => self.state.report.bad_command = Some(e),
        }
        self.changed = true;
    }

    /// Sends what the jobs allow this tick, in order.
    fn run_jobs(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(job) = self.state.jobs.front_mut() {
            let mut budget = job.per_tick;
            while budget > 0 && job.next <= job.last {
                let payload = job.next.to_le_bytes();
                let sent = match &job.to {
                    Dest::Zone(z) => ctx.send(MessageTarget::Zone(z.clone()), job.topic, &payload),
                    Dest::Group(g) => {
                        ctx.send(MessageTarget::Group(g.clone()), job.topic, &payload)
                    }
                    Dest::Parent => ctx.to_parent(job.topic, &payload),
                };
                match sent {
                    Ok(()) => {
                        self.state.report.sent += 1;
                        job.next += 1;
                        budget -= 1;
                    }
                    // Over the core's per-tick or outbox limit: the rest wait for the next tick.
                    Err(SendError::RateLimited) => {
                        self.state.report.refused += 1;
                        self.changed = true;
                        return;
                    }
                    // Nothing later in this job can succeed: drop it, say why.
                    Err(e) => {
                        self.state.report.refused += 1;
                        self.state.report.bad_command = Some(e.to_string());
                        job.next = job.last.saturating_add(1);
                    }
                }
                self.changed = true;
            }
            if job.next > job.last {
                self.state.jobs.pop_front();
            }
            if budget == 0 {
                return;
            }
        }
    }
}

impl Zone for Courier {
    type Input = Job;

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let bad = |what: &str| ZoneError::InvalidParams(what.into());
        match init.params.get("groups") {
            None | Some(Value::Null) => {}
            Some(Value::Array(groups)) => {
                for g in groups {
                    let g = g.as_str().ok_or_else(|| bad("groups are strings"))?;
                    ctx.join_group(g)
                        .map_err(|e| bad(&format!("group {g:?}: {e}")))?;
                }
            }
            Some(_) => return Err(bad("groups must be an array of names")),
        }
        match init.params.get("parent") {
            None | Some(Value::Null) => {}
            Some(Value::String(p)) if p.is_empty() || p.len() > 128 || *p == init.zone_id => {
                return Err(bad("parent must be another zone's id of 1..=128 bytes"))
            }
            Some(Value::String(p)) => ctx.set_parent(Some(p)),
            Some(_) => return Err(bad("parent must be a zone id")),
        }
        Ok(Courier {
            state: Saved::default(),
            changed: false,
        })
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<Job, InputRefusal> {
        parse_command(payload).map_err(|e| InputRefusal::new(1, e))
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _player: PlayerId, job: Job) {
        self.queue(Ok(job));
    }

    fn on_message(&mut self, _ctx: &mut Ctx<'_>, from: &MessageFrom, topic: u16, payload: &[u8]) {
        match from {
            MessageFrom::Admin if topic == TOPIC_COMMAND => self.queue(parse_command(payload)),
            MessageFrom::Admin => self.state.report.note("admin".into(), topic, payload),
            MessageFrom::Zone(z) => self.state.report.note(format!("zone:{z}"), topic, payload),
        }
        self.changed = true;
    }

    fn on_child(&mut self, _ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>) {
        let report = &mut self.state.report;
        match event {
            ChildEvent::Tier { from, to } => {
                if report.tiers.len() < MAX_KEYS {
                    report.tiers.push(format!("{child} {from:?}->{to:?}"));
                }
            }
            ChildEvent::Message { topic, payload } => {
                report.note(format!("child:{child}"), topic, payload)
            }
        }
        self.changed = true;
    }

    fn on_undeliverable(
        &mut self,
        _ctx: &mut Ctx<'_>,
        _to: &MessageTarget,
        _topic: u16,
        reason: &str,
    ) {
        let mut reason = zonekeep_protocol::limits::clip(reason, MAX_REASON).to_owned();
        let map = &mut self.state.report.undeliverable;
        if !map.contains_key(&reason) && map.len() >= MAX_KEYS {
            reason = "other".into();
        }
        *map.entry(reason).or_default() += 1;
        self.changed = true;
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.run_jobs(ctx);
        if std::mem::take(&mut self.changed) {
            if let Ok(json) = serde_json::to_vec(&self.state.report) {
                ctx.emit_event(EventTarget::All, TOPIC_REPORT, json);
            }
        }
    }

    fn state_hash(&self) -> Option<u64> {
        let bytes = serde_json::to_vec(&self.state).unwrap_or_default();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Some(h)
    }

    fn save(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(&self.state).ok()
    }

    fn restore(_init: &ZoneInit, _ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        // Groups and the parent come back with the host's own part of the save.
        let state = serde_json::from_slice(bytes).map_err(|e| ZoneError::Restore(e.to_string()))?;
        Ok(Courier {
            state,
            changed: true,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn runs_show_order_gaps_and_duplicates() {
        let mut r = Runs::default();
        for n in [1u64, 2, 3, 5, 5, 6] {
            r.note(&n.to_le_bytes());
        }
        r.note(b"x");
        assert_eq!(r.runs, vec![[1, 3], [5, 5], [5, 6]]);
        assert_eq!(r.count, 7);
        assert_eq!(r.other, 1);
    }

    #[test]
    fn commands_are_checked() {
        let job = parse_command(br#"{"send": 3, "zone": "b", "from": 10}"#).unwrap();
        assert_eq!((job.next, job.last, job.topic), (10, 12, TOPIC_NUMBERED));
        assert_eq!(job.to, Dest::Zone("b".into()));
        for bad in [
            &br#"{"send": 3}"#[..],
            br#"{"send": 3, "zone": "b", "group": "g"}"#,
            br#"{"send": 0, "zone": "b"}"#,
            br#"{"send": 3, "zone": "b", "per_tick": 0}"#,
            br#"{"send": 3, "zone": "b", "topic": 65535}"#,
            br#"{"send": 2, "zone": "b", "from": 18446744073709551615}"#,
            br#"{"send": 3, "zone": "b", "extra": 1}"#,
            b"not json",
        ] {
            assert!(
                parse_command(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
