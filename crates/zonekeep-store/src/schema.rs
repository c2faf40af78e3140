//! The tables both backends keep, described once.
//!
//! The SQL differs per backend (types, `STRICT`, `BYTEA`), so each backend has its own migration
//! list, but they must describe the same logical schema:
//!
//! - `zone_fences(zone_id PK, epoch)`: the highest epoch claimed or written per zone. Kept apart
//!   from the save so a claim fences old owners before the new owner has saved anything, and so
//!   deleting a save never lowers the fence.
//! - `zone_saves(zone_id PK, kind, epoch, seq, bytes, saved_at_ms)`: the latest save per zone.
//! - `facts(key PK, zone_id, kind, principal, payload, result, recorded_at_ms)`: the ledger; the
//!   primary key on `key` is what makes recording idempotent.
//! - `fact_totals(principal, name, total, PK(principal, name))`: the built-in effect's table, meant
//!   to be read by games (e.g. per-player scores).
//! - `fleet_hosts(host_id PK, incarnation, url, capacity, draining, has_left, heartbeat_ms)`: the
//!   directory's hosts; `heartbeat_ms` is stamped by the database's clock (ms since the Unix
//!   epoch) and only ever compared with that same clock in SQL.
//! - `zone_directory(zone_id PK, kind, params, owner)`: each placed zone's kind, params (JSON) and
//!   owner (NULL while dormant). It has no epoch column on purpose: the zone's epoch is its fence.
//! - `spent_tickets(jti PK, expires_ms)`: ticket ids already used, kept until they expire.
//! - `modules(sha256 PK, bytes, size, created_at_ms)`: zone modules by content address (the
//!   lowercase hex SHA-256 of `bytes`); rows are only ever added.
//! - `module_kinds(kind PK, sha256 -> modules, version, deployed_at_ms)`: the module each module
//!   kind runs and how many deploys it has had; `deployed_at_ms` is stamped by the database's clock.
//!   The deploy checks in its transaction that the module is stored (SQLite does not enforce the
//!   reference, as its foreign keys are off).
//! - `zone_transfers(id PK, principal, player, source_zone, source_epoch, target_zone, claims,
//!   player_claims, state, status, target_epoch, reason, arrived, created_at_ms, resolved_at_ms)`:
//!   players moving between zones, each status change fenced by the writing zone's epoch.
//! - `characters(principal PK, data, version, holder_zone, holder_epoch, updated_at_ms)`: each
//!   principal's character bytes and how many commits wrote them, with the zone holding its lease
//!   and that zone's owner epoch (both NULL while free, never one without the other).
//!   `updated_at_ms` is stamped by the database's clock. The lease's epoch is checked against
//!   `zone_fences` in every write's transaction; the table keeps no clock of its own.
//! - `zone_calls(zone_id, call_key, function, args, args_sha256, answer_kind, answer_ok,
//!   answer_code, answer_message, created_at_ms, settled_at_ms, PK(zone_id, call_key))`: the
//!   journal of zones' external calls. `args` is the exact JSON text (TEXT, not JSONB, so it is
//!   compared byte for byte) beside its SHA-256 in lowercase hex; the answer is NULL while the
//!   call is pending, then `answer_kind` `'ok'` with `answer_ok` (JSON text) or `'failed'` with
//!   `answer_code` and `answer_message`, set together with `settled_at_ms`. Both stamps come from
//!   the database's clock; the index on `coalesce(settled_at_ms, created_at_ms)` serves the sweep.
//! - `boards(name PK, sort_order, op, period, total, keep_periods, created_at_ms)`: the declared
//!   leaderboards (see [`crate::boards`]): `sort_order` `'desc'` or `'asc'`, `op` `'incr'`,
//!   `'best'` or `'set'`, `period` `'all'`, `'daily'` or `'weekly'`, and the fact total the board
//!   follows (NULL for none; indexed where set, so recording a fact finds its followers).
//! - `board_entries(board, period, principal, score, sort_key, version, updated_at_ms,
//!   PK(board, period, principal))`: each principal's score on a board in one period (the
//!   period's start in ms, 0 for an `all` board), changed only in the transaction recording a
//!   fact. `sort_key` is the score as ranked (negated on a `desc` board); the index on
//!   `(board, period, sort_key, principal)` is the rank order, and the index on `updated_at_ms`
//!   (stamped by the database's clock) is the change feed an index follows. `version` rises with
//!   every change of the row. On PostgreSQL, board names and principals are `COLLATE "C"`, so
//!   ties order by bytes as in SQLite and Redis.
//! - `presence(principal, zone_id, host_id, incarnation, since_ms, updated_at_ms,
//!   PK(principal, zone_id))`: who is in which zone (see [`crate::presence`]), written by the
//!   host running the zone's session under its incarnation. A row is live only while
//!   `fleet_hosts` holds that host under that same incarnation, not left, with a heartbeat
//!   within the fleet's takeover bound; nothing else expires it. `since_ms` (when the principal
//!   arrived, kept across resumes) and `updated_at_ms` are stamped by the database's clock; the
//!   index on `host_id` serves the join with `fleet_hosts` and the sweep. On PostgreSQL,
//!   principals and zone ids are `COLLATE "C"`, so listings order by bytes as in SQLite.
//! - `chat_channels(channel PK, last_seq)`: each chat channel's counter (see [`crate::chat`]),
//!   locked while a batch of lines is appended, so a channel's `seq` order is its commit order.
//! - `chat_lines(id, channel, seq, sender, body, sent_at_ms, host_id, UNIQUE(channel, seq))`:
//!   the lines each channel keeps (its newest `keep`; older ones are pruned as new ones come).
//!   `id` is never handed out twice and orders the fleet's feed; a direct channel's key is `dm:`
//!   and its two principals sorted, joined by 0x1F.
//! - `chat_sanctions(id, principal, action, scope, until_ms, reason, actor, created_ms,
//!   lifted_ms, lifted_by)`: mutes and bans (`fleet`, `zone:<id>`, `group:<name>`), in force
//!   while not lifted and `until_ms` is ahead.
//! - `chat_reports(id, reporter, channel, reason, lines, created_ms)`: reports, `lines` the JSON
//!   copy of the reported lines as the store held them when the report was filed.
//! - `chat_audit(id, at_ms, actor, action, target, scope, detail)`: every mute, ban, lift and
//!   report, written in the transaction of the action.
//!
//! A migration is appended, never edited: databases in the field have already run the old ones.

/// One schema step: a human name (logged and, on PostgreSQL, recorded) and its SQL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    /// Short description, e.g. "initial schema".
    pub name: &'static str,
    /// Statements to run, separated by semicolons.
    pub sql: &'static str,
}
