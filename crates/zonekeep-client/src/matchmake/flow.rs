//! One search from creation to its match: probe the regions, queue, then wait with a heartbeat
//! that keeps the search alive beside long polls that follow its state. Every answer, whichever
//! path it came by, goes through one [`SearchTracker`], so the state only moves forward and the
//! assignment is handed out once.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::backoff::Backoff;
use super::{
    MatchError, MatchOptions, Matched, Matchmaker, Search, SearchState, SearchTracker,
    StateCallback,
};

/// What the flow knows of its search: the tracker and who to tell.
pub(super) struct Flow {
    pub(super) tracker: SearchTracker,
    pub(super) on_state: Option<StateCallback>,
}

impl Flow {
    /// Takes one answer: the match once assigned, [`MatchError::Ended`] once over without one.
    pub(super) fn observe(&mut self, s: &Search) -> Result<Option<Matched>, MatchError> {
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
pub(super) async fn search(
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
