//! The mutes and bans in force, as this host knows them: read from the store every half second
//! (so one written on any host holds on every host within a second), and at once for this host's
//! own actions. Each read kicks the sessions here that a ban now keeps out.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::sim::now_ms as unix_now_ms;
use zonekeep_protocol::messages::KickCode;
use zonekeep_store::{ChatScope, Sanction, SanctionAction};

use super::channel::{Channel, Seat};
use super::scope;
use super::Chat;

/// How often the store's sanctions are read.
pub(crate) const REFRESH: Duration = Duration::from_millis(500);
/// Most sanctions in force a host holds; past it the newest are left out (and logged).
const MAX_ACTIVE: u32 = 100_000;

/// The sanctions in force, by principal.
#[derive(Default)]
pub(crate) struct Sanctions {
    by_principal: RwLock<HashMap<String, Vec<Sanction>>>,
}

impl Sanctions {
    /// Replaces what is known with `all` (the store's sanctions in force).
    pub fn replace(&self, all: Vec<Sanction>) {
        let mut map: HashMap<String, Vec<Sanction>> = HashMap::new();
        for s in all {
            map.entry(s.principal.clone()).or_default().push(s);
        }
        *self.by_principal.write().unwrap_or_else(|p| p.into_inner()) = map;
    }

    /// Adds one this host just wrote, before the next read brings it.
    pub fn add(&self, s: Sanction) {
        let mut map = self.by_principal.write().unwrap_or_else(|p| p.into_inner());
        let list = map.entry(s.principal.clone()).or_default();
        list.retain(|x| x.id != s.id);
        list.push(s);
    }

    /// Forgets one this host just lifted.
    pub fn lift(&self, id: u64) {
        let mut map = self.by_principal.write().unwrap_or_else(|p| p.into_inner());
        for list in map.values_mut() {
            list.retain(|x| x.id != id);
        }
        map.retain(|_, l| !l.is_empty());
    }

    /// The sanction in force with `id`, if this host knows it.
    pub fn by_id(&self, id: u64) -> Option<Sanction> {
        let map = self.by_principal.read().unwrap_or_else(|p| p.into_inner());
        map.values().flatten().find(|f| f.id == id).cloned()
    }

    /// The ban (the one lasting longest) that keeps `seat` out of its zone now.
    pub fn ban_of(&self, seat: &Seat<'_>) -> Option<Sanction> {
        self.find(seat.principal, SanctionAction::Ban, |s| {
            scope::bars(s, seat)
        })
    }

    /// Whether `principal` has a ban in force anywhere (a cheap look before its seat is built).
    pub fn bans(&self, principal: &str) -> bool {
        let now = unix_now_ms();
        let map = self.by_principal.read().unwrap_or_else(|p| p.into_inner());
        map.get(principal).is_some_and(|list| {
            list.iter()
                .any(|s| s.action == SanctionAction::Ban && s.is_active(now))
        })
    }

    /// The mute (the one lasting longest) that silences `seat` on `channel` now.
    pub fn mute_of(&self, seat: &Seat<'_>, channel: &Channel) -> Option<Sanction> {
        self.find(seat.principal, SanctionAction::Mute, |s| {
            scope::silences(s, seat, channel)
        })
    }

    fn find(
        &self,
        principal: &str,
        action: SanctionAction,
        reaches: impl Fn(&ChatScope) -> bool,
    ) -> Option<Sanction> {
        let now = unix_now_ms();
        let map = self.by_principal.read().unwrap_or_else(|p| p.into_inner());
        map.get(principal)?
            .iter()
            .filter(|s| s.action == action && s.is_active(now))
            .filter(|s| reaches(&s.scope))
            .max_by_key(|s| s.until_ms)
            .cloned()
    }

    /// How many are known.
    pub fn len(&self) -> usize {
        self.by_principal
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(Vec::len)
            .sum()
    }
}

/// What a banned session or join is told.
pub(crate) fn ban_reason(s: &Sanction) -> String {
    let mut reason = format!("banned from {} until {}", s.scope, s.until_ms);
    if !s.reason.is_empty() {
        reason.push_str(": ");
        reason.push_str(&s.reason);
    }
    reason
}

/// Kicks the sessions here that a ban keeps out.
pub(crate) fn enforce(chat: &Chat) {
    // Most of a crowd has no ban at all: a session's seat (its zone's groups) is built only when
    // its principal has one, and nothing is looked at while no ban is in force.
    if chat.sanctions.len() == 0 {
        return;
    }
    for m in chat.hub.members() {
        if !chat.sanctions.bans(&m.principal) {
            continue;
        }
        let groups = m.groups();
        let seat = Seat {
            principal: &m.principal,
            zone: &m.entry.zone_id,
            groups: &groups,
        };
        if let Some(ban) = chat.sanctions.ban_of(&seat) {
            chat.metrics.banned_kick();
            m.conn.kick(KickCode::BANNED, ban_reason(&ban));
        }
    }
}

/// Reads the sanctions in force every [`REFRESH`] until `stop`, enforcing bans after each read.
pub(crate) async fn run(chat: Arc<Chat>, stop: tokio_util::sync::CancellationToken) {
    let mut every = tokio::time::interval(REFRESH);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        round += 1;
        if round.is_multiple_of(120) {
            chat.tidy();
        }
        let read = tokio::time::timeout(
            crate::host::STORE_TIMEOUT,
            chat.store.active_sanctions(unix_now_ms(), MAX_ACTIVE),
        )
        .await;
        match read {
            Ok(Ok(all)) => {
                if all.len() >= MAX_ACTIVE as usize {
                    tracing::warn!(
                        held = all.len(),
                        "sanctions in force reached the most a host holds"
                    );
                }
                chat.sanctions.replace(all);
                chat.metrics.set_sanctions(chat.sanctions.len());
            }
            // Kept as last read: the next read tries again.
            Ok(Err(e)) => {
                chat.metrics.store_failed();
                tracing::warn!(error = %e, "reading the sanctions in force failed");
            }
            Err(_) => {
                chat.metrics.store_failed();
                tracing::warn!("reading the sanctions in force timed out");
            }
        }
        enforce(&chat);
    }
}
