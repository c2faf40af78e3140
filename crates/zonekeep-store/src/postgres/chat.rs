//! Chat on PostgreSQL (see [`crate::ChatStore`] for the contract and [`crate::chat`] for the
//! rules both backends share).
//!
//! An append moves each of its channels' counters with one upsert, which locks the counter row
//! until the transaction ends, taking the channels in byte order whatever order the lines came
//! in, so two appends never wait on each other in a cycle. The next append to a channel waits for
//! the counter and then reads the committed value: seqs are never repeated and follow commit
//! order within a channel. Lines are inserted after every counter is held, in input order, in
//! one statement; the prune then deletes older seqs of the same channels, still under their
//! counters. Ids come from a sequence, so they grow with every line but may commit out of order
//! across channels (the feed's reader knows). A lift locks its sanction row with its `UPDATE`, so
//! of two lifts one finds it lifted already and writes nothing.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::chat::{
    check_active, check_append, check_channel, check_lift, check_limit, check_report,
    check_sanction, check_sanctions_of, AuditEntry, ChatStore, NewLine, NewReport, NewSanction,
    Report, ReportedLine, Sanction, StoredLine, MAX_CHAT_PAGE,
};
use crate::chat_rows::{
    after_bound, assign_seqs, audit_from_db, before_bound, channel_counts, first_seq, line_from_db,
    lines_json, missing_seqs, oldest_kept, report_from_db, sanction_from_db, AuditRow, RawSanction,
    AUDIT_COLUMNS, REPORT_COLUMNS, SANCTION_COLUMNS,
};
use crate::error::{Result, StoreError};
use crate::validate::{from_db, to_db};

type Arg<'a> = &'a (dyn ToSql + Sync);

/// A line's columns, in the order [`line_of`] reads them.
const LINE_COLUMNS: &str = "id, channel, seq, sender, body, sent_at_ms, host_id";

/// Moves a channel's counter past `$2` new lines (creating it at `$2`) and answers it; the row
/// stays locked until the transaction ends.
const BUMP: &str = "
    INSERT INTO chat_channels (channel, last_seq) VALUES ($1, $2)
    ON CONFLICT (channel) DO UPDATE SET last_seq = chat_channels.last_seq + excluded.last_seq
    RETURNING last_seq";

/// A batch's lines, in input order (`ORDER BY n`: the sequence hands out ids in that order).
const INSERT_LINES: &str = "
    INSERT INTO chat_lines (channel, seq, sender, body, sent_at_ms, host_id)
    SELECT c, s, se, b, t, h
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[])
         WITH ORDINALITY AS l(c, s, se, b, t, h, n)
    ORDER BY n
    RETURNING id, channel, seq";

/// Deletes each written channel's lines below the oldest it keeps.
const PRUNE: &str = "
    DELETE FROM chat_lines AS l
    USING unnest($1::text[], $2::bigint[]) AS p(channel, oldest)
    WHERE l.channel = p.channel AND l.seq < p.oldest";

/// One audit row.
const AUDIT: &str = "
    INSERT INTO chat_audit (at_ms, actor, action, target, scope, detail)
    VALUES ($1, $2, $3, $4, $5, $6)";

fn line_of(row: &Row) -> Result<StoredLine> {
    line_from_db((
        col(row, 0)?,
        col(row, 1)?,
        col(row, 2)?,
        col(row, 3)?,
        col(row, 4)?,
        col(row, 5)?,
        col(row, 6)?,
    ))
}

fn sanction_of(row: &Row) -> Result<Sanction> {
    sanction_from_db(RawSanction {
        id: col(row, 0)?,
        principal: col(row, 1)?,
        action: col(row, 2)?,
        scope: col(row, 3)?,
        until_ms: col(row, 4)?,
        reason: col(row, 5)?,
        actor: col(row, 6)?,
        created_ms: col(row, 7)?,
        lifted_ms: col(row, 8)?,
        lifted_by: col(row, 9)?,
    })
}

fn report_of(row: &Row) -> Result<Report> {
    report_from_db((
        col(row, 0)?,
        col(row, 1)?,
        col(row, 2)?,
        col(row, 3)?,
        col(row, 4)?,
        col(row, 5)?,
    ))
}

fn audit_of(row: &Row) -> Result<AuditEntry> {
    audit_from_db((
        col(row, 0)?,
        col(row, 1)?,
        col(row, 2)?,
        col(row, 3)?,
        col(row, 4)?,
        col(row, 5)?,
        col(row, 6)?,
    ))
}

/// The rows of `sql` (with `args`), each checked by `parse`.
async fn read<T>(
    c: &impl GenericClient,
    sql: &str,
    args: &[Arg<'_>],
    parse: fn(&Row) -> Result<T>,
    err: &PgErr,
) -> Result<Vec<T>> {
    let rows = c.query(sql, args).await.map_err(|e| err.map(e))?;
    rows.iter().map(parse).collect()
}

/// Writes `row` inside the transaction `tx`.
async fn audit(tx: &Transaction<'_>, row: &AuditRow, err: &PgErr) -> Result<()> {
    tx.execute(
        AUDIT,
        &[
            &row.at_ms,
            &row.actor,
            &row.action,
            &row.target,
            &row.scope,
            &row.detail,
        ],
    )
    .await
    .map_err(|e| err.map(e))?;
    Ok(())
}

async fn append_lines(
    tx: Transaction<'_>,
    lines: &[NewLine],
    keep: u32,
    err: &PgErr,
) -> Result<Vec<StoredLine>> {
    let bump = tx.prepare(BUMP).await.map_err(|e| err.map(e))?;
    let (mut firsts, mut lasts) = (BTreeMap::new(), BTreeMap::new());
    // In byte order of the channel (a BTreeMap's): the lock order of every append.
    for (channel, count) in channel_counts(lines) {
        let row = tx
            .query_one(&bump, &[&channel, &count])
            .await
            .map_err(|e| err.map(e))?;
        let last: i64 = col(&row, 0)?;
        firsts.insert(channel, first_seq(channel, last, count)?);
        lasts.insert(channel, last);
    }
    let seqs = assign_seqs(lines, &firsts)?;
    let mut columns = (
        Vec::with_capacity(lines.len()),
        Vec::with_capacity(lines.len()),
        Vec::with_capacity(lines.len()),
        Vec::with_capacity(lines.len()),
        Vec::with_capacity(lines.len()),
        Vec::with_capacity(lines.len()),
    );
    for (line, seq) in lines.iter().zip(&seqs) {
        columns.0.push(line.channel.as_str());
        columns.1.push(*seq);
        columns.2.push(line.sender.as_str());
        columns.3.push(line.body.as_str());
        columns.4.push(to_db("sent_at_ms", line.sent_at_ms)?);
        columns.5.push(line.host_id.as_deref());
    }
    let rows = tx
        .query(
            INSERT_LINES,
            &[
                &columns.0, &columns.1, &columns.2, &columns.3, &columns.4, &columns.5,
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    // RETURNING promises no order: the ids are matched back by (channel, seq), which is unique.
    let mut ids = HashMap::with_capacity(rows.len());
    for row in &rows {
        let (id, channel, seq): (i64, String, i64) = (col(row, 0)?, col(row, 1)?, col(row, 2)?);
        ids.insert((channel, seq), id);
    }
    let (channels, oldest): (Vec<&str>, Vec<i64>) = lasts
        .iter()
        .map(|(channel, last)| (*channel, oldest_kept(*last, keep)))
        .unzip();
    tx.execute(PRUNE, &[&channels, &oldest])
        .await
        .map_err(|e| err.map(e))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    lines
        .iter()
        .zip(seqs)
        .map(|(line, seq)| {
            let id = ids
                .get(&(line.channel.clone(), seq))
                .copied()
                .ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "chat line {:?} seq {seq} was not answered by its insert",
                        line.channel
                    ))
                })?;
            line_from_db((
                id,
                line.channel.clone(),
                seq,
                line.sender.clone(),
                line.body.clone(),
                to_db("sent_at_ms", line.sent_at_ms)?,
                line.host_id.clone(),
            ))
        })
        .collect()
}

async fn file_report(
    tx: Transaction<'_>,
    r: &NewReport,
    seqs: &[i64],
    err: &PgErr,
) -> Result<Report> {
    // The store's own copy of each line, never the reporter's.
    let rows = tx
        .query(
            "SELECT seq, sender, sent_at_ms, body FROM chat_lines
             WHERE channel = $1 AND seq = ANY($2) ORDER BY seq",
            &[&r.channel, &seqs],
        )
        .await
        .map_err(|e| err.map(e))?;
    let lines = rows
        .iter()
        .map(|row| {
            Ok(ReportedLine {
                seq: from_db("chat line seq", col(row, 0)?)?,
                sender: col(row, 1)?,
                sent_at_ms: from_db("chat line sent_at_ms", col(row, 2)?)?,
                body: col(row, 3)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let missing = missing_seqs(seqs, &lines);
    if !missing.is_empty() {
        return Err(StoreError::ChatLinesMissing {
            channel: r.channel.clone(),
            seqs: missing,
        });
    }
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO chat_reports (reporter, channel, reason, lines, created_ms)
                 VALUES ($1, $2, $3, $4, $5) RETURNING {REPORT_COLUMNS}"
            ),
            &[
                &r.reporter,
                &r.channel,
                &r.reason,
                &lines_json(&lines)?,
                &to_db("created_ms", r.created_ms)?,
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    let report = report_of(&row)?;
    audit(&tx, &AuditRow::filed(&report)?, err).await?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(report)
}

#[async_trait]
impl ChatStore for PostgresStore {
    async fn append_lines(&self, lines: &[NewLine], keep: u32) -> Result<Vec<StoredLine>> {
        check_append(lines, keep)?;
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        append_lines(tx, lines, keep, &self.err).await
    }

    async fn lines(
        &self,
        channel: &str,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<StoredLine>> {
        check_channel(channel)?;
        let limit = check_limit(limit)?;
        let client = self.client().await?;
        let mut lines = read(
            &**client,
            &format!(
                "SELECT {LINE_COLUMNS} FROM chat_lines
                 WHERE channel = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3"
            ),
            &[&channel, &before_bound(before_seq), &limit],
            line_of,
            &self.err,
        )
        .await?;
        // Read newest first (the page's end is the newest); answered oldest first.
        lines.reverse();
        Ok(lines)
    }

    async fn lines_after(&self, after_id: u64, limit: u32) -> Result<Vec<StoredLine>> {
        let limit = check_limit(limit)?;
        let client = self.client().await?;
        read(
            &**client,
            &format!("SELECT {LINE_COLUMNS} FROM chat_lines WHERE id > $1 ORDER BY id LIMIT $2"),
            &[&after_bound(after_id), &limit],
            line_of,
            &self.err,
        )
        .await
    }

    async fn last_line_id(&self) -> Result<u64> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT coalesce(max(id), 0)::bigint FROM chat_lines", &[])
            .await
            .map_err(|e| self.err.map(e))?;
        from_db("chat line id", col(&row, 0)?)
    }

    async fn add_sanction(&self, s: &NewSanction) -> Result<Sanction> {
        check_sanction(s)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO chat_sanctions
                         (principal, action, scope, until_ms, reason, actor, created_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)
                     RETURNING {SANCTION_COLUMNS}"
                ),
                &[
                    &s.principal,
                    &s.action.as_str(),
                    &s.scope.to_string(),
                    &to_db("until_ms", s.until_ms)?,
                    &s.reason,
                    &s.actor,
                    &to_db("created_ms", s.created_ms)?,
                ],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        let sanction = sanction_of(&row)?;
        audit(&tx, &AuditRow::added(&sanction)?, &self.err).await?;
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(sanction)
    }

    async fn lift_sanction(&self, id: u64, actor: &str, now_ms: u64) -> Result<Option<Sanction>> {
        check_lift(actor, now_ms)?;
        // No stored id passes i64::MAX: a larger one names no sanction.
        let Ok(id) = i64::try_from(id) else {
            return Ok(None);
        };
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE chat_sanctions SET lifted_ms = $2, lifted_by = $3
                     WHERE id = $1 AND lifted_ms IS NULL
                     RETURNING {SANCTION_COLUMNS}"
                ),
                &[&id, &to_db("now_ms", now_ms)?, &actor],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sanction = sanction_of(&row)?;
        audit(&tx, &AuditRow::lifted(&sanction, actor, now_ms)?, &self.err).await?;
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(Some(sanction))
    }

    async fn active_sanctions(&self, now_ms: u64, limit: u32) -> Result<Vec<Sanction>> {
        let (now, limit) = check_active(now_ms, limit)?;
        let client = self.client().await?;
        read(
            &**client,
            &format!(
                "SELECT {SANCTION_COLUMNS} FROM chat_sanctions
                 WHERE lifted_ms IS NULL AND until_ms > $1 ORDER BY id LIMIT $2"
            ),
            &[&now, &limit],
            sanction_of,
            &self.err,
        )
        .await
    }

    async fn sanctions_of(&self, principal: &str, now_ms: u64) -> Result<Vec<Sanction>> {
        check_sanctions_of(principal, now_ms)?;
        let now = to_db("now_ms", now_ms)?;
        let client = self.client().await?;
        read(
            &**client,
            &format!(
                "SELECT {SANCTION_COLUMNS} FROM chat_sanctions
                 WHERE principal = $1 AND lifted_ms IS NULL AND until_ms > $2
                 ORDER BY id LIMIT $3"
            ),
            &[&principal, &now, &i64::from(MAX_CHAT_PAGE)],
            sanction_of,
            &self.err,
        )
        .await
    }

    async fn file_report(&self, report: &NewReport) -> Result<Report> {
        let seqs = check_report(report)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        file_report(tx, report, &seqs, &self.err).await
    }

    async fn reports(&self, after_id: u64, limit: u32) -> Result<Vec<Report>> {
        let limit = check_limit(limit)?;
        let client = self.client().await?;
        read(
            &**client,
            &format!(
                "SELECT {REPORT_COLUMNS} FROM chat_reports WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            &[&after_bound(after_id), &limit],
            report_of,
            &self.err,
        )
        .await
    }

    async fn audit(&self, after_id: u64, limit: u32) -> Result<Vec<AuditEntry>> {
        let limit = check_limit(limit)?;
        let client = self.client().await?;
        read(
            &**client,
            &format!("SELECT {AUDIT_COLUMNS} FROM chat_audit WHERE id > $1 ORDER BY id LIMIT $2"),
            &[&after_bound(after_id), &limit],
            audit_of,
            &self.err,
        )
        .await
    }
}
