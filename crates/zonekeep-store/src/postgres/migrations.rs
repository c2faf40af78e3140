//! PostgreSQL schema migrations, versioned in a `zonekeep_migrations` table.
//!
//! All of it runs in one transaction that first takes a transaction-scoped advisory lock, so two
//! hosts starting at once against the same database serialize: the second waits, then finds every
//! version recorded and applies nothing. DDL is transactional in PostgreSQL, so a crash mid-way
//! leaves the previous version intact. The lock is database-wide (advisory locks ignore schemas),
//! which only means that migrations of different schemas wait for each other — they are short.

use deadpool_postgres::Object;
use tokio_postgres::IsolationLevel;

use super::PgErr;
use crate::error::{Result, StoreError};
use crate::schema::Migration;

/// Advisory lock key: the ASCII bytes of "zonekeep" read as a big-endian i64.
const MIGRATION_LOCK_KEY: i64 = 0x7a6f_6e65_6b65_6570;

/// Every migration, in order; index + 1 is its version number.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        name: "initial schema: fences, saves, facts, totals",
        sql: "
        CREATE TABLE zone_fences (
            zone_id TEXT PRIMARY KEY,
            epoch   BIGINT NOT NULL CHECK (epoch >= 0)
        );
        CREATE TABLE zone_saves (
            zone_id     TEXT PRIMARY KEY,
            kind        TEXT NOT NULL,
            epoch       BIGINT NOT NULL CHECK (epoch >= 0),
            seq         BIGINT NOT NULL CHECK (seq >= 0),
            bytes       BYTEA NOT NULL,
            saved_at_ms BIGINT NOT NULL
        );
        CREATE TABLE facts (
            key            TEXT PRIMARY KEY,
            zone_id        TEXT NOT NULL,
            kind           TEXT NOT NULL,
            principal      TEXT,
            payload        JSONB NOT NULL,
            result         JSONB NOT NULL,
            recorded_at_ms BIGINT NOT NULL
        );
        CREATE INDEX facts_by_zone ON facts (zone_id);
        CREATE TABLE fact_totals (
            principal TEXT NOT NULL,
            name      TEXT NOT NULL,
            total     BIGINT NOT NULL,
            PRIMARY KEY (principal, name)
        );
    ",
    },
    Migration {
        name: "fleet directory: hosts with heartbeats, zone ownership",
        sql: "
        CREATE TABLE fleet_hosts (
            host_id      TEXT PRIMARY KEY,
            incarnation  TEXT NOT NULL,
            url          TEXT NOT NULL,
            capacity     BIGINT NOT NULL CHECK (capacity >= 0),
            draining     BOOLEAN NOT NULL,
            has_left     BOOLEAN NOT NULL,
            heartbeat_ms BIGINT NOT NULL
        );
        CREATE TABLE zone_directory (
            zone_id TEXT PRIMARY KEY,
            kind    TEXT NOT NULL,
            params  JSONB NOT NULL,
            owner   TEXT
        );
        CREATE INDEX zone_directory_by_owner ON zone_directory (owner);
    ",
    },
    Migration {
        name: "spent tickets: single-use ticket ids across the fleet",
        sql: "
        CREATE TABLE spent_tickets (
            jti        TEXT PRIMARY KEY,
            expires_ms BIGINT NOT NULL
        );
        CREATE INDEX spent_tickets_by_expiry ON spent_tickets (expires_ms);
    ",
    },
    Migration {
        name: "zone modules: content-addressed modules, the module each kind runs",
        sql: "
        CREATE TABLE modules (
            sha256        TEXT PRIMARY KEY CHECK (octet_length(sha256) = 64),
            bytes         BYTEA NOT NULL,
            size          BIGINT NOT NULL CHECK (size > 0),
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE module_kinds (
            kind           TEXT PRIMARY KEY,
            sha256         TEXT NOT NULL REFERENCES modules (sha256),
            version        BIGINT NOT NULL CHECK (version >= 1),
            deployed_at_ms BIGINT NOT NULL
        );
    ",
    },
    Migration {
        name: "zone transfers: a player's move between zones, fenced by both zones' epochs",
        sql: "
        CREATE TABLE zone_transfers (
            id             TEXT PRIMARY KEY,
            principal      TEXT NOT NULL,
            player         BIGINT NOT NULL CHECK (player >= 0),
            source_zone    TEXT NOT NULL,
            source_epoch   BIGINT NOT NULL CHECK (source_epoch >= 0),
            target_zone    TEXT NOT NULL,
            claims         TEXT NOT NULL,
            player_claims  TEXT NOT NULL,
            state          BYTEA NOT NULL,
            status         TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'returned')),
            target_epoch   BIGINT CHECK (target_epoch >= 0),
            reason         TEXT,
            arrived        BOOLEAN NOT NULL DEFAULT false,
            created_at_ms  BIGINT NOT NULL,
            resolved_at_ms BIGINT
        );
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
            data          BYTEA NOT NULL,
            version       BIGINT NOT NULL CHECK (version >= 0),
            holder_zone   TEXT,
            holder_epoch  BIGINT CHECK (holder_epoch >= 0),
            updated_at_ms BIGINT NOT NULL,
            CHECK ((holder_zone IS NULL) = (holder_epoch IS NULL))
        );
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
            args_sha256    TEXT NOT NULL CHECK (octet_length(args_sha256) = 64),
            answer_kind    TEXT CHECK (answer_kind IN ('ok', 'failed')),
            answer_ok      TEXT,
            answer_code    TEXT,
            answer_message TEXT,
            created_at_ms  BIGINT NOT NULL,
            settled_at_ms  BIGINT,
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
        );
        CREATE INDEX zone_calls_by_age ON zone_calls ((coalesce(settled_at_ms, created_at_ms)));
    ",
    },
    Migration {
        name: "module deploy history: every kind's recent deploys and why each was made",
        sql: "
        CREATE TABLE module_deploys (
            kind           TEXT NOT NULL,
            version        BIGINT NOT NULL CHECK (version >= 1),
            sha256         TEXT NOT NULL REFERENCES modules (sha256),
            cause          TEXT NOT NULL CHECK (cause IN ('push', 'rollback')),
            deployed_at_ms BIGINT NOT NULL,
            PRIMARY KEY (kind, version)
        );
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
            max_players     BIGINT NOT NULL CHECK (max_players >= 0),
            max_observers   BIGINT NOT NULL CHECK (max_observers >= 0),
            players         BIGINT NOT NULL CHECK (players >= 0),
            observers       BIGINT NOT NULL CHECK (observers >= 0),
            reserved_players   BIGINT NOT NULL DEFAULT 0 CHECK (reserved_players >= 0),
            reserved_observers BIGINT NOT NULL DEFAULT 0 CHECK (reserved_observers >= 0),
            open            BIGINT NOT NULL CHECK (open IN (0, 1)),
            metadata        TEXT NOT NULL,
            created_at_ms   BIGINT NOT NULL,
            active_at_ms    BIGINT NOT NULL
        );
        CREATE INDEX lobby_rooms_by_kind ON lobby_rooms (kind, open);
        CREATE TABLE lobby_seats (
            zone_id    TEXT NOT NULL,
            principal  TEXT NOT NULL,
            role       TEXT NOT NULL CHECK (role IN ('player', 'observer')),
            address    TEXT,
            expires_ms BIGINT,
            PRIMARY KEY (zone_id, principal)
        );
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
            created_ms   BIGINT NOT NULL,
            queued_ms    BIGINT,
            heartbeat_ms BIGINT NOT NULL,
            changed_ms   BIGINT NOT NULL
        );
        CREATE INDEX match_searches_queued ON match_searches (queue, state, queued_ms);
        CREATE INDEX match_searches_by_match ON match_searches (match_id);
        CREATE INDEX match_searches_by_change ON match_searches (changed_ms);
        CREATE INDEX match_searches_by_state ON match_searches (state);
    ",
    },
    Migration {
        name: "leaderboards: boards, and the scores facts give principals on them",
        // Names and principals compare as bytes (`COLLATE "C"`), like SQLite's BINARY and a
        // Redis sorted set's ties, so every backend and index agrees on every rank and listing.
        sql: "
        CREATE TABLE boards (
            name          TEXT COLLATE \"C\" PRIMARY KEY,
            sort_order    TEXT NOT NULL CHECK (sort_order IN ('desc', 'asc')),
            op            TEXT NOT NULL CHECK (op IN ('incr', 'best', 'set')),
            period        TEXT NOT NULL CHECK (period IN ('all', 'daily', 'weekly')),
            total         TEXT,
            keep_periods  BIGINT NOT NULL CHECK (keep_periods >= 0),
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX boards_by_total ON boards (total) WHERE total IS NOT NULL;
        CREATE TABLE board_entries (
            board         TEXT COLLATE \"C\" NOT NULL,
            period        BIGINT NOT NULL CHECK (period >= 0),
            principal     TEXT COLLATE \"C\" NOT NULL,
            score         BIGINT NOT NULL,
            sort_key      BIGINT NOT NULL,
            version       BIGINT NOT NULL CHECK (version >= 1),
            updated_at_ms BIGINT NOT NULL,
            PRIMARY KEY (board, period, principal)
        );
        CREATE INDEX board_entries_by_rank ON board_entries (board, period, sort_key, principal);
        CREATE INDEX board_entries_by_change ON board_entries (updated_at_ms);
    ",
    },
    Migration {
        name: "presence: who is in which zone, on which host, since when",
        // Principals and zone ids compare as bytes (`COLLATE "C"`), like SQLite's BINARY, so
        // both backends list presence in the same order.
        sql: "
        CREATE TABLE presence (
            principal     TEXT COLLATE \"C\" NOT NULL,
            zone_id       TEXT COLLATE \"C\" NOT NULL,
            host_id       TEXT NOT NULL,
            incarnation   TEXT NOT NULL,
            since_ms      BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            PRIMARY KEY (principal, zone_id)
        );
        CREATE INDEX presence_by_host ON presence (host_id);
    ",
    },
    Migration {
        name: "chat: channels' counters, lines, sanctions, reports and their audit",
        // The unique (channel, seq) is the index every read of a channel and every prune uses.
        // Sequence values are never reused, so the fleet feed's cursor never meets an id twice.
        sql: "
        CREATE TABLE chat_channels (
            channel  TEXT PRIMARY KEY,
            last_seq BIGINT NOT NULL CHECK (last_seq >= 0)
        );
        CREATE TABLE chat_lines (
            id         BIGSERIAL PRIMARY KEY,
            channel    TEXT NOT NULL,
            seq        BIGINT NOT NULL CHECK (seq >= 1),
            sender     TEXT NOT NULL,
            body       TEXT NOT NULL,
            sent_at_ms BIGINT NOT NULL CHECK (sent_at_ms >= 0),
            host_id    TEXT,
            UNIQUE (channel, seq)
        );
        CREATE TABLE chat_sanctions (
            id         BIGSERIAL PRIMARY KEY,
            principal  TEXT NOT NULL,
            action     TEXT NOT NULL CHECK (action IN ('mute', 'ban')),
            scope      TEXT NOT NULL CHECK (scope = 'fleet'
                OR (substr(scope, 1, 5) = 'zone:' AND length(scope) > 5)
                OR (substr(scope, 1, 6) = 'group:' AND length(scope) > 6)),
            until_ms   BIGINT NOT NULL,
            reason     TEXT NOT NULL,
            actor      TEXT NOT NULL,
            created_ms BIGINT NOT NULL,
            lifted_ms  BIGINT,
            lifted_by  TEXT,
            CHECK ((lifted_ms IS NULL) = (lifted_by IS NULL))
        );
        CREATE INDEX chat_sanctions_by_until ON chat_sanctions (until_ms);
        CREATE INDEX chat_sanctions_by_principal ON chat_sanctions (principal);
        CREATE TABLE chat_reports (
            id         BIGSERIAL PRIMARY KEY,
            reporter   TEXT NOT NULL,
            channel    TEXT NOT NULL,
            reason     TEXT NOT NULL,
            lines      TEXT NOT NULL,
            created_ms BIGINT NOT NULL
        );
        CREATE TABLE chat_audit (
            id     BIGSERIAL PRIMARY KEY,
            at_ms  BIGINT NOT NULL,
            actor  TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('mute', 'ban', 'lift', 'report')),
            target TEXT NOT NULL,
            scope  TEXT NOT NULL,
            detail TEXT NOT NULL
        );
    ",
    },
];

/// Creates `schema` if given, then applies pending migrations inside it (via the connection's
/// `search_path`, which the pool sets to that schema).
pub(crate) async fn migrate(client: &mut Object, schema: Option<&str>, err: &PgErr) -> Result<()> {
    let client: &mut tokio_postgres::Client = client;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(|e| err.map(e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await
        .map_err(|e| err.map(e))?;
    if let Some(schema) = schema {
        // The name was validated as a plain identifier, so quoting it is enough.
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
            .await
            .map_err(|e| err.map(e))?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS zonekeep_migrations (
             version    INTEGER PRIMARY KEY,
             name       TEXT NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(|e| err.map(e))?;
    let found: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM zonekeep_migrations",
            &[],
        )
        .await
        .map_err(|e| err.map(e))?
        .try_get(0)
        .map_err(super::corrupt_column)?;
    let supported = i32::try_from(MIGRATIONS.len())
        .map_err(|_| StoreError::Corrupt("too many migrations".into()))?;
    if found > supported {
        return Err(StoreError::SchemaTooNew {
            found: found.into(),
            supported: supported.into(),
        });
    }
    let applied = usize::try_from(found)
        .map_err(|_| StoreError::Corrupt(format!("negative migration version {found}")))?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        let version = i32::try_from(index + 1)
            .map_err(|_| StoreError::Corrupt("too many migrations".into()))?;
        tx.batch_execute(migration.sql)
            .await
            .map_err(|e| err.map(e))?;
        tx.execute(
            "INSERT INTO zonekeep_migrations (version, name) VALUES ($1, $2)",
            &[&version, &migration.name],
        )
        .await
        .map_err(|e| err.map(e))?;
        tracing::info!(version, name = migration.name, "applied postgres migration");
    }
    tx.commit().await.map_err(|e| err.map(e))
}
