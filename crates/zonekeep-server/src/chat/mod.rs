//! Chat and its moderation (docs/CHAT.md): channels per zone, per zone group and between two
//! principals, over a session's own connection (PROTOCOL.md §4.7–§4.9, §5.11–§5.12) and over
//! HTTP for the application's back end and its moderators.
//!
//! The sender of a line is always the principal of the session's verified ticket (or the one
//! the back end names). A line is heard only once the store kept it ([`feed`]); the store keeps
//! a bounded history per channel, sent to a session before the lines it hears live ([`hub`]).
//! Mutes and bans hold per zone, per zone group (a world) or fleet-wide, until they expire or
//! are lifted, on every host ([`sanctions`]); every action and every report is in the audit log.
//! A report files the store's copy of the reported lines, never the reporter's.
//!
//! Chat needs a store: a host without one answers chat messages NOT_ALLOWED and its routes
//! `chat_off`.

pub(crate) mod channel;
mod feed;
pub(crate) mod hub;
pub(crate) mod routes;
pub(crate) mod sanctions;
pub(crate) mod scope;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use zonekeep_protocol::messages::{
    Chat as ChatSay, ChatHistory, ChatReply, ChatReplyCode as Code, ChatReport, ServerMessage,
};
use zonekeep_store::{ChatStore, NewLine, NewReport, StoreError};

use channel::{check_body, Channel, Seat};
use hub::{Hub, Member};

use crate::host::Shared;
use crate::metrics::ChatMetrics;
use crate::net::conn::ConnHandle;
use crate::sim::{now_ms, ZoneEntry};

pub(crate) use feed::Pending;

/// Most history reads and reports in flight on a host; past it a request is answered
/// UNAVAILABLE (retry).
const MAX_TASKS: usize = 256;

/// What chat takes from the host's configuration.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Lines kept per channel.
    pub keep: u32,
    /// Longest line taken, bytes.
    pub max_line: usize,
    /// Lines of each channel sent as a session attaches.
    pub history: u32,
}

/// Chat on this host.
pub(crate) struct Chat {
    pub store: Arc<dyn ChatStore>,
    pub config: Settings,
    pub hub: Hub,
    pub sanctions: sanctions::Sanctions,
    pub feed: feed::Feed,
    pub metrics: ChatMetrics,
    queue: mpsc::Sender<Pending>,
    limiter: DefaultKeyedRateLimiter<String>,
    tasks: Arc<Semaphore>,
    host_id: String,
}

/// Starts chat on a host with a store (once it joined its fleet): the writer, the feed from
/// the newest line kept now, and the sanctions' reader, all stopped by `shared.fleet_stop`.
pub(crate) async fn start(shared: &Arc<Shared>, host_id: &str) -> Result<(), StoreError> {
    let Some(persist) = shared.sim.persist.clone() else {
        return Ok(());
    };
    let store = Arc::clone(&persist.store().chat);
    let last = store.last_line_id().await?;
    let cfg = &shared.config;
    let (queue, rx) = mpsc::channel(feed::QUEUE);
    let period = Duration::from_secs_f64(1.0 / cfg.chat_rate);
    let quota = Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(NonZeroU32::new(cfg.chat_burst).unwrap_or(NonZeroU32::MIN));
    let chat = Arc::new(Chat {
        store,
        config: Settings {
            keep: cfg.chat_keep,
            max_line: usize::try_from(cfg.chat_max_line).unwrap_or(usize::MAX),
            history: cfg.chat_history,
        },
        hub: Hub::default(),
        sanctions: sanctions::Sanctions::default(),
        feed: std::sync::Mutex::new(feed::Cursor::after(last)),
        metrics: shared.metrics.chat().clone(),
        queue,
        limiter: DefaultKeyedRateLimiter::keyed(quota),
        tasks: Arc::new(Semaphore::new(MAX_TASKS)),
        host_id: host_id.to_owned(),
    });
    // The sanctions in force before the first session is admitted.
    match chat.store.active_sanctions(now_ms(), 100_000).await {
        Ok(all) => chat.sanctions.replace(all),
        Err(e) => tracing::warn!(error = %e, "reading the sanctions in force failed"),
    }
    let stop = shared.fleet_stop.clone();
    tokio::spawn(feed::write(Arc::clone(&chat), rx));
    tokio::spawn(feed::follow(Arc::clone(&chat), stop.clone()));
    tokio::spawn(sanctions::run(Arc::clone(&chat), stop));
    let _ = shared.chat.set(chat);
    Ok(())
}

/// A ChatReply frame.
pub(crate) fn reply(reference: u32, code: Code, until_ms: u64, text: impl Into<String>) -> Bytes {
    let mut text: String = text.into();
    if text.len() > 1024 {
        let mut cut = 1024;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let msg = ServerMessage::ChatReply(ChatReply {
        reference,
        code,
        until_ms,
        text,
    });
    msg.to_bytes(None).map(Bytes::from).unwrap_or_default()
}

/// A session's place in chat: registered while it lives, forgotten when it ends.
pub(crate) struct ChatSeat {
    chat: Arc<Chat>,
    pub member: Arc<Member>,
}

impl ChatSeat {
    /// The host's chat.
    pub fn chat(&self) -> &Arc<Chat> {
        &self.chat
    }
}

impl Drop for ChatSeat {
    fn drop(&mut self) {
        self.chat.hub.unregister(&self.member);
    }
}

impl Chat {
    /// This host's id, as its lines name it.
    pub fn host_id(&self) -> &str {
        &self.host_id
    }

    /// Registers an attached session (protocol version 11 or later) and sends it the history of
    /// its zone's channels before anything it hears live.
    pub fn seat(
        self: &Arc<Self>,
        principal: &str,
        entry: Arc<ZoneEntry>,
        conn: ConnHandle,
    ) -> ChatSeat {
        let member = self.hub.register(principal, entry, conn);
        let chat = Arc::clone(self);
        let m = Arc::clone(&member);
        tokio::spawn(async move { chat.send_history(&m).await });
        ChatSeat {
            chat: Arc::clone(self),
            member,
        }
    }

    async fn send_history(&self, m: &Arc<Member>) {
        let mut through = std::collections::HashMap::new();
        let mut channels = vec![Channel::Zone(m.entry.zone_id.clone())];
        channels.extend(m.groups().into_iter().map(Channel::Group));
        if self.config.history > 0 {
            let _permit = self.tasks.acquire().await;
            for ch in channels {
                let key = ch.key();
                let read = crate::host::bounded_store_call(self.store.lines(
                    &key,
                    None,
                    self.config.history,
                ))
                .await;
                match read {
                    // Sent even when empty: the client learns the channel's history is complete.
                    Ok(lines) => {
                        through.insert(key, lines.last().map_or(0, |l| l.seq));
                        let wire = lines.into_iter().map(wire_line).collect();
                        m.send(
                            hub::lines_frame(&ch.wire_name(&m.principal), true, 0, wire),
                            &self.metrics,
                        );
                    }
                    Err(e) => {
                        self.metrics.store_failed();
                        tracing::warn!(channel = %ch, error = ?e, "reading a channel's history failed");
                    }
                }
            }
        }
        m.history_sent(through, &self.metrics);
    }

    /// Where `m` stands now.
    fn seat_of<'a>(m: &'a Member, groups: &'a [String]) -> Seat<'a> {
        Seat {
            principal: &m.principal,
            zone: &m.entry.zone_id,
            groups,
        }
    }

    /// Takes one principal's line against its rate; the time it may speak again when over.
    fn allow(&self, principal: &str) -> Result<(), u64> {
        match self.limiter.check_key(&principal.to_owned()) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Err(now_ms().saturating_add(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)))
            }
        }
    }

    /// A line a session says: refused at once (the returned frame), or queued for the store
    /// and heard by everyone on the channel once kept.
    pub fn say(&self, m: &Arc<Member>, said: ChatSay) -> Option<Bytes> {
        let r = said.reference;
        let groups = m.groups();
        let seat = Self::seat_of(m, &groups);
        let channel = match Channel::from_wire(&said.channel, &m.principal) {
            Ok(c) => c,
            Err(e) => return Some(self.refuse(r, Code::INVALID, 0, e.to_string(), "invalid")),
        };
        if !seat.hears(&channel) {
            return Some(self.refuse(
                r,
                Code::NOT_ALLOWED,
                0,
                format!("{} is not a channel of this session", said.channel),
                "not_allowed",
            ));
        }
        if let Err(why) = check_body(&said.body, self.config.max_line) {
            return Some(self.refuse(r, Code::INVALID, 0, why, "invalid"));
        }
        if let Some(mute) = self.sanctions.mute_of(&seat, &channel) {
            let text = format!(
                "muted in {} until {}: {}",
                mute.scope, mute.until_ms, mute.reason
            );
            return Some(self.refuse(r, Code::MUTED, mute.until_ms, text, "muted"));
        }
        if let Err(until) = self.allow(&m.principal) {
            let text = "too many lines: wait before the next";
            return Some(self.refuse(r, Code::RATE_LIMITED, until, text, "rate_limited"));
        }
        let line = NewLine {
            channel: channel.key(),
            sender: m.principal.clone(),
            body: said.body,
            sent_at_ms: now_ms(),
            host_id: Some(self.host_id.clone()),
        };
        let pending = Pending {
            line,
            answer: feed::Answer::Session(Arc::clone(m), r),
        };
        if self.queue.try_send(pending).is_err() {
            let text = "this host's chat is behind: retry shortly";
            return Some(self.refuse(r, Code::UNAVAILABLE, 0, text, "queue_full"));
        }
        None
    }

    /// A line the back end says as `sender`: kept and heard, or why not.
    pub async fn say_as(
        &self,
        channel: &Channel,
        sender: &str,
        body: &str,
    ) -> Result<zonekeep_store::StoredLine, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let pending = Pending {
            line: NewLine {
                channel: channel.key(),
                sender: sender.to_owned(),
                body: body.to_owned(),
                sent_at_ms: now_ms(),
                host_id: Some(self.host_id.clone()),
            },
            answer: feed::Answer::Http(tx),
        };
        self.queue
            .try_send(pending)
            .map_err(|_| "this host's chat is behind: retry shortly".to_owned())?;
        rx.await.map_err(|_| "the chat writer stopped".to_owned())?
    }

    fn refuse(
        &self,
        reference: u32,
        code: Code,
        until: u64,
        text: impl Into<String>,
        why: &'static str,
    ) -> Bytes {
        self.metrics.refused(why);
        reply(reference, code, until, text)
    }

    /// The channel a session names for a history read or a report, if it hears it, with a task
    /// permit: or the refusal to send it.
    fn open(
        &self,
        m: &Member,
        reference: u32,
        name: &str,
    ) -> Result<(Channel, OwnedSemaphorePermit), Bytes> {
        let channel = Channel::from_wire(name, &m.principal)
            .map_err(|e| self.refuse(reference, Code::INVALID, 0, e.to_string(), "invalid"))?;
        if !m.hears(&channel) {
            let text = format!("{name} is not a channel of this session");
            return Err(self.refuse(reference, Code::NOT_ALLOWED, 0, text, "not_allowed"));
        }
        let permit = Arc::clone(&self.tasks).try_acquire_owned().map_err(|_| {
            let text = "this host's chat is busy: retry shortly";
            self.refuse(reference, Code::UNAVAILABLE, 0, text, "busy")
        })?;
        Ok((channel, permit))
    }

    /// The answer to a request the store did not serve.
    fn store_failed(&self, reference: u32, e: &crate::host::StoreCallError) -> Bytes {
        self.metrics.store_failed();
        let why = match e {
            crate::host::StoreCallError::Store(e) => e.to_string(),
            crate::host::StoreCallError::Timeout(why) => why.clone(),
        };
        let text = format!("the store did not answer ({why}); retry shortly");
        self.refuse(reference, Code::UNAVAILABLE, 0, text, "store")
    }

    /// A session asks for older lines of one of its channels: answered as ChatLines (history)
    /// with its ref, from a task.
    pub fn history(self: &Arc<Self>, m: &Arc<Member>, ask: ChatHistory) -> Option<Bytes> {
        let r = ask.reference;
        let (channel, permit) = match self.open(m, r, &ask.channel) {
            Ok(opened) => opened,
            Err(refusal) => return Some(refusal),
        };
        let chat = Arc::clone(self);
        let m = Arc::clone(m);
        tokio::spawn(async move {
            let _permit = permit;
            let before = (ask.before > 0).then_some(ask.before);
            let key = channel.key();
            let read =
                crate::host::bounded_store_call(chat.store.lines(&key, before, ask.limit)).await;
            let frame = match read {
                Ok(lines) => {
                    let wire = lines.into_iter().map(wire_line).collect();
                    hub::lines_frame(&channel.wire_name(&m.principal), true, r, wire)
                }
                Err(e) => chat.store_failed(r, &e),
            };
            m.send(frame, &chat.metrics);
        });
        None
    }

    /// A session reports lines of one of its channels: the store files its own copy of them.
    /// A report counts against the principal's rate as a line does.
    pub fn report(self: &Arc<Self>, m: &Arc<Member>, rep: ChatReport) -> Option<Bytes> {
        let r = rep.reference;
        if rep.reason.chars().any(char::is_control) {
            let text = "a report's reason holds no control characters";
            return Some(self.refuse(r, Code::INVALID, 0, text, "invalid"));
        }
        if let Err(until) = self.allow(&m.principal) {
            let text = "too many reports and lines: wait before the next";
            return Some(self.refuse(r, Code::RATE_LIMITED, until, text, "rate_limited"));
        }
        let (channel, permit) = match self.open(m, r, &rep.channel) {
            Ok(opened) => opened,
            Err(refusal) => return Some(refusal),
        };
        let chat = Arc::clone(self);
        let m = Arc::clone(m);
        tokio::spawn(async move {
            let _permit = permit;
            let filed = NewReport {
                reporter: m.principal.clone(),
                channel: channel.key(),
                seqs: rep.seqs,
                reason: rep.reason,
                created_ms: now_ms(),
            };
            let frame = match crate::host::bounded_store_call(chat.store.file_report(&filed)).await
            {
                Ok(report) => {
                    chat.metrics.reported();
                    reply(r, Code::OK, 0, report.id.to_string())
                }
                Err(crate::host::StoreCallError::Store(
                    e @ StoreError::ChatLinesMissing { .. },
                )) => chat.refuse(r, Code::NOT_FOUND, 0, e.to_string(), "not_found"),
                Err(e) => chat.store_failed(r, &e),
            };
            m.send(frame, &chat.metrics);
        });
        None
    }

    /// Forgets rate state of principals quiet for long (the limiter's memory stays bounded by
    /// those who spoke lately).
    pub fn tidy(&self) {
        self.limiter.retain_recent();
    }
}

fn wire_line(l: zonekeep_store::StoredLine) -> zonekeep_protocol::messages::ChatLine {
    zonekeep_protocol::messages::ChatLine {
        seq: l.seq,
        sender: l.sender,
        sent_at_ms: l.sent_at_ms,
        body: l.body,
    }
}
