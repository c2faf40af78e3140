//! One zone on its simulation thread: the host and its subscribers (connections); the
//! per-advance work of the hot path is in `step`.

mod detail;
mod step;
mod transfer;
mod upgrade;
pub use upgrade::ZoneUpgrade;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zonekeep_core::{
    Claims, JoinError, PlayerId, Principal, RejoinError, ResumeOutcome, Role, Tier, ZoneHost,
};
use zonekeep_protocol::messages::{
    KickCode, ResumeFrom, Role as WireRole, Welcome, ENTRIES_PROTOCOL,
};

use super::frames::welcome_frame;
use super::limit_log::LimitLog;
use super::notices::Notices;
use super::registry::ZoneEntry;
use super::{InboxInput, JoinFailure, Joined, SimContext};
use crate::metrics::ZoneMetrics;
use crate::net::conn::{ConnHandle, Offer};
use crate::persist::{FinalSave, Unload, ZonePersist};
use crate::recording::ZoneRecording;

/// One participant's connection (`None` while it is dropped, within the grace).
struct Sub {
    conn: Option<ConnHandle>,
    /// The ack of the last Delta sent, and the tick it was sent at (quiet-frame suppression).
    last_frame: super::notices::LastFrame,
    /// InputRefused, KnownSetCheck and Resync bookkeeping.
    notices: Notices,
    /// The newest State tick its datagram client acknowledged, as last handed to the zone.
    state_acked: u64,
    /// The generation of the entry URLs it was last told (PROTOCOL.md §5.3.1); `None` for a
    /// session below version 7, which has no message for them.
    entries_told: Option<u64>,
    /// The protocol version its last session negotiated (a move needs version 8).
    version: u32,
    /// For a player that just arrived by a move: when its source recorded the move (ms since
    /// the Unix epoch), until its first frame here is sent and the move's latency counted.
    moved_at_ms: Option<u64>,
    /// The connection's last measured round trip (a WebSocket Ping and its Pong, QUIC's own
    /// estimate for WebTransport); `None` until measured, and while dropped.
    rtt: Option<Duration>,
    /// The bytes queued to its last connection, kept once it dropped.
    bytes_dropped: u64,
    /// When its bytes-per-second was last measured (the zone's clock), and its byte count then.
    rate_mark: (Duration, u64),
    /// Bytes queued per second over the last measured window (see [`RATE_WINDOW`]).
    bytes_per_s: u64,
}

/// How often a zone measures its participants' bytes per second anew (as it steps).
const RATE_WINDOW: Duration = Duration::from_secs(1);

impl Sub {
    /// Bytes queued to its connection (to its last one, while dropped).
    fn bytes_out(&self) -> u64 {
        self.conn
            .as_ref()
            .map_or(self.bytes_dropped, ConnHandle::bytes_out)
    }

    /// Measures its bytes per second since the last measurement, at `now`.
    fn roll_rate(&mut self, now: Duration) {
        let bytes = self.bytes_out();
        let (at, before) = self.rate_mark;
        let secs = now.saturating_sub(at).as_secs_f64();
        if secs > 0.0 {
            self.bytes_per_s = (bytes.saturating_sub(before) as f64 / secs).round() as u64;
        }
        self.rate_mark = (now, bytes);
    }
}

pub(crate) struct ZoneRun {
    pub host: ZoneHost,
    /// Facts, settlements and saves; `None` without persistence.
    persist: Option<ZonePersist>,
    pub entry: Arc<ZoneEntry>,
    inbox: crossbeam_channel::Receiver<InboxInput>,
    pub metrics: ZoneMetrics,
    subs: BTreeMap<PlayerId, Sub>,
    inbox_capacity: usize,
    tick_stats: (u64, u128, u64),
    /// Who was present when [`Self::publish`] last published it (count, largest id), and how
    /// many of them were players and observers.
    present_fingerprint: (usize, u32),
    present_roles: (u32, u32),
    /// Participants whose connection has a datagram path (its acknowledgements are read each
    /// patch): the others are not looked at, however many.
    datagram_subs: BTreeSet<PlayerId>,
    ticks_dropped: u64,
    /// The zone's count of log lines its rate limit dropped, as last counted in the metrics.
    log_suppressed: u64,
    /// The rate-limited WARN line of what the zone's limits refused.
    limit_log: LimitLog,
    /// The zone's recording, while one runs.
    recording: Option<ZoneRecording>,
    /// The generation of the host's entry URLs its sessions were last told.
    entries_told: u64,
    /// Players moves brought in whose connection may still come, by transfer id.
    arrivals: std::collections::HashMap<String, PlayerId>,
    /// The transfer ids of `arrivals`, oldest first.
    arrival_order: std::collections::VecDeque<String>,
    /// The zone's end of the cross-zone bus, once bound (at its first step with a bus).
    bus: Option<crate::bus::ZoneBus>,
    /// What the zone did since it started here (its work counters).
    pub work: super::work::WorkCounters,
    /// The work counters already added to `/metrics`.
    work_exported: super::work::WorkCounters,
    /// The world's version when the work counters last counted its writes.
    world_version: u64,
    /// When its participants' bytes per second were last measured (the zone's clock).
    rates_at: Duration,
    /// The relay links that follow the zone: each patch goes to each (see [`crate::net::relay`]).
    relay_links: Vec<FollowingLink>,
}

/// A relay link following the zone.
struct FollowingLink {
    out: Arc<crate::net::relay::LinkOut>,
    /// It has not had its first patch (the world's image) yet.
    starting: bool,
}

fn tier_name(t: Tier) -> &'static str {
    match t {
        Tier::Hot => "hot",
        Tier::Idle => "idle",
        Tier::Dormant => "dormant",
    }
}

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
    pub fn new(
        host: ZoneHost,
        persist: Option<ZonePersist>,
        entry: Arc<ZoneEntry>,
        inbox: crossbeam_channel::Receiver<InboxInput>,
        inbox_capacity: usize,
        metrics: ZoneMetrics,
    ) -> Self {
        let mut run = Self {
            host,
            persist,
            entry,
            inbox,
            metrics,
            subs: BTreeMap::new(),
            inbox_capacity,
            tick_stats: (0, 0, 0),
            present_fingerprint: (0, 0),
            present_roles: (0, 0),
            datagram_subs: BTreeSet::new(),
            ticks_dropped: 0,
            log_suppressed: 0,
            limit_log: LimitLog::default(),
            recording: None,
            entries_told: 0,
            arrivals: std::collections::HashMap::new(),
            arrival_order: std::collections::VecDeque::new(),
            bus: None,
            work: super::work::WorkCounters::default(),
            work_exported: super::work::WorkCounters::default(),
            world_version: 0,
            rates_at: Duration::ZERO,
            relay_links: Vec::new(),
        };
        run.world_version = run.host.world().version();
        run.publish();
        run
    }

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
                last_frame: super::notices::LastFrame::default(),
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

    /// Queue the final save, kick every connection with `code` and dispose
    /// (hibernation, admin stop). The save is queued before the zone leaves
    /// the registry, so a join that recreates it finds the save pending and
    /// waits for it (`ZoneLoader::claim`).
    pub fn teardown(&mut self, ctx: &SimContext, code: KickCode, reason: &str, why: Unload) {
        self.queue_final_save(ctx, why);
        self.release(ctx, code, reason);
    }

    /// The zone's last act as a live zone: last facts handed to the fact
    /// queue, final snapshot queued, the dispose hook run. The caller stops
    /// ticking the zone from here on, so no input is acknowledged after the
    /// state this save holds. Says what became of the final snapshot.
    pub fn queue_final_save(&mut self, ctx: &SimContext, why: Unload) -> FinalSave {
        let mut save = FinalSave::NotPersisted;
        if let Some(p) = self.persist.take() {
            save = p.unload(&mut self.host, why);
            tracing::info!(zone = %self.entry.zone_id, save = ?save, facts_in_flight = self.host.facts_in_flight(), "zone frozen; final save queued");
        }
        if let Some(hook) = &ctx.dispose_hook {
            hook(&self.entry.zone_id, &mut self.host);
        }
        save
    }

    /// Kick every connection with `code` and dispose the zone.
    pub fn release(&mut self, ctx: &SimContext, code: KickCode, reason: &str) {
        self.host.dispose();
        self.leave_bus(ctx, true);
        self.pump_recording();
        ctx.reconnect.forget_zone(&self.entry.zone_id);
        ctx.registry.remove(&self.entry);
        // Clients are told last, so one that hears the Kick and looks at the host finds the zone
        // already gone.
        for (_, sub) in std::mem::take(&mut self.subs) {
            if let Some(c) = sub.conn {
                c.kick(code, reason);
            }
        }
    }

    /// The zone's game code failed with `reason` (see [`ZoneHost::failure`]): its players are
    /// kicked with ZONE_STOPPED and the reason, no final save is written (the last good one
    /// stays), and the failure is listed by the admin API, and refuses joins, until an operator
    /// removes it.
    pub fn fail(&mut self, ctx: &SimContext, reason: &str) {
        let failed = super::FailedZone {
            id: self.entry.zone_id.clone(),
            kind: self.host.kind().to_owned(),
            reason: reason.to_owned(),
            tick: self.host.tick(),
            at_start: false,
            at_ms: super::registry::now_ms(),
        };
        if ctx.registry.mark_failed(failed) {
            tracing::warn!("more failed zones than the host remembers: the oldest was forgotten");
        }
        ctx.metrics.zone_failed();
        if let Some(p) = self.persist.take() {
            p.fail(&mut self.host);
        }
        self.release(
            ctx,
            KickCode::ZONE_STOPPED,
            &format!("zone failed: {reason}"),
        );
    }

    /// For a lasting world: how long its newest state has waited unsaved, once that passed its
    /// bound (see [`ZonePersist::storage_lost`]); the world must halt.
    pub fn storage_lost(&self) -> Option<std::time::Duration> {
        self.persist.as_ref().and_then(ZonePersist::storage_lost)
    }

    /// The lasting world halts because its saves failed for `unsaved` (see
    /// [`crate::halt`]): no final save, the snapshot still waiting is dropped, its players are
    /// kicked with WORLD_HALTED, and the host's resumer starts it again from its last committed
    /// save once the store answers.
    pub fn halt(&mut self, ctx: &SimContext, unsaved: std::time::Duration) {
        let status = self.persist.as_ref().and_then(|p| p.save_status());
        let world = crate::halt::HaltedWorld::new(
            &self.entry.zone_id,
            self.host.kind(),
            self.host.init().params.clone(),
            self.host.tick(),
            status.as_ref().map_or(0, |s| s.epoch),
            status.as_ref().and_then(|s| s.last_saved_seq),
            unsaved,
            status.as_ref().and_then(|s| s.last_error.as_deref()),
        );
        let message = world.message();
        ctx.lifecycle.halted(
            &self.entry.zone_id,
            world.tick,
            world.last_saved_seq,
            &world.reason,
        );
        if let Some(p) = self.persist.take() {
            p.halt();
        }
        // Recorded before the players hear it, so one that retries at once is refused with it.
        if ctx.halts.halt(world) {
            tracing::warn!("more halted worlds than the host remembers: the oldest was forgotten");
        }
        self.release(ctx, KickCode::WORLD_HALTED, &message);
    }

    /// Start recording the zone (see [`ZoneHost::start_recording`]).
    pub fn start_recording(
        &mut self,
        ctx: &SimContext,
        limits: zonekeep_core::recording::RecordLimits,
    ) -> Result<(), String> {
        let rec =
            ZoneRecording::start(&ctx.recordings, &self.entry.zone_id, &mut self.host, limits)?;
        self.recording = Some(rec);
        Ok(())
    }

    /// Stop the zone's recording, if one runs.
    pub fn stop_recording(&mut self) {
        if let Some(r) = self.recording.take() {
            r.stop(
                &mut self.host,
                zonekeep_core::recording::StopReason::Requested,
            );
        }
    }

    /// Hand the recorded bytes to the recording's writer; forget a recording that ended.
    fn pump_recording(&mut self) {
        if let Some(r) = &mut self.recording {
            if !r.pump(&mut self.host) {
                self.recording = None;
            }
        }
    }

    /// The zone leaves the bus on this host; with `carry`, what it still sent (the Dormant tier
    /// message of an unloading zone) goes out first.
    fn leave_bus(&mut self, ctx: &SimContext, carry: bool) {
        let Some(bus) = ctx.bus.get() else {
            return;
        };
        if carry {
            crate::bus::ZoneBus::carry(bus, &self.entry.zone_id, &mut self.host);
        }
        if let Some(zb) = self.bus.take() {
            zb.unbind(bus);
        }
    }

    /// Whether the store refused a save or fact of this zone's owner epoch:
    /// another host claimed it, and it must stop here at once.
    pub fn fenced(&self) -> bool {
        self.persist.as_ref().is_some_and(ZonePersist::fenced)
    }

    /// Whether the zone stops because this host's lease lapsed (rather than
    /// because the store refused one of its writes).
    pub fn lease_ended(&self) -> bool {
        self.persist.as_ref().is_some_and(ZonePersist::lease_ended)
    }

    /// This host may not act for the zone any more — another host claimed it,
    /// or this host's lease lapsed: stop it without writing anything more (no
    /// final save, no dispose hook, no further facts) and tell every client to
    /// resume elsewhere (HOST_FENCED: both SDKs resume through their entry URL,
    /// which leads to the zone's owner). A zone another host claimed is marked
    /// fenced before it leaves the registry, so no join can slip in and claim
    /// it back; one stopped by a lapse may be claimed here again once the lease
    /// holds (with a new epoch).
    pub fn unload_fenced(&mut self, ctx: &SimContext) {
        let zone_id = self.entry.zone_id.clone();
        let lapsed = self.lease_ended();
        let forgot = !lapsed && ctx.registry.mark_fenced(&zone_id);
        let reason = if lapsed {
            "this host lost its lease on the zone; resume elsewhere"
        } else {
            "the zone moved to another host; resume there"
        };
        if let Some(p) = self.persist.take() {
            p.discard();
        }
        if let Some(p) = &ctx.persist {
            p.metrics().zones_fenced.inc();
            if forgot {
                p.metrics().fenced_zones_forgotten.inc();
            }
        }
        self.host.dispose();
        // Fenced: the new owner sends what this run would have (from its save); nothing leaves.
        self.leave_bus(ctx, false);
        self.pump_recording();
        ctx.reconnect.forget_zone(&zone_id);
        ctx.registry.remove(&self.entry);
        // Clients are told last, so one that hears HOST_FENCED and looks at the host (its admin
        // API, its metrics) finds the zone already gone and counted.
        for (_, sub) in std::mem::take(&mut self.subs) {
            if let Some(c) = sub.conn {
                c.kick(KickCode::HOST_FENCED, reason);
            }
        }
    }

    /// Whether the zone is a lasting world ([`zonekeep_core::ZoneConfig::lasting`]).
    pub fn lasting(&self) -> bool {
        self.host.config().lasting
    }

    /// Why the zone's game code failed, once it has ([`ZoneHost::failure`]).
    pub fn failure(&self) -> Option<&str> {
        self.host.failure()
    }

    /// Measures every participant's bytes per second anew, once per [`RATE_WINDOW`] (called as
    /// the zone steps).
    pub(super) fn roll_rates(&mut self, now: Duration) {
        if now.saturating_sub(self.rates_at) < RATE_WINDOW {
            return;
        }
        self.rates_at = now;
        for sub in self.subs.values_mut() {
            sub.roll_rate(now);
        }
    }
}

/// Offer a frame; count it when queued.
fn send_frame(metrics: &ZoneMetrics, conn: &ConnHandle, frame: Bytes) -> bool {
    let len = frame.len() as u64;
    match conn.offer(frame) {
        Offer::Queued => {
            metrics.record_out(1, len);
            true
        }
        Offer::Overflowed | Offer::Closed => false,
    }
}
