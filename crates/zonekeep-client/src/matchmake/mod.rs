//! Matchmaking (docs/MATCHMAKING.md): ask a matchmaker for a match, let it measure how far this
//! client is from each region, wait in its queue, and receive the zone and ticket of the match.
//!
//! [`matchmake`] runs the whole flow against a matchmaker's `/match` routes:
//!
//! 1. **create** a search with a ticket for `@match` (from the game's back end), the queue, this
//!    crate's protocol version and optionally the game's content version;
//! 2. **probe** every region the answer lists, all at once: the region's host measures the round
//!    trips itself, the client only answers its echoes (a region whose probe fails is skipped; when
//!    none succeeds the search is cancelled and the outcome is [`MatchError::NoProbeResult`]);
//! 3. **queue** the search;
//! 4. **wait**: a heartbeat every `heartbeat_secs` keeps the search alive while long polls follow
//!    its state (a network failure or a busy matchmaker is retried with backoff: the assignment is
//!    never lost, a later read answers it again);
//! 5. the first answer that carries an **assignment** ends the flow with a [`Matched`]: the zone's
//!    URL and a single-use ticket for it. [`matchmake_and_connect`] then opens the zone
//!    connection with the crate's [`connect`].
//!
//! Answers from the heartbeat and from the long poll arrive concurrently, so one can be older than
//! another, and an assignment can arrive twice. A [`SearchTracker`] sees every answer: its state
//! only ever moves forward, and it hands the assignment out exactly once, so the zone is connected
//! to once per match.
//!
//! A search ends without a match as [`MatchError::Ended`] when the matchmaker expires, fails or
//! cancels it, and as [`MatchError::Outdated`] when the game is below the matchmaker's version
//! floor (HTTP 426): show "update to keep playing", never retry. [`MatchError::retryable`] tells
//! the other outcomes apart: whether searching again may succeed.
//!
//! ```no_run
//! use zonekeep_client::{matchmake_and_connect, ConnectOptions, MatchOptions};
//!
//! # async fn run() -> Result<(), zonekeep_client::MatchError> {
//! let opts = MatchOptions::new("http://127.0.0.1:7350", "<ticket for @match>", "duel")
//!     .with_content_version("1.4.0");
//! match matchmake_and_connect(opts, ConnectOptions::new("")).await {
//!     Ok((matched, _conn, _welcome)) => println!("playing in {}", matched.assignment.zone),
//!     Err(e) if e.is_outdated() => println!("update to keep playing"),
//!     Err(e) if e.retryable() => println!("no match yet ({e}): search again"),
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```

mod http;
mod search;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zonekeep_protocol::limits::PROTOCOL_VERSION;
use zonekeep_protocol::Welcome;

pub use http::{Matchmaker, MAX_BODY, MAX_WAIT_MS};
pub use search::{Assignment, MatchError, Probe, Search, SearchState, SearchTracker};

use crate::connection::{connect, ConnectOptions, Connection};

/// A handle to cancel a running [`matchmake`]: the search is deleted on the matchmaker (best
/// effort) and the call returns [`MatchError::Cancelled`]. Clones cancel the same search.
#[derive(Debug, Clone, Default)]
pub struct MatchCancel {
    inner: Arc<CancelInner>,
}

#[derive(Debug, Default)]
struct CancelInner {
    cancelled: AtomicBool,
    notify: Notify,
}

impl MatchCancel {
    /// A handle not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels the search (before it started, it never starts).
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    async fn cancelled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read, so a cancel in between is not missed.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Called with each answer that moved the search forward.
pub type StateCallback = Arc<dyn Fn(&Search) + Send + Sync>;

/// Everything [`matchmake`] needs.
#[derive(Clone)]
pub struct MatchOptions {
    /// The matchmaker's `http://` base URL (a host serving `/match`).
    pub matchmaker: String,
    /// A ticket whose `zone` claim is `@match`, from the game's back end (single use).
    pub ticket: String,
    /// The queue to search in.
    pub queue: String,
    /// The protocol version announced (default: this crate's, [`PROTOCOL_VERSION`]).
    pub protocol_version: u32,
    /// The game content version announced, a dotted number such as `1.4.0` (default none).
    pub content_version: Option<String>,
    /// How long each long poll asks the matchmaker to hold (default 25 s; at most 30 s).
    pub wait_ms: u32,
    /// Time allowed for one request; a long poll gets its wait on top (default 10 s).
    pub request_timeout: Duration,
    /// First pause after a failed request while waiting; it doubles per failure up to
    /// `backoff_max`, each scaled by a random 50–100% (default 200 ms).
    pub backoff_min: Duration,
    /// Longest pause between retries (default 5 s). Retries stop once requests have failed for
    /// three heartbeat periods in a row: by then the search has lapsed.
    pub backoff_max: Duration,
    /// Cancels the search.
    pub cancel: Option<MatchCancel>,
    /// Called with each answer that moves the search forward (a progress display).
    pub on_state: Option<StateCallback>,
}

impl std::fmt::Debug for MatchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The ticket is a credential: never printed.
        f.debug_struct("MatchOptions")
            .field("matchmaker", &self.matchmaker)
            .field("queue", &self.queue)
            .field("protocol_version", &self.protocol_version)
            .field("content_version", &self.content_version)
            .field("wait_ms", &self.wait_ms)
            .field("request_timeout", &self.request_timeout)
            .field("backoff_min", &self.backoff_min)
            .field("backoff_max", &self.backoff_max)
            .field("cancel", &self.cancel.is_some())
            .field("on_state", &self.on_state.is_some())
            .finish_non_exhaustive()
    }
}

impl MatchOptions {
    /// Defaults around a matchmaker URL, a ticket for `@match` and a queue.
    pub fn new(
        matchmaker: impl Into<String>,
        ticket: impl Into<String>,
        queue: impl Into<String>,
    ) -> Self {
        Self {
            matchmaker: matchmaker.into(),
            ticket: ticket.into(),
            queue: queue.into(),
            protocol_version: PROTOCOL_VERSION,
            content_version: None,
            wait_ms: 25_000,
            request_timeout: Duration::from_secs(10),
            backoff_min: Duration::from_millis(200),
            backoff_max: Duration::from_secs(5),
            cancel: None,
            on_state: None,
        }
    }

    /// Sets the content version announced.
    pub fn with_content_version(mut self, version: impl Into<String>) -> Self {
        self.content_version = Some(version.into());
        self
    }

    /// Sets the handle that cancels the search.
    pub fn with_cancel(mut self, cancel: MatchCancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Sets the progress callback ([`MatchOptions::on_state`]).
    pub fn with_on_state(mut self, f: impl Fn(&Search) + Send + Sync + 'static) -> Self {
        self.on_state = Some(Arc::new(f));
        self
    }
}

/// A match was found: where to play.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    /// The answer that carried the assignment.
    pub search: Search,
    /// The zone and the ticket to join it with.
    pub assignment: Assignment,
}

/// Searches for a match (see the [module docs](self)) and returns the first assignment: the zone's
/// URL and a single-use ticket to connect with. Cancel it with [`MatchOptions::cancel`]; dropping
/// the future instead abandons the search, which the matchmaker expires after three heartbeat
/// periods.
pub async fn matchmake(opts: MatchOptions) -> Result<Matched, MatchError> {
    let mm = Matchmaker::new(&opts.matchmaker)?.with_timeout(opts.request_timeout);
    let created = OnceLock::new();
    let result = match opts.cancel.clone() {
        Some(cancel) => {
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(MatchError::Cancelled),
                r = search(&mm, &opts, &created) => r,
            }
        }
        None => search(&mm, &opts, &created).await,
    };
    if let (Err(e), Some((id, token))) = (&result, created.get()) {
        // A search the matchmaker did not end is deleted rather than left to lapse.
        if !matches!(e, MatchError::Ended { .. }) {
            if let Err(why) = mm.cancel(id, token).await {
                tracing::debug!(search = %id, "cancelling the search failed: {why}");
            }
        }
    }
    result
}

/// [`matchmake`], then joins the match's zone with [`connect`] at the
/// assignment's URL, with `connect_opts` and the assignment's ticket (whatever ticket
/// `connect_opts` holds is replaced). A failed join is [`MatchError::Connect`].
pub async fn matchmake_and_connect(
    opts: MatchOptions,
    connect_opts: ConnectOptions,
) -> Result<(Matched, Connection, Welcome), MatchError> {
    let matched = matchmake(opts).await?;
    let mut connect_opts = connect_opts;
    connect_opts.ticket = matched.assignment.ticket.clone();
    let (conn, welcome) = connect(&matched.assignment.url, connect_opts)
        .await
        .map_err(MatchError::Connect)?;
    Ok((matched, conn, welcome))
}

/// What the flow knows of its search: the tracker and who to tell.
struct Flow {
    tracker: SearchTracker,
    on_state: Option<StateCallback>,
}

impl Flow {
    /// Takes one answer: the match once assigned, [`MatchError::Ended`] once over without one.
    fn observe(&mut self, s: &Search) -> Result<Option<Matched>, MatchError> {
        let before = self.tracker.state();
        let assignment = self.tracker.observe(s);
        let now = self.tracker.state();
        if now != before {
            if let Some(f) = &self.on_state {
                f(s);
            }
        }
        if let Some(assignment) = assignment {
            return Ok(Some(Matched {
                search: s.clone(),
                assignment,
            }));
        }
        match now {
            Some(state) if now != before && state.is_final() => Err(MatchError::Ended {
                state,
                reason: s.reason.clone(),
            }),
            _ => Ok(None),
        }
    }
}

/// Pauses between retries of failing requests, and gives up after a while.
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    patience: Duration,
    failing_since: Option<Instant>,
    rng: Xoshiro256PlusPlus,
}

impl Backoff {
    fn new(opts: &MatchOptions, heartbeat_secs: u32) -> Self {
        // Jitter only needs to differ between clients, not be unpredictable.
        let seed = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
        Self {
            min: opts.backoff_min,
            max: opts.backoff_max.max(opts.backoff_min),
            next: opts.backoff_min,
            patience: Duration::from_secs(3 * u64::from(heartbeat_secs.max(1))),
            failing_since: None,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    fn reset(&mut self) {
        self.next = self.min;
        self.failing_since = None;
    }

    /// The pause before retrying after `err`, or `err` when failures have lasted too long.
    fn pause(&mut self, err: MatchError) -> Result<Duration, MatchError> {
        let since = *self.failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.patience {
            return Err(err);
        }
        let unit = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let pause = self.next.mul_f64(0.5 + 0.5 * unit);
        self.next = self.next.saturating_mul(2).min(self.max);
        Ok(pause)
    }
}

/// The heartbeat task, stopped when dropped.
struct Heartbeat(Option<JoinHandle<()>>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

impl Heartbeat {
    /// Heartbeats every `period`, sending each answer to `answers`.
    fn start(
        mm: Matchmaker,
        id: String,
        token: String,
        period: Duration,
        answers: mpsc::Sender<Search>,
    ) -> Self {
        Self(Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match mm.heartbeat(&id, &token).await {
                    Ok(s) => {
                        if answers.send(s).await.is_err() {
                            return;
                        }
                    }
                    // A search that is over shows in the long poll; a network failure is
                    // retried at the next tick.
                    Err(e) => tracing::debug!(search = %id, "heartbeat failed: {e}"),
                }
            }
        })))
    }

    /// Stops the task and waits until it is gone, so no heartbeat outlives the search's flow.
    async fn stop(mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

/// The flow until a match, the search ending, or a failure; the created search's id and token go
/// into `created` so the caller can cancel it.
async fn search(
    mm: &Matchmaker,
    opts: &MatchOptions,
    created: &OnceLock<(String, String)>,
) -> Result<Matched, MatchError> {
    let first = mm
        .create_search(
            &opts.ticket,
            &opts.queue,
            opts.protocol_version,
            opts.content_version.as_deref(),
        )
        .await?;
    let id = first.search.clone();
    let token = first.token.clone().unwrap_or_default();
    let _ = created.set((id.clone(), token.clone()));
    let mut flow = Flow {
        tracker: SearchTracker::new(),
        on_state: opts.on_state.clone(),
    };
    if let Some(m) = flow.observe(&first)? {
        return Ok(m);
    }

    let measured = futures_util::future::join_all(first.probes.iter().map(|p| async move {
        let r = mm.probe(p).await;
        if let Err(e) = &r {
            tracing::debug!(region = %p.region, "probe failed: {e}");
        }
        r
    }))
    .await;
    if !measured.iter().any(Result::is_ok) {
        return Err(MatchError::NoProbeResult);
    }

    // Queue. A retry refused with `wrong_state` means an earlier attempt got through.
    let mut backoff = Backoff::new(opts, first.heartbeat_secs);
    let mut retried = false;
    let queued = loop {
        match mm.queue(&id, &token).await {
            Ok(s) => break Some(s),
            Err(MatchError::Refused { code, .. }) if retried && code == "wrong_state" => {
                break None
            }
            Err(e) if e.transient() => {
                retried = true;
                tokio::time::sleep(backoff.pause(e)?).await;
            }
            Err(e) => return Err(e),
        }
    };
    let mut heartbeat_secs = first.heartbeat_secs;
    let mut poll_state = None;
    if let Some(s) = &queued {
        heartbeat_secs = s.heartbeat_secs;
        poll_state = Some(s.state);
        if let Some(m) = flow.observe(s)? {
            return Ok(m);
        }
    }

    let (tx, mut beats) = mpsc::channel(4);
    let period = Duration::from_secs(u64::from(heartbeat_secs.max(1)));
    let heartbeat = Heartbeat::start(mm.clone(), id.clone(), token.clone(), period, tx);
    let waiting = Waiting {
        mm,
        opts,
        id: &id,
        token: &token,
        heartbeat_secs,
    };
    let result = waiting.wait(poll_state, &mut flow, &mut beats).await;
    heartbeat.stop().await;
    result
}

/// A queued search being waited on.
struct Waiting<'a> {
    mm: &'a Matchmaker,
    opts: &'a MatchOptions,
    id: &'a str,
    token: &'a str,
    heartbeat_secs: u32,
}

impl Waiting<'_> {
    /// Long polls (and takes the heartbeat's answers) until the search is assigned or over.
    async fn wait(
        &self,
        mut poll_state: Option<SearchState>,
        flow: &mut Flow,
        beats: &mut mpsc::Receiver<Search>,
    ) -> Result<Matched, MatchError> {
        let (mm, opts) = (self.mm, self.opts);
        let mut backoff = Backoff::new(opts, self.heartbeat_secs);
        loop {
            let read = mm.read(self.id, self.token, Some(opts.wait_ms), poll_state);
            tokio::pin!(read);
            let answer = loop {
                tokio::select! {
                    r = &mut read => break r,
                    Some(s) = beats.recv() => if let Some(m) = flow.observe(&s)? {
                        return Ok(m);
                    },
                }
            };
            match answer {
                Ok(s) => {
                    backoff.reset();
                    // The next poll waits for a change from what the matchmaker said last, even when
                    // that is older than the furthest state seen: a poll against a state the search
                    // left would answer at once, again and again.
                    poll_state = Some(s.state);
                    if let Some(m) = flow.observe(&s)? {
                        return Ok(m);
                    }
                }
                Err(e) if e.transient() => {
                    let pause = tokio::time::sleep(backoff.pause(e)?);
                    tokio::pin!(pause);
                    loop {
                        tokio::select! {
                            () = &mut pause => break,
                            Some(s) = beats.recv() => if let Some(m) = flow.observe(&s)? {
                                return Ok(m);
                            },
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(state: &str, assignment: Option<(&str, &str)>) -> Search {
        let assignment = assignment.map(|(m, ticket)| {
            serde_json::json!({
                "match": m, "zone": format!("duel-{m}"), "kind": "arena",
                "url": format!("ws://127.0.0.1:1/zones/duel-{m}"), "host": "h1",
                "ticket": ticket, "expires_at": 1_790_000_000u64, "players": ["alice", "bob"]
            })
        });
        let json = serde_json::json!({
            "search": "s-1", "queue": "duel", "state": state, "reason": null,
            "rtt_ms": {"eu": 12, "us": 81.4}, "region": "eu", "heartbeat_secs": 10,
            "probes": [], "assignment": assignment,
        });
        Search::from_json(json.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_doc_search_is_read() {
        let body = br#"{
          "search": "s-9", "queue": "duel", "state": "assigned", "reason": null,
          "rtt_ms": {"eu": 12, "us": 81}, "region": "eu",
          "heartbeat_secs": 10, "token": "tok",
          "probes": [{"region": "eu", "url": "http://eu.example:7350", "challenge": "c1"}],
          "assignment": {
            "match": "m-1", "zone": "duel-1", "kind": "arena", "url": "ws://h/zones/duel-1",
            "host": "h", "ticket": "t.k.s", "expires_at": 1790000000, "players": ["alice", "bob"]
          }
        }"#;
        let s = Search::from_json(body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.search.as_str(), s.state), ("s-9", SearchState::Assigned));
        assert_eq!(s.rtt_ms.get("us"), Some(&81));
        assert_eq!(s.probes[0].challenge, "c1");
        assert_eq!(s.token.as_deref(), Some("tok"));
        let a = s
            .assignment
            .as_ref()
            .unwrap_or_else(|| panic!("no assignment"));
        assert_eq!((a.match_id.as_str(), a.ticket.as_str()), ("m-1", "t.k.s"));
        assert_eq!(a.players, ["alice", "bob"]);
        // Credentials stay out of logs.
        let printed = format!("{s:?}");
        assert!(
            !printed.contains("t.k.s") && !printed.contains("\"tok\""),
            "{printed}"
        );

        let probing = Search::from_json(br#"{"search":"s-1","state":"probing","rtt_ms":null}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(probing.heartbeat_secs, 10);
        assert!(probing.rtt_ms.is_empty() && probing.assignment.is_none());
        assert_eq!(answer("queued", None).rtt_ms.get("us"), Some(&81));
    }

    #[test]
    fn answers_off_the_contract_are_malformed() {
        for bad in [
            &b""[..],
            b"[]",
            b"{\"search\":\"s-1\"}",
            b"{\"search\":\"\",\"state\":\"queued\"}",
            b"{\"search\":\"s-1\",\"state\":\"dancing\"}",
            b"{\"search\":\"s-1\",\"state\":\"assigned\"}",
            b"{\"search\":\"s-1\",\"state\":\"queued\",\"rtt_ms\":{\"eu\":-1}}",
            br#"{"search":"s-1","state":"assigned","assignment":{"match":"m","zone":"z","kind":"k",
                "url":"http://h/zones/z","ticket":"t","expires_at":1}}"#,
            br#"{"search":"s-1","state":"assigned","assignment":{"match":"m","zone":"z","kind":"k",
                "url":"ws://h/zones/z","ticket":"","expires_at":1}}"#,
        ] {
            let r = Search::from_json(bad);
            assert!(
                matches!(r, Err(MatchError::Malformed(_))),
                "{}: {r:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn states_rank_in_the_order_of_the_flow() {
        use SearchState::*;
        let flow = [Probing, Queued, Proposed, Allocated, Assigned, Connected];
        assert!(flow.windows(2).all(|w| w[0].rank() < w[1].rank()));
        for end in [Cancelled, Expired, Failed] {
            assert!(end.is_final() && end.rank() > Connected.rank());
        }
        assert!(Connected.is_final() && !Assigned.is_final());
        assert_eq!(Allocated.to_string(), "allocated");
    }

    #[test]
    fn the_assignment_is_handed_out_once() {
        let mut t = SearchTracker::new();
        assert_eq!(t.observe(&answer("probing", None)), None);
        assert_eq!(t.observe(&answer("queued", None)), None);
        let a = t.observe(&answer("assigned", Some(("m-1", "t1"))));
        assert_eq!(a.map(|a| a.ticket), Some("t1".to_owned()));
        assert!(t.handed_out());
        // The same assignment again (a heartbeat and a poll both answered it)...
        assert_eq!(t.observe(&answer("assigned", Some(("m-1", "t1")))), None);
        // ...another one, and the player arriving: nothing more to connect to.
        assert_eq!(t.observe(&answer("assigned", Some(("m-2", "t2")))), None);
        assert_eq!(t.observe(&answer("connected", Some(("m-1", "t1")))), None);
        assert_eq!(t.state(), Some(SearchState::Connected));
    }

    #[test]
    fn older_answers_never_move_the_state_back() {
        let mut t = SearchTracker::new();
        assert_eq!(t.observe(&answer("allocated", None)), None);
        assert_eq!(t.observe(&answer("queued", None)), None);
        assert_eq!(t.state(), Some(SearchState::Allocated));
        assert!(t
            .observe(&answer("assigned", Some(("m-1", "t1"))))
            .is_some());
        for older in ["probing", "queued", "proposed", "allocated"] {
            assert_eq!(t.observe(&answer(older, None)), None);
            assert_eq!(t.state(), Some(SearchState::Assigned), "{older}");
        }
    }

    #[test]
    fn a_missed_assigned_answer_is_handed_out_from_connected() {
        let mut t = SearchTracker::new();
        t.observe(&answer("queued", None));
        let a = t.observe(&answer("connected", Some(("m-1", "t1"))));
        assert_eq!(a.map(|a| a.match_id), Some("m-1".to_owned()));
        assert_eq!(t.observe(&answer("assigned", Some(("m-1", "t1")))), None);
    }

    #[test]
    fn a_final_state_is_final() {
        let mut t = SearchTracker::new();
        t.observe(&answer("queued", None));
        assert_eq!(t.observe(&answer("expired", None)), None);
        // An assignment read after the search expired (an older answer) is not handed out.
        assert_eq!(t.observe(&answer("assigned", Some(("m-1", "t1")))), None);
        assert_eq!(t.observe(&answer("cancelled", None)), None);
        assert_eq!(t.state(), Some(SearchState::Expired));
        assert!(!t.handed_out());
    }

    #[test]
    fn the_flow_reports_progress_and_endings() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let mut flow = Flow {
            tracker: SearchTracker::new(),
            on_state: Some(Arc::new(move |s: &Search| {
                log.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(s.state);
            })),
        };
        for state in ["probing", "queued", "queued", "proposed", "queued"] {
            assert!(matches!(flow.observe(&answer(state, None)), Ok(None)));
        }
        let mut expired = answer("expired", None);
        expired.reason = Some("no_heartbeat".into());
        let ended = flow.observe(&expired);
        assert!(
            matches!(&ended, Err(MatchError::Ended { state: SearchState::Expired, reason: Some(r) }) if r == "no_heartbeat"),
            "{ended:?}"
        );
        assert!(ended.is_err_and(|e| e.retryable() && !e.is_outdated()));
        let seen = seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        use SearchState::*;
        assert_eq!(seen, [Probing, Queued, Proposed, Expired]);
    }

    #[test]
    fn which_outcomes_are_worth_a_new_search() {
        let refused = |code: &str, status: u16, retryable| MatchError::Refused {
            status,
            code: code.into(),
            message: String::new(),
            retryable,
        };
        assert!(MatchError::Network("down".into()).retryable());
        assert!(MatchError::NoProbeResult.retryable());
        assert!(refused("unavailable", 503, true).retryable());
        assert!(!refused("unauthorized", 401, false).retryable());
        assert!(!MatchError::Outdated {
            message: String::new()
        }
        .retryable());
        assert!(!MatchError::Malformed(String::new()).retryable());
        assert!(!MatchError::Cancelled.retryable());
        // Only network failures and a busy matchmaker are retried within a search.
        assert!(MatchError::Network(String::new()).transient());
        assert!(refused("unavailable", 503, true).transient());
        assert!(!refused("no_search", 404, false).transient());
        assert!(!MatchError::Outdated {
            message: String::new()
        }
        .transient());
    }

    #[test]
    fn backoff_grows_within_its_bounds() {
        let mut opts = MatchOptions::new("http://h:1", "t", "q");
        opts.backoff_min = Duration::from_millis(100);
        opts.backoff_max = Duration::from_millis(400);
        let mut b = Backoff::new(&opts, 10);
        let pauses: Vec<Duration> = (0..5)
            .map(|_| {
                b.pause(MatchError::Network(String::new()))
                    .unwrap_or_default()
            })
            .collect();
        for (p, nominal) in pauses.iter().zip([100, 200, 400, 400, 400]) {
            let nominal = Duration::from_millis(nominal);
            assert!(*p >= nominal / 2 && *p <= nominal, "{p:?} for {nominal:?}");
        }
        b.reset();
        let p = b
            .pause(MatchError::Network(String::new()))
            .unwrap_or_default();
        assert!(p <= Duration::from_millis(100));
    }
}
