//! What both chat backends conclude from the rows they read and write, as plain functions (the
//! checks of the input are in [`crate::chat`]).
//!
//! Each backend runs the same steps inside its own transaction: count a batch's lines per
//! channel, move each channel's counter, number the lines, prune below the oldest seq kept, write
//! one audit row per action, read rows back. Everything decided along the way (which seq each
//! line gets, what is pruned, what an audit row says, what a stored row means) lives here, so
//! SQLite and PostgreSQL cannot drift apart.

use std::collections::BTreeMap;

use serde_json::json;

use crate::chat::{
    AuditAction, AuditEntry, ChatScope, NewLine, Report, ReportedLine, Sanction, StoredLine,
};
use crate::error::{Result, StoreError};
use crate::validate::{from_db, to_db};

/// A page of lines' upper seq bound as bound in SQL (`seq < bound`): no seq reaches `i64::MAX`,
/// so a larger `before` (or none) means every line.
pub(crate) fn before_bound(before_seq: Option<u64>) -> i64 {
    before_seq.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX))
}

/// A cursor as bound in SQL (`id > cursor`): no id passes `i64::MAX`, so a larger cursor reads
/// nothing.
pub(crate) fn after_bound(after_id: u64) -> i64 {
    i64::try_from(after_id).unwrap_or(i64::MAX)
}

/// How many lines of the batch each channel gets, by channel in byte order: the order every
/// append locks channel counters in, so two appends never wait on each other in a cycle.
pub(crate) fn channel_counts(lines: &[NewLine]) -> BTreeMap<&str, i64> {
    let mut counts = BTreeMap::new();
    for line in lines {
        *counts.entry(line.channel.as_str()).or_insert(0i64) += 1;
    }
    counts
}

/// The first seq of `count` lines after the counter moved to `last`.
pub(crate) fn first_seq(channel: &str, last: i64, count: i64) -> Result<i64> {
    if last < count {
        return Err(StoreError::Corrupt(format!(
            "chat channel {channel:?}: counter {last} below the {count} lines just counted"
        )));
    }
    Ok(last - count + 1)
}

/// The lowest seq a channel whose counter is `last` keeps: its newest `keep` lines.
pub(crate) fn oldest_kept(last: i64, keep: u32) -> i64 {
    last.saturating_sub(i64::from(keep)).saturating_add(1)
}

/// Each line's seq, in input order, given each channel's first seq in this batch.
pub(crate) fn assign_seqs(lines: &[NewLine], firsts: &BTreeMap<&str, i64>) -> Result<Vec<i64>> {
    let mut next = firsts.clone();
    lines
        .iter()
        .map(|line| {
            let seq = next.get_mut(line.channel.as_str()).ok_or_else(|| {
                StoreError::Corrupt(format!("no counter read for {:?}", line.channel))
            })?;
            let this = *seq;
            *seq += 1;
            Ok(this)
        })
        .collect()
}

/// The seqs of `wanted` the store did not find among `found`.
pub(crate) fn missing_seqs(wanted: &[i64], found: &[ReportedLine]) -> Vec<u64> {
    wanted
        .iter()
        .filter_map(|w| u64::try_from(*w).ok())
        .filter(|w| !found.iter().any(|f| f.seq == *w))
        .collect()
}

/// An audit row as both backends write it: what each action records is decided here, once.
pub(crate) struct AuditRow {
    pub at_ms: i64,
    pub actor: String,
    pub action: &'static str,
    pub target: String,
    pub scope: String,
    pub detail: String,
}

impl AuditRow {
    /// The row of an added sanction: its actor, its principal, its scope, when it was created.
    pub(crate) fn added(s: &Sanction) -> Result<AuditRow> {
        Ok(AuditRow {
            at_ms: to_db("created_ms", s.created_ms)?,
            actor: s.actor.clone(),
            action: AuditAction::from(s.action).as_str(),
            target: s.principal.clone(),
            scope: s.scope.to_string(),
            detail: json!({"sanction": s.id, "until_ms": s.until_ms, "reason": s.reason})
                .to_string(),
        })
    }

    /// The row of a lift of `s` by `actor` at `now_ms`.
    pub(crate) fn lifted(s: &Sanction, actor: &str, now_ms: u64) -> Result<AuditRow> {
        Ok(AuditRow {
            at_ms: to_db("now_ms", now_ms)?,
            actor: actor.to_owned(),
            action: AuditAction::Lift.as_str(),
            target: s.principal.clone(),
            scope: s.scope.to_string(),
            detail: json!({"sanction": s.id, "action": s.action.as_str()}).to_string(),
        })
    }

    /// The row of a filed report: its reporter, its channel and that channel's scope.
    pub(crate) fn filed(r: &Report) -> Result<AuditRow> {
        let seqs: Vec<u64> = r.lines.iter().map(|l| l.seq).collect();
        Ok(AuditRow {
            at_ms: to_db("created_ms", r.created_ms)?,
            actor: r.reporter.clone(),
            action: AuditAction::Report.as_str(),
            target: r.channel.clone(),
            scope: ChatScope::of_channel(&r.channel)?.to_string(),
            detail: json!({"report": r.id, "seqs": seqs, "reason": r.reason}).to_string(),
        })
    }
}

/// A report's lines as stored: a JSON array of `{seq, sender, sent_at_ms, body}`.
pub(crate) fn lines_json(lines: &[ReportedLine]) -> Result<String> {
    serde_json::to_string(lines)
        .map_err(|e| StoreError::Backend(format!("encoding reported lines: {e}")))
}

/// A line as a backend reads it: `id, channel, seq, sender, body, sent_at_ms, host_id`.
pub(crate) type RawLine = (i64, String, i64, String, String, i64, Option<String>);

/// A stored line's row, checked.
pub(crate) fn line_from_db(raw: RawLine) -> Result<StoredLine> {
    let (id, channel, seq, sender, body, sent_at_ms, host_id) = raw;
    Ok(StoredLine {
        id: from_db("chat line id", id)?,
        channel,
        seq: from_db("chat line seq", seq)?,
        sender,
        body,
        sent_at_ms: from_db("chat line sent_at_ms", sent_at_ms)?,
        host_id,
    })
}

/// A sanction as a backend reads it (the columns of [`SANCTION_COLUMNS`]).
pub(crate) struct RawSanction {
    pub id: i64,
    pub principal: String,
    pub action: String,
    pub scope: String,
    pub until_ms: i64,
    pub reason: String,
    pub actor: String,
    pub created_ms: i64,
    pub lifted_ms: Option<i64>,
    pub lifted_by: Option<String>,
}

/// A sanction's columns, in [`RawSanction`]'s order.
pub(crate) const SANCTION_COLUMNS: &str =
    "id, principal, action, scope, until_ms, reason, actor, created_ms, lifted_ms, lifted_by";

/// A stored sanction's row, checked.
pub(crate) fn sanction_from_db(raw: RawSanction) -> Result<Sanction> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("chat sanction {}: {what}", raw.id));
    Ok(Sanction {
        id: from_db("chat sanction id", raw.id)?,
        action: raw.action.parse().map_err(|_| corrupt("action"))?,
        scope: raw.scope.parse().map_err(|_| corrupt("scope"))?,
        until_ms: from_db("chat sanction until_ms", raw.until_ms)?,
        created_ms: from_db("chat sanction created_ms", raw.created_ms)?,
        lifted_ms: raw
            .lifted_ms
            .map(|t| from_db("chat sanction lifted_ms", t))
            .transpose()?,
        principal: raw.principal,
        reason: raw.reason,
        actor: raw.actor,
        lifted_by: raw.lifted_by,
    })
}

/// A report as a backend reads it: `id, reporter, channel, reason, lines, created_ms`.
pub(crate) type RawReport = (i64, String, String, String, String, i64);

/// A report's columns, in [`RawReport`]'s order.
pub(crate) const REPORT_COLUMNS: &str = "id, reporter, channel, reason, lines, created_ms";

/// A stored report's row, checked.
pub(crate) fn report_from_db(raw: RawReport) -> Result<Report> {
    let (id, reporter, channel, reason, lines, created_ms) = raw;
    Ok(Report {
        id: from_db("chat report id", id)?,
        lines: serde_json::from_str(&lines)
            .map_err(|e| StoreError::Corrupt(format!("chat report {id} lines: {e}")))?,
        reporter,
        channel,
        reason,
        created_ms: from_db("chat report created_ms", created_ms)?,
    })
}

/// An audit row as a backend reads it: `id, at_ms, actor, action, target, scope, detail`.
pub(crate) type RawAudit = (i64, i64, String, String, String, String, String);

/// An audit row's columns, in [`RawAudit`]'s order.
pub(crate) const AUDIT_COLUMNS: &str = "id, at_ms, actor, action, target, scope, detail";

/// A stored audit row, checked.
pub(crate) fn audit_from_db(raw: RawAudit) -> Result<AuditEntry> {
    let (id, at_ms, actor, action, target, scope, detail) = raw;
    let corrupt = |what: &str| StoreError::Corrupt(format!("chat audit row {id}: {what}"));
    let action = match action.as_str() {
        "mute" => AuditAction::Mute,
        "ban" => AuditAction::Ban,
        "lift" => AuditAction::Lift,
        "report" => AuditAction::Report,
        _ => return Err(corrupt("action")),
    };
    Ok(AuditEntry {
        id: from_db("chat audit id", id)?,
        at_ms: from_db("chat audit at_ms", at_ms)?,
        actor,
        action,
        target,
        scope: scope.parse().map_err(|_| corrupt("scope"))?,
        detail: serde_json::from_str(&detail).map_err(|_| corrupt("detail"))?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn line(channel: &str) -> NewLine {
        NewLine {
            channel: channel.into(),
            sender: "ann".into(),
            body: "hi".into(),
            sent_at_ms: 1,
            host_id: None,
        }
    }

    #[test]
    fn seqs_follow_input_order_per_channel() {
        let lines = [
            line("zone:b"),
            line("zone:a"),
            line("zone:b"),
            line("zone:b"),
        ];
        let counts = channel_counts(&lines);
        assert_eq!(
            counts.iter().collect::<Vec<_>>(),
            [(&"zone:a", &1), (&"zone:b", &3)]
        );
        let firsts = BTreeMap::from([
            ("zone:a", 7),
            ("zone:b", first_seq("zone:b", 3, 3).unwrap()),
        ]);
        assert_eq!(assign_seqs(&lines, &firsts).unwrap(), [1, 7, 2, 3]);
        assert!(first_seq("zone:b", 2, 3).is_err());
        assert_eq!(oldest_kept(10, 3), 8);
        assert_eq!(oldest_kept(2, 3), 0);
        assert_eq!(before_bound(None), i64::MAX);
        assert_eq!(before_bound(Some(u64::MAX)), i64::MAX);
        assert_eq!(after_bound(5), 5);
    }

    #[test]
    fn missing_seqs_are_those_not_found() {
        let found = [ReportedLine {
            seq: 3,
            sender: "bob".into(),
            sent_at_ms: 1,
            body: "x".into(),
        }];
        assert_eq!(missing_seqs(&[1, 3, 6], &found), [1, 6]);
        assert!(missing_seqs(&[3], &found).is_empty());
    }

    #[test]
    fn audit_rows_name_what_was_done_and_read_back() {
        let sanction = Sanction {
            id: 4,
            principal: "ann".into(),
            action: crate::chat::SanctionAction::Ban,
            scope: ChatScope::Zone("arena-1".into()),
            until_ms: 9,
            reason: "abuse".into(),
            actor: "mod".into(),
            created_ms: 2,
            lifted_ms: None,
            lifted_by: None,
        };
        let added = AuditRow::added(&sanction).unwrap();
        assert_eq!(
            (added.action, added.scope.as_str()),
            ("ban", "zone:arena-1")
        );
        let lifted = AuditRow::lifted(&sanction, "boss", 5).unwrap();
        let entry = audit_from_db((
            1,
            lifted.at_ms,
            lifted.actor,
            lifted.action.into(),
            lifted.target,
            lifted.scope,
            lifted.detail,
        ))
        .unwrap();
        assert_eq!(
            (
                entry.at_ms,
                entry.actor.as_str(),
                entry.action,
                entry.target.as_str()
            ),
            (5, "boss", AuditAction::Lift, "ann")
        );
        assert_eq!(entry.detail, json!({"sanction": 4, "action": "ban"}));
        let bad = (
            1,
            5,
            "a".into(),
            "kick".into(),
            "t".into(),
            "fleet".into(),
            "{}".into(),
        );
        assert!(matches!(audit_from_db(bad), Err(StoreError::Corrupt(_))));
        let bad = (
            1,
            5,
            "a".into(),
            "lift".into(),
            "t".into(),
            "zone:".into(),
            "{}".into(),
        );
        assert!(matches!(audit_from_db(bad), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn stored_rows_are_checked() {
        let line = (-1, "zone:a".into(), 1, "ann".into(), "hi".into(), 1, None);
        assert!(matches!(line_from_db(line), Err(StoreError::Corrupt(_))));
        let report = (
            1,
            "ann".into(),
            "zone:a".into(),
            String::new(),
            "[{".into(),
            1,
        );
        assert!(matches!(
            report_from_db(report),
            Err(StoreError::Corrupt(_))
        ));
        let lines = lines_json(&[ReportedLine {
            seq: 2,
            sender: "bob".into(),
            sent_at_ms: 3,
            body: "x".into(),
        }])
        .unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&lines).unwrap(),
            json!([{"seq": 2, "sender": "bob", "sent_at_ms": 3, "body": "x"}])
        );
        let report = report_from_db((1, "ann".into(), "zone:a".into(), String::new(), lines, 1));
        assert_eq!(report.unwrap().lines[0].body, "x");
    }
}
