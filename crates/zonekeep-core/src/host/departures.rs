//! Participants leaving: reconnect graces running out, the zone's kicks and transfers applied,
//! the removal itself (hooks, subscriber, history, character), and every participant at once
//! when the zone is disposed.

use std::time::Duration;

use super::ZoneHost;
use crate::player::PlayerId;
use crate::replicate::SubscriberId;
use crate::zone::LeaveReason;

impl ZoneHost {
    /// Whether [`dispose`](ZoneHost::dispose) has run.
    pub fn is_disposed(&self) -> bool {
        self.disposed
    }

    /// Shut the zone down: call `dispose`, then forget every participant.
    /// Later joins, rejoins and inputs are refused and `advance` runs nothing.
    pub fn dispose(&mut self) {
        if self.disposed {
            return;
        }
        self.tap_call(|| crate::recording::Record::Dispose);
        self.zone.dispose(&mut self.core.ctx(None));
        self.disposed = true;
        self.core.roster.clear();
        self.core.out.kicks.clear();
        self.core.transfers.asked.clear();
        self.core.transfers.moving.clear();
        self.dropped_at.clear();
        self.stop_recording(crate::recording::StopReason::ZoneEnded);
    }

    pub(super) fn grace_expired(&self, id: PlayerId, now: Duration) -> bool {
        self.dropped_at
            .expired(id, now, self.config.reconnect_grace)
    }

    pub(super) fn expire_graces(&mut self, now: Duration) {
        let expired = self
            .dropped_at
            .all_expired(now, self.config.reconnect_grace);
        for id in expired {
            self.remove_player(id, LeaveReason::Dropped);
        }
        self.apply_kicks();
    }

    /// Remove without applying kicks (callers do, once, afterwards).
    pub(super) fn remove_player(&mut self, id: PlayerId, why: LeaveReason) {
        if self.core.roster.remove(&id).is_none() {
            return;
        }
        self.dropped_at.remove(id);
        self.core.views.remove(id);
        self.core.transfers.moving.remove(&id);
        self.core.transfers.asked.retain(|a| a.player != id);
        // A request not yet handed out is withdrawn: there is nobody left to move.
        self.core.transfers.out.retain(|r| r.player != id);
        if let Some(history) = self.rewind.as_mut() {
            history.forget(id);
        }
        let _ = self.replicator.remove_subscriber(SubscriberId(id.0));
        self.held.forget(id);
        self.forget_relayed(id);
        self.pending.left.push((id, why));
        if self.core.roster.is_empty() {
            let now = self.read_clock();
            self.core.tier.emptied(now);
        }
        self.zone.leave(&mut self.core.ctx(None), id, why);
        // Handed back after the leave hook, which may still set it.
        self.core.characters.release(id);
    }

    /// Apply the zone's kick and transfer requests, including any made by the hooks they
    /// trigger (`on_leave`, `transfer_out`). Terminates: each applied kick removes a
    /// participant, each applied transfer makes a player moving (and a moving player cannot be
    /// asked for again), and a refused transfer's return asks for nothing the loop runs again.
    pub(super) fn apply_kicks(&mut self) {
        while !self.core.out.kicks.is_empty() || !self.core.transfers.asked.is_empty() {
            let kicks = std::mem::take(&mut self.core.out.kicks);
            for kick in kicks {
                if self.core.roster.contains_key(&kick.player) {
                    self.remove_player(kick.player, LeaveReason::Kicked);
                    self.pending.kicks.push(kick);
                }
            }
            self.apply_transfers();
        }
    }
}
