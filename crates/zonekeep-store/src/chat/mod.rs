//! Chat lines and their moderation (see [`ChatStore`]): the rules both backends share.
//!
//! A **channel** is named as the wire names it, except a direct message, which the store keeps
//! under one key for both sides of the conversation:
//! - `zone:<zone id>` and `group:<group name>` (the name 1..=[`MAX_CHAT_NAME`] bytes);
//! - `dm:<a>\u{1f}<b>`: the two principals in byte order, joined by the unit separator
//!   ([`dm_channel`]), so `ann → bob` and `bob → ann` are one channel. A principal holding the
//!   separator has no DM channel.
//!
//! Each line gets a **seq** from its channel's counter (`chat_channels.last_seq`), which the
//! appending transaction holds locked until it commits, so seqs start at 1, grow by one per line
//! with no gap, and follow commit order within a channel. Each line also gets a global **id**
//! (the fleet feed's cursor, [`ChatStore::lines_after`]). A channel keeps only its newest `keep`
//! lines: an append prunes the channels it wrote, and since a channel's seqs have no gaps, that is
//! every seq at or below `last_seq - keep`.
//!
//! **Sanctions** (mutes and bans, fleet-wide or of a zone or group) last until `until_ms` or until
//! lifted. **Reports** copy the reported lines from the store, never from the reporter, so a
//! report shows what was really said. Every sanction, lift and report writes one **audit** row in
//! its own transaction. Times are the callers' (the host that accepted the line or the action), as
//! the spec's wire and HTTP carry them, never the database's.

mod channel;
mod checks;
mod moderation;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;

pub use channel::{check_channel, dm_channel, dm_parties};
pub(crate) use checks::{
    check_active, check_append, check_lift, check_limit, check_report, check_sanction,
    check_sanctions_of,
};
pub use moderation::{
    AuditAction, AuditEntry, ChatScope, NewReport, NewSanction, Report, ReportedLine, Sanction,
    SanctionAction,
};

/// Longest principal (sender, actor, reporter, sanctioned principal), in bytes.
pub const MAX_CHAT_PRINCIPAL: usize = 256;
/// Longest zone id or group name in a channel or a scope, in bytes.
pub const MAX_CHAT_NAME: usize = 128;
/// Longest channel key, in bytes: a DM between two principals of [`MAX_CHAT_PRINCIPAL`] bytes.
/// (Channels on the wire are at most 300 bytes; only the DM key, which names both sides, is
/// longer.)
pub const MAX_CHAT_CHANNEL: usize = 3 + 2 * MAX_CHAT_PRINCIPAL + 1;
/// Longest line body, in bytes.
pub const MAX_CHAT_BODY: usize = 1024;
/// Most rows one read returns.
pub const MAX_CHAT_PAGE: u32 = 1000;
/// Most sanctions one [`ChatStore::active_sanctions`] read returns: a host's sanctions cache
/// reads every sanction in force at once (the read has no cursor), so its bound is its own.
pub const MAX_ACTIVE_SANCTIONS: u32 = 100_000;
/// Most lines one append takes (a host's whole chat queue).
pub const MAX_CHAT_BATCH: usize = 4096;
/// Most lines a channel may be asked to keep.
pub const MAX_CHAT_KEEP: u32 = 100_000;
/// Most lines one report names.
pub const MAX_REPORT_LINES: usize = 20;
/// Longest reason of a report or a sanction, in bytes.
pub const MAX_CHAT_REASON: usize = 500;
/// What joins the two principals of a DM channel key.
pub const DM_SEPARATOR: char = '\u{1f}';

/// A line to append ([`ChatStore::append_lines`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewLine {
    /// The channel key (a DM's canonical key, [`dm_channel`]).
    pub channel: String,
    /// Who said it: a principal.
    pub sender: String,
    /// What was said: 1..=[`MAX_CHAT_BODY`] bytes, no control characters.
    pub body: String,
    /// When the host accepted it (ms since the Unix epoch, the host's clock).
    pub sent_at_ms: u64,
    /// The host that accepted it, so a host's feed can skip its own lines.
    pub host_id: Option<String>,
}

/// A stored line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLine {
    /// Global, growing with every append: the fleet feed's cursor.
    pub id: u64,
    /// The channel key.
    pub channel: String,
    /// Its place in the channel: 1 for the first line, one more for each line after.
    pub seq: u64,
    /// Who said it.
    pub sender: String,
    /// What was said.
    pub body: String,
    /// When the host accepted it.
    pub sent_at_ms: u64,
    /// The host that accepted it, if named.
    pub host_id: Option<String>,
}

/// Chat lines, sanctions, reports and their audit, shared by every host of a fleet.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Appends `lines` in one transaction: each gets its channel's next seq, in input order, and
    /// a new id. Answers the stored lines in input order. Then prunes every channel written to
    /// its newest `keep` (1..=[`MAX_CHAT_KEEP`]) lines, so a batch larger than `keep` answers
    /// lines no longer kept. At most [`MAX_CHAT_BATCH`] lines; one malformed line refuses the
    /// batch ([`StoreError::InvalidArgument`](crate::StoreError::InvalidArgument)) and nothing is
    /// written.
    async fn append_lines(&self, lines: &[NewLine], keep: u32) -> Result<Vec<StoredLine>>;

    /// The newest `limit` (1..=[`MAX_CHAT_PAGE`]) lines of `channel` with a seq below
    /// `before_seq` (all, for `None`), oldest first.
    async fn lines(
        &self,
        channel: &str,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<StoredLine>>;

    /// Up to `limit` (1..=[`MAX_CHAT_PAGE`]) kept lines of any channel with an id above
    /// `after_id`, by id: the fleet feed. (On PostgreSQL ids may commit out of order: a reader
    /// must expect a smaller id to appear after a larger one.)
    async fn lines_after(&self, after_id: u64, limit: u32) -> Result<Vec<StoredLine>>;

    /// The largest id of a kept line (0 when none): where a host starts following the feed, so
    /// it hands on only lines said after it started.
    async fn last_line_id(&self) -> Result<u64>;

    /// Stores a sanction and its audit row (`mute` or `ban`) in one transaction.
    async fn add_sanction(&self, sanction: &NewSanction) -> Result<Sanction>;

    /// Lifts a sanction at `now_ms` by `actor` and writes its audit row (`lift`), in one
    /// transaction; `None` (and nothing written) when there is no such sanction or it was lifted
    /// already. An expired sanction may still be lifted.
    async fn lift_sanction(&self, id: u64, actor: &str, now_ms: u64) -> Result<Option<Sanction>>;

    /// Up to `limit` (1..=[`MAX_ACTIVE_SANCTIONS`]) sanctions active at `now_ms` (not lifted, `until_ms`
    /// after it), by id.
    async fn active_sanctions(&self, now_ms: u64, limit: u32) -> Result<Vec<Sanction>>;

    /// The sanctions of `principal` active at `now_ms`, by id (at most [`MAX_CHAT_PAGE`]).
    async fn sanctions_of(&self, principal: &str, now_ms: u64) -> Result<Vec<Sanction>>;

    /// Files a report with the store's copy of the named lines of its channel, and its audit
    /// row (`report`), in one transaction. A named seq the channel does not keep (pruned, or never
    /// written) refuses it with
    /// [`StoreError::ChatLinesMissing`](crate::StoreError::ChatLinesMissing), and nothing is
    /// written.
    async fn file_report(&self, report: &NewReport) -> Result<Report>;

    /// Up to `limit` (1..=[`MAX_CHAT_PAGE`]) reports with an id above `after_id`, by id.
    async fn reports(&self, after_id: u64, limit: u32) -> Result<Vec<Report>>;

    /// Up to `limit` (1..=[`MAX_CHAT_PAGE`]) audit rows with an id above `after_id`, by id.
    async fn audit(&self, after_id: u64, limit: u32) -> Result<Vec<AuditEntry>>;
}
