//! What the store refuses before it writes or reads anything, the same on both backends: names
//! and bodies too long or malformed, times past what the database holds, limits outside their
//! bounds. A refusal is [`StoreError::InvalidArgument`], and a batch with one bad line writes
//! nothing.

use super::channel::check_channel;
use super::{
    ChatScope, NewLine, NewReport, NewSanction, MAX_ACTIVE_SANCTIONS, MAX_CHAT_BATCH,
    MAX_CHAT_BODY, MAX_CHAT_KEEP, MAX_CHAT_NAME, MAX_CHAT_PAGE, MAX_CHAT_PRINCIPAL,
    MAX_CHAT_REASON, MAX_REPORT_LINES,
};
use crate::error::{Result, StoreError};
use crate::validate::{check_id, to_db};

pub(super) fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::InvalidArgument(message.into())
}

/// Refuses an empty name or one longer than `max` bytes.
pub(super) fn check_len(what: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() || value.len() > max {
        return Err(invalid(format!(
            "{what} must be 1..={max} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
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

pub(super) fn check_scope(scope: &ChatScope) -> Result<()> {
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
