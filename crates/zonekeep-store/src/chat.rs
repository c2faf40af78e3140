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

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::validate::{check_id, to_db};

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

/// What a sanction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SanctionAction {
    /// The principal may not send lines in the scope.
    Mute,
    /// The principal may not join (and is removed from) the scope.
    Ban,
}

impl SanctionAction {
    /// Its stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            SanctionAction::Mute => "mute",
            SanctionAction::Ban => "ban",
        }
    }
}

impl FromStr for SanctionAction {
    type Err = StoreError;

    /// `"mute"` or `"ban"`; anything else is [`StoreError::InvalidArgument`].
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "mute" => Ok(SanctionAction::Mute),
            "ban" => Ok(SanctionAction::Ban),
            _ => Err(StoreError::InvalidArgument(
                "a sanction's action is \"mute\" or \"ban\"".into(),
            )),
        }
    }
}

/// Where a sanction holds: the whole fleet, one zone, or one zone group (a world).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ChatScope {
    /// Everywhere: `fleet`.
    Fleet,
    /// One zone: `zone:<zone id>`.
    Zone(String),
    /// One zone group: `group:<group name>`.
    Group(String),
}

impl ChatScope {
    /// The scope that moderates `channel`: its zone or group, and the fleet for a DM (only the
    /// back end and fleet moderators may read DMs).
    pub fn of_channel(channel: &str) -> Result<ChatScope> {
        match parse_channel(channel)? {
            Channel::Zone(zone) => Ok(ChatScope::Zone(zone.to_owned())),
            Channel::Group(group) => Ok(ChatScope::Group(group.to_owned())),
            Channel::Dm(..) => Ok(ChatScope::Fleet),
        }
    }
}

impl fmt::Display for ChatScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatScope::Fleet => f.write_str("fleet"),
            ChatScope::Zone(zone) => write!(f, "zone:{zone}"),
            ChatScope::Group(group) => write!(f, "group:{group}"),
        }
    }
}

impl FromStr for ChatScope {
    type Err = StoreError;

    /// `fleet`, `zone:<id>` or `group:<name>` (the name 1..=[`MAX_CHAT_NAME`] bytes); anything
    /// else is [`StoreError::InvalidArgument`].
    fn from_str(s: &str) -> Result<Self> {
        let scope = if s == "fleet" {
            ChatScope::Fleet
        } else if let Some(zone) = s.strip_prefix("zone:") {
            ChatScope::Zone(zone.to_owned())
        } else if let Some(group) = s.strip_prefix("group:") {
            ChatScope::Group(group.to_owned())
        } else {
            return Err(StoreError::InvalidArgument(
                "a scope is \"fleet\", \"zone:<id>\" or \"group:<name>\"".into(),
            ));
        };
        check_scope(&scope)?;
        Ok(scope)
    }
}

impl TryFrom<String> for ChatScope {
    type Error = StoreError;

    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<ChatScope> for String {
    fn from(scope: ChatScope) -> String {
        scope.to_string()
    }
}

/// A sanction to add ([`ChatStore::add_sanction`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSanction {
    /// Whom it holds.
    pub principal: String,
    /// Mute or ban.
    pub action: SanctionAction,
    /// Where it holds.
    pub scope: ChatScope,
    /// Until when (ms since the Unix epoch, at most `i64::MAX`); after `created_ms`.
    pub until_ms: u64,
    /// Why (at most [`MAX_CHAT_REASON`] bytes; may be empty).
    pub reason: String,
    /// Who imposed it: `backend` or a moderator's principal.
    pub actor: String,
    /// When (ms since the Unix epoch, the caller's clock).
    pub created_ms: u64,
}

/// A stored sanction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sanction {
    /// Its id (growing).
    pub id: u64,
    /// Whom it holds.
    pub principal: String,
    /// Mute or ban.
    pub action: SanctionAction,
    /// Where it holds.
    pub scope: ChatScope,
    /// Until when.
    pub until_ms: u64,
    /// Why.
    pub reason: String,
    /// Who imposed it.
    pub actor: String,
    /// When.
    pub created_ms: u64,
    /// When it was lifted, if it was.
    pub lifted_ms: Option<u64>,
    /// Who lifted it, if anyone did.
    pub lifted_by: Option<String>,
}

impl Sanction {
    /// Whether it holds at `now_ms`: not lifted and not yet over.
    pub fn is_active(&self, now_ms: u64) -> bool {
        self.lifted_ms.is_none() && self.until_ms > now_ms
    }
}

/// A report to file ([`ChatStore::file_report`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewReport {
    /// Who reports.
    pub reporter: String,
    /// The channel key of the reported lines.
    pub channel: String,
    /// The reported lines' seqs: 1..=[`MAX_REPORT_LINES`] (repeats count once).
    pub seqs: Vec<u64>,
    /// Why (at most [`MAX_CHAT_REASON`] bytes; may be empty).
    pub reason: String,
    /// When (ms since the Unix epoch, the caller's clock).
    pub created_ms: u64,
}

/// A reported line as the store held it when the report was filed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedLine {
    /// Its seq in the channel.
    pub seq: u64,
    /// Who said it.
    pub sender: String,
    /// When the host accepted it.
    pub sent_at_ms: u64,
    /// What was said.
    pub body: String,
}

/// A filed report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Its id (growing).
    pub id: u64,
    /// Who reported.
    pub reporter: String,
    /// The channel key.
    pub channel: String,
    /// Why.
    pub reason: String,
    /// The server's copy of the reported lines, by seq.
    pub lines: Vec<ReportedLine>,
    /// When.
    pub created_ms: u64,
}

/// What an audit row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditAction {
    /// A mute was added.
    Mute,
    /// A ban was added.
    Ban,
    /// A sanction was lifted.
    Lift,
    /// A report was filed.
    Report,
}

impl AuditAction {
    /// Its stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Mute => "mute",
            AuditAction::Ban => "ban",
            AuditAction::Lift => "lift",
            AuditAction::Report => "report",
        }
    }
}

impl From<SanctionAction> for AuditAction {
    fn from(action: SanctionAction) -> AuditAction {
        match action {
            SanctionAction::Mute => AuditAction::Mute,
            SanctionAction::Ban => AuditAction::Ban,
        }
    }
}

/// One audit row ([`ChatStore::audit`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Its id (growing).
    pub id: u64,
    /// When (the action's own time: a sanction's `created_ms`, a lift's `now_ms`, a report's
    /// `created_ms`).
    pub at_ms: u64,
    /// Who acted: the sanction's actor, the lifter, the reporter.
    pub actor: String,
    /// What was done.
    pub action: AuditAction,
    /// To whom or what: the sanctioned principal, or the reported channel.
    pub target: String,
    /// Where: the sanction's scope, or the reported channel's ([`ChatScope::of_channel`]).
    pub scope: ChatScope,
    /// The rest, as JSON: `{"sanction", "until_ms", "reason"}` for a mute or ban,
    /// `{"sanction", "action"}` for a lift, `{"report", "seqs", "reason"}` for a report.
    pub detail: Value,
}

/// Chat lines, sanctions, reports and their audit, shared by every host of a fleet.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Appends `lines` in one transaction: each gets its channel's next seq, in input order, and
    /// a new id. Answers the stored lines in input order. Then prunes every channel written to
    /// its newest `keep` (1..=[`MAX_CHAT_KEEP`]) lines, so a batch larger than `keep` answers
    /// lines no longer kept. At most [`MAX_CHAT_BATCH`] lines; one malformed line refuses the
    /// batch ([`StoreError::InvalidArgument`]) and nothing is written.
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
    /// written) refuses it with [`StoreError::ChatLinesMissing`], and nothing is written.
    async fn file_report(&self, report: &NewReport) -> Result<Report>;

    /// Up to `limit` (1..=[`MAX_CHAT_PAGE`]) reports with an id above `after_id`, by id.
    async fn reports(&self, after_id: u64, limit: u32) -> Result<Vec<Report>>;

    /// Up to `limit` (1..=[`MAX_CHAT_PAGE`]) audit rows with an id above `after_id`, by id.
    async fn audit(&self, after_id: u64, limit: u32) -> Result<Vec<AuditEntry>>;
}

/// A channel key, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel<'a> {
    Zone(&'a str),
    Group(&'a str),
    Dm(&'a str, &'a str),
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::InvalidArgument(message.into())
}

/// Refuses an empty name or one longer than `max` bytes.
fn check_len(what: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() || value.len() > max {
        return Err(invalid(format!(
            "{what} must be 1..={max} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

fn parse_channel(channel: &str) -> Result<Channel<'_>> {
    check_len("a chat channel", channel, MAX_CHAT_CHANNEL)?;
    if let Some(zone) = channel.strip_prefix("zone:") {
        check_len("a channel's zone id", zone, MAX_CHAT_NAME)?;
        return Ok(Channel::Zone(zone));
    }
    if let Some(group) = channel.strip_prefix("group:") {
        check_len("a channel's group name", group, MAX_CHAT_NAME)?;
        return Ok(Channel::Group(group));
    }
    let Some((a, b)) = channel
        .strip_prefix("dm:")
        .and_then(|pair| pair.split_once(DM_SEPARATOR))
    else {
        return Err(invalid(
            "a chat channel is \"zone:<id>\", \"group:<name>\" or a DM key",
        ));
    };
    check_dm_party(a)?;
    check_dm_party(b)?;
    // One key per conversation: the other order would be a second channel for the same two.
    if a > b {
        return Err(invalid("a DM key names its two principals in byte order"));
    }
    Ok(Channel::Dm(a, b))
}

fn check_dm_party(principal: &str) -> Result<()> {
    check_len("a principal", principal, MAX_CHAT_PRINCIPAL)?;
    if principal.contains(DM_SEPARATOR) {
        return Err(invalid("a principal holding U+001F has no DM channel"));
    }
    Ok(())
}

/// Refuses a malformed channel key: `zone:<id>` or `group:<name>` (1..=[`MAX_CHAT_NAME`]
/// bytes), or a DM key as [`dm_channel`] makes it.
pub fn check_channel(channel: &str) -> Result<()> {
    parse_channel(channel).map(|_| ())
}

/// The DM channel key of the conversation between `a` and `b` (either order):
/// `dm:` + the smaller + U+001F + the larger. Refuses a principal that is empty, too long or
/// holds U+001F.
pub fn dm_channel(a: &str, b: &str) -> Result<String> {
    check_dm_party(a)?;
    check_dm_party(b)?;
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    Ok(format!("dm:{lo}{DM_SEPARATOR}{hi}"))
}

/// The two principals of a DM channel key, in byte order (`None` for any other channel).
pub fn dm_parties(channel: &str) -> Option<(&str, &str)> {
    match parse_channel(channel) {
        Ok(Channel::Dm(a, b)) => Some((a, b)),
        _ => None,
    }
}

fn check_principal(what: &str, principal: &str) -> Result<()> {
    check_len(what, principal, MAX_CHAT_PRINCIPAL)
}

fn check_reason(reason: &str) -> Result<()> {
    if reason.len() > MAX_CHAT_REASON {
        return Err(invalid(format!(
            "a reason is at most {MAX_CHAT_REASON} bytes"
        )));
    }
    Ok(())
}

fn check_scope(scope: &ChatScope) -> Result<()> {
    match scope {
        ChatScope::Fleet => Ok(()),
        ChatScope::Zone(name) => check_len("a scope's zone id", name, MAX_CHAT_NAME),
        ChatScope::Group(name) => check_len("a scope's group name", name, MAX_CHAT_NAME),
    }
}

fn check_line(line: &NewLine) -> Result<()> {
    check_channel(&line.channel)?;
    check_principal("a sender", &line.sender)?;
    check_len("a line's body", &line.body, MAX_CHAT_BODY)?;
    if line.body.chars().any(char::is_control) {
        return Err(invalid("a line's body holds no control characters"));
    }
    to_db("sent_at_ms", line.sent_at_ms)?;
    if let Some(host) = &line.host_id {
        check_id("host id", host)?;
    }
    Ok(())
}

/// Refuses a malformed append (every line is checked before anything is written).
pub(crate) fn check_append(lines: &[NewLine], keep: u32) -> Result<()> {
    if !(1..=MAX_CHAT_KEEP).contains(&keep) {
        return Err(invalid(format!(
            "a channel keeps 1..={MAX_CHAT_KEEP} lines"
        )));
    }
    if lines.len() > MAX_CHAT_BATCH {
        return Err(invalid(format!(
            "an append takes at most {MAX_CHAT_BATCH} lines"
        )));
    }
    lines.iter().try_for_each(check_line)
}

/// Refuses a read's limit outside 1..=[`MAX_CHAT_PAGE`]; answers it as the backends bind it.
pub(crate) fn check_limit(limit: u32) -> Result<i64> {
    if !(1..=MAX_CHAT_PAGE).contains(&limit) {
        return Err(invalid(format!(
            "a chat read takes 1..={MAX_CHAT_PAGE} rows"
        )));
    }
    Ok(i64::from(limit))
}

/// Refuses a read of active sanctions outside 1..=[`MAX_ACTIVE_SANCTIONS`]; answers the limit
/// and the time as the backends bind them.
pub(crate) fn check_active(now_ms: u64, limit: u32) -> Result<(i64, i64)> {
    if !(1..=MAX_ACTIVE_SANCTIONS).contains(&limit) {
        return Err(invalid(format!(
            "a read of active sanctions takes 1..={MAX_ACTIVE_SANCTIONS} rows"
        )));
    }
    Ok((to_db("now_ms", now_ms)?, i64::from(limit)))
}

/// Refuses a malformed sanction.
pub(crate) fn check_sanction(s: &NewSanction) -> Result<()> {
    check_principal("a sanctioned principal", &s.principal)?;
    check_scope(&s.scope)?;
    check_reason(&s.reason)?;
    check_principal("an actor", &s.actor)?;
    to_db("until_ms", s.until_ms)?;
    to_db("created_ms", s.created_ms)?;
    if s.until_ms <= s.created_ms {
        return Err(invalid("a sanction ends after it is created"));
    }
    Ok(())
}

/// Refuses a malformed lift.
pub(crate) fn check_lift(actor: &str, now_ms: u64) -> Result<()> {
    check_principal("an actor", actor)?;
    to_db("now_ms", now_ms).map(|_| ())
}

/// Refuses a malformed read of a principal's sanctions.
pub(crate) fn check_sanctions_of(principal: &str, now_ms: u64) -> Result<()> {
    check_principal("a principal", principal)?;
    to_db("now_ms", now_ms).map(|_| ())
}

/// Refuses a malformed report; answers its seqs in order, each once, as the backends bind them.
pub(crate) fn check_report(r: &NewReport) -> Result<Vec<i64>> {
    check_principal("a reporter", &r.reporter)?;
    check_channel(&r.channel)?;
    check_reason(&r.reason)?;
    to_db("created_ms", r.created_ms)?;
    if r.seqs.is_empty() || r.seqs.len() > MAX_REPORT_LINES {
        return Err(invalid(format!(
            "a report names 1..={MAX_REPORT_LINES} lines"
        )));
    }
    let mut seqs = r
        .seqs
        .iter()
        .map(|s| to_db("seq", *s))
        .collect::<Result<Vec<_>>>()?;
    seqs.sort_unstable();
    seqs.dedup();
    Ok(seqs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn channels_have_three_forms_and_one_dm_key_per_pair() {
        assert!(check_channel("zone:arena-1").is_ok());
        assert!(check_channel("group:world-1").is_ok());
        for bad in [
            "",
            "zone:",
            "group:",
            "arena-1",
            "dm:bob",
            "Zone:x",
            "dm:\u{1f}bob",
        ] {
            assert!(check_channel(bad).is_err(), "{bad:?}");
        }
        assert!(check_channel(&format!("zone:{}", "z".repeat(MAX_CHAT_NAME + 1))).is_err());
        let key = dm_channel("bob", "ann").unwrap();
        assert_eq!(key, "dm:ann\u{1f}bob");
        assert_eq!(dm_channel("ann", "bob").unwrap(), key);
        assert!(check_channel(&key).is_ok());
        assert!(check_channel("dm:bob\u{1f}ann").is_err(), "not canonical");
        assert_eq!(dm_parties(&key), Some(("ann", "bob")));
        assert_eq!(dm_parties("zone:a"), None);
        assert!(dm_channel("a\u{1f}b", "c").is_err());
        assert!(dm_channel("", "c").is_err());
        let longest = "p".repeat(MAX_CHAT_PRINCIPAL);
        let key = dm_channel(&longest, &longest).unwrap();
        assert_eq!(key.len(), MAX_CHAT_CHANNEL);
        assert!(check_channel(&key).is_ok());
        assert!(dm_channel(&format!("{longest}p"), "a").is_err());
    }

    #[test]
    fn scopes_round_trip_and_malformed_ones_are_refused() {
        for text in ["fleet", "zone:arena-1", "group:world"] {
            let scope: ChatScope = text.parse().unwrap();
            assert_eq!(scope.to_string(), text);
            let json = serde_json::to_string(&scope).unwrap();
            assert_eq!(serde_json::from_str::<ChatScope>(&json).unwrap(), scope);
        }
        for bad in ["", "Fleet", "zone:", "group:", "world:x", "fleet:x"] {
            assert!(bad.parse::<ChatScope>().is_err(), "{bad:?}");
        }
        assert!(serde_json::from_str::<ChatScope>("\"zone:\"").is_err());
        assert_eq!(
            ChatScope::of_channel(&dm_channel("a", "b").unwrap()).unwrap(),
            ChatScope::Fleet
        );
        assert_eq!(
            ChatScope::of_channel("group:w").unwrap(),
            ChatScope::Group("w".into())
        );
        assert_eq!(
            "ban".parse::<SanctionAction>().unwrap(),
            SanctionAction::Ban
        );
        assert!("kick".parse::<SanctionAction>().is_err());
    }
}
