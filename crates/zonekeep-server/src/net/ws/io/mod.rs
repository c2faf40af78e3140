//! WebSocket I/O threads: each owns many attached connections and moves their bytes itself.
//!
//! Once a connection's Hello is admitted, its socket leaves the async runtime for one of these
//! threads (a `mio` poll loop). A zone's patch then costs each connection a frame pushed onto its
//! [`Link`] and, per I/O thread, one wake-up (not a task wake-up and a channel hop per frame);
//! the thread writes every frame waiting for its connections in one pass, one `write` per
//! connection, and reads each readable connection's inputs in a batch. This is the cheapest shape
//! the I/O floor benchmark found (BENCHMARKS.md, "The I/O floor").
//!
//! The guarantees of the per-connection shape stay: a slow reader is kicked, never waited for
//! (its frames wait in its link, bounded by `outbox_frames`, and unanswered read-progress Pings
//! end it), a connection's memory stays small while idle, and every hostile-input limit is the
//! same code ([`crate::session::handle_message`]).
//!
//! A relay serves its clients on the same threads: what a connection's messages mean is its
//! [`Peer`]'s, the host's participant or the relay's client.

mod peer;
mod session;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use zonekeep_protocol::messages::KickCode;

use crate::metrics::Metrics;
use crate::net::conn::{KickNotice, Offer};

pub(crate) use peer::{IoSettings, Peer};
pub(crate) use session::Arrival;

/// The mio token of a thread's waker; connections use their connection id (never 0).
const WAKER: mio::Token = mio::Token(0);

/// What the simulation and the I/O thread share of one connection: its frames not yet written
/// and a kick request. The simulation only pushes (never waits); the I/O thread takes them.
#[derive(Debug)]
pub(crate) struct Link {
    /// Connection id (the thread's key for it).
    pub(crate) id: u64,
    cap: usize,
    state: Mutex<LinkState>,
    /// On the thread's ready list already (one entry per batch, however many frames).
    scheduled: AtomicBool,
    home: Arc<IoThread>,
}

#[derive(Debug, Default)]
struct LinkState {
    frames: VecDeque<Bytes>,
    kick: Option<KickNotice>,
    /// An ending without a Kick was asked for (after the frames queued before it).
    close: bool,
    /// An ending was asked for (it stays true once the I/O thread took it).
    kicked: bool,
    closed: bool,
}

impl Link {
    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue a frame without waiting; a full link kicks the connection as a slow consumer.
    pub(crate) fn offer(self: &Arc<Self>, frame: Bytes) -> Offer {
        {
            let mut s = self.lock();
            if s.closed {
                return Offer::Closed;
            }
            if s.frames.len() >= self.cap {
                if !s.kicked {
                    s.kicked = true;
                    s.kick = Some(KickNotice {
                        code: KickCode::SLOW_CONSUMER,
                        reason: "outbox overflowed: the client is not reading fast enough".into(),
                    });
                }
                drop(s);
                self.schedule();
                return Offer::Overflowed;
            }
            s.frames.push_back(frame);
        }
        self.schedule();
        Offer::Queued
    }

    /// Ask the I/O thread to send a Kick and close; the first kick wins.
    pub(crate) fn kick(self: &Arc<Self>, notice: KickNotice) {
        {
            let mut s = self.lock();
            if s.closed || s.kicked {
                return;
            }
            s.kicked = true;
            s.kick = Some(notice);
        }
        self.schedule();
    }

    /// End the connection without a Kick once the frames queued before are written (the
    /// client was sent on: a Transfer was its last message); the first ending wins.
    pub(crate) fn close(self: &Arc<Self>) {
        {
            let mut s = self.lock();
            if s.closed || s.kicked {
                return;
            }
            s.kicked = true;
            s.close = true;
        }
        self.schedule();
    }

    /// Whether a kick was asked for.
    pub(crate) fn is_kicked(&self) -> bool {
        self.lock().kicked
    }

    fn schedule(self: &Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.home.push(|inbox| inbox.ready.push(Arc::clone(self)));
        }
    }

    /// Frames and ending waiting, taken by the I/O thread (`frames` is swapped with `into`, so
    /// neither side allocates per batch): `Some(Some(kick))` ends with a Kick now, `Some(None)`
    /// without one after the frames, so it waits while they cannot be taken.
    fn take(&self, into: &mut VecDeque<Bytes>, frames: bool) -> Option<Option<KickNotice>> {
        let mut s = self.lock();
        if frames {
            std::mem::swap(&mut s.frames, into);
        }
        if let Some(k) = s.kick.take() {
            return Some(Some(k));
        }
        if s.close && frames && s.frames.is_empty() {
            s.close = false;
            return Some(None);
        }
        None
    }

    /// The connection ended (or never reached its thread): later frames are refused, those
    /// waiting are dropped, and its thread stops counting it.
    fn retire(&self) {
        {
            let mut s = self.lock();
            s.closed = true;
            s.frames = VecDeque::new();
        }
        self.home.conns.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What reaches a thread from other threads between two of its polls.
#[derive(Default)]
struct Inbox {
    arrivals: Vec<Arrival>,
    ready: Vec<Arc<Link>>,
    shutdown: bool,
}

/// One I/O thread as other threads see it.
pub(crate) struct IoThread {
    inbox: Mutex<Inbox>,
    /// A wake-up is on its way (cleared by the thread just before it empties its inbox).
    wake_pending: AtomicBool,
    waker: mio::Waker,
    /// Connections the thread holds (for placing new ones on the least loaded thread).
    conns: AtomicUsize,
    /// Every connection's settings.
    settings: Arc<IoSettings>,
    /// Kicks and disconnects are counted here.
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for IoThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoThread")
            .field("conns", &self.conns.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl IoThread {
    fn push(&self, f: impl FnOnce(&mut Inbox)) {
        f(&mut self.inbox.lock().unwrap_or_else(|p| p.into_inner()));
        if !self.wake_pending.swap(true, Ordering::AcqRel) {
            if let Err(e) = self.waker.wake() {
                tracing::error!(error = %e, "waking a WebSocket I/O thread failed");
            }
        }
    }

    fn take_inbox(&self, into: &mut Inbox) {
        self.wake_pending.store(false, Ordering::Release);
        let mut inbox = self.inbox.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(&mut inbox.arrivals, &mut into.arrivals);
        std::mem::swap(&mut inbox.ready, &mut into.ready);
        into.shutdown |= inbox.shutdown;
    }
}

/// The host's WebSocket I/O threads.
#[derive(Debug)]
pub(crate) struct WsIo {
    first: Arc<IoThread>,
    rest: Vec<Arc<IoThread>>,
}

impl WsIo {
    /// Start `count` threads (at least one), named `{name}-{i}`, for connections of `settings`
    /// counted in `metrics`. They run until `owner` is gone or [`shutdown`](Self::shutdown),
    /// and their last connection ended.
    pub(crate) fn start<T: Send + Sync + 'static>(
        count: usize,
        name: &str,
        settings: IoSettings,
        metrics: &Arc<Metrics>,
        owner: &Arc<T>,
        runtime: tokio::runtime::Handle,
    ) -> std::io::Result<Self> {
        let settings = Arc::new(settings);
        let mut threads = Vec::new();
        for i in 0..count.max(1) {
            let poll = mio::Poll::new()?;
            let waker = mio::Waker::new(poll.registry(), WAKER)?;
            let thread = Arc::new(IoThread {
                inbox: Mutex::new(Inbox::default()),
                wake_pending: AtomicBool::new(false),
                waker,
                conns: AtomicUsize::new(0),
                settings: Arc::clone(&settings),
                metrics: Arc::clone(metrics),
            });
            let home = Arc::clone(&thread);
            let weak: Weak<T> = Arc::downgrade(owner);
            let rt = runtime.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    let _rt = rt.enter();
                    session::run(&home, poll, &|| weak.strong_count() > 0);
                })?;
            threads.push(thread);
        }
        let mut threads = threads.into_iter();
        let first = threads
            .next()
            .ok_or_else(|| std::io::Error::other("no WebSocket I/O thread"))?;
        Ok(Self {
            first,
            rest: threads.collect(),
        })
    }

    /// A link for a new connection, on the thread holding the fewest connections.
    pub(crate) fn link(&self, id: u64, cap: usize) -> Arc<Link> {
        let home = Arc::clone(self.rest.iter().fold(&self.first, |best, t| {
            if t.conns.load(Ordering::Relaxed) < best.conns.load(Ordering::Relaxed) {
                t
            } else {
                best
            }
        }));
        home.conns.fetch_add(1, Ordering::Relaxed);
        Arc::new(Link {
            id,
            cap: cap.max(1),
            state: Mutex::new(LinkState::default()),
            scheduled: AtomicBool::new(false),
            home,
        })
    }

    /// The settings its connections are served with.
    pub(crate) fn settings(&self) -> &IoSettings {
        &self.first.settings
    }

    /// Hand an admitted connection to its link's thread.
    pub(crate) fn attach(&self, arrival: Arrival) {
        let home = Arc::clone(&arrival.link.home);
        home.push(|inbox| inbox.arrivals.push(arrival));
    }

    /// A link whose connection never reached its thread (refused, moved, gone) stops counting.
    pub(crate) fn forget(&self, link: &Link) {
        link.retire();
    }

    /// Every thread.
    fn threads(&self) -> impl Iterator<Item = &Arc<IoThread>> {
        std::iter::once(&self.first).chain(&self.rest)
    }

    /// Let the threads end once their connections have (the host is shutting down).
    pub(crate) fn shutdown(&self) {
        for t in self.threads() {
            t.push(|inbox| inbox.shutdown = true);
        }
    }
}

impl Drop for WsIo {
    /// The owner is gone (it holds the threads' handle): wake every thread, so one asleep with
    /// no connection and nothing to time sees that and ends.
    fn drop(&mut self) {
        for t in self.threads() {
            t.push(|_| {});
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn link(cap: usize) -> (tokio::runtime::Runtime, WsIo, Arc<Link>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let owner = Arc::new(());
        let metrics = Arc::new(Metrics::new(0));
        let settings = IoSettings::of(&crate::config::ServerConfig::default());
        let io = WsIo::start(
            1,
            "test-io",
            settings,
            &metrics,
            &owner,
            rt.handle().clone(),
        )
        .unwrap();
        let link = io.link(1, cap);
        (rt, io, link)
    }

    fn frame(n: u8) -> Bytes {
        Bytes::from(vec![n])
    }

    #[test]
    fn a_close_goes_after_the_frames_queued_before_it() {
        let (_rt, io, link) = link(8);
        assert_eq!(link.offer(frame(1)), Offer::Queued);
        assert_eq!(link.offer(frame(2)), Offer::Queued);
        link.close();
        // A later ending does not replace the first.
        link.kick(KickNotice {
            code: KickCode::KICKED,
            reason: "late".into(),
        });
        let mut taken = VecDeque::new();
        // While the socket cannot take frames, the close waits behind them.
        assert!(link.take(&mut taken, false).is_none());
        assert!(taken.is_empty());
        // Once it can, the frames go first and the close (without a Kick) with them.
        assert!(matches!(link.take(&mut taken, true), Some(None)));
        assert_eq!(taken, VecDeque::from([frame(1), frame(2)]));
        assert!(
            link.take(&mut taken, true).is_none(),
            "the close is taken once"
        );
        io.forget(&link);
        assert_eq!(link.offer(frame(3)), Offer::Closed);
    }

    #[test]
    fn a_kick_ends_at_once_and_a_full_link_kicks_its_reader() {
        let (_rt, io, link) = link(2);
        assert_eq!(link.offer(frame(1)), Offer::Queued);
        assert_eq!(link.offer(frame(2)), Offer::Queued);
        assert_eq!(link.offer(frame(3)), Offer::Overflowed);
        let mut taken = VecDeque::new();
        // The socket is full, yet the slow reader's Kick is taken now: nobody waits for it.
        match link.take(&mut taken, false) {
            Some(Some(k)) => assert_eq!(k.code, KickCode::SLOW_CONSUMER),
            other => panic!("expected the slow consumer's Kick, got {other:?}"),
        }
        assert!(link.is_kicked());
        io.forget(&link);
    }

    #[test]
    fn an_idle_thread_ends_when_its_owner_goes() {
        let (rt, io, link) = link(1);
        io.forget(&link);
        drop(link);
        let thread = Arc::downgrade(&io.first);
        // The owner is gone already; the thread sleeps with nothing to time until its handle
        // goes too and wakes it.
        drop(io);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while thread.strong_count() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the I/O thread did not end"
            );
            std::thread::yield_now();
        }
        drop(rt);
    }
}
