//! What a caller hands [`matchmake`](super::matchmake()): the matchmaker, the ticket and the queue,
//! the timings of the wait, a progress callback, and the handle that cancels the search.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use zonekeep_protocol::limits::PROTOCOL_VERSION;

use super::Search;

/// A handle to cancel a running [`matchmake`](super::matchmake()): the search is deleted on the
/// matchmaker (best effort) and the call returns
/// [`MatchError::Cancelled`](super::MatchError::Cancelled). Clones cancel the same search.
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

    pub(super) async fn cancelled(&self) {
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

/// Everything [`matchmake`](super::matchmake()) needs.
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
