//! [`ServerConfig::validate`]: every value checked against its range and the values it must
//! agree with, the first problem returned as a [`ConfigError`] that names its key. A value that
//! a setting is derived from (queues, boards, ticket keys, persistence, content versions) is
//! checked by deriving that setting (`settings`).

use super::{invalid, ConfigError, ServerConfig};

impl ServerConfig {
    /// Check every value; the first problem is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max_connections", self.max_connections as u64),
            ("max_connections_per_ip", self.max_connections_per_ip as u64),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("max_message_bytes", self.max_message_bytes as u64),
            ("read_buffer_bytes", self.read_buffer_bytes as u64),
            ("outbox_frames", self.outbox_frames as u64),
            ("kick_write_timeout_ms", self.kick_write_timeout_ms),
            ("input_burst", u64::from(self.input_burst)),
            ("abuse_burst", u64::from(self.abuse_burst)),
            ("ping_burst", u64::from(self.ping_burst)),
            ("read_progress_timeout_ms", self.read_progress_timeout_ms),
            ("zone_inbox", self.zone_inbox as u64),
            ("sim_queue", self.sim_queue as u64),
            ("max_zones", self.max_zones as u64),
            ("zone_max_entities", self.zone_max_entities as u64),
            ("zone_max_fact_bytes", self.zone_max_fact_bytes as u64),
            (
                "zone_max_facts_per_second",
                u64::from(self.zone_max_facts_per_second),
            ),
            ("shutdown_timeout_ms", self.shutdown_timeout_ms),
            ("module_compile_timeout_ms", self.module_compile_timeout_ms),
            ("ticket_max_lifetime_secs", self.ticket_max_lifetime_secs),
            ("ticket_replay_capacity", self.ticket_replay_capacity as u64),
            ("reconnect_capacity", self.reconnect_capacity as u64),
            (
                "webtransport_max_handshakes",
                self.webtransport_max_handshakes as u64,
            ),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(invalid(key, "must be greater than 0"));
            }
        }
        crate::fleet::validate_config(self)?;
        if self.webtransport_cert.is_some() != self.webtransport_key.is_some() {
            return Err(invalid(
                "webtransport_cert",
                "and webtransport_key go together (a certificate chain and its private key)",
            ));
        }
        if self.webtransport.is_some() && !self.dev && self.webtransport_cert.is_none() {
            return Err(invalid(
                "webtransport",
                "needs webtransport_cert and webtransport_key outside dev mode (browsers accept a \
                 self-signed certificate only for development)",
            ));
        }
        if self.max_message_bytes > zonekeep_protocol::limits::MAX_CLIENT_MESSAGE {
            return Err(invalid(
                "max_message_bytes",
                format!(
                    "must be at most {} (PROTOCOL.md §7)",
                    zonekeep_protocol::limits::MAX_CLIENT_MESSAGE
                ),
            ));
        }
        if self.max_write_buffer_bytes
            < self.write_buffer_bytes + zonekeep_protocol::limits::MAX_SERVER_MESSAGE
        {
            return Err(invalid(
                "max_write_buffer_bytes",
                "must hold write_buffer_bytes plus one largest server message (1 MiB)",
            ));
        }
        for (key, v) in [
            ("input_rate", self.input_rate),
            ("abuse_rate", self.abuse_rate),
            ("ping_rate", self.ping_rate),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1e6) {
                return Err(invalid(key, "must be a number in (0, 1000000]"));
            }
        }
        if self.ticket_kid.is_empty() {
            return Err(invalid("ticket_kid", "must not be empty"));
        }
        if self
            .admin_token
            .as_ref()
            .is_some_and(|t| t.expose().len() < 16)
        {
            return Err(invalid("admin_token", "must be at least 16 bytes"));
        }
        if let Some(t) = &self.lobby_token {
            if t.expose().len() < 16 {
                return Err(invalid("lobby_token", "must be at least 16 bytes"));
            }
            if self
                .admin_token
                .as_ref()
                .is_some_and(|a| a.expose() == t.expose())
            {
                return Err(invalid(
                    "lobby_token",
                    "must differ from the admin token: the application's back end holds it",
                ));
            }
        }
        if let Some(t) = &self.relay_token {
            if t.expose().len() < 16 {
                return Err(invalid("relay_token", "must be at least 16 bytes"));
            }
            if self
                .admin_token
                .as_ref()
                .is_some_and(|a| a.expose() == t.expose())
            {
                return Err(invalid(
                    "relay_token",
                    "must differ from the admin token: every relay holds it",
                ));
            }
        }
        if self.relay_link_queue == 0 || self.relay_link_queue > 1 << 20 {
            return Err(invalid("relay_link_queue", "must be 1..=1048576"));
        }
        if self.relay_link_clients == 0 || self.relay_link_clients > 1 << 20 {
            return Err(invalid("relay_link_clients", "must be 1..=1048576"));
        }
        if self.lobby_seat_hold_secs == 0 || self.lobby_seat_hold_secs > 3600 {
            return Err(invalid("lobby_seat_hold_secs", "must be 1..=3600"));
        }
        if !crate::matchmaker::valid_label(&self.region) {
            return Err(invalid(
                "region",
                "must be 1..=64 bytes of letters, digits, '_', '-', '.' and ':'",
            ));
        }
        self.match_queues()?;
        if self.match_heartbeat_secs == 0 || self.match_heartbeat_secs > 600 {
            return Err(invalid("match_heartbeat_secs", "must be 1..=600"));
        }
        if self.min_protocol_version > zonekeep_protocol::limits::PROTOCOL_VERSION {
            return Err(invalid(
                "min_protocol_version",
                "is newer than this host speaks",
            ));
        }
        if let Some(r) = &self.match_redis {
            if !r.expose().starts_with("redis://") {
                return Err(invalid("match_redis", "must be a redis:// URL"));
            }
        }
        self.boards()?;
        if let Some(r) = &self.board_redis {
            if !r.expose().starts_with("redis://") {
                return Err(invalid("board_redis", "must be a redis:// URL"));
            }
        }
        if self.chat_keep == 0 || self.chat_keep > 100_000 {
            return Err(invalid("chat_keep", "must be 1..=100000"));
        }
        if self.chat_max_line == 0 || self.chat_max_line > 1024 {
            return Err(invalid("chat_max_line", "must be 1..=1024 bytes"));
        }
        if !(self.chat_rate.is_finite() && self.chat_rate > 0.0 && self.chat_rate <= 1000.0) {
            return Err(invalid(
                "chat_rate",
                "must be above 0 and at most 1000 per second",
            ));
        }
        if self.chat_burst == 0 || self.chat_burst > 1000 {
            return Err(invalid("chat_burst", "must be 1..=1000"));
        }
        if self.chat_history > 200 || self.chat_history > self.chat_keep {
            return Err(invalid(
                "chat_history",
                "must be at most 200 and at most chat_keep",
            ));
        }
        self.key_ring()?;
        self.persist_config()?;
        self.content_policy()?;
        Ok(())
    }
}
