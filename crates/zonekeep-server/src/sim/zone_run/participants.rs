//! Participants coming and going: a join or a resume admitted and its connection attached
//! (Welcome sent), a dropped connection's grace, round trips and resyncs, and a participant
//! removed by an operator or because another zone took its character.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_core::{Claims, JoinError, PlayerId, Principal, RejoinError, ResumeOutcome, Role};
use zonekeep_protocol::messages::{
    KickCode, ResumeFrom, Role as WireRole, Welcome, ENTRIES_PROTOCOL,
};

use super::{send_frame, FollowingLink, Sub, ZoneRun};
use crate::net::conn::ConnHandle;
use crate::sim::frames::welcome_frame;
use crate::sim::notices::{LastFrame, Notices};
use crate::sim::{JoinFailure, Joined, SimContext};

fn wire_role(r: Role) -> WireRole {
    match r {
        Role::Player => WireRole::Player,
        Role::Observer => WireRole::Observer,
    }
}

/// How a join enters the zone.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Admission<'a> {
    /// Afresh, as a participant of this role (`on_join` or `on_observe`).
    Join(Role),
    /// As a player whose move out of this zone was returned after a crash, with the state of
    /// this reclaimed record (the zone's return instead of `on_join`).
    Return(&'a zonekeep_store::StoredTransfer),
}

impl ZoneRun {
    /// Send Welcome and attach `conn` to `player`. Its next frame is a BASELINE (PROTOCOL.md
    /// §6) unless it resumes from what its client holds (`first` is [`ResumeOutcome::Delta`],
    /// §4.1.1).
    fn attach(
        &mut self,
        ctx: &SimContext,
        player: PlayerId,
        version: u32,
        conn: ConnHandle,
        first: ResumeOutcome,
    ) -> Result<Joined, JoinFailure> {
        let Some(info) = self.host.player(player) else {
            return Err(JoinFailure::Unavailable("player vanished".into()));
        };
        let role = info.role;
        let principal = info.principal.clone();
        let zone_id = self.entry.zone_id.clone();
        let token = match ctx
            .reconnect
            .issue(&principal, &zone_id, player, role, Instant::now())
        {
            Ok(t) => t.to_vec(),
            Err(e) => {
                tracing::warn!(zone = %zone_id, %player, error = %e, "no reconnect token issued");
                Vec::new()
            }
        };
        let cfg = self.host.config();
        let entries_told = (version >= ENTRIES_PROTOCOL).then(|| ctx.entries.generation());
        let welcome = Welcome {
            version,
            player_id: player.0,
            zone_id: zone_id.clone(),
            role: wire_role(role),
            tick_hz: cfg.tick_hz,
            patch_every: cfg.patch_every_for(role),
            tick: self.host.tick(),
            // Chat is kept by every host with a store (see `crate::chat`).
            features: if version >= zonekeep_protocol::messages::CHAT_PROTOCOL
                && ctx.persist.is_some()
            {
                zonekeep_protocol::messages::FEATURE_CHAT
            } else {
                0
            },
            idle_timeout_ms: ctx.timeouts.idle_ms,
            handshake_timeout_ms: ctx.timeouts.handshake_ms,
            reconnect_grace_ms: u32::try_from(cfg.reconnect_grace.as_millis()).unwrap_or(u32::MAX),
            reconnect_token: token,
            schema: self.host.schema(),
            content_version: ctx.content.welcome_content_version(version),
            entries: if version >= ENTRIES_PROTOCOL {
                ctx.entries.zone_urls(&zone_id)
            } else {
                Vec::new()
            },
        };
        let frame = welcome_frame(welcome)
            .map_err(|e| JoinFailure::Unavailable(format!("welcome: {e}")))?;
        match conn.relay_link() {
            // A relay builds its frames, from the patches its link is sent.
            Some(link) => {
                self.host
                    .relay(player, link.id())
                    .map_err(|e| JoinFailure::Unavailable(e.to_string()))?;
                self.follow(link);
            }
            None => {
                // Back from a relay (say it died): this host builds its frames again.
                self.host.unrelay(player);
                if first == ResumeOutcome::Baseline {
                    self.host.resync(player);
                }
                if let Some(path) = &conn.datagrams {
                    // States against what the client acknowledged, each fitting one datagram.
                    self.host.use_datagrams(player, Some(path.max_frame()));
                    self.datagram_subs.insert(player);
                }
            }
        }
        send_frame(&self.metrics, &conn, frame);
        self.subs.insert(
            player,
            Sub {
                conn: Some(conn),
                last_frame: LastFrame::default(),
                notices: Notices::default(),
                state_acked: 0,
                entries_told,
                version,
                moved_at_ms: None,
                rtt: None,
                bytes_dropped: 0,
                rate_mark: (ctx.clock.now(), 0),
                bytes_per_s: 0,
            },
        );
        self.publish();
        let role_name = match role {
            Role::Player => "player",
            Role::Observer => "observer",
        };
        ctx.lifecycle
            .joined(&zone_id, player.0, principal.as_str(), role_name);
        Ok(Joined { player })
    }

    /// The relay link `link` follows the zone from its next patch (the world's image) on.
    fn follow(&mut self, link: &Arc<crate::net::relay::LinkOut>) {
        if self.relay_links.iter().any(|l| l.out.id() == link.id()) {
            return;
        }
        link.mark_followed();
        self.relay_links.push(FollowingLink {
            out: Arc::clone(link),
            starting: true,
        });
        self.host.want_relay_image();
    }

    #[allow(clippy::too_many_arguments)]
    pub fn join(
        &mut self,
        ctx: &SimContext,
        principal: Principal,
        claims: Claims,
        how: Admission<'_>,
        character: Option<Vec<u8>>,
        version: u32,
        conn: ConnHandle,
    ) -> Result<Joined, JoinFailure> {
        if self.fenced() {
            return Err(JoinFailure::Fenced);
        }
        let admitted = match how {
            Admission::Return(r) => {
                let handed = match serde_json::from_str(&r.transfer.claims) {
                    Ok(serde_json::Value::Object(m)) => m,
                    _ => serde_json::Map::new(),
                };
                let (to, state) = (&r.transfer.target_zone, &r.transfer.state);
                match character {
                    Some(c) => self.host.handle_transfer_return_with_character(
                        principal, claims, handed, to, state, c,
                    ),
                    None => self
                        .host
                        .handle_transfer_return(principal, claims, handed, to, state),
                }
            }
            Admission::Join(role) => match character {
                Some(c) => self
                    .host
                    .handle_join_with_character(principal, claims, role, c),
                None => self.host.handle_join(principal, claims, role),
            },
        };
        // A refused join hands its character back at once.
        if let Some(p) = self.persist.as_mut() {
            p.send_characters(&mut self.host, None);
        }
        let player = admitted.map_err(|e| match e {
            JoinError::Full { .. } => JoinFailure::Full,
            JoinError::Refused(r) => JoinFailure::Refused(r),
            JoinError::Disposed => JoinFailure::Unavailable("zone stopped".into()),
            JoinError::IdsExhausted => JoinFailure::Unavailable("player ids exhausted".into()),
        })?;
        let r = self.attach(ctx, player, version, conn, ResumeOutcome::Baseline);
        if r.is_err() {
            let _ = self
                .host
                .handle_leave(player, zonekeep_core::LeaveReason::Left);
            if let Some(p) = self.persist.as_mut() {
                p.send_characters(&mut self.host, None);
            }
        }
        r
    }

    pub fn resume(
        &mut self,
        ctx: &SimContext,
        player: PlayerId,
        principal: &Principal,
        version: u32,
        resume_from: Option<ResumeFrom>,
        conn: ConnHandle,
    ) -> Result<Joined, JoinFailure> {
        if self.fenced() {
            return Err(JoinFailure::Fenced);
        }
        if self.host.player(player).map(|p| &p.principal) != Some(principal) {
            return Err(JoinFailure::ReconnectRefused(
                "not this principal's player".into(),
            ));
        }
        // A half-open old connection is replaced by the new one.
        if let Some(old) = self.subs.get_mut(&player).and_then(|s| s.conn.take()) {
            old.kick(KickCode::KICKED, "resumed on another connection");
            let _ = self.host.handle_drop(player);
        }
        let rejoined = match resume_from {
            Some(from) => self.host.handle_rejoin_from(player, from),
            None => self
                .host
                .handle_rejoin(player)
                .map(|()| ResumeOutcome::Baseline),
        };
        let resumed = rejoined.map_err(|e| {
            JoinFailure::ReconnectRefused(match e {
                RejoinError::GraceExpired(_) => "reconnect grace expired".into(),
                other => other.to_string(),
            })
        })?;
        ctx.metrics.resumed(match resumed {
            ResumeOutcome::Delta => "delta",
            ResumeOutcome::Baseline => "baseline",
        });
        self.attach(ctx, player, version, conn, resumed)
    }

    /// The connection of `player` is gone: its reconnect grace starts.
    pub fn disconnected(&mut self, ctx: &SimContext, player: PlayerId, conn_id: u64) {
        let Some(sub) = self.subs.get_mut(&player) else {
            return;
        };
        if sub.conn.as_ref().map(|c| c.id) != Some(conn_id) {
            return; // a stale notice from a replaced connection
        }
        sub.bytes_dropped = sub.bytes_out();
        sub.rtt = None;
        sub.conn = None;
        if self.host.handle_drop(player).is_ok() {
            let grace = self.host.config().reconnect_grace;
            ctx.reconnect
                .detach(&self.entry.zone_id, player, Instant::now() + grace);
        }
        self.publish();
    }

    /// The connection `conn_id` of `player` measured its round trip; a replaced connection's
    /// measurement is ignored.
    pub fn round_trip(&mut self, player: PlayerId, conn_id: u64, rtt: Duration) {
        let Some(sub) = self.subs.get_mut(&player) else {
            return;
        };
        if sub.conn.as_ref().map(|c| c.id) == Some(conn_id) {
            sub.rtt = Some(rtt);
            self.host.set_rtt(player, rtt);
        }
    }

    /// The client of `player` asked for a BASELINE (its known set failed a check): honoured at most
    /// once a second per connection, since each one resends the subscriber's whole view.
    pub fn resync(&mut self, ctx: &SimContext, player: PlayerId, conn_id: u64) {
        let tick = self.host.tick();
        let tick_hz = self.host.config().tick_hz;
        let Some(sub) = self.subs.get_mut(&player) else {
            return;
        };
        if sub.conn.as_ref().map(|c| c.id) != Some(conn_id) {
            return;
        }
        if sub.notices.allow_resync(tick, tick_hz) {
            self.host.resync(player);
            ctx.metrics.sync_notice("resync_honoured");
        } else {
            ctx.metrics.sync_notice("resync_suppressed");
        }
    }

    /// Remove a participant on an admin's request.
    pub fn kick(&mut self, ctx: &SimContext, player: PlayerId, reason: &str) -> bool {
        if self
            .host
            .handle_leave(player, zonekeep_core::LeaveReason::Kicked)
            .is_err()
        {
            return false;
        }
        if let Some(c) = self.subs.remove(&player).and_then(|s| s.conn) {
            c.kick(KickCode::KICKED, reason);
        }
        ctx.reconnect.forget(&self.entry.zone_id, player);
        self.publish();
        true
    }

    /// Another zone asks for `principal`'s character: each of the principal's players here is
    /// kicked with CHARACTER_MOVED and leaves, handing its character back; `done` is answered
    /// once that release is settled in the store (at once when the principal holds none here).
    pub fn recall(
        &mut self,
        ctx: &SimContext,
        principal: &str,
        done: tokio::sync::oneshot::Sender<bool>,
    ) {
        // A moving player handed its character back as it moved out: it keeps its place.
        let players: Vec<PlayerId> = self
            .host
            .players()
            .filter(|p| {
                p.principal.as_str() == principal
                    && p.role == Role::Player
                    && !self.host.is_moving(p.id)
            })
            .map(|p| p.id)
            .collect();
        for player in players {
            if self
                .host
                .handle_leave(player, zonekeep_core::LeaveReason::Kicked)
                .is_ok()
            {
                if let Some(c) = self.subs.remove(&player).and_then(|s| s.conn) {
                    c.kick(
                        KickCode::CHARACTER_MOVED,
                        "your character was taken into another zone",
                    );
                }
                ctx.reconnect.forget(&self.entry.zone_id, player);
            }
        }
        self.publish();
        match self.persist.as_mut() {
            Some(p) => p.send_characters(&mut self.host, Some((principal, done))),
            None => {
                let _ = done.send(true);
            }
        }
    }
}
