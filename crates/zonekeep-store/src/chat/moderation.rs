//! Moderation beside the lines: sanctions (mutes and bans, fleet-wide or of a zone or a group),
//! reports that carry the store's copy of the reported lines, and the audit row every sanction,
//! lift and report leaves behind.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::channel::{parse_channel, Channel};
use super::checks::check_scope;
use crate::error::{Result, StoreError};

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

    /// `fleet`, `zone:<id>` or `group:<name>` (the name
    /// 1..=[`MAX_CHAT_NAME`](crate::MAX_CHAT_NAME) bytes); anything else is
    /// [`StoreError::InvalidArgument`].
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

/// A sanction to add ([`ChatStore::add_sanction`](crate::ChatStore::add_sanction)).
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
    /// Why (at most [`MAX_CHAT_REASON`](crate::MAX_CHAT_REASON) bytes; may be empty).
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

/// A report to file ([`ChatStore::file_report`](crate::ChatStore::file_report)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewReport {
    /// Who reports.
    pub reporter: String,
    /// The channel key of the reported lines.
    pub channel: String,
    /// The reported lines' seqs: 1..=[`MAX_REPORT_LINES`](crate::MAX_REPORT_LINES) (repeats
    /// count once).
    pub seqs: Vec<u64>,
    /// Why (at most [`MAX_CHAT_REASON`](crate::MAX_CHAT_REASON) bytes; may be empty).
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

/// One audit row ([`ChatStore::audit`](crate::ChatStore::audit)).
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::chat::dm_channel;

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
