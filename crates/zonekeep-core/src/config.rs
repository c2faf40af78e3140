//! Per-zone runtime configuration.

use std::time::Duration;

use crate::call::MAX_CALL_ARGS_BYTES;
use crate::error::ConfigError;
use crate::input::InputPolicy;
use crate::tier::IdlePolicy;
use crate::view::ReplicationSettings;

/// Largest [`ZoneConfig::observer_patch_every`]: one frame in a thousand patches is already a
/// frame every 50 s at 20 Hz; slower, a spectator would see a slideshow and its events would
/// wait for minutes.
pub const MAX_OBSERVER_PATCH_EVERY: u32 = 1000;

/// How a [`ZoneHost`](crate::ZoneHost) runs one zone.
///
/// The defaults suit a small action game: 30 Hz ticks with a patch every tick
/// (30 Hz replication), at most 5 ticks of catch-up per `advance` (~167 ms),
/// 64 players and 16 observers, Idle after 30 s empty (ticking at a quarter
/// rate), Dormant after 5 min, 32 buffered inputs per player consumed one per
/// tick, 15 s reconnect grace, world seed 0. The limits that keep hostile game code from growing
/// the host: 65,536 entities, 1 MiB of events waiting for a patch, 16 KiB fact payloads and 256
/// facts per second of zone time.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneConfig {
    /// Simulation ticks per second (`1..=1000`).
    pub tick_hz: u32,
    /// Ticks per replication patch: a tick `t` is a patch tick when
    /// `t % patch_every == 0` (60 Hz ticks with `patch_every = 3` patch at 20 Hz).
    pub patch_every: u32,
    /// An observer gets a frame on one patch in this many (`1..=1000`; default 1: every patch,
    /// like a player). A zone watched by thousands of spectators serves them at a fraction of
    /// its players' rate, and its write cost and their bandwidth drop by as much.
    ///
    /// Observers take turns so each patch serves about one in `observer_patch_every` of them,
    /// not all of them at once: observer `id`'s patches are those whose index
    /// `i = tick / patch_every` has `(i + id) % observer_patch_every == 0` (a patch built after
    /// skipped ones, a host catching up, serves every observer whose turn fell in between; a
    /// zone's first patch serves all). Its frame says everything that changed since its last
    /// one, and carries the events addressed to it since then, in order: an event waits at most
    /// until the observer's next frame, which comes early when its waiting events would no
    /// longer fit one frame. A relay applies the same rule, so a relayed observer gets the
    /// frames its host would have built. Its Welcome says the rate it gets
    /// ([`ZoneConfig::patch_every_for`]). Players are not affected.
    pub observer_patch_every: u32,
    /// Most ticks one `advance` runs; later due ticks are dropped and counted.
    pub max_catch_up: u32,
    /// Most participants with [`Role::Player`](crate::Role::Player).
    pub max_players: u32,
    /// Most participants with [`Role::Observer`](crate::Role::Observer).
    pub max_observers: u32,
    /// Empty this long: the zone goes Idle.
    pub idle_after: Duration,
    /// Empty this long: the zone goes Dormant (must be `>= idle_after`). A lasting zone never
    /// goes Dormant.
    pub dormant_after: Duration,
    /// A lasting world: never reset, cleared or forgotten. Its zones never go Dormant — an
    /// empty one stays loaded at Idle, its world going on — and its host refuses to stop one
    /// unless the operator forces it.
    pub lasting: bool,
    /// The version of the zone's saved state: what its [`Zone::save`](crate::Zone::save) bytes
    /// mean. Each save records it; a save of another version is restored only through
    /// [`Zone::migrate`](crate::Zone::migrate) from an older one, and otherwise refused (a
    /// lasting world does not start, its save kept) or, for other zones, replaced by a fresh
    /// start. Raise it whenever the save's layout changes. At least 1; default 1.
    pub state_version: u32,
    /// The kind's players bring their characters (see [`crate::character`]): the host holds each
    /// player's character lease while it is here and hands the character to the zone
    /// ([`ZoneHost::handle_join_with_character`](crate::ZoneHost::handle_join_with_character)).
    /// A zone of such a kind is restored without its participants: each comes back by joining,
    /// with the character its store holds, never from the zone's save. Default false.
    pub characters: bool,
    /// What Idle means: slower ticks or none.
    pub idle_policy: IdlePolicy,
    /// Capacity of each player's input buffer.
    pub input_buffer: usize,
    /// How buffered inputs are consumed each tick (a zone-wide choice, kept in
    /// config rather than the trait so operators can tune it per deployment).
    pub input_policy: InputPolicy,
    /// How long a dropped participant keeps its place.
    pub reconnect_grace: Duration,
    /// The world seed that, with the zone id, seeds the zone's RNG.
    pub world_seed: u64,
    /// Most timers scheduled at once.
    pub max_timers: usize,
    /// Most events queued between two `advance` calls.
    pub max_pending_events: usize,
    /// Most payload bytes of the events queued and not yet sent: an event that would pass it is
    /// dropped and counted, like one past `max_pending_events`. Events a patch cannot carry
    /// (see [`MAX_FRAME_EVENT_BYTES`](crate::replicate::MAX_FRAME_EVENT_BYTES)) wait here for
    /// the next one.
    pub max_pending_event_bytes: usize,
    /// Most live entities in the zone's world; a spawn beyond is refused with
    /// [`WorldError::EntityCap`](crate::WorldError::EntityCap). The default, 65,536, is also
    /// the most entities one Delta may list, so every view fits a message's lists.
    pub max_entities: usize,
    /// Most facts in flight (emitted, not yet settled); a zone emitting more
    /// gets [`FactError::QueueFull`](crate::FactError::QueueFull).
    pub max_facts_in_flight: usize,
    /// Largest fact payload, in bytes of its JSON text; a larger fact gets
    /// [`FactError::TooLarge`](crate::FactError::TooLarge).
    pub max_fact_bytes: usize,
    /// Most facts accepted per second of zone time (`tick_hz` ticks); more get
    /// [`FactError::RateLimited`](crate::FactError::RateLimited).
    pub max_facts_per_second: u32,
    /// Most durable calls in flight (made, result not yet delivered); a zone calling more gets
    /// [`CallError::QueueFull`](crate::CallError::QueueFull).
    pub max_calls_in_flight: usize,
    /// Largest call arguments, in bytes of their JSON text; larger get
    /// [`CallError::TooLarge`](crate::CallError::TooLarge). At most 64 KiB (the store's limit).
    pub max_call_bytes: usize,
    /// Position quantum, interest radius and byte budget of replication.
    pub replication: ReplicationSettings,
}

impl Default for ZoneConfig {
    fn default() -> Self {
        Self {
            tick_hz: 30,
            patch_every: 1,
            observer_patch_every: 1,
            max_catch_up: 5,
            max_players: 64,
            max_observers: 16,
            idle_after: Duration::from_secs(30),
            dormant_after: Duration::from_secs(300),
            lasting: false,
            state_version: 1,
            characters: false,
            idle_policy: IdlePolicy::Slow(4),
            input_buffer: 32,
            input_policy: InputPolicy::Next,
            reconnect_grace: Duration::from_secs(15),
            world_seed: 0,
            max_timers: 1024,
            max_pending_events: 4096,
            max_pending_event_bytes: 1 << 20,
            max_entities: 65_536,
            max_facts_in_flight: 1024,
            max_fact_bytes: 16 * 1024,
            max_facts_per_second: 256,
            max_calls_in_flight: 256,
            max_call_bytes: 16 * 1024,
            replication: ReplicationSettings::default(),
        }
    }
}

impl ZoneConfig {
    /// Check every field; the host refuses an invalid config.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1000).contains(&self.tick_hz) {
            return Err(ConfigError::TickHz(self.tick_hz));
        }
        if self.patch_every == 0 {
            return Err(ConfigError::PatchEvery);
        }
        // The Welcome tells an observer `patch_every × observer_patch_every` as a `u32`.
        if !(1..=MAX_OBSERVER_PATCH_EVERY).contains(&self.observer_patch_every)
            || self
                .patch_every
                .checked_mul(self.observer_patch_every)
                .is_none()
        {
            return Err(ConfigError::ObserverPatchEvery(self.observer_patch_every));
        }
        if self.max_catch_up == 0 {
            return Err(ConfigError::MaxCatchUp);
        }
        if self.max_players == 0 && self.max_observers == 0 {
            return Err(ConfigError::NoCapacity);
        }
        if self.idle_after > self.dormant_after {
            return Err(ConfigError::TierOrder {
                idle: self.idle_after,
                dormant: self.dormant_after,
            });
        }
        if self.idle_policy == IdlePolicy::Slow(0) {
            return Err(ConfigError::SlowDivisor);
        }
        if self.input_buffer == 0 {
            return Err(ConfigError::InputBuffer);
        }
        if self.state_version == 0 {
            return Err(ConfigError::StateVersion);
        }
        if self.max_timers == 0 {
            return Err(ConfigError::MaxTimers);
        }
        if self.max_pending_events == 0 {
            return Err(ConfigError::MaxPendingEvents);
        }
        if self.max_facts_in_flight == 0 {
            return Err(ConfigError::MaxFactsInFlight);
        }
        if self.max_pending_event_bytes == 0 {
            return Err(ConfigError::MaxPendingEventBytes);
        }
        if self.max_entities == 0 {
            return Err(ConfigError::MaxEntities);
        }
        if self.max_fact_bytes == 0 {
            return Err(ConfigError::MaxFactBytes);
        }
        if self.max_facts_per_second == 0 {
            return Err(ConfigError::MaxFactsPerSecond);
        }
        if self.max_calls_in_flight == 0 {
            return Err(ConfigError::MaxCallsInFlight);
        }
        if !(1..=MAX_CALL_ARGS_BYTES).contains(&self.max_call_bytes) {
            return Err(ConfigError::MaxCallBytes(self.max_call_bytes));
        }
        self.replication.validate()
    }

    /// The fixed step, `1s / tick_hz` rounded down to whole nanoseconds.
    pub fn dt(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.tick_hz.max(1)))
    }

    /// Ticks between two frames of a participant of `role`: `patch_every` for a player,
    /// `patch_every × observer_patch_every` for an observer. Its Welcome says so, for its
    /// client interpolates between frames that far apart. Saturates on a config
    /// [`validate`](Self::validate) refuses.
    pub fn patch_every_for(&self, role: crate::Role) -> u32 {
        match role {
            crate::Role::Player => self.patch_every,
            crate::Role::Observer => self.patch_every.saturating_mul(self.observer_patch_every),
        }
    }

    /// Patches per second implied by `tick_hz / patch_every`.
    pub fn patch_hz(&self) -> f64 {
        f64::from(self.tick_hz) / f64::from(self.patch_every.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(ZoneConfig::default().validate(), Ok(()));
        assert_eq!(ZoneConfig::default().dt(), Duration::from_nanos(33_333_333));
    }

    #[test]
    fn invalid_fields_are_typed_errors() {
        let d = ZoneConfig::default;
        let cases: Vec<(ZoneConfig, ConfigError)> = vec![
            (ZoneConfig { tick_hz: 0, ..d() }, ConfigError::TickHz(0)),
            (
                ZoneConfig {
                    tick_hz: 5000,
                    ..d()
                },
                ConfigError::TickHz(5000),
            ),
            (
                ZoneConfig {
                    patch_every: 0,
                    ..d()
                },
                ConfigError::PatchEvery,
            ),
            (
                ZoneConfig {
                    observer_patch_every: 0,
                    ..d()
                },
                ConfigError::ObserverPatchEvery(0),
            ),
            (
                ZoneConfig {
                    observer_patch_every: 1001,
                    ..d()
                },
                ConfigError::ObserverPatchEvery(1001),
            ),
            (
                ZoneConfig {
                    patch_every: u32::MAX / 2,
                    observer_patch_every: 3,
                    ..d()
                },
                ConfigError::ObserverPatchEvery(3),
            ),
            (
                ZoneConfig {
                    max_catch_up: 0,
                    ..d()
                },
                ConfigError::MaxCatchUp,
            ),
            (
                ZoneConfig {
                    max_players: 0,
                    max_observers: 0,
                    ..d()
                },
                ConfigError::NoCapacity,
            ),
            (
                ZoneConfig {
                    idle_after: Duration::from_secs(10),
                    dormant_after: Duration::from_secs(5),
                    ..d()
                },
                ConfigError::TierOrder {
                    idle: Duration::from_secs(10),
                    dormant: Duration::from_secs(5),
                },
            ),
            (
                ZoneConfig {
                    idle_policy: IdlePolicy::Slow(0),
                    ..d()
                },
                ConfigError::SlowDivisor,
            ),
            (
                ZoneConfig {
                    input_buffer: 0,
                    ..d()
                },
                ConfigError::InputBuffer,
            ),
            (
                ZoneConfig {
                    max_timers: 0,
                    ..d()
                },
                ConfigError::MaxTimers,
            ),
            (
                ZoneConfig {
                    max_pending_events: 0,
                    ..d()
                },
                ConfigError::MaxPendingEvents,
            ),
            (
                ZoneConfig {
                    max_facts_in_flight: 0,
                    ..d()
                },
                ConfigError::MaxFactsInFlight,
            ),
            (
                ZoneConfig {
                    max_pending_event_bytes: 0,
                    ..d()
                },
                ConfigError::MaxPendingEventBytes,
            ),
            (
                ZoneConfig {
                    max_entities: 0,
                    ..d()
                },
                ConfigError::MaxEntities,
            ),
            (
                ZoneConfig {
                    max_fact_bytes: 0,
                    ..d()
                },
                ConfigError::MaxFactBytes,
            ),
            (
                ZoneConfig {
                    max_facts_per_second: 0,
                    ..d()
                },
                ConfigError::MaxFactsPerSecond,
            ),
        ];
        for (cfg, err) in cases {
            assert_eq!(cfg.validate(), Err(err));
        }
    }

    #[test]
    fn an_observers_frames_are_observer_patch_every_patches_apart() {
        let c = ZoneConfig {
            patch_every: 3,
            observer_patch_every: 4,
            ..ZoneConfig::default()
        };
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.patch_every_for(crate::Role::Player), 3);
        assert_eq!(c.patch_every_for(crate::Role::Observer), 12);
        let top = ZoneConfig {
            observer_patch_every: MAX_OBSERVER_PATCH_EVERY,
            ..ZoneConfig::default()
        };
        assert_eq!(top.validate(), Ok(()));
    }

    #[test]
    fn patch_rate_is_independent_of_tick_rate() {
        let c = ZoneConfig {
            tick_hz: 60,
            patch_every: 3,
            ..ZoneConfig::default()
        };
        assert!((c.patch_hz() - 20.0).abs() < f64::EPSILON);
    }
}
