//! SQLite schema migrations, versioned by `PRAGMA user_version`.
//!
//! `user_version` lives in the database header and changes inside the same transaction as the
//! migration's DDL, so a crash mid-migration leaves either the old or the new version, never half.
//! The transaction is `BEGIN IMMEDIATE`, so two processes opening the same file at once serialize:
//! the second sees the version the first wrote and applies nothing.

use rusqlite::{Connection, TransactionBehavior};

use super::sql_err;
use crate::error::{Result, StoreError};
use crate::schema::Migration;

/// Every migration, in order; index + 1 is the version it brings the database to.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        name: "initial schema: fences, saves, facts, totals",
        sql: "
        CREATE TABLE zone_fences (
            zone_id TEXT PRIMARY KEY,
            epoch   INTEGER NOT NULL CHECK (epoch >= 0)
        ) STRICT;
        CREATE TABLE zone_saves (
            zone_id     TEXT PRIMARY KEY,
            kind        TEXT NOT NULL,
            epoch       INTEGER NOT NULL CHECK (epoch >= 0),
            seq         INTEGER NOT NULL CHECK (seq >= 0),
            bytes       BLOB NOT NULL,
            saved_at_ms INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE facts (
            key            TEXT PRIMARY KEY,
            zone_id        TEXT NOT NULL,
            kind           TEXT NOT NULL,
            principal      TEXT,
            payload        TEXT NOT NULL,
            result         TEXT NOT NULL,
            recorded_at_ms INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX facts_by_zone ON facts (zone_id);
        CREATE TABLE fact_totals (
            principal TEXT NOT NULL,
            name      TEXT NOT NULL,
            total     INTEGER NOT NULL,
            PRIMARY KEY (principal, name)
        ) STRICT;
    ",
    },
    Migration {
        name: "fleet directory: hosts with heartbeats, zone ownership",
        sql: "
        CREATE TABLE fleet_hosts (
            host_id      TEXT PRIMARY KEY,
            incarnation  TEXT NOT NULL,
            url          TEXT NOT NULL,
            capacity     INTEGER NOT NULL CHECK (capacity >= 0),
            draining     INTEGER NOT NULL CHECK (draining IN (0, 1)),
            has_left     INTEGER NOT NULL CHECK (has_left IN (0, 1)),
            heartbeat_ms INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE zone_directory (
            zone_id TEXT PRIMARY KEY,
            kind    TEXT NOT NULL,
            params  TEXT NOT NULL,
            owner   TEXT
        ) STRICT;
        CREATE INDEX zone_directory_by_owner ON zone_directory (owner);
    ",
    },
    Migration {
        name: "spent tickets: single-use ticket ids across the fleet",
        sql: "
        CREATE TABLE spent_tickets (
            jti        TEXT PRIMARY KEY,
            expires_ms INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX spent_tickets_by_expiry ON spent_tickets (expires_ms);
    ",
    },
    Migration {
        name: "zone modules: content-addressed modules, the module each kind runs",
        sql: "
        CREATE TABLE modules (
            sha256        TEXT PRIMARY KEY CHECK (length(sha256) = 64),
            bytes         BLOB NOT NULL,
            size          INTEGER NOT NULL CHECK (size > 0),
            created_at_ms INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE module_kinds (
            kind           TEXT PRIMARY KEY,
            sha256         TEXT NOT NULL REFERENCES modules (sha256),
            version        INTEGER NOT NULL CHECK (version >= 1),
            deployed_at_ms INTEGER NOT NULL
        ) STRICT;
    ",
    },
    Migration {
        name: "zone transfers: a player's move between zones, fenced by both zones' epochs",
        sql: "
        CREATE TABLE zone_transfers (
            id             TEXT PRIMARY KEY,
            principal      TEXT NOT NULL,
            player         INTEGER NOT NULL CHECK (player >= 0),
            source_zone    TEXT NOT NULL,
            source_epoch   INTEGER NOT NULL CHECK (source_epoch >= 0),
            target_zone    TEXT NOT NULL,
            claims         TEXT NOT NULL,
            player_claims  TEXT NOT NULL,
            state          BLOB NOT NULL,
            status         TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'returned')),
            target_epoch   INTEGER CHECK (target_epoch >= 0),
            reason         TEXT,
            arrived        INTEGER NOT NULL DEFAULT 0 CHECK (arrived IN (0, 1)),
            created_at_ms  INTEGER NOT NULL,
            resolved_at_ms INTEGER
        ) STRICT;
        CREATE INDEX zone_transfers_from ON zone_transfers (source_zone, status);
        CREATE INDEX zone_transfers_into ON zone_transfers (target_zone, status);
        CREATE INDEX zone_transfers_by_principal
            ON zone_transfers (source_zone, principal, created_at_ms);
    ",
    },
    Migration {
        name: "characters: a player's travelling state under one zone's lease",
        sql: "
        CREATE TABLE characters (
            principal     TEXT PRIMARY KEY,
            data          BLOB NOT NULL,
            version       INTEGER NOT NULL CHECK (version >= 0),
            holder_zone   TEXT,
            holder_epoch  INTEGER CHECK (holder_epoch >= 0),
            updated_at_ms INTEGER NOT NULL,
            CHECK ((holder_zone IS NULL) = (holder_epoch IS NULL))
        ) STRICT;
    ",
    },
    Migration {
        name: "zone calls: the journal of zones' external calls and their answers",
        sql: "
        CREATE TABLE zone_calls (
            zone_id        TEXT NOT NULL,
            call_key       TEXT NOT NULL,
            function       TEXT NOT NULL,
            args           TEXT NOT NULL,
            args_sha256    TEXT NOT NULL CHECK (length(args_sha256) = 64),
            answer_kind    TEXT CHECK (answer_kind IN ('ok', 'failed')),
            answer_ok      TEXT,
            answer_code    TEXT,
            answer_message TEXT,
            created_at_ms  INTEGER NOT NULL,
            settled_at_ms  INTEGER,
            PRIMARY KEY (zone_id, call_key),
            CHECK (
                (answer_kind IS NULL AND answer_ok IS NULL AND answer_code IS NULL
                    AND answer_message IS NULL AND settled_at_ms IS NULL)
                OR (coalesce(answer_kind, '') = 'ok' AND answer_ok IS NOT NULL
                    AND answer_code IS NULL AND answer_message IS NULL
                    AND settled_at_ms IS NOT NULL)
                OR (coalesce(answer_kind, '') = 'failed' AND answer_ok IS NULL
                    AND answer_code IS NOT NULL AND answer_message IS NOT NULL
                    AND settled_at_ms IS NOT NULL))
        ) STRICT;
        CREATE INDEX zone_calls_by_age ON zone_calls (coalesce(settled_at_ms, created_at_ms));
    ",
    },
    Migration {
        name: "module deploy history: every kind's recent deploys and why each was made",
        sql: "
        CREATE TABLE module_deploys (
            kind           TEXT NOT NULL,
            version        INTEGER NOT NULL CHECK (version >= 1),
            sha256         TEXT NOT NULL REFERENCES modules (sha256),
            cause          TEXT NOT NULL CHECK (cause IN ('push', 'rollback')),
            deployed_at_ms INTEGER NOT NULL,
            PRIMARY KEY (kind, version)
        ) STRICT;
        INSERT INTO module_deploys (kind, version, sha256, cause, deployed_at_ms)
            SELECT kind, version, sha256, 'push', deployed_at_ms FROM module_kinds;
    ",
    },
    Migration {
        name: "lobby: rooms players find, and the seats handed out in them",
        sql: "
        CREATE TABLE lobby_rooms (
            zone_id         TEXT PRIMARY KEY,
            kind            TEXT NOT NULL,
            content_version TEXT NOT NULL,
            code            TEXT UNIQUE,
            max_players     INTEGER NOT NULL CHECK (max_players >= 0),
            max_observers   INTEGER NOT NULL CHECK (max_observers >= 0),
            players         INTEGER NOT NULL CHECK (players >= 0),
            observers       INTEGER NOT NULL CHECK (observers >= 0),
            reserved_players   INTEGER NOT NULL DEFAULT 0 CHECK (reserved_players >= 0),
            reserved_observers INTEGER NOT NULL DEFAULT 0 CHECK (reserved_observers >= 0),
            open            INTEGER NOT NULL CHECK (open IN (0, 1)),
            metadata        TEXT NOT NULL,
            created_at_ms   INTEGER NOT NULL,
            active_at_ms    INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX lobby_rooms_by_kind ON lobby_rooms (kind, open);
        CREATE TABLE lobby_seats (
            zone_id    TEXT NOT NULL,
            principal  TEXT NOT NULL,
            role       TEXT NOT NULL CHECK (role IN ('player', 'observer')),
            address    TEXT,
            expires_ms INTEGER,
            PRIMARY KEY (zone_id, principal)
        ) STRICT;
        CREATE INDEX lobby_seats_by_address ON lobby_seats (zone_id, address);
        CREATE INDEX lobby_seats_by_principal ON lobby_seats (principal);
        CREATE INDEX lobby_seats_by_expiry ON lobby_seats (expires_ms);
    ",
    },
    Migration {
        name: "matchmaking: hosts' regions, and the matchmaker's searches",
        sql: "
        ALTER TABLE fleet_hosts ADD COLUMN region TEXT NOT NULL DEFAULT 'local';
        CREATE TABLE match_searches (
            search_id    TEXT PRIMARY KEY,
            queue        TEXT NOT NULL,
            principal    TEXT NOT NULL,
            name         TEXT,
            token_hash   TEXT NOT NULL,
            state        TEXT NOT NULL,
            reason       TEXT,
            probes       TEXT NOT NULL,
            rtts         TEXT NOT NULL,
            region       TEXT,
            match_id     TEXT,
            zone_id      TEXT,
            kid          TEXT,
            assignment   TEXT,
            created_ms   INTEGER NOT NULL,
            queued_ms    INTEGER,
            heartbeat_ms INTEGER NOT NULL,
            changed_ms   INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX match_searches_queued ON match_searches (queue, state, queued_ms);
        CREATE INDEX match_searches_by_match ON match_searches (match_id);
        CREATE INDEX match_searches_by_change ON match_searches (changed_ms);
        CREATE INDEX match_searches_by_state ON match_searches (state);
    ",
    },
    Migration {
        name: "leaderboards: boards, and the scores facts give principals on them",
        sql: "
        CREATE TABLE boards (
            name          TEXT PRIMARY KEY,
            sort_order    TEXT NOT NULL CHECK (sort_order IN ('desc', 'asc')),
            op            TEXT NOT NULL CHECK (op IN ('incr', 'best', 'set')),
            period        TEXT NOT NULL CHECK (period IN ('all', 'daily', 'weekly')),
            total         TEXT,
            keep_periods  INTEGER NOT NULL CHECK (keep_periods >= 0),
            created_at_ms INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX boards_by_total ON boards (total) WHERE total IS NOT NULL;
        CREATE TABLE board_entries (
            board         TEXT NOT NULL,
            period        INTEGER NOT NULL CHECK (period >= 0),
            principal     TEXT NOT NULL,
            score         INTEGER NOT NULL,
            sort_key      INTEGER NOT NULL,
            version       INTEGER NOT NULL CHECK (version >= 1),
            updated_at_ms INTEGER NOT NULL,
            PRIMARY KEY (board, period, principal)
        ) STRICT;
        CREATE INDEX board_entries_by_rank ON board_entries (board, period, sort_key, principal);
        CREATE INDEX board_entries_by_change ON board_entries (updated_at_ms);
    ",
    },
    Migration {
        name: "presence: who is in which zone, on which host, since when",
        sql: "
        CREATE TABLE presence (
            principal     TEXT NOT NULL,
            zone_id       TEXT NOT NULL,
            host_id       TEXT NOT NULL,
            incarnation   TEXT NOT NULL,
            since_ms      INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL,
            PRIMARY KEY (principal, zone_id)
        ) STRICT;
        CREATE INDEX presence_by_host ON presence (host_id);
    ",
    },
    Migration {
        name: "chat: channels' counters, lines, sanctions, reports and their audit",
        // Ids are AUTOINCREMENT so none is ever handed out twice (a pruned line's id included):
        // the fleet feed reads lines by id. The unique (channel, seq) is the index every read
        // of a channel and every prune uses.
        sql: "
        CREATE TABLE chat_channels (
            channel  TEXT PRIMARY KEY,
            last_seq INTEGER NOT NULL CHECK (last_seq >= 0)
        ) STRICT;
        CREATE TABLE chat_lines (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            channel    TEXT NOT NULL,
            seq        INTEGER NOT NULL CHECK (seq >= 1),
            sender     TEXT NOT NULL,
            body       TEXT NOT NULL,
            sent_at_ms INTEGER NOT NULL CHECK (sent_at_ms >= 0),
            host_id    TEXT,
            UNIQUE (channel, seq)
        ) STRICT;
        CREATE TABLE chat_sanctions (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            principal  TEXT NOT NULL,
            action     TEXT NOT NULL CHECK (action IN ('mute', 'ban')),
            scope      TEXT NOT NULL CHECK (scope = 'fleet'
                OR (substr(scope, 1, 5) = 'zone:' AND length(scope) > 5)
                OR (substr(scope, 1, 6) = 'group:' AND length(scope) > 6)),
            until_ms   INTEGER NOT NULL,
            reason     TEXT NOT NULL,
            actor      TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            lifted_ms  INTEGER,
            lifted_by  TEXT,
            CHECK ((lifted_ms IS NULL) = (lifted_by IS NULL))
        ) STRICT;
        CREATE INDEX chat_sanctions_by_until ON chat_sanctions (until_ms);
        CREATE INDEX chat_sanctions_by_principal ON chat_sanctions (principal);
        CREATE TABLE chat_reports (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            reporter   TEXT NOT NULL,
            channel    TEXT NOT NULL,
            reason     TEXT NOT NULL,
            lines      TEXT NOT NULL,
            created_ms INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE chat_audit (
            id     INTEGER PRIMARY KEY AUTOINCREMENT,
            at_ms  INTEGER NOT NULL,
            actor  TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('mute', 'ban', 'lift', 'report')),
            target TEXT NOT NULL,
            scope  TEXT NOT NULL,
            detail TEXT NOT NULL
        ) STRICT;
    ",
    },
];

/// Brings the database to the newest schema this build knows; refuses a newer one.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let found: i64 = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql_err)?;
    let supported = i64::try_from(MIGRATIONS.len())
        .map_err(|_| StoreError::Corrupt("too many migrations".into()))?;
    if found > supported {
        return Err(StoreError::SchemaTooNew { found, supported });
    }
    let applied = usize::try_from(found)
        .map_err(|_| StoreError::Corrupt(format!("negative user_version {found}")))?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(migration.sql).map_err(sql_err)?;
        tracing::info!(
            version = index + 1,
            name = migration.name,
            "applied sqlite migration"
        );
    }
    if found != supported {
        tx.pragma_update(None, "user_version", supported)
            .map_err(sql_err)?;
    }
    tx.commit().map_err(sql_err)
}
