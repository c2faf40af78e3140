//! Chat on a SQLite connection (see [`crate::ChatStore`] for the contract and [`crate::chat`] for
//! the rules both backends share).
//!
//! Every write runs under `BEGIN IMMEDIATE`, so the database's write lock serializes it with
//! every other write: a batch's channel counters, its lines and its prune commit together, and
//! seqs follow commit order. Ids are `AUTOINCREMENT`, so an id is never handed out twice, even
//! after the line holding the largest one is pruned: the fleet feed's cursor never skips a line.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, TransactionBehavior};

use super::connection::CachedSql;
use super::{sql_err, SqliteStore};
use crate::chat::{
    check_active, check_append, check_channel, check_lift, check_limit, check_report,
    check_sanction, check_sanctions_of, AuditEntry, ChatStore, NewLine, NewReport, NewSanction,
    Report, ReportedLine, Sanction, StoredLine, MAX_CHAT_PAGE,
};
use crate::chat_rows::{
    after_bound, assign_seqs, audit_from_db, before_bound, channel_counts, first_seq, line_from_db,
    lines_json, missing_seqs, oldest_kept, report_from_db, sanction_from_db, AuditRow, RawAudit,
    RawLine, RawReport, RawSanction, AUDIT_COLUMNS, REPORT_COLUMNS, SANCTION_COLUMNS,
};
use crate::error::{Result, StoreError};
use crate::validate::{from_db, to_db};

/// A line's columns, in [`RawLine`]'s order.
const LINE_COLUMNS: &str = "id, channel, seq, sender, body, sent_at_ms, host_id";

/// Moves a channel's counter past `?2` new lines (creating it at `?2`) and answers it.
const BUMP: &str = "
    INSERT INTO chat_channels (channel, last_seq) VALUES (?1, ?2)
    ON CONFLICT (channel) DO UPDATE SET last_seq = chat_channels.last_seq + excluded.last_seq
    RETURNING last_seq";

/// One audit row.
const AUDIT: &str = "
    INSERT INTO chat_audit (at_ms, actor, action, target, scope, detail)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

fn raw_line(r: &Row<'_>) -> rusqlite::Result<RawLine> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn raw_sanction(r: &Row<'_>) -> rusqlite::Result<RawSanction> {
    Ok(RawSanction {
        id: r.get(0)?,
        principal: r.get(1)?,
        action: r.get(2)?,
        scope: r.get(3)?,
        until_ms: r.get(4)?,
        reason: r.get(5)?,
        actor: r.get(6)?,
        created_ms: r.get(7)?,
        lifted_ms: r.get(8)?,
        lifted_by: r.get(9)?,
    })
}

fn raw_report(r: &Row<'_>) -> rusqlite::Result<RawReport> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn raw_audit(r: &Row<'_>) -> rusqlite::Result<RawAudit> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

/// The rows of `sql` (with `args`), each read raw by `raw` and then checked by `parse`.
fn read_parsed<R, T>(
    conn: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
    raw: fn(&Row<'_>) -> rusqlite::Result<R>,
    parse: fn(R) -> Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(args.iter()), raw)
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for r in rows {
        out.push(parse(r.map_err(sql_err)?)?);
    }
    Ok(out)
}

/// Writes `row` inside the transaction `tx`.
fn audit(tx: &Connection, row: &AuditRow) -> Result<()> {
    tx.prepare_cached(AUDIT)
        .and_then(|mut stmt| {
            stmt.execute(params![
                row.at_ms, row.actor, row.action, row.target, row.scope, row.detail
            ])
        })
        .map_err(sql_err)?;
    Ok(())
}

fn append_lines(conn: &mut Connection, lines: &[NewLine], keep: u32) -> Result<Vec<StoredLine>> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let mut firsts = BTreeMap::new();
    let mut lasts = BTreeMap::new();
    let mut out = Vec::with_capacity(lines.len());
    {
        let mut bump = tx.prepare_cached(BUMP).map_err(sql_err)?;
        for (channel, count) in channel_counts(lines) {
            let last: i64 = bump
                .query_row(params![channel, count], |r| r.get(0))
                .map_err(sql_err)?;
            firsts.insert(channel, first_seq(channel, last, count)?);
            lasts.insert(channel, last);
        }
        let seqs = assign_seqs(lines, &firsts)?;
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO chat_lines (channel, seq, sender, body, sent_at_ms, host_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            )
            .map_err(sql_err)?;
        for (line, seq) in lines.iter().zip(seqs) {
            let sent_at = to_db("sent_at_ms", line.sent_at_ms)?;
            let id: i64 = insert
                .query_row(
                    params![
                        line.channel,
                        seq,
                        line.sender,
                        line.body,
                        sent_at,
                        line.host_id
                    ],
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            out.push(line_from_db((
                id,
                line.channel.clone(),
                seq,
                line.sender.clone(),
                line.body.clone(),
                sent_at,
                line.host_id.clone(),
            ))?);
        }
        // After the inserts, so a batch longer than `keep` is pruned too.
        let mut prune = tx
            .prepare_cached("DELETE FROM chat_lines WHERE channel = ?1 AND seq < ?2")
            .map_err(sql_err)?;
        for (channel, last) in lasts {
            prune
                .execute(params![channel, oldest_kept(last, keep)])
                .map_err(sql_err)?;
        }
    }
    tx.commit().map_err(sql_err)?;
    Ok(out)
}

fn add_sanction(conn: &mut Connection, s: &NewSanction) -> Result<Sanction> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let raw = tx
        .query_row_cached(
            &format!(
                "INSERT INTO chat_sanctions
                     (principal, action, scope, until_ms, reason, actor, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 RETURNING {SANCTION_COLUMNS}"
            ),
            params![
                s.principal,
                s.action.as_str(),
                s.scope.to_string(),
                to_db("until_ms", s.until_ms)?,
                s.reason,
                s.actor,
                to_db("created_ms", s.created_ms)?
            ],
            raw_sanction,
        )
        .map_err(sql_err)?;
    let sanction = sanction_from_db(raw)?;
    audit(&tx, &AuditRow::added(&sanction)?)?;
    tx.commit().map_err(sql_err)?;
    Ok(sanction)
}

fn lift_sanction(
    conn: &mut Connection,
    id: i64,
    actor: &str,
    now: u64,
) -> Result<Option<Sanction>> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let raw = tx
        .query_row_cached(
            &format!(
                "UPDATE chat_sanctions SET lifted_ms = ?2, lifted_by = ?3
                 WHERE id = ?1 AND lifted_ms IS NULL
                 RETURNING {SANCTION_COLUMNS}"
            ),
            params![id, to_db("now_ms", now)?, actor],
            raw_sanction,
        )
        .optional()
        .map_err(sql_err)?;
    let Some(raw) = raw else {
        return Ok(None);
    };
    let sanction = sanction_from_db(raw)?;
    audit(&tx, &AuditRow::lifted(&sanction, actor, now)?)?;
    tx.commit().map_err(sql_err)?;
    Ok(Some(sanction))
}

fn file_report(conn: &mut Connection, r: &NewReport, seqs: &[i64]) -> Result<Report> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    // The store's own copy of each line, never the reporter's.
    let mut lines = Vec::with_capacity(seqs.len());
    {
        let mut read = tx
            .prepare_cached(
                "SELECT seq, sender, sent_at_ms, body FROM chat_lines
                 WHERE channel = ?1 AND seq = ?2",
            )
            .map_err(sql_err)?;
        for seq in seqs {
            let found: Option<(i64, String, i64, String)> = read
                .query_row(params![r.channel, seq], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
                .optional()
                .map_err(sql_err)?;
            if let Some((seq, sender, sent_at_ms, body)) = found {
                lines.push(ReportedLine {
                    seq: from_db("chat line seq", seq)?,
                    sender,
                    sent_at_ms: from_db("chat line sent_at_ms", sent_at_ms)?,
                    body,
                });
            }
        }
    }
    let missing = missing_seqs(seqs, &lines);
    if !missing.is_empty() {
        return Err(StoreError::ChatLinesMissing {
            channel: r.channel.clone(),
            seqs: missing,
        });
    }
    let raw = tx
        .query_row_cached(
            &format!(
                "INSERT INTO chat_reports (reporter, channel, reason, lines, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING {REPORT_COLUMNS}"
            ),
            params![
                r.reporter,
                r.channel,
                r.reason,
                lines_json(&lines)?,
                to_db("created_ms", r.created_ms)?
            ],
            raw_report,
        )
        .map_err(sql_err)?;
    let report = report_from_db(raw)?;
    audit(&tx, &AuditRow::filed(&report)?)?;
    tx.commit().map_err(sql_err)?;
    Ok(report)
}

#[async_trait]
impl ChatStore for SqliteStore {
    async fn append_lines(&self, lines: &[NewLine], keep: u32) -> Result<Vec<StoredLine>> {
        check_append(lines, keep)?;
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        let lines = lines.to_vec();
        self.run(move |conn| append_lines(conn, &lines, keep)).await
    }

    async fn lines(
        &self,
        channel: &str,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<StoredLine>> {
        check_channel(channel)?;
        let limit = check_limit(limit)?;
        let (channel, before) = (channel.to_owned(), before_bound(before_seq));
        let mut lines = self
            .run(move |conn| {
                read_parsed(
                    conn,
                    &format!(
                        "SELECT {LINE_COLUMNS} FROM chat_lines
                         WHERE channel = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3"
                    ),
                    &[&channel, &before, &limit],
                    raw_line,
                    line_from_db,
                )
            })
            .await?;
        // Read newest first (the page's end is the newest); answered oldest first.
        lines.reverse();
        Ok(lines)
    }

    async fn lines_after(&self, after_id: u64, limit: u32) -> Result<Vec<StoredLine>> {
        let limit = check_limit(limit)?;
        let after = after_bound(after_id);
        self.run(move |conn| {
            read_parsed(
                conn,
                &format!(
                    "SELECT {LINE_COLUMNS} FROM chat_lines WHERE id > ?1 ORDER BY id LIMIT ?2"
                ),
                &[&after, &limit],
                raw_line,
                line_from_db,
            )
        })
        .await
    }

    async fn last_line_id(&self) -> Result<u64> {
        self.run(|conn| {
            let last: i64 = conn
                .query_row_cached("SELECT coalesce(max(id), 0) FROM chat_lines", [], |r| {
                    r.get(0)
                })
                .map_err(sql_err)?;
            from_db("chat line id", last)
        })
        .await
    }

    async fn add_sanction(&self, sanction: &NewSanction) -> Result<Sanction> {
        check_sanction(sanction)?;
        let sanction = sanction.clone();
        self.run(move |conn| add_sanction(conn, &sanction)).await
    }

    async fn lift_sanction(&self, id: u64, actor: &str, now_ms: u64) -> Result<Option<Sanction>> {
        check_lift(actor, now_ms)?;
        // No stored id passes i64::MAX: a larger one names no sanction.
        let Ok(id) = i64::try_from(id) else {
            return Ok(None);
        };
        let actor = actor.to_owned();
        self.run(move |conn| lift_sanction(conn, id, &actor, now_ms))
            .await
    }

    async fn active_sanctions(&self, now_ms: u64, limit: u32) -> Result<Vec<Sanction>> {
        let (now, limit) = check_active(now_ms, limit)?;
        self.run(move |conn| {
            read_parsed(
                conn,
                &format!(
                    "SELECT {SANCTION_COLUMNS} FROM chat_sanctions
                     WHERE lifted_ms IS NULL AND until_ms > ?1 ORDER BY id LIMIT ?2"
                ),
                &[&now, &limit],
                raw_sanction,
                sanction_from_db,
            )
        })
        .await
    }

    async fn sanctions_of(&self, principal: &str, now_ms: u64) -> Result<Vec<Sanction>> {
        check_sanctions_of(principal, now_ms)?;
        let (principal, now) = (principal.to_owned(), to_db("now_ms", now_ms)?);
        let limit = i64::from(MAX_CHAT_PAGE);
        self.run(move |conn| {
            read_parsed(
                conn,
                &format!(
                    "SELECT {SANCTION_COLUMNS} FROM chat_sanctions
                     WHERE principal = ?1 AND lifted_ms IS NULL AND until_ms > ?2
                     ORDER BY id LIMIT ?3"
                ),
                &[&principal, &now, &limit],
                raw_sanction,
                sanction_from_db,
            )
        })
        .await
    }

    async fn file_report(&self, report: &NewReport) -> Result<Report> {
        let seqs = check_report(report)?;
        let report = report.clone();
        self.run(move |conn| file_report(conn, &report, &seqs))
            .await
    }

    async fn reports(&self, after_id: u64, limit: u32) -> Result<Vec<Report>> {
        let limit = check_limit(limit)?;
        let after = after_bound(after_id);
        self.run(move |conn| {
            read_parsed(
                conn,
                &format!(
                    "SELECT {REPORT_COLUMNS} FROM chat_reports WHERE id > ?1 ORDER BY id LIMIT ?2"
                ),
                &[&after, &limit],
                raw_report,
                report_from_db,
            )
        })
        .await
    }

    async fn audit(&self, after_id: u64, limit: u32) -> Result<Vec<AuditEntry>> {
        let limit = check_limit(limit)?;
        let after = after_bound(after_id);
        self.run(move |conn| {
            read_parsed(
                conn,
                &format!(
                    "SELECT {AUDIT_COLUMNS} FROM chat_audit WHERE id > ?1 ORDER BY id LIMIT ?2"
                ),
                &[&after, &limit],
                raw_audit,
                audit_from_db,
            )
        })
        .await
    }
}
