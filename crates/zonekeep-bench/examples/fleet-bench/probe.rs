//! One measuring client per zone: the Rust client (`zonekeep_client::connect`) at a host's entry
//! URL, which follows the Redirect to the zone's owner and, when the transport drops or the host
//! says ZONE_MOVED, reconnects through the entry URL by itself — with the reconnect token first,
//! then as a new player with a fresh ticket. The probe sends no inputs; it only notes when each of
//! its sessions began and ended and when Deltas arrived in it, which is all the scenarios need.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use zonekeep_bench::tickets::Tickets;
use zonekeep_client::{connect, ConnectOptions, CountersSnapshot, Event, ReconnectPolicy};
use zonekeep_protocol::messages::KickCode;

/// One session: from a Welcome to the end of its transport.
#[derive(Debug, Clone)]
pub struct Session {
    /// When the Welcome arrived.
    pub welcomed: Instant,
    /// Whether the reconnect token resumed the same player (false: a new player).
    pub resumed: bool,
    /// The first Delta of the session.
    pub first_delta: Option<Instant>,
    /// The newest Delta of the session.
    pub last_delta: Option<Instant>,
    /// Deltas received in it.
    pub deltas: u64,
    /// When it ended (a Kick or the transport dropping, whichever came first).
    pub ended: Option<Instant>,
    /// The Kick that ended it, if one did.
    pub kick: Option<KickCode>,
}

/// What a probe has seen so far.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Sessions in order; the last one is current.
    pub sessions: Vec<Session>,
    /// `Disconnected` events (the transport dropped and the client began reconnecting).
    pub disconnects: u32,
    /// Why the connection ended for good, if it did.
    pub closed: Option<String>,
}

impl Session {
    /// A session welcomed at `welcomed` that has received no Delta yet.
    pub fn new(welcomed: Instant, resumed: bool) -> Session {
        Session {
            welcomed,
            resumed,
            first_delta: None,
            last_delta: None,
            deltas: 0,
            ended: None,
            kick: None,
        }
    }
}

impl Timeline {
    fn current(&mut self) -> Option<&mut Session> {
        self.sessions.last_mut()
    }
}

/// How probes reconnect: the client's own policy with bounds chosen for measuring the fleet.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// Largest wait between two reconnect attempts.
    pub max: Duration,
    /// Attempts before the client gives up.
    pub attempts: u32,
}

/// A running probe.
#[derive(Debug)]
pub struct Probe {
    /// The zone it plays in.
    pub zone: String,
    timeline: Arc<Mutex<Timeline>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<CountersSnapshot>,
}

impl Probe {
    /// Joins `zone` through `entry` (a zone URL at some host) as bot `bot`; returns once the
    /// handshake is done (Redirects followed), before the first Delta.
    pub async fn start(
        entry: &str,
        zone: &str,
        bot: u32,
        tickets: &Tickets,
        backoff: Backoff,
    ) -> Result<Probe, String> {
        let (_, ticket) = tickets.ticket(bot, zone).await.map_err(|e| e.to_string())?;
        let fresh = {
            let (tickets, zone) = (tickets.clone(), zone.to_owned());
            move || {
                let (tickets, zone) = (tickets.clone(), zone.clone());
                async move {
                    tickets
                        .ticket(bot, &zone)
                        .await
                        .map(|(_, t)| t)
                        .map_err(|e| e.to_string())
                }
            }
        };
        let mut opts = ConnectOptions::new(ticket).with_fresh_ticket(fresh);
        opts.reconnect = ReconnectPolicy {
            max_attempts: backoff.attempts,
            backoff_max: backoff.max,
            ..ReconnectPolicy::default()
        };
        let (mut conn, _welcome) = connect(entry, opts)
            .await
            .map_err(|e| format!("{zone}: {e}"))?;
        let timeline = Arc::new(Mutex::new(Timeline {
            sessions: vec![Session::new(Instant::now(), false)],
            ..Timeline::default()
        }));
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let log = Arc::clone(&timeline);
        let task = tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = &mut stop_rx => break,
                    e = conn.recv() => e,
                };
                let Some(event) = event else { break };
                let now = Instant::now();
                let closed = matches!(event, Event::Closed(_));
                record(&log, event, now);
                if closed {
                    break;
                }
            }
            let counters = conn.counters();
            conn.close().await;
            counters
        });
        Ok(Probe {
            zone: zone.to_owned(),
            timeline,
            stop: Some(stop_tx),
            task,
        })
    }

    /// A copy of the timeline now.
    pub fn timeline(&self) -> Timeline {
        self.timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Closes the connection; returns the client's counters and the final timeline.
    pub async fn finish(mut self) -> (CountersSnapshot, Timeline) {
        let timeline = Arc::clone(&self.timeline);
        if let Some(stop) = self.stop.take() {
            // An error means the task ended already (the connection closed).
            let _ = stop.send(());
        }
        let counters = self.task.await.unwrap_or_default();
        // The task has ended: nothing changes the timeline any more.
        let timeline = timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        (counters, timeline)
    }
}

/// Notes one event in the timeline.
fn record(log: &Mutex<Timeline>, event: Event, now: Instant) {
    let mut t = log.lock().unwrap_or_else(PoisonError::into_inner);
    match event {
        Event::Delta(_) => {
            if let Some(s) = t.current() {
                s.first_delta.get_or_insert(now);
                s.last_delta = Some(now);
                s.deltas += 1;
            }
        }
        Event::Kick(k) => {
            if let Some(s) = t.current() {
                s.kick.get_or_insert(k.code);
                s.ended.get_or_insert(now);
            }
        }
        Event::Disconnected { .. } => {
            t.disconnects += 1;
            if let Some(s) = t.current() {
                s.ended.get_or_insert(now);
            }
        }
        Event::Welcome { resumed, .. } => t.sessions.push(Session::new(now, resumed)),
        Event::Closed(reason) => {
            if let Some(s) = t.current() {
                s.ended.get_or_insert(now);
            }
            t.closed = Some(format!("{reason:?}"));
        }
        Event::Event { .. } | Event::InputRefused(_) | Event::Transfer(_) => {}
    }
}

/// Starts one probe per zone through `entry(zone)`, a few handshakes at a time; bot numbers are
/// the zones' indices.
pub async fn start_all(
    zones: &[String],
    entry: impl Fn(&str) -> String,
    tickets: &Tickets,
    backoff: Backoff,
) -> Result<Vec<Probe>, String> {
    use futures_util::StreamExt;
    let starts = zones.iter().enumerate().map(|(i, z)| {
        let url = entry(z);
        async move {
            let bot = u32::try_from(i).map_err(|e| e.to_string())?;
            Probe::start(&url, z, bot, tickets, backoff).await
        }
    });
    let started: Vec<Result<Probe, String>> = futures_util::stream::iter(starts)
        .buffer_unordered(16)
        .collect()
        .await;
    started.into_iter().collect()
}

/// Waits (up to `bound`) until `done` holds for every probe's timeline; returns whether it did.
pub async fn wait_all(probes: &[Probe], bound: Duration, done: impl Fn(&Timeline) -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if probes.iter().all(|p| done(&p.timeline())) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Closes every probe; their counters and timelines, in order.
pub async fn finish_all(probes: Vec<Probe>) -> Vec<(String, CountersSnapshot, Timeline)> {
    let mut out = Vec::new();
    for p in probes {
        let zone = p.zone.clone();
        let (c, t) = p.finish().await;
        out.push((zone, c, t));
    }
    out
}
