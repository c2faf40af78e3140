//! A zone's side of moving players (see [`crate::transfer`]): handing its moves to the transfer
//! worker, taking players in, letting them go or taking them back, and a moved player's
//! connection arriving. In a kind that keeps characters, a player moves out without its
//! character (the core hands it back), arrives with the one its host took for this zone, and
//! comes back with it again — or, when it could not be taken again, is let go with a retry
//! hint rather than stay without it.

use zonekeep_core::{EventTarget, JoinError, LeaveReason, PlayerId, Principal, Role};
use zonekeep_protocol::messages::{KickCode, TRANSFER_PROTOCOL};
use zonekeep_store::StoredTransfer;

use super::{send_frame, ZoneRun};
use crate::persist::CharacterJob;
use crate::sim::{JoinFailure, Joined, SimContext};
use crate::transfer::{Job, Outbound, Resolution, Retaken, RETURNED_TOPIC};

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
            ctx.lifecycle
                .moving(&self.entry.zone_id, player.0, &request.target_zone);
            let version = self.subs.get(&player).map_or(0, |s| s.version);
            if version < TRANSFER_PROTOCOL {
                ctx.metrics.transfer("client_too_old");
                self.take_back(
                    ctx,
                    player,
                    "the client is too old to be moved to another zone (protocol version 8 needed)",
                    None,
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
                    None,
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
            Resolution::Returned(reason, retaken) => self.take_back(ctx, player, &reason, retaken),
        }
    }

    /// The zone takes `player` back (`returning = true`) and tells it why; with the character
    /// its host took again for the zone, if any (a move whose release the host had not taken
    /// yet gets it back from the core). A player of a kind with characters left without one is
    /// let go with CHARACTER_ELSEWHERE, a retry hint: its next join takes the character.
    fn take_back(
        &mut self,
        ctx: &SimContext,
        player: PlayerId,
        reason: &str,
        retaken: Option<Retaken>,
    ) {
        let (back, retake_failed) = match retaken {
            Some(Retaken {
                principal,
                character: Ok(c),
            }) => {
                let back = self.host.handle_transfer_back_with_character(player, c);
                if back.is_err() {
                    // The player left meanwhile: the lease taken for it is given up again.
                    self.give_back_character(ctx, &principal);
                }
                (back, None)
            }
            Some(Retaken {
                character: Err(why),
                ..
            }) => (self.host.handle_transfer_back(player), Some(why)),
            None => (self.host.handle_transfer_back(player), None),
        };
        if back.is_err() {
            return;
        }
        ctx.metrics.transfer("taken_back");
        if self.keeps_characters(ctx) && !self.host.holds_character(player) {
            let why = retake_failed.unwrap_or_else(|| "it was handed back as you moved".into());
            self.let_go_without_character(ctx, player, &why);
            return;
        }
        self.host.notify(
            EventTarget::Player(player),
            RETURNED_TOPIC,
            reason.as_bytes(),
        );
        tracing::info!(zone = %self.entry.zone_id, %player, %reason, "a move was returned: the player stays");
    }

    /// Admits the player a move brings in (once per transfer: a repeat answers the same player):
    /// its id and this zone's owner epoch. `character` is the player's, whose lease the host took
    /// for this zone (kinds with characters); a refused admission hands it back at once.
    pub fn transfer_in(
        &mut self,
        ctx: &SimContext,
        record: &StoredTransfer,
        character: Option<Vec<u8>>,
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
        if character.is_none() && self.keeps_characters(ctx) {
            // The zone holds the player's character already: the zone restarted since the
            // admission and restored the player, with its character, from its save.
            return self
                .restored_arrival(&t.principal)
                .map(|player| (player, epoch))
                .ok_or_else(|| {
                    JoinFailure::CharacterElsewhere(
                        "your character is in use in this zone; retry shortly".into(),
                    )
                });
        }
        let principal = Principal::new(t.principal.clone());
        let claims = |text: &str| match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let admitted = match character {
            Some(c) => self.host.handle_transfer_in_with_character(
                principal,
                claims(&t.player_claims),
                claims(&t.claims),
                &t.source_zone,
                &t.state,
                c,
            ),
            None => self.host.handle_transfer_in(
                principal,
                claims(&t.player_claims),
                claims(&t.claims),
                &t.source_zone,
                &t.state,
            ),
        };
        // A refused arrival hands its character back at once.
        if let Some(p) = self.persist.as_mut() {
            p.send_characters(&mut self.host, None);
        }
        let player = admitted.map_err(|e| match e {
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

    /// Whether the host hands this zone's players their characters (a kind registered as keeping
    /// characters, as `session::character` decides for joins).
    fn keeps_characters(&self, ctx: &SimContext) -> bool {
        ctx.specs
            .get(self.host.kind())
            .is_some_and(|s| s.config.characters)
    }

    /// A player of `principal` that this run restored from the zone's save, still waiting for its
    /// connection (dropped, not moving).
    fn restored_arrival(&self, principal: &str) -> Option<PlayerId> {
        self.host
            .players()
            .find(|p| {
                p.principal.as_str() == principal
                    && p.role == Role::Player
                    && !p.connected
                    && !self.host.is_moving(p.id)
            })
            .map(|p| p.id)
    }

    /// `player` cannot stay without its character (it could not be taken again after its move
    /// came back): it leaves the zone, and its connection is told to retry (CHARACTER_ELSEWHERE),
    /// whose join takes the character wherever it is.
    fn let_go_without_character(&mut self, ctx: &SimContext, player: PlayerId, why: &str) {
        if self.host.handle_leave(player, LeaveReason::Kicked).is_err() {
            return;
        }
        if let Some(c) = self.subs.remove(&player).and_then(|s| s.conn) {
            c.kick(
                KickCode::CHARACTER_ELSEWHERE,
                format!("your move was returned, but your character could not be taken back ({why}); join again"),
            );
        }
        ctx.reconnect.forget(&self.entry.zone_id, player);
        self.publish();
        tracing::warn!(zone = %self.entry.zone_id, %player, reason = %why, "a returned move's player left: its character could not be taken back");
    }

    /// Gives up this zone's lease on `principal`'s character, leaving the character as the store
    /// holds it (a lease taken for a player that left before it could have it).
    fn give_back_character(&self, ctx: &SimContext, principal: &str) {
        let (Some(p), Some(persist)) = (&ctx.persist, &self.persist) else {
            return;
        };
        let job = CharacterJob {
            zone: self.entry.zone_id.clone(),
            epoch: persist.epoch(),
            principal: principal.to_owned(),
            data: None,
            release: true,
            done: None,
        };
        if p.characters().try_send(job).is_err() {
            tracing::warn!(zone = %self.entry.zone_id, "the character worker is full: a returned move's character lease stays with the zone until its next owner");
        }
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
        character: Option<Vec<u8>>,
    ) -> Result<Joined, JoinFailure> {
        let (player, epoch) = self.transfer_in(ctx, record, character)?;
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
