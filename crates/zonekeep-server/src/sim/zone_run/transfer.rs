//! A zone's side of moving players (see [`crate::transfer`]): handing its moves to the transfer
//! worker, taking players in, letting them go or taking them back, and a moved player's
//! connection arriving.

use zonekeep_core::{EventTarget, JoinError, PlayerId, Principal};
use zonekeep_protocol::messages::TRANSFER_PROTOCOL;
use zonekeep_store::StoredTransfer;

use super::{send_frame, ZoneRun};
use crate::sim::{JoinFailure, Joined, SimContext};
use crate::transfer::{Job, Outbound, Resolution, RETURNED_TOPIC};

/// Most arrivals a zone remembers (transfer id → player) for connections still to come; the
/// oldest is forgotten first (its connection is then admitted again from the record).
const MAX_ARRIVALS: usize = 4096;

impl ZoneRun {
    /// Hands the moves the zone asked for in its last advance to the transfer worker. A move the
    /// player's client cannot follow (its session is older than protocol version 8) or that the
    /// worker cannot take now is returned at once.
    pub(super) fn send_transfers(&mut self, ctx: &SimContext) {
        for request in self.host.drain_transfers() {
            let player = request.player;
            let version = self.subs.get(&player).map_or(0, |s| s.version);
            if version < TRANSFER_PROTOCOL {
                ctx.metrics.transfer("client_too_old");
                self.take_back(
                    ctx,
                    player,
                    "the client is too old to be moved to another zone (protocol version 8 needed)",
                );
                continue;
            }
            let job = Job::Move(Outbound {
                zone_id: self.entry.zone_id.clone(),
                thread: self.entry.thread,
                epoch: self.persist.as_ref().map_or(0, |p| p.epoch()),
                request,
            });
            if ctx.transfers.submit(job).is_err() {
                ctx.metrics.transfer("queue_full");
                self.take_back(
                    ctx,
                    player,
                    "the host is moving too many players; try again",
                );
            }
        }
    }

    /// The move of `player` ended.
    pub fn transfer_resolved(&mut self, ctx: &SimContext, player: PlayerId, r: Resolution) {
        match r {
            Resolution::Moved(frame) => {
                if self.host.handle_transfer_done(player).is_err() {
                    return; // it left meanwhile (its grace ended, or it was kicked)
                }
                if let Some(conn) = self.subs.remove(&player).and_then(|s| s.conn) {
                    // The connection stays open: the client closes it once the target's
                    // BASELINE arrived (PROTOCOL.md §5.3.2); this zone sends it nothing more.
                    send_frame(&self.metrics, &conn, frame);
                }
                ctx.reconnect.forget(&self.entry.zone_id, player);
                self.publish();
            }
            Resolution::Returned(reason) => self.take_back(ctx, player, &reason),
        }
    }

    /// The zone takes `player` back (`returning = true`) and tells it why.
    fn take_back(&mut self, ctx: &SimContext, player: PlayerId, reason: &str) {
        if self.host.handle_transfer_back(player).is_err() {
            return;
        }
        ctx.metrics.transfer("taken_back");
        self.host.notify(
            EventTarget::Player(player),
            RETURNED_TOPIC,
            reason.as_bytes(),
        );
        tracing::info!(zone = %self.entry.zone_id, %player, %reason, "a move was returned: the player stays");
    }

    /// Admits the player a move brings in (once per transfer: a repeat answers the same player):
    /// its id and this zone's owner epoch.
    pub fn transfer_in(
        &mut self,
        _ctx: &SimContext,
        record: &StoredTransfer,
    ) -> Result<(PlayerId, u64), JoinFailure> {
        if self.fenced() {
            return Err(JoinFailure::Fenced);
        }
        let epoch = self.persist.as_ref().map_or(0, |p| p.epoch());
        let id = &record.transfer.id;
        if let Some(&player) = self.arrivals.get(id) {
            if self.host.player(player).is_some() {
                return Ok((player, epoch));
            }
        }
        let t = &record.transfer;
        let principal = Principal::new(t.principal.clone());
        let claims = |text: &str| match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let player = self
            .host
            .handle_transfer_in(
                principal,
                claims(&t.player_claims),
                claims(&t.claims),
                &t.source_zone,
                &t.state,
            )
            .map_err(|e| match e {
                JoinError::Full { .. } => JoinFailure::Full,
                JoinError::Refused(r) => JoinFailure::Refused(r),
                JoinError::Disposed => JoinFailure::Unavailable("zone stopped".into()),
                JoinError::IdsExhausted => JoinFailure::Unavailable("player ids exhausted".into()),
            })?;
        if self.arrivals.len() >= MAX_ARRIVALS {
            if let Some(oldest) = self.arrival_order.pop_front() {
                self.arrivals.remove(&oldest);
            }
        }
        self.arrivals.insert(id.clone(), player);
        self.arrival_order.push_back(id.clone());
        self.publish();
        Ok((player, epoch))
    }

    /// A move this zone admitted `player` for was returned after all: the player leaves.
    pub fn transfer_cancel(&mut self, ctx: &SimContext, player: PlayerId) {
        if self
            .host
            .handle_leave(player, zonekeep_core::LeaveReason::Left)
            .is_ok()
        {
            ctx.metrics.transfer("admission_undone");
            self.arrivals.retain(|_, p| *p != player);
            self.publish();
        }
    }

    /// A moved player's connection arrived: attach it to the player admitted for `record`,
    /// admitting it again from the record first when this run of the zone never did (it
    /// restarted since) or the player's grace ended.
    pub fn arrive(
        &mut self,
        ctx: &SimContext,
        record: &StoredTransfer,
        principal: &Principal,
        version: u32,
        conn: crate::net::conn::ConnHandle,
    ) -> Result<Joined, JoinFailure> {
        let (player, epoch) = self.transfer_in(ctx, record)?;
        let joined = self.resume(ctx, player, principal, version, None, conn)?;
        if let Some(sub) = self.subs.get_mut(&player) {
            sub.moved_at_ms = Some(record.created_at_ms);
        }
        let job = Job::Arrived {
            id: record.transfer.id.clone(),
            epoch,
        };
        if ctx.transfers.submit(job).is_err() {
            tracing::warn!(zone = %self.entry.zone_id, transfer = %record.transfer.id, "the transfer worker is full: the arrival is not recorded");
        }
        Ok(joined)
    }
}
