//! A zone's step on its simulation thread: the inbox drained, the host advanced, and what the
//! advance produced handed on (frames to connections, notices, tier changes, the zone's
//! summary).

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use zonekeep_core::{AdvanceReport, InputOutcome, PlayerId, Role};
use zonekeep_protocol::messages::{Entries, KickCode, ServerMessage};

use crate::sim::limit_log::LIMIT_LOG_EVERY_SECONDS;
use crate::sim::notices::{input_refused_frame, known_set_check_frame};
use crate::sim::SimContext;

use super::{send_frame, tier_name, ZoneRun};

impl ZoneRun {
    pub fn due(&self, now: Duration) -> bool {
        self.host.next_tick_due() <= now
    }

    /// Drain the inbox, advance, deliver. Whether the zone is now Dormant is its tier's to say
    /// (`host.tier()`): the thread unloads it once no join is on its way to it.
    pub fn step(&mut self, ctx: &SimContext, now: Duration) {
        let bus = ctx.bus.get();
        if let Some(bus) = bus {
            if self.bus.is_none() {
                // A zone acknowledges at its saves when it has any, else on delivery.
                let persistent = self.persist.is_some() && self.host.snapshot().is_some();
                self.bus = crate::bus::ZoneBus::bind(bus, &self.entry.zone_id, persistent);
            }
            if let Some(zb) = &mut self.bus {
                zb.deliver(bus, &self.entry.zone_id, &mut self.host);
            }
        }
        // The inputs that arrived since the last step, checked and sanitized: one `sanitize`
        // stage for the batch (a reading per input would cost more than the check itself).
        let batch = ctx.stage_clock.as_ref().map(|c| c.now());
        let mut handled = 0usize;
        for _ in 0..self.inbox_capacity {
            let Ok(i) = self.inbox.try_recv() else { break };
            handled += 1;
            // Outcomes are counted by the host and come back in the report; a refusal is also
            // told to the client so its predictor drops the input.
            let outcome = self
                .host
                .handle_input(i.player, i.seq, i.view_tick, &i.payload);
            match outcome {
                InputOutcome::Refused(r) => self.notify_refused(ctx, i.player, i.seq, r.code),
                InputOutcome::Moving => {
                    self.notify_refused(ctx, i.player, i.seq, crate::transfer::MOVING_CODE)
                }
                _ => {}
            }
        }
        if let (Some(clock), Some(started), true) = (ctx.stage_clock.as_ref(), batch, handled > 0) {
            let took = clock.now().saturating_sub(started);
            self.host.record_stage(zonekeep_core::Stage::Sanitize, took);
        }
        if let Some(p) = &mut self.persist {
            p.before_advance(&mut self.host);
        }
        let report = self.host.advance(now);
        // Before the character writes are drained: a move taken back at once keeps its
        // character's release from leaving (the core withdraws it).
        self.send_transfers(ctx);
        if let Some(p) = &mut self.persist {
            let mut saved = p.after_advance(&mut self.host, now);
            if let Some(seq) = saved {
                ctx.lifecycle.saved(&self.entry.zone_id, seq);
            }
            if let Some(zb) = &mut self.bus {
                if saved.is_none() && zb.wants_save() {
                    saved = p.save(&self.host);
                }
                if let Some(seq) = saved {
                    zb.saved(seq);
                }
                if let Some(bus) = bus {
                    zb.committed(bus, &self.entry.zone_id, p.last_saved_seq());
                }
            }
        }
        if let Some(bus) = bus {
            crate::bus::ZoneBus::carry(bus, &self.entry.zone_id, &mut self.host);
        }
        self.absorb(ctx, &report);
        self.metrics
            .record_stages(&self.host.take_stage_durations());
        self.metrics
            .record_work(&self.work.since(&self.work_exported).named());
        self.work_exported = self.work;
        self.pump_recording();
        self.tell_entries(ctx);
        self.roll_rates(now);
    }

    /// Sends the entry URLs anew (Entries, PROTOCOL.md §5.3.1) to every version 7 session told an
    /// older list, once after each change: a player must not learn only at its next Welcome that
    /// a host joined or left.
    fn tell_entries(&mut self, ctx: &SimContext) {
        let current = ctx.entries.generation();
        if current == self.entries_told {
            return;
        }
        self.entries_told = current;
        let entries = ctx.entries.zone_urls(&self.entry.zone_id);
        let frame = match ServerMessage::Entries(Entries { entries }).to_bytes(None) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::warn!(zone = %self.entry.zone_id, error = %e, "entry URLs do not encode");
                return;
            }
        };
        for sub in self.subs.values_mut() {
            if sub.entries_told.is_some_and(|g| g != current) {
                sub.entries_told = Some(current);
                if let Some(conn) = &sub.conn {
                    send_frame(&self.metrics, conn, frame.clone());
                }
            }
        }
    }

    /// Send InputRefused for `seq` to `player`'s connection, within its per-second bound.
    fn notify_refused(&mut self, ctx: &SimContext, player: PlayerId, seq: u32, code: u16) {
        let tick = self.host.tick();
        let tick_hz = self.host.config().tick_hz;
        let Some(sub) = self.subs.get_mut(&player) else {
            return;
        };
        let Some(conn) = sub.conn.as_ref() else {
            return;
        };
        if !sub.notices.allow_refusal(tick, tick_hz) {
            ctx.metrics.sync_notice("input_refused_suppressed");
            return;
        }
        if let Some(frame) = input_refused_frame(seq, code) {
            if send_frame(&self.metrics, conn, frame) {
                ctx.metrics.sync_notice("input_refused_sent");
            }
        }
    }

    fn absorb(&mut self, ctx: &SimContext, report: &AdvanceReport) {
        self.entry.tick.store(report.tick, Ordering::Relaxed);
        self.ticks_dropped += report.ticks_dropped;
        self.metrics.record_advance(
            report.ticks_run,
            report.ticks_dropped,
            &report.tick_durations,
            &report.inputs,
        );
        self.work.advanced(report);
        let version = self.host.world().version();
        self.work.wrote(self.world_version, version);
        self.world_version = version;
        if let Some(p) = &self.persist {
            self.work.facts_emitted = p.facts_emitted();
        }
        // The zone counts from its start; a new instance (an upgrade) starts again from 0.
        let suppressed = self.host.log_lines_suppressed();
        if suppressed != self.log_suppressed {
            let new = if suppressed > self.log_suppressed {
                suppressed - self.log_suppressed
            } else {
                suppressed
            };
            ctx.metrics.log_lines_suppressed(new);
            self.log_suppressed = suppressed;
        }
        for d in &report.tick_durations {
            let us = d.as_micros();
            self.tick_stats.0 += 1;
            self.tick_stats.1 += us;
            self.tick_stats.2 = u64::try_from(us).unwrap_or(u64::MAX);
            let mut s = self.entry.summary.lock().unwrap_or_else(|p| p.into_inner());
            s.max_tick_us = s.max_tick_us.max(self.tick_stats.2);
        }
        for k in &report.kicks {
            if let Some(c) = self.subs.get(&k.player).and_then(|s| s.conn.as_ref()) {
                c.kick(KickCode::KICKED, k.reason.clone());
            }
        }
        for (player, why) in &report.left {
            ctx.lifecycle.left(
                &self.entry.zone_id,
                player.0,
                &format!("{why:?}").to_lowercase(),
            );
            if let Some(c) = self.subs.remove(player).and_then(|s| s.conn) {
                c.kick(KickCode::KICKED, "removed from the zone");
            }
            ctx.reconnect.forget(&self.entry.zone_id, *player);
        }
        if report.events_dropped > 0 {
            ctx.metrics.events_dropped(report.events_dropped);
        }
        ctx.metrics.limits().record(report);
        if let Some(r) = self.limit_log.note(report, self.host.config().tick_hz) {
            tracing::warn!(
                zone = %self.entry.zone_id,
                spawns_refused = r.spawns,
                facts_too_large = r.facts_too_large,
                facts_over_rate = r.facts_rate,
                facts_over_in_flight = r.facts_in_flight,
                events_dropped = r.events_dropped,
                "the zone's code hit its limits (counts since the last such line; one line per {LIMIT_LOG_EVERY_SECONDS} s of zone time)"
            );
        }
        if !report.patch_ticks.is_empty() {
            self.deliver_frames(ctx);
        }
        for t in &report.tier_transitions {
            ctx.lifecycle.tier(
                &self.entry.zone_id,
                &format!("{:?}", t.from).to_lowercase(),
                &format!("{:?}", t.to).to_lowercase(),
                t.tick,
            );
            ctx.metrics.set_tier(&mut self.metrics, t.to);
        }
        if !report.left.is_empty() || !report.tier_transitions.is_empty() || report.ticks_run > 0 {
            self.publish();
        }
    }

    /// Build the patch (the replicator: interest, diffs, budget, ack, events) and hand each
    /// frame to its connection's outbox without waiting.
    ///
    /// A Delta that says nothing new (PROTOCOL.md §6: no entity changes, no events, the same ack)
    /// is not sent, except once a second as a keep-alive: idle connections then cost next to
    /// nothing.
    fn deliver_frames(&mut self, ctx: &SimContext) {
        let tick = self.host.tick();
        let keepalive = u64::from(self.host.config().tick_hz);
        let mut checks_due: Vec<PlayerId> = Vec::new();
        // What datagram clients acknowledged since the last patch: their States build on it.
        // Those whose connection left (or resumed without datagrams) leave the set.
        let (subs, host) = (&mut self.subs, &mut self.host);
        self.datagram_subs.retain(|player| {
            let Some(sub) = subs.get_mut(player) else {
                return false;
            };
            let Some(path) = sub.conn.as_ref().and_then(|c| c.datagrams.as_ref()) else {
                return false;
            };
            let acked = path.acked();
            if acked > sub.state_acked {
                sub.state_acked = acked;
                host.ack_state(*player, acked);
            }
            true
        });
        let frames = match self.host.drain_frames() {
            Ok(frames) => frames,
            Err(e) => {
                tracing::error!(zone = %self.entry.zone_id, error = %e, "building frames failed");
                for c in self.subs.values().filter_map(|s| s.conn.as_ref()) {
                    c.kick(KickCode::INTERNAL_ERROR, "frame building failed");
                }
                return;
            }
        };
        let handoff = ctx.stage_clock.as_ref().map(|c| c.now());
        for frame in frames {
            let Some(sub) = self.subs.get_mut(&frame.player) else {
                continue;
            };
            let Some(conn) = sub.conn.as_ref() else {
                continue;
            };
            if sub
                .last_frame
                .skips(frame.quiet, frame.ack, tick, keepalive)
            {
                self.metrics.record_quiet_skipped();
                continue;
            }
            // Events of a datagram client go reliably, ahead of the State of their tick.
            if !frame.events.is_empty() {
                send_frame(&self.metrics, conn, Bytes::copy_from_slice(frame.events));
            }
            if send_frame(&self.metrics, conn, Bytes::copy_from_slice(frame.bytes)) {
                sub.last_frame.sent(frame.ack, tick);
                if let Some(at) = sub.moved_at_ms.take() {
                    let ms = crate::sim::now_ms().saturating_sub(at);
                    ctx.metrics.transfer_latency(ms as f64 / 1000.0);
                }
                // A State names the state it applies to: no KnownSetCheck follows it.
                if frame.base.is_none() && sub.notices.frame_sent() {
                    checks_due.push(frame.player);
                }
            }
        }
        if let (Some(clock), Some(started)) = (ctx.stage_clock.as_ref(), handoff) {
            let took = clock.now().saturating_sub(started);
            self.host.record_stage(zonekeep_core::Stage::Handoff, took);
        }
        self.feed_relays(ctx);
        let built = self.host.last_build_stats();
        self.work.built(&built);
        ctx.metrics.limits().events_deferred(built.events_deferred);
        self.send_known_set_checks(ctx, tick, &checks_due);
    }

    /// Send each relay link following the zone its message of this patch: the world's image to a
    /// link starting, the feed's delta to the others, with what changed of its participants.
    /// A link that cannot take it (closed, or its queue full) is dropped; when none is left the
    /// feed stops.
    fn feed_relays(&mut self, ctx: &SimContext) {
        if self.relay_links.is_empty() {
            return;
        }
        self.relay_links.retain(|l| !l.out.is_closed());
        if self.relay_links.is_empty() {
            self.host.end_relay_feed();
            return;
        }
        let Some(out) = self.host.relay_output() else {
            return;
        };
        let mut want_image = false;
        let mut message = Vec::new();
        for link in &mut self.relay_links {
            message.clear();
            match out.write_link(&mut message, link.starting, link.out.id()) {
                Ok(()) => {
                    link.starting = false;
                    ctx.metrics.relay().patch(message.len());
                    let _ = link.out.send(crate::net::relay::wire::patch(&message));
                }
                // The image comes with a later patch.
                Err(_) if link.starting => want_image = true,
                // The feed broke: the link starts over (its relay links again).
                Err(_) => link.out.close(),
            }
        }
        if want_image {
            self.host.want_relay_image();
        }
    }

    /// Follow the Deltas just sent to `players` with a KnownSetCheck of what each client now holds
    /// (PROTOCOL.md §5.7); the outbox keeps them in order behind the Delta they check.
    fn send_known_set_checks(&self, ctx: &SimContext, tick: u64, players: &[PlayerId]) {
        for (player, check) in self.host.known_set_checks(players) {
            let Some((count, hash)) = check else {
                continue;
            };
            let Some(conn) = self.subs.get(&player).and_then(|s| s.conn.as_ref()) else {
                continue;
            };
            if send_frame(
                &self.metrics,
                conn,
                known_set_check_frame(tick, count, hash),
            ) {
                ctx.metrics.sync_notice("known_set_check_sent");
            }
        }
    }

    /// Publish the summary and population gauges.
    pub(super) fn publish(&mut self) {
        // Who is present, fingerprinted without walking the roster (a crowd of thousands would
        // cost every tick): ids only grow and are never reused, so a join raises the largest id
        // and a leave alone lowers the count.
        let fingerprint = {
            let mut present = self.host.players();
            (present.len(), present.next_back().map_or(0, |p| p.id.0))
        };
        let changed = fingerprint != self.present_fingerprint;
        if changed {
            let (mut players, mut observers) = (0u32, 0u32);
            for p in self.host.players() {
                match p.role {
                    Role::Player => players += 1,
                    Role::Observer => observers += 1,
                }
            }
            self.present_roles = (players, observers);
        }
        let (players, observers) = self.present_roles;
        if let Some(listing) = self.host.take_listing() {
            *self.entry.listing.lock().unwrap_or_else(|p| p.into_inner()) = Some(listing);
        }
        {
            let mut groups = self.entry.groups.lock().unwrap_or_else(|p| p.into_inner());
            if !groups.iter().map(String::as_str).eq(self.host.groups()) {
                *groups = self.host.groups().map(str::to_owned).collect();
            }
        }
        if changed {
            self.present_fingerprint = fingerprint;
            let present: std::sync::Arc<[String]> = self
                .host
                .players()
                .map(|p| p.principal.as_str().to_owned())
                .collect();
            *self.entry.present.lock().unwrap_or_else(|p| p.into_inner()) = present;
        }
        let entities = u32::try_from(self.host.world().len()).unwrap_or(u32::MAX);
        self.metrics.set_population(
            i64::from(players),
            i64::from(observers),
            i64::from(entities),
        );
        let mut s = self.entry.summary.lock().unwrap_or_else(|p| p.into_inner());
        s.id = self.entry.zone_id.clone();
        s.kind = self.host.kind().to_owned();
        s.tier = tier_name(self.host.tier());
        s.lasting = self.host.config().lasting;
        s.tick = self.host.tick();
        s.players = players;
        s.observers = observers;
        s.entities = entities;
        s.ticks_run = self.tick_stats.0;
        s.ticks_dropped = self.ticks_dropped;
        s.last_tick_us = self.tick_stats.2;
        s.mean_tick_us = if self.tick_stats.0 == 0 {
            0.0
        } else {
            self.tick_stats.1 as f64 / self.tick_stats.0 as f64
        };
    }
}
