//! Calls in and outputs out for what links a zone to others: transfers ([`crate::transfer`]),
//! zone messages, groups and the parent ([`crate::message`]).

use super::ZoneHost;
use crate::error::{JoinError, UnknownPlayer};
use crate::message::{
    tier_from_code, ChildEvent, Delivery, GroupChange, Inbound, InboundMessage, MessageFrom,
    MessageId, MessageTarget, OutboundMessage, TIER_TOPIC,
};
use crate::player::{Claims, PlayerId, PlayerInfo, Principal, Role};
use crate::recording::{Outcome, Record};
use crate::replicate::SubscriberId;
use crate::transfer::{Arrival, Moving, TransferRequest, MAX_TRANSFER_STATE};
use crate::view::subscriber_config;
use crate::zone::LeaveReason;

impl ZoneHost {
    /// Whether `player` is moving to another zone: its transfer left this zone and the server
    /// has not yet reported the outcome ([`handle_transfer_done`](ZoneHost::handle_transfer_done)
    /// or [`handle_transfer_back`](ZoneHost::handle_transfer_back)).
    pub fn is_moving(&self, player: PlayerId) -> bool {
        self.core.transfers.moving.contains_key(&player)
    }

    /// Sends `payload` under `topic` to `target` in the next frames, as an event of the zone's
    /// own would be, from outside any hook: the host tells a player something the zone did not
    /// (a move that was returned, and why). It changes no zone state.
    pub fn notify(&mut self, target: crate::ctx::EventTarget, topic: u16, payload: &[u8]) {
        self.core
            .ctx(None)
            .emit_event(target, topic, payload.to_vec());
    }

    /// The transfers that left this zone since the last call, in order, for the server to carry
    /// to their targets. Each player in one is moving until the server reports the outcome. A
    /// request whose player left (kicked, or its grace ended) before it was drained is gone:
    /// there is nothing left to move.
    pub fn drain_transfers(&mut self) -> Vec<TransferRequest> {
        std::mem::take(&mut self.core.transfers.out)
    }

    /// The transfer of `player` failed (the target refused it, does not exist, or could not be
    /// reached): the zone takes the player back through
    /// [`Zone::transfer_in`](crate::Zone::transfer_in) with `returning` set, the state it handed
    /// out, `from_zone` the target and the claims it handed over. The player is no longer
    /// moving; its inputs are taken again and its frames resume as ordinary Deltas against what
    /// its client was last sent (the connection stayed open). [`UnknownPlayer`] when the player
    /// is not moving.
    ///
    /// In a kind that keeps characters, the player first gets back the character it handed over
    /// as it moved out when that release has not been drained yet (the release is withdrawn,
    /// never written); otherwise it comes back without one ([`holds_character`] says so). A
    /// host that took the character's lease again for this zone calls
    /// [`handle_transfer_back_with_character`](ZoneHost::handle_transfer_back_with_character)
    /// instead.
    ///
    /// [`holds_character`]: ZoneHost::holds_character
    pub fn handle_transfer_back(&mut self, player: PlayerId) -> Result<(), UnknownPlayer> {
        self.tap_call(|| Record::TransferBack(player));
        let back = self.transfer_back(player, None);
        self.tap_player_outcome(back.map_err(|_| Outcome::UnknownPlayer));
        back
    }

    /// Like [`handle_transfer_back`](ZoneHost::handle_transfer_back), for a player of a kind that
    /// keeps characters whose release (at its move out) was written: `character` is the one its
    /// host took the lease of again for this zone, which the zone sees from the return's
    /// `transfer_in` on. (A release still not drained is newer and wins.) [`UnknownPlayer`] when
    /// the player is not moving: the character is not taken, and the caller gives its lease up.
    pub fn handle_transfer_back_with_character(
        &mut self,
        player: PlayerId,
        character: Vec<u8>,
    ) -> Result<(), UnknownPlayer> {
        self.tap_call(|| Record::TransferBackCharacter {
            player,
            character: character.clone(),
        });
        let back = self.transfer_back(player, Some(character));
        self.tap_player_outcome(back.map_err(|_| Outcome::UnknownPlayer));
        back
    }

    /// Whether `player` holds a character here (a kind that keeps characters; not while it
    /// moves).
    pub fn holds_character(&self, player: PlayerId) -> bool {
        self.core.characters.holds(player)
    }

    fn transfer_back(
        &mut self,
        player: PlayerId,
        character: Option<Vec<u8>>,
    ) -> Result<(), UnknownPlayer> {
        let info = match self.core.roster.get(&player) {
            Some(info) if self.core.transfers.moving.contains_key(&player) => info.clone(),
            _ => return Err(UnknownPlayer(player)),
        };
        let Some(moving) = self.core.transfers.moving.remove(&player) else {
            return Err(UnknownPlayer(player));
        };
        self.relays_changed(&[player]);
        // The character is back before the zone's hook runs.
        self.core
            .characters
            .take_back(player, info.principal.clone(), character);
        // Frames resume first, so that what the zone tells the player as it takes it back (an
        // event of `transfer_in`) reaches it.
        if info.connected {
            self.resume_frames(player);
        }
        self.take_back(&info, &moving);
        self.apply_kicks();
        Ok(())
    }

    /// `transfer_in` with `returning`; a refusal is counted and ignored.
    fn take_back(&mut self, info: &PlayerInfo, moving: &Moving) {
        let arrival = Arrival {
            state: &moving.state,
            from_zone: &moving.target,
            claims: &moving.claims,
            returning: true,
            new_to_run: false,
        };
        let capacity = self.config.input_buffer;
        let verdict = self
            .zone
            .transfer_in(&mut self.core.ctx(None), info, &arrival, capacity);
        if verdict.is_err() {
            let t = &mut self.core.transfers;
            t.returns_refused = t.returns_refused.saturating_add(1);
        }
    }

    /// A moving player's frames continue from what its client holds.
    fn resume_frames(&mut self, player: PlayerId) {
        if !self.builds_here(player) {
            return;
        }
        let (Some(info), Some(view)) = (self.core.roster.get(&player), self.core.views.get(player))
        else {
            return;
        };
        let cfg = subscriber_config(&self.config.replication, info.role, view);
        if self
            .replicator
            .resume_subscriber(SubscriberId(player.0), cfg)
            .is_err()
        {
            self.subscribe(player);
        }
    }

    /// The transfer of `player` succeeded: the target took it. The participant leaves with
    /// [`LeaveReason::Transferred`] (`on_leave` is called). [`UnknownPlayer`] when the player is
    /// not moving.
    pub fn handle_transfer_done(&mut self, player: PlayerId) -> Result<(), UnknownPlayer> {
        self.tap_call(|| Record::TransferDone(player));
        let moving = self.core.roster.contains_key(&player) && self.is_moving(player);
        if moving {
            self.remove_player(player, LeaveReason::Transferred);
            self.apply_kicks();
        }
        let done = if moving {
            Ok(())
        } else {
            Err(UnknownPlayer(player))
        };
        self.tap_player_outcome(done.map_err(|_| Outcome::UnknownPlayer));
        done
    }

    /// A player arrives by transfer from zone `from_zone`: admitted like
    /// [`handle_join`](ZoneHost::handle_join) (the same capacity check and a new id) but through
    /// [`Zone::transfer_in`](crate::Zone::transfer_in) with `state`, instead of `on_join`. Its
    /// [`PlayerInfo`] claims are `player_claims` (what it joined the first zone with) merged with
    /// `claims` (what that zone handed over; these win). The participant starts dropped: its
    /// client connects later and the server calls [`handle_rejoin`](ZoneHost::handle_rejoin);
    /// if it never comes, the reconnect grace (running from now) ends it with
    /// [`LeaveReason::Dropped`].
    pub fn handle_transfer_in(
        &mut self,
        principal: Principal,
        player_claims: Claims,
        claims: Claims,
        from_zone: &str,
        state: &[u8],
    ) -> Result<PlayerId, JoinError> {
        self.tap_call(|| Record::TransferIn {
            principal: principal.as_str().to_owned(),
            player_claims: serde_json::Value::Object(player_claims.clone()).to_string(),
            claims: serde_json::Value::Object(claims.clone()).to_string(),
            from_zone: from_zone.to_owned(),
            state: state.to_vec(),
        });
        let arrival = Move {
            principal,
            player_claims,
            claims,
            from_zone,
            state,
        };
        let admitted = self.admit_arrival(arrival, None);
        if self.recording() {
            self.tap_effect(Record::Outcome(super::calls::join_outcome(&admitted)));
        }
        admitted
    }

    /// Like [`handle_transfer_in`](ZoneHost::handle_transfer_in), for a player arriving in a
    /// kind that keeps characters ([`ZoneConfig::characters`](crate::ZoneConfig::characters)):
    /// `character` is the one the host took the lease of for this zone (the zone the player
    /// comes from handed it back as the player moved out), which the zone sees from its
    /// `transfer_in` on ([`Ctx::character`](crate::Ctx::character)). A refused arrival hands it
    /// back as the zone left it, as a releasing [`CharacterWrite`](crate::CharacterWrite), as a
    /// refused [`handle_join_with_character`](ZoneHost::handle_join_with_character) does.
    pub fn handle_transfer_in_with_character(
        &mut self,
        principal: Principal,
        player_claims: Claims,
        claims: Claims,
        from_zone: &str,
        state: &[u8],
        character: Vec<u8>,
    ) -> Result<PlayerId, JoinError> {
        self.tap_call(|| Record::TransferInCharacter {
            principal: principal.as_str().to_owned(),
            player_claims: serde_json::Value::Object(player_claims.clone()).to_string(),
            claims: serde_json::Value::Object(claims.clone()).to_string(),
            from_zone: from_zone.to_owned(),
            state: state.to_vec(),
            character: character.clone(),
        });
        let arrival = Move {
            principal,
            player_claims,
            claims,
            from_zone,
            state,
        };
        let admitted = self.admit_arrival(arrival, Some(character));
        if self.recording() {
            self.tap_effect(Record::Outcome(super::calls::join_outcome(&admitted)));
        }
        admitted
    }

    fn admit_arrival(
        &mut self,
        arrival: Move<'_>,
        character: Option<Vec<u8>>,
    ) -> Result<PlayerId, JoinError> {
        let Move {
            principal,
            player_claims,
            claims,
            from_zone,
            state,
        } = arrival;
        let id = match self.admit_id(Role::Player) {
            Ok(id) => id,
            Err(e) => {
                // Full (or stopped): the character goes back as it came.
                if let Some(data) = character {
                    self.core.characters.hand_back(principal, data);
                }
                return Err(e);
            }
        };
        if let Some(data) = character {
            self.core.characters.admit(id, principal.clone(), data);
        }
        let mut merged = player_claims;
        for (k, v) in &claims {
            merged.insert(k.clone(), v.clone());
        }
        let info = PlayerInfo {
            id,
            principal,
            role: Role::Player,
            claims: merged,
            connected: false,
        };
        self.core.roster.insert(id, info.clone());
        self.core.views.insert(id);
        let arrival = Arrival {
            state,
            from_zone,
            claims: &claims,
            returning: false,
            new_to_run: false,
        };
        let capacity = self.config.input_buffer;
        let verdict = self
            .zone
            .transfer_in(&mut self.core.ctx(None), &info, &arrival, capacity);
        if let Err(refusal) = verdict {
            self.forget_refused(id);
            self.core.characters.refused(id);
            return Err(JoinError::Refused(refusal));
        }
        // The grace runs from the arrival: the client's connection is on its way.
        let now = self.read_clock();
        self.dropped_at.insert(id, now);
        if let Some((from, to)) = self.core.tier.occupied() {
            self.transition(from, to);
        }
        self.apply_kicks();
        Ok(id)
    }

    /// A player whose move out of this zone was returned after the zone's previous run ended
    /// (its host crashed while the move was pending) joins again: admitted like
    /// [`handle_join`](ZoneHost::handle_join) (the same capacity check, a new id, connected and
    /// subscribed at once) but through [`Zone::transfer_in`](crate::Zone::transfer_in) with
    /// `returning` set and `state` (what `transfer_out` handed out), instead of `on_join`: the
    /// player gets back what it carried. Its [`PlayerInfo`] claims are `player_claims`;
    /// `claims` are those the zone handed over with the move, and `from_zone` the zone it did
    /// not reach. As for any return, a refusal by the zone is ignored and counted.
    pub fn handle_transfer_return(
        &mut self,
        principal: Principal,
        player_claims: Claims,
        claims: Claims,
        from_zone: &str,
        state: &[u8],
    ) -> Result<PlayerId, JoinError> {
        self.tap_call(|| Record::TransferReturn {
            principal: principal.as_str().to_owned(),
            player_claims: serde_json::Value::Object(player_claims.clone()).to_string(),
            claims: serde_json::Value::Object(claims.clone()).to_string(),
            from_zone: from_zone.to_owned(),
            state: state.to_vec(),
        });
        let back = Move {
            principal,
            player_claims,
            claims,
            from_zone,
            state,
        };
        let admitted = self.admit_return(back, None);
        if self.recording() {
            self.tap_effect(Record::Outcome(super::calls::join_outcome(&admitted)));
        }
        admitted
    }

    /// Like [`handle_transfer_return`](ZoneHost::handle_transfer_return), for a player of a
    /// kind that keeps characters: `character` is the one the host took the lease of for this
    /// zone as the player joined, which the zone sees from the return's `transfer_in` on. A
    /// join refused for want of room hands it back unchanged.
    pub fn handle_transfer_return_with_character(
        &mut self,
        principal: Principal,
        player_claims: Claims,
        claims: Claims,
        from_zone: &str,
        state: &[u8],
        character: Vec<u8>,
    ) -> Result<PlayerId, JoinError> {
        self.tap_call(|| Record::TransferReturnCharacter {
            principal: principal.as_str().to_owned(),
            player_claims: serde_json::Value::Object(player_claims.clone()).to_string(),
            claims: serde_json::Value::Object(claims.clone()).to_string(),
            from_zone: from_zone.to_owned(),
            state: state.to_vec(),
            character: character.clone(),
        });
        let back = Move {
            principal,
            player_claims,
            claims,
            from_zone,
            state,
        };
        let admitted = self.admit_return(back, Some(character));
        if self.recording() {
            self.tap_effect(Record::Outcome(super::calls::join_outcome(&admitted)));
        }
        admitted
    }

    fn admit_return(
        &mut self,
        back: Move<'_>,
        character: Option<Vec<u8>>,
    ) -> Result<PlayerId, JoinError> {
        let Move {
            principal,
            player_claims,
            claims,
            from_zone,
            state,
        } = back;
        let claims = &claims;
        let id = match self.admit_id(Role::Player) {
            Ok(id) => id,
            Err(e) => {
                if let Some(data) = character {
                    self.core.characters.hand_back(principal, data);
                }
                return Err(e);
            }
        };
        if let Some(data) = character {
            self.core.characters.admit(id, principal.clone(), data);
        }
        let info = PlayerInfo {
            id,
            principal,
            role: Role::Player,
            claims: player_claims,
            connected: true,
        };
        self.core.roster.insert(id, info.clone());
        self.core.views.insert(id);
        let arrival = Arrival {
            state,
            from_zone,
            claims,
            returning: true,
            new_to_run: true,
        };
        let capacity = self.config.input_buffer;
        let verdict = self
            .zone
            .transfer_in(&mut self.core.ctx(None), &info, &arrival, capacity);
        if verdict.is_err() {
            // A zone must take its own player back: the refusal is counted, the player stays.
            let t = &mut self.core.transfers;
            t.returns_refused = t.returns_refused.saturating_add(1);
        }
        self.subscribe(id);
        if let Some((from, to)) = self.core.tier.occupied() {
            self.transition(from, to);
        }
        self.apply_kicks();
        Ok(id)
    }

    /// Apply the transfers the zone asked for (see [`crate::transfer`]); called with the kicks.
    pub(super) fn apply_transfers(&mut self) {
        let asks = std::mem::take(&mut self.core.transfers.asked);
        for ask in asks {
            let Some(info) = self.core.roster.get(&ask.player).cloned() else {
                continue;
            };
            if self.core.transfers.moving.contains_key(&ask.player) {
                continue;
            }
            let state = self.zone.transfer_out(&mut self.core.ctx(None), ask.player);
            let moving = Moving {
                target: ask.target,
                claims: ask.claims,
                state,
            };
            if moving.state.len() > MAX_TRANSFER_STATE {
                let t = &mut self.core.transfers;
                t.refused = t.refused.saturating_add(1);
                self.take_back(&info, &moving);
                continue;
            }
            // No frames while moving: its client keeps drawing the last world it was sent.
            let _ = self.replicator.park_subscriber(SubscriberId(ask.player.0));
            self.held.forget(ask.player);
            // Its character goes back as `transfer_out` left it: the target takes it from there.
            self.core.characters.release(ask.player);
            self.core.transfers.out.push(TransferRequest {
                player: ask.player,
                principal: info.principal,
                role: Role::Player,
                player_claims: info.claims,
                target_zone: moving.target.clone(),
                claims: moving.claims.clone(),
                state: moving.state.clone(),
                tick: ask.tick,
            });
            self.core.transfers.moving.insert(ask.player, moving);
            self.relays_changed(&[ask.player]);
        }
    }

    /// A message for this zone (from another zone or the operator): queued for delivery at the
    /// start of the zone's next tick, after fact settlements and before inputs, in arrival
    /// order — or refused as a [`Delivery::Duplicate`] (see [`crate::message`] for the rule) or
    /// because [`MAX_INBOX`](crate::message::MAX_INBOX) wait already ([`Delivery::Full`],
    /// counted in [`AdvanceReport::messages_full`](crate::AdvanceReport::messages_full)). A
    /// disposed host answers `Full`. Messages wait while the zone runs no ticks (Idle with
    /// [`IdlePolicy::Pause`](crate::IdlePolicy::Pause), Dormant): the server wakes such a zone.
    pub fn handle_message(&mut self, msg: InboundMessage) -> Delivery {
        self.tap_call(|| Record::Message(msg.clone()));
        let delivery = if self.disposed {
            Delivery::Full
        } else {
            self.core.mail.receive(msg)
        };
        if self.recording() {
            self.tap_effect(Record::Outcome(match delivery {
                Delivery::Queued => Outcome::Ok,
                Delivery::Duplicate => Outcome::Duplicate,
                Delivery::Full => Outcome::Full,
            }));
        }
        delivery
    }

    /// A message this zone sent (`id`, to `to` with `topic`) could not be delivered: the bus is
    /// down, there is none in this fleet, or the target refused it or does not exist. The zone
    /// hears it at the start of its next tick through
    /// [`Zone::on_undeliverable`](crate::Zone::on_undeliverable). Shares the inbox bound with
    /// messages (a notice past it is dropped and counted).
    pub fn handle_undeliverable(
        &mut self,
        id: MessageId,
        to: MessageTarget,
        topic: u16,
        reason: String,
    ) {
        self.tap_call(|| Record::Undeliverable {
            id: id.clone(),
            to: to.clone(),
            topic,
            reason: reason.clone(),
        });
        if !self.disposed {
            self.core.mail.undeliverable(id, to, topic, reason);
        }
    }

    /// The messages the zone sent (and the host's tier messages to its parent) since the last
    /// call, in order, for the server to carry. Works after [`dispose`](ZoneHost::dispose) too,
    /// so the Dormant tier message of an unloading zone still leaves.
    pub fn drain_messages(&mut self) -> Vec<OutboundMessage> {
        self.tap_call(|| Record::DrainMessages);
        std::mem::take(&mut self.core.mail.outbox)
    }

    /// How the zone's group membership changed since the last call (after a restore, every
    /// group it is in counts as joined), for the server's fleet-wide table.
    pub fn group_changes(&mut self) -> Vec<GroupChange> {
        self.core.mail.take_group_changes()
    }

    /// The groups the zone is in now, in name order.
    pub fn groups(&self) -> impl Iterator<Item = &str> + '_ {
        self.core.mail.groups.iter().map(String::as_str)
    }

    /// The zone's parent, if it named one ([`Ctx::set_parent`](crate::Ctx::set_parent)).
    pub fn parent(&self) -> Option<&str> {
        self.core.mail.parent.as_deref()
    }

    /// Hand the queued messages and notices to the zone (at the start of a tick).
    pub(super) fn deliver_inbox(&mut self) {
        while let Some(item) = self.core.mail.inbox.pop_front() {
            let ctx = &mut self.core.ctx(None);
            match item {
                Inbound::Message(m) => match (&m.from, m.via_parent) {
                    (MessageFrom::Zone(child), true) => {
                        let event = child_event(m.topic, &m.payload);
                        self.zone.on_child(ctx, child, event);
                    }
                    (from, _) => self.zone.on_message(ctx, from, m.topic, &m.payload),
                },
                Inbound::Undeliverable {
                    to, topic, reason, ..
                } => self.zone.on_undeliverable(ctx, &to, topic, &reason),
            }
        }
    }
}

/// A move's arrival or return, as the host is handed it.
struct Move<'a> {
    principal: Principal,
    player_claims: Claims,
    claims: Claims,
    from_zone: &'a str,
    state: &'a [u8],
}

/// What a message from a child means: a tier change (the host's reserved topic with a valid
/// payload) or the child's own message.
fn child_event(topic: u16, payload: &[u8]) -> ChildEvent<'_> {
    if topic == TIER_TOPIC {
        if let [from, to] = payload {
            if let (Some(from), Some(to)) = (tier_from_code(*from), tier_from_code(*to)) {
                return ChildEvent::Tier { from, to };
            }
        }
    }
    ChildEvent::Message { topic, payload }
}
