//! [`ModuleSettings`]: the zone settings a module asks for (its CONFIG answer), and how they
//! become each zone's [`ZoneConfig`].

use zonekeep_core::ZoneConfig;
use zonekeep_protocol::contract::Contract;

use crate::error::LoadError;
use crate::wire::Reader;

/// What a module's CONFIG call answered (docs/MODULES.md): each setting `None` where the module
/// leaves it to the host.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModuleSettings {
    /// Ticks per second.
    pub tick_hz: Option<u32>,
    /// Ticks between two state messages.
    pub patch_every: Option<u32>,
    /// Most players at once.
    pub max_players: Option<u32>,
    /// Most observers at once.
    pub max_observers: Option<u32>,
    /// The wire's position quantum.
    pub pos_step: Option<f32>,
    /// The view radius.
    pub view_radius: Option<f32>,
    /// The interest grid's cell size.
    pub cell_size: Option<f32>,
    /// Most entities a zone may hold at once (only within the host's own cap).
    pub max_entities: Option<u32>,
    /// A lasting world ([`ZoneConfig::lasting`]).
    pub lasting: bool,
    /// The version of the module's saves ([`ZoneConfig::state_version`]): `None` when the module
    /// declares none, which is version 1.
    pub state_version: Option<u32>,
    /// The kind's players bring their characters ([`ZoneConfig::characters`]): the module reads
    /// and changes them through JOIN's and TRANSFER_IN's `character` and the SET_CHARACTER and
    /// COMMIT_CHARACTER commands.
    pub characters: bool,
    /// An observer gets a frame on one patch in this many
    /// ([`ZoneConfig::observer_patch_every`]); `None` leaves it to the host.
    pub observer_patch_every: Option<u32>,
}

/// The range of settings a module may ask for: what a host can run for everyone else on its
/// simulation thread, and what replication can carry. Past them the module is refused at load,
/// naming the setting.
pub mod bounds {
    /// Highest tick rate, in Hz.
    pub const TICK_HZ: u32 = 120;
    /// Most state messages per second (`tick_hz / patch_every`).
    pub const PATCH_HZ: u32 = 60;
    /// Most players or observers a zone may admit.
    pub const PARTICIPANTS: u32 = 10_000;
    /// Finest and coarsest position quantum: finer, positions no longer fit the wire's
    /// integers and moving entities stop replicating.
    pub const POS_STEP: (f32, f32) = (1.0e-4, 100.0);
    /// Largest finite view radius and cell size.
    pub const DISTANCE: f32 = 1.0e6;
    /// Smallest cell of the interest grid.
    pub const MIN_CELL: f32 = 0.01;
    /// Most grid cells across one view's diameter (`2 × view_radius / cell_size`): the interest
    /// pass visits every cell of a view each patch.
    pub const CELLS_ACROSS: f32 = 256.0;
    /// Most patches between two frames of an observer
    /// ([`ZoneConfig::observer_patch_every`](zonekeep_core::ZoneConfig::observer_patch_every)):
    /// slower, a spectator sees a slideshow and its events wait for minutes.
    pub const OBSERVER_PATCH_EVERY: u32 = zonekeep_core::config::MAX_OBSERVER_PATCH_EVERY;
}

fn some_u32(v: u32) -> Option<u32> {
    (v != 0).then_some(v)
}

fn some_f32(v: f32) -> Option<f32> {
    (v != 0.0).then_some(v)
}

/// A setting's `u8` that must be 0 or 1.
fn flag(v: u8, name: &str) -> Result<bool, LoadError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(LoadError::Settings(format!("{name} {n}: 0 or 1"))),
    }
}

impl ModuleSettings {
    /// Reads CONFIG's output: empty (every setting the host's), or the seven settings, then
    /// optionally `u32 max_entities`, `u8 lasting`, `u32 state_version`, `u8 characters`,
    /// `bytes contract` (the kind's client contract, [`Contract::encode`]) and
    /// `u32 observer_patch_every` (1 to 1000), each only after the one before it: a module
    /// built before a setting existed stops before it and gets the host's. Settings the host
    /// cannot run, a contract that is not valid, and a malformed answer are refused, naming the
    /// setting.
    pub fn decode(out: &[u8]) -> Result<(Self, Contract), LoadError> {
        if out.is_empty() {
            return Ok((Self::default(), Contract::new()));
        }
        let bad = |e: crate::Failure| LoadError::Settings(e.to_string());
        let mut r = Reader::new(out);
        let settings = Self {
            tick_hz: some_u32(r.u32("tick_hz").map_err(bad)?),
            patch_every: some_u32(r.u32("patch_every").map_err(bad)?),
            max_players: some_u32(r.u32("max_players").map_err(bad)?),
            max_observers: some_u32(r.u32("max_observers").map_err(bad)?),
            pos_step: some_f32(r.f32("pos_step").map_err(bad)?),
            view_radius: some_f32(r.f32("view_radius").map_err(bad)?),
            cell_size: some_f32(r.f32("cell_size").map_err(bad)?),
            // The eighth to eleventh settings are optional: a module may answer seven, eight,
            // nine, ten or eleven.
            max_entities: if r.is_empty() {
                None
            } else {
                some_u32(r.u32("max_entities").map_err(bad)?)
            },
            lasting: if r.is_empty() {
                false
            } else {
                flag(r.u8("lasting").map_err(bad)?, "lasting")?
            },
            // Any version from 1 up; 0 leaves it unset (version 1).
            state_version: if r.is_empty() {
                None
            } else {
                some_u32(r.u32("state_version").map_err(bad)?)
            },
            characters: if r.is_empty() {
                false
            } else {
                flag(r.u8("characters").map_err(bad)?, "characters")?
            },
            observer_patch_every: None,
        };
        let contract = if r.is_empty() {
            Contract::new()
        } else {
            Contract::decode(r.bytes("contract").map_err(bad)?)?
        };
        // After the contract: an older module's answer ends before it. Present, it is the
        // module's own (the SDK leaves it out for the host's), so 0 is refused with the bounds.
        let settings = Self {
            observer_patch_every: if r.is_empty() {
                None
            } else {
                Some(r.u32("observer_patch_every").map_err(bad)?)
            },
            ..settings
        };
        if !r.is_empty() {
            return Err(LoadError::Settings(format!(
                "{} bytes after the eleven settings, the contract and the observer rate",
                r.remaining()
            )));
        }
        settings.check_bounds().map_err(LoadError::Settings)?;
        settings
            .apply(ZoneConfig::default())
            .validate()
            .map_err(|e| LoadError::Settings(e.to_string()))?;
        Ok((settings, contract))
    }

    /// Refuses a setting outside [`bounds`], naming it.
    fn check_bounds(&self) -> Result<(), String> {
        let host = ZoneConfig::default();
        let tick_hz = self.tick_hz.unwrap_or(host.tick_hz);
        if tick_hz > bounds::TICK_HZ {
            return Err(format!("tick_hz {tick_hz}: at most {} Hz", bounds::TICK_HZ));
        }
        let patch_every = self.patch_every.unwrap_or(host.patch_every).max(1);
        if tick_hz.div_ceil(patch_every) > bounds::PATCH_HZ {
            return Err(format!(
                "patch_every {patch_every} at {tick_hz} Hz sends {} state messages a second: at most {}",
                tick_hz.div_ceil(patch_every),
                bounds::PATCH_HZ
            ));
        }
        for (name, v) in [
            ("max_players", self.max_players),
            ("max_observers", self.max_observers),
        ] {
            if let Some(v) = v.filter(|v| *v > bounds::PARTICIPANTS) {
                return Err(format!("{name} {v}: at most {}", bounds::PARTICIPANTS));
            }
        }
        if let Some(step) = self.pos_step {
            let (lo, hi) = bounds::POS_STEP;
            if !(step.is_finite() && (lo..=hi).contains(&step)) {
                return Err(format!("pos_step {step}: from {lo} to {hi}"));
            }
        }
        for (name, v) in [
            ("view_radius", self.view_radius),
            ("cell_size", self.cell_size),
        ] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v > 0.0 && *v <= bounds::DISTANCE)) {
                return Err(format!(
                    "{name} {v}: a finite distance above 0 and at most {} (0 leaves it to the host)",
                    bounds::DISTANCE
                ));
            }
        }
        if let Some(v) = self
            .observer_patch_every
            .filter(|v| !(1..=bounds::OBSERVER_PATCH_EVERY).contains(v))
        {
            return Err(format!(
                "observer_patch_every {v}: from 1 to {} (a module that leaves it out gets the host's)",
                bounds::OBSERVER_PATCH_EVERY
            ));
        }
        if let Some(c) = self.cell_size.filter(|c| *c < bounds::MIN_CELL) {
            return Err(format!("cell_size {c}: at least {}", bounds::MIN_CELL));
        }
        let r = self.apply(host).replication;
        if r.view_radius.is_finite() && 2.0 * r.view_radius / r.cell_size > bounds::CELLS_ACROSS {
            return Err(format!(
                "cell_size {}: a view of radius {} would span more than {} cells; use a larger cell",
                r.cell_size,
                r.view_radius,
                bounds::CELLS_ACROSS
            ));
        }
        Ok(())
    }

    /// `config` (the host's for the kind) with what the module asks for in place.
    pub fn apply(&self, mut config: ZoneConfig) -> ZoneConfig {
        let r = &mut config.replication;
        if let Some(v) = self.tick_hz {
            config.tick_hz = v;
        }
        if let Some(v) = self.patch_every {
            config.patch_every = v;
        }
        if let Some(v) = self.observer_patch_every {
            config.observer_patch_every = v;
        }
        if let Some(v) = self.max_players {
            config.max_players = v;
        }
        if let Some(v) = self.max_observers {
            config.max_observers = v;
        }
        if let Some(v) = self.pos_step {
            r.pos_step = v;
        }
        if let Some(v) = self.view_radius {
            r.view_radius = v;
        }
        if let Some(v) = self.cell_size {
            r.cell_size = v;
        }
        // Only within the host's own cap: a module may ask for fewer entities, never more.
        if let Some(v) = self.max_entities {
            config.max_entities = config.max_entities.min(v as usize);
        }
        config.lasting |= self.lasting;
        // Always the module's own: what its saves mean is its code's, never the host's. The
        // config given may be a running zone's, made for the module this one replaces.
        config.state_version = self.state_version.unwrap_or(1);
        // The module's own too: the SDK tells a player with a character from one without by
        // this setting, so the zone must keep characters exactly when its code says it does.
        config.characters = self.characters;
        config
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use zonekeep_guest::{Settings, Writer};

    /// What a module built with the SDK answers CONFIG with.
    fn config_of(settings: Settings, contract: &Contract) -> Vec<u8> {
        let mut w = Writer::new();
        settings.encode_with(contract, &mut w);
        w.into_vec()
    }

    #[test]
    fn an_observer_rate_goes_from_the_sdk_to_every_zone_of_the_kind() {
        let contract =
            Contract::new().event(zonekeep_protocol::contract::EventDef::new("goal", 1, ""));
        for (settings, contract) in [
            (Settings::new().observer_patch_every(4), Contract::new()),
            (
                Settings::new()
                    .tick_hz(20)
                    .lasting()
                    .characters()
                    .observer_patch_every(4),
                contract.clone(),
            ),
        ] {
            let (read, got) = ModuleSettings::decode(&config_of(settings, &contract)).unwrap();
            assert_eq!(read.observer_patch_every, Some(4));
            assert_eq!(got, contract);
            assert_eq!(read.lasting, settings.lasting);
            assert_eq!(read.characters, settings.characters);
            let config = read.apply(ZoneConfig::default());
            assert_eq!(config.observer_patch_every, 4);
            assert_eq!(config.patch_every_for(zonekeep_core::Role::Observer), 4);
        }
        // At the bound.
        let top = config_of(Settings::new().observer_patch_every(1000), &Contract::new());
        assert_eq!(
            ModuleSettings::decode(&top).unwrap().0.observer_patch_every,
            Some(1000)
        );
    }

    #[test]
    fn a_module_that_names_no_observer_rate_keeps_the_hosts() {
        // Older modules: seven settings, eleven, eleven and a contract.
        let host = ZoneConfig {
            observer_patch_every: 3,
            ..ZoneConfig::default()
        };
        let contract =
            Contract::new().event(zonekeep_protocol::contract::EventDef::new("goal", 1, ""));
        for bytes in [
            Vec::new(),
            config_of(Settings::new().tick_hz(20), &Contract::new()),
            config_of(Settings::new().characters(), &Contract::new()),
            config_of(Settings::new(), &contract),
        ] {
            let (read, _) = ModuleSettings::decode(&bytes).unwrap();
            assert_eq!(read.observer_patch_every, None, "{bytes:?}");
            assert_eq!(read.apply(host.clone()).observer_patch_every, 3);
        }
    }

    #[test]
    fn an_observer_rate_of_0_or_past_the_bound_refuses_the_module_naming_it() {
        let mut zero = config_of(Settings::new().observer_patch_every(9), &Contract::new());
        let at = zero.len() - 4;
        zero[at..].copy_from_slice(&0u32.to_le_bytes());
        for (bytes, named) in [
            (zero, "observer_patch_every 0"),
            (
                config_of(Settings::new().observer_patch_every(1001), &Contract::new()),
                "observer_patch_every 1001",
            ),
        ] {
            match ModuleSettings::decode(&bytes) {
                Err(LoadError::Settings(why)) => assert!(why.starts_with(named), "{why}"),
                other => panic!("expected a refusal naming {named}, got {other:?}"),
            }
        }
        // A rate cut short, or bytes after it.
        let mut short = config_of(Settings::new().observer_patch_every(2), &Contract::new());
        short.pop();
        assert!(matches!(
            ModuleSettings::decode(&short),
            Err(LoadError::Settings(_))
        ));
        let mut long = config_of(Settings::new().observer_patch_every(2), &Contract::new());
        long.push(0);
        assert!(matches!(
            ModuleSettings::decode(&long),
            Err(LoadError::Settings(_))
        ));
    }
}
