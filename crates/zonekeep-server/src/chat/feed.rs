//! How a line travels: the writer keeps what this host's sessions and back end said (one store
//! transaction for whatever queued meanwhile) and hands each kept line to the sessions here; the
//! feed reads what other hosts kept, by the store's line ids, and hands it to the sessions here.
//!
//! A line is heard only once the store kept it, so history and what was heard never disagree.
//! On PostgreSQL two hosts' transactions may commit out of id order: the feed remembers the ids
//! above its cursor it has seen, and gives a gap up only once it is [`GAP_GRACE`] old (a
//! transaction that rolled back never fills its id).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use zonekeep_store::{NewLine, StoredLine};

use super::channel::Channel;
use super::hub::Heard;
use super::Chat;

/// How often the feed reads what other hosts kept.
pub(crate) const FEED_EVERY: Duration = Duration::from_millis(100);
/// How long an id the feed has not seen, below ids it has, is waited for.
const GAP_GRACE: Duration = Duration::from_secs(2);
/// Most lines one feed read takes.
const FEED_PAGE: u32 = 1000;
/// Most lines one store transaction keeps.
const BATCH: usize = 256;
/// Most lines waiting for the writer.
pub(crate) const QUEUE: usize = 4096;

/// A line waiting to be kept, and who waits for the answer.
pub(crate) struct Pending {
    pub line: NewLine,
    pub answer: Answer,
}

/// Who is told what became of a line.
pub(crate) enum Answer {
    /// A session, by its line's ref: told only a failure (it hears its line once kept).
    Session(Arc<super::hub::Member>, u32),
    /// The back end's request.
    Http(oneshot::Sender<Result<StoredLine, String>>),
}

impl Answer {
    fn tell(self, chat: &Chat, outcome: Result<StoredLine, String>) {
        match (self, outcome) {
            (Answer::Http(tx), outcome) => {
                let _ = tx.send(outcome);
            }
            (Answer::Session(..), Ok(_)) => {}
            (Answer::Session(m, r), Err(why)) => {
                let frame = super::reply(
                    r,
                    zonekeep_protocol::messages::ChatReplyCode::UNAVAILABLE,
                    0,
                    why,
                );
                m.send(frame, &chat.metrics);
            }
        }
    }
}

/// The line as the hub hands it on; `None` for a key that is no channel (never written by us).
pub(crate) fn heard(line: &StoredLine) -> Option<Heard> {
    Some(Heard {
        channel: Channel::from_key(&line.channel)?,
        seq: line.seq,
        sender: line.sender.clone(),
        sent_at_ms: line.sent_at_ms,
        body: line.body.clone(),
    })
}

/// Keeps queued lines until the queue closes.
pub(crate) async fn write(chat: Arc<Chat>, mut queue: mpsc::Receiver<Pending>) {
    let mut batch: Vec<Pending> = Vec::with_capacity(BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < BATCH {
            match queue.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let lines: Vec<NewLine> = batch.iter().map(|p| p.line.clone()).collect();
        let kept = tokio::time::timeout(
            crate::host::STORE_TIMEOUT,
            chat.store.append_lines(&lines, chat.config.keep),
        )
        .await;
        let kept = match kept {
            Ok(Ok(kept)) => kept,
            Ok(Err(e)) => {
                chat.metrics.store_failed();
                tracing::warn!(error = %e, lines = lines.len(), "keeping chat lines failed");
                refuse_all(
                    &chat,
                    &mut batch,
                    format!("the store did not keep the line: {e}"),
                );
                continue;
            }
            Err(_) => {
                chat.metrics.store_failed();
                refuse_all(&chat, &mut batch, "the store did not answer in time".into());
                continue;
            }
        };
        chat.feed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .own(kept.iter().map(|l| l.id));
        for (p, line) in batch.drain(..).zip(kept) {
            if let Some(h) = heard(&line) {
                chat.hub.deliver(&h, &chat.metrics);
            }
            chat.metrics.kept();
            p.answer.tell(&chat, Ok(line));
        }
    }
}

fn refuse_all(chat: &Chat, batch: &mut Vec<Pending>, why: String) {
    for p in batch.drain(..) {
        p.answer.tell(chat, Err(why.clone()));
    }
}

/// Where the feed stands: every id up to `cursor` was handed on or given up; `seen` holds the
/// ids above it already handed on (this host's own included).
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    cursor: u64,
    seen: BTreeSet<u64>,
    /// The gap just above the cursor, named by the cursor it sits above, and since when.
    gap_since: Option<(u64, Instant)>,
}

impl Cursor {
    /// Starts after `last` (the newest id when the host started: older lines are history).
    pub fn after(last: u64) -> Cursor {
        Cursor {
            cursor: last,
            ..Cursor::default()
        }
    }

    /// Notes ids this host kept and handed on itself.
    pub fn own(&mut self, ids: impl Iterator<Item = u64>) {
        for id in ids {
            if id > self.cursor {
                self.seen.insert(id);
            }
        }
    }

    /// Takes a read's rows: answers those not handed on yet, and moves the cursor over every id
    /// now known, or over a gap older than [`GAP_GRACE`] at `now`.
    pub fn take(&mut self, rows: Vec<StoredLine>, now: Instant) -> Vec<StoredLine> {
        let fresh: Vec<StoredLine> = rows
            .into_iter()
            .filter(|r| r.id > self.cursor && self.seen.insert(r.id))
            .collect();
        loop {
            while self.seen.first() == Some(&(self.cursor + 1)) {
                self.seen.pop_first();
                self.cursor += 1;
            }
            let Some(&next) = self.seen.first() else {
                self.gap_since = None;
                break;
            };
            match self.gap_since {
                Some((at, since))
                    if at == self.cursor && now.duration_since(since) >= GAP_GRACE =>
                {
                    // Never filled: a transaction that rolled back.
                    self.cursor = next - 1;
                    self.gap_since = None;
                }
                Some((at, _)) if at == self.cursor => break,
                _ => {
                    self.gap_since = Some((self.cursor, now));
                    break;
                }
            }
        }
        fresh
    }

    /// The id reads start after.
    pub fn position(&self) -> u64 {
        self.cursor
    }
}

/// Reads what other hosts kept every [`FEED_EVERY`] until `stop`.
pub(crate) async fn follow(chat: Arc<Chat>, stop: tokio_util::sync::CancellationToken) {
    let mut every = tokio::time::interval(FEED_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let after = chat
            .feed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .position();
        let read = tokio::time::timeout(
            crate::host::STORE_TIMEOUT,
            chat.store.lines_after(after, FEED_PAGE),
        )
        .await;
        let rows = match read {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => {
                chat.metrics.store_failed();
                tracing::warn!(error = %e, "reading the chat feed failed");
                continue;
            }
            Err(_) => {
                chat.metrics.store_failed();
                continue;
            }
        };
        let fresh = chat
            .feed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(rows, Instant::now());
        for line in fresh {
            // This host's own lines were handed on by its writer as they were kept (the feed may
            // read one before the writer noted its id).
            if line.host_id.as_deref() == Some(chat.host_id()) {
                continue;
            }
            if let Some(h) = heard(&line) {
                chat.hub.deliver(&h, &chat.metrics);
            }
        }
    }
}

/// The feed's state, shared by the writer and the reader.
pub(crate) type Feed = Mutex<Cursor>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn row(id: u64) -> StoredLine {
        StoredLine {
            id,
            channel: "zone:z".into(),
            seq: id,
            sender: "ann".into(),
            body: "hi".into(),
            sent_at_ms: 0,
            host_id: None,
        }
    }

    fn ids(rows: &[StoredLine]) -> Vec<u64> {
        rows.iter().map(|r| r.id).collect()
    }

    #[test]
    fn the_feed_hands_each_line_on_once_and_waits_for_a_gap_then_gives_it_up() {
        let t0 = Instant::now();
        let mut c = Cursor::after(10);
        c.own([11].into_iter());
        // 12 commits late: 13 and 14 are read first.
        assert_eq!(
            ids(&c.take(vec![row(11), row(13), row(14)], t0)),
            vec![13, 14]
        );
        assert_eq!(c.position(), 11);
        // Read again: nothing new, still waiting for 12.
        let later = t0 + Duration::from_millis(500);
        assert!(c.take(vec![row(13), row(14)], later).is_empty());
        assert_eq!(c.position(), 11);
        // 12 arrives: handed on, and the cursor moves over all.
        assert_eq!(
            ids(&c.take(vec![row(12), row(13), row(14)], later)),
            vec![12]
        );
        assert_eq!(c.position(), 14);
        // 15 never commits; 16 does: given up after the grace.
        assert_eq!(ids(&c.take(vec![row(16)], later)), vec![16]);
        assert_eq!(c.position(), 14);
        let much_later = later + GAP_GRACE;
        assert!(c.take(vec![row(16)], much_later).is_empty());
        assert_eq!(c.position(), 16);
        // Older rows than the cursor are never handed on again.
        assert!(c.take(vec![row(9), row(16)], much_later).is_empty());
    }
}
