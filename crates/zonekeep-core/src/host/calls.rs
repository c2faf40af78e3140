//! Calls in: participants joining, dropping, rejoining and leaving, and their inputs. Each runs
//! the zone's hooks at once; inputs are checked and sanitized at once and wait in the player's
//! buffer for the next tick.

use super::ZoneHost;
use crate::error::{JoinError, RejoinError, UnknownPlayer};
use crate::input::{InputMeta, InputOutcome};
use crate::player::{Claims, PlayerId, PlayerInfo, Principal, Role};
use crate::recording::{Outcome, Record};
use crate::replicate::{ResumeOutcome, SubscriberId};
use crate::zone::LeaveReason;
use zonekeep_protocol::ResumeFrom;

impl ZoneHost {
    /// Admit a participant with a verified `principal` and ticket `claims`.
    ///
    /// Refused with [`JoinError::Full`] when the role is at capacity (dropped
    /// participants within grace still hold their place), or with the zone's
    /// own [`JoinRefusal`](crate::JoinRefusal). Wakes an Idle or Dormant zone.
    pub fn handle_join(
        &mut self,
        principal: Principal,
        claims: Claims,
        role: Role,
    ) -> Result<PlayerId, JoinError> {
        self.tap_call(|| Record::Join {
            principal: principal.as_str().to_owned(),
            claims: serde_json::Value::Object(claims.clone()).to_string(),
            role,
        });
        let joined = self.join_participant(principal, claims, role, None);
        if self.recording() {
            self.tap_effect(Record::Outcome(join_outcome(&joined)));
        }
        joined
    }

    /// Like [`handle_join`](ZoneHost::handle_join), for a player of a kind that keeps characters
    /// ([`ZoneConfig::characters`](crate::ZoneConfig::characters)): `character` is the one the
    /// host holds the lease of for this zone, which the zone sees from its join hook on
    /// ([`Ctx::character`](crate::Ctx::character)). A refused join hands it back unchanged, as a
    /// releasing [`CharacterWrite`](crate::CharacterWrite).
    pub fn handle_join_with_character(
        &mut self,
        principal: Principal,
        claims: Claims,
        role: Role,
        character: Vec<u8>,
    ) -> Result<PlayerId, JoinError> {
        self.tap_call(|| Record::JoinCharacter {
            principal: principal.as_str().to_owned(),
            claims: serde_json::Value::Object(claims.clone()).to_string(),
            role,
            character: character.clone(),
        });
        let joined = self.join_participant(principal, claims, role, Some(character));
        if self.recording() {
            self.tap_effect(Record::Outcome(join_outcome(&joined)));
        }
        joined
    }

    /// The capacity check and a new id for a participant of `role` about to be admitted.
    pub(super) fn admit_id(&mut self, role: Role) -> Result<PlayerId, JoinError> {
        if self.disposed {
            return Err(JoinError::Disposed);
        }
        let max = match role {
            Role::Player => self.config.max_players,
            Role::Observer => self.config.max_observers,
        };
        let present = self.core.roster.count(role);
        if present >= usize::try_from(max).unwrap_or(usize::MAX) {
            return Err(JoinError::Full { role });
        }
        let id = PlayerId(self.next_player);
        self.next_player = self
            .next_player
            .checked_add(1)
            .ok_or(JoinError::IdsExhausted)?;
        Ok(id)
    }

    /// Undo the admission of a participant the zone refused.
    pub(super) fn forget_refused(&mut self, id: PlayerId) {
        self.core.roster.remove(&id);
        self.core.views.remove(id);
        // Kicks and transfers requested for the refused participant are moot.
        self.core.out.kicks.retain(|k| k.player != id);
        self.core.transfers.asked.retain(|a| a.player != id);
        self.apply_kicks();
    }

    fn join_participant(
        &mut self,
        principal: Principal,
        claims: Claims,
        role: Role,
        character: Option<Vec<u8>>,
    ) -> Result<PlayerId, JoinError> {
        let id = match self.admit_id(role) {
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
        let info = PlayerInfo {
            id,
            principal,
            role,
            claims,
            connected: true,
        };
        self.core.roster.insert(id, info.clone());
        self.core.views.insert(id);
        let verdict = self
            .zone
            .join(&mut self.core.ctx(None), &info, self.config.input_buffer);
        if let Err(refusal) = verdict {
            self.forget_refused(id);
            self.core.characters.refused(id);
            return Err(JoinError::Refused(refusal));
        }
        self.subscribe(id);
        if let Some((from, to)) = self.core.tier.occupied() {
            self.transition(from, to);
        }
        self.apply_kicks();
        Ok(id)
    }

    /// The participant's connection was lost: it keeps its place until
    /// `reconnect_grace` passes (checked in [`advance`](ZoneHost::advance)).
    /// Dropping an already dropped participant changes nothing.
    pub fn handle_drop(&mut self, id: PlayerId) -> Result<(), UnknownPlayer> {
        self.tap_call(|| Record::Drop(id));
        let dropped = self.drop_participant(id);
        self.tap_player_outcome(dropped.map_err(|_| Outcome::UnknownPlayer));
        dropped
    }

    fn drop_participant(&mut self, id: PlayerId) -> Result<(), UnknownPlayer> {
        let was = self
            .core
            .roster
            .set_connected(id, false)
            .ok_or(UnknownPlayer(id))?;
        if !was {
            return Ok(());
        }
        self.relays_changed(&[id]);
        let now = self.read_clock();
        self.dropped_at.insert(id, now);
        // A dropped participant gets no frames, but what it was sent is kept until it rejoins
        // (perhaps continuing from it) or its grace passes.
        let _ = self.replicator.park_subscriber(SubscriberId(id.0));
        self.held.forget(id);
        self.zone.on_drop(&mut self.core.ctx(None), id);
        self.apply_kicks();
        Ok(())
    }

    /// A dropped participant is back within the grace; it keeps its id,
    /// buffered inputs and sequence numbers. Its next frame is a BASELINE.
    pub fn handle_rejoin(&mut self, id: PlayerId) -> Result<(), RejoinError> {
        self.tap_call(|| Record::Rejoin(id));
        let rejoined = self.rejoin_participant(id, None);
        self.tap_player_outcome(rejoined.as_ref().map(|_| ()).map_err(rejoin_outcome));
        rejoined.map(|_| ())
    }

    /// [`handle_rejoin`](ZoneHost::handle_rejoin) for a client that says what it holds
    /// (PROTOCOL.md §4.1.1): when `from` names the participant's last Delta (or a later quiet one)
    /// and the count and hash of the known set it was last sent, its next frame is an ordinary
    /// Delta against that state ([`ResumeOutcome::Delta`]); otherwise a BASELINE, as after
    /// [`handle_rejoin`](ZoneHost::handle_rejoin). The state is kept from the drop until the
    /// rejoin, a leave or the end of the grace.
    pub fn handle_rejoin_from(
        &mut self,
        id: PlayerId,
        from: ResumeFrom,
    ) -> Result<ResumeOutcome, RejoinError> {
        self.tap_call(|| Record::RejoinFrom { player: id, from });
        let rejoined = self.rejoin_participant(id, Some(&from));
        if self.recording() {
            self.tap_effect(Record::Outcome(match &rejoined {
                Ok(ResumeOutcome::Delta) => Outcome::ResumedDelta,
                Ok(ResumeOutcome::Baseline) => Outcome::ResumedBaseline,
                Err(e) => rejoin_outcome(e),
            }));
        }
        rejoined
    }

    fn rejoin_participant(
        &mut self,
        id: PlayerId,
        from: Option<&ResumeFrom>,
    ) -> Result<ResumeOutcome, RejoinError> {
        if self.disposed {
            return Err(RejoinError::Disposed);
        }
        let connected = self
            .core
            .roster
            .get(&id)
            .map(|p| p.connected)
            .ok_or(RejoinError::UnknownPlayer(id))?;
        if connected {
            return Err(RejoinError::NotDropped(id));
        }
        let now = self.read_clock();
        if self.grace_expired(id, now) {
            self.remove_player(id, LeaveReason::Dropped);
            self.apply_kicks();
            return Err(RejoinError::GraceExpired(id));
        }
        self.dropped_at.remove(id);
        let _ = self.core.roster.set_connected(id, true);
        self.relays_changed(&[id]);
        let resumed = self.resubscribe(id, from);
        if self.core.transfers.moving.contains_key(&id) {
            // Still moving: the new connection gets frames once the transfer comes back.
            let _ = self.replicator.park_subscriber(SubscriberId(id.0));
            self.held.forget(id);
        }
        self.zone.on_rejoin(&mut self.core.ctx(None), id);
        self.apply_kicks();
        Ok(resumed)
    }

    /// Remove a participant now, telling the zone why.
    pub fn handle_leave(&mut self, id: PlayerId, why: LeaveReason) -> Result<(), UnknownPlayer> {
        self.tap_call(|| Record::Leave {
            player: id,
            reason: why,
        });
        let known = self.core.roster.contains_key(&id);
        if known {
            self.remove_player(id, why);
            self.apply_kicks();
        }
        self.tap_player_outcome(if known {
            Ok(())
        } else {
            Err(Outcome::UnknownPlayer)
        });
        if known {
            Ok(())
        } else {
            Err(UnknownPlayer(id))
        }
    }

    /// The driver measured participant `id`'s round trip (say, from its connection's Ping and
    /// Pong). Lag compensation lets its inputs reach at most this plus
    /// [`LagCompensation::max_view_delay`](crate::LagCompensation::max_view_delay) into the past;
    /// until it is told, `max_view_delay` alone. Recorded, since it changes how inputs are
    /// judged; ignored by a zone without lag compensation and for unknown participants.
    pub fn set_rtt(&mut self, id: PlayerId, rtt: std::time::Duration) {
        self.tap_call(|| Record::Rtt { player: id, rtt });
        if !self.core.roster.contains_key(&id) {
            return;
        }
        if let Some(history) = self.rewind.as_mut() {
            history.set_rtt(id, rtt);
        }
    }

    /// Offer one input from player `id` with the client's sequence number
    /// `seq` and the tick it was viewing. Duplicates and stale numbers are
    /// dropped before `sanitize` runs; sanitized inputs are buffered (a full
    /// buffer drops its oldest). Every outcome is counted for the next report
    /// and returned, so a driver can tell the client about a refusal.
    pub fn handle_input(
        &mut self,
        id: PlayerId,
        seq: u32,
        view_tick: u32,
        payload: &[u8],
    ) -> InputOutcome {
        if let Some(r) = self.tap() {
            r.record_input((id, seq, view_tick, payload));
        }
        let outcome = self.classify_and_buffer(id, seq, view_tick, payload);
        // An accepted input (nearly every one) records no outcome: the replay records its own
        // the same way, so one that is not accepted there still shows as a difference.
        if self.recording() && !matches!(outcome, InputOutcome::Accepted) {
            self.tap_effect(Record::Outcome(match &outcome {
                InputOutcome::Accepted => Outcome::Ok,
                InputOutcome::AcceptedDroppedOldest => Outcome::DroppedOldest,
                InputOutcome::Duplicate => Outcome::Duplicate,
                InputOutcome::Stale => Outcome::Stale,
                InputOutcome::Refused(r) => Outcome::Refused(r.code),
                InputOutcome::UnknownPlayer => Outcome::UnknownPlayer,
                InputOutcome::Observer => Outcome::Observer,
                InputOutcome::Disconnected => Outcome::Disconnected,
                InputOutcome::Moving => Outcome::Moving,
                InputOutcome::Disposed => Outcome::Disposed,
            }));
        }
        let c = &mut self.pending.inputs;
        let slot = match &outcome {
            InputOutcome::Accepted => &mut c.accepted,
            InputOutcome::AcceptedDroppedOldest => {
                c.overflowed = c.overflowed.saturating_add(1);
                &mut c.accepted
            }
            InputOutcome::Duplicate => &mut c.duplicate,
            InputOutcome::Stale => &mut c.stale,
            InputOutcome::Refused(_) => &mut c.refused,
            InputOutcome::UnknownPlayer
            | InputOutcome::Observer
            | InputOutcome::Disconnected
            | InputOutcome::Moving
            | InputOutcome::Disposed => &mut c.unroutable,
        };
        *slot = slot.saturating_add(1);
        outcome
    }

    fn classify_and_buffer(
        &mut self,
        id: PlayerId,
        seq: u32,
        view_tick: u32,
        payload: &[u8],
    ) -> InputOutcome {
        if self.disposed {
            return InputOutcome::Disposed;
        }
        match self.core.roster.get(&id) {
            None => return InputOutcome::UnknownPlayer,
            Some(p) if p.role == Role::Observer => return InputOutcome::Observer,
            Some(_) if self.core.transfers.moving.contains_key(&id) => return InputOutcome::Moving,
            Some(p) if !p.connected => return InputOutcome::Disconnected,
            Some(_) => {}
        }
        let meta = InputMeta {
            seq,
            view_tick: view_tick.min(u32::try_from(self.core.tick).unwrap_or(u32::MAX)),
        };
        self.zone.offer(id, meta, payload)
    }
}

/// How a join's (or an arrival's) answer is recorded.
pub(super) fn join_outcome(joined: &Result<PlayerId, JoinError>) -> Outcome {
    match joined {
        Ok(id) => Outcome::Joined(*id),
        Err(JoinError::Full { .. }) => Outcome::Full,
        Err(JoinError::Refused(r)) => Outcome::Refused(r.code),
        Err(JoinError::Disposed) => Outcome::Disposed,
        Err(JoinError::IdsExhausted) => Outcome::IdsExhausted,
    }
}

/// How a refused rejoin is recorded.
fn rejoin_outcome(e: &RejoinError) -> Outcome {
    match e {
        RejoinError::UnknownPlayer(_) => Outcome::UnknownPlayer,
        RejoinError::NotDropped(_) => Outcome::NotDropped,
        RejoinError::GraceExpired(_) => Outcome::GraceExpired,
        RejoinError::Disposed => Outcome::Disposed,
    }
}
