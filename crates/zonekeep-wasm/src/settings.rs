//! [`ModuleSettings`]: the zone settings a module asks for (its CONFIG answer), and how they
//! become each zone's [`ZoneConfig`].

use zonekeep_core::ZoneConfig;

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
}

fn some_u32(v: u32) -> Option<u32> {
    (v != 0).then_some(v)
}

fn some_f32(v: f32) -> Option<f32> {
    (v != 0.0).then_some(v)
}

impl ModuleSettings {
    /// Reads CONFIG's output: empty (every setting the host's), or the seven settings. Settings
    /// the host cannot run are refused, naming the setting.
    pub fn decode(out: &[u8]) -> Result<Self, LoadError> {
        if out.is_empty() {
            return Ok(Self::default());
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
        };
        if !r.is_empty() {
            return Err(LoadError::Settings(format!(
                "{} bytes after the seven settings",
                r.remaining()
            )));
        }
        settings
            .apply(ZoneConfig::default())
            .validate()
            .map_err(|e| LoadError::Settings(e.to_string()))?;
        Ok(settings)
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
        config
    }

    /// Why a zone running at `tick_hz` with position quantum `pos_step` cannot take this
    /// module in place (a deploy): what a tick and a position mean would change under its saved
    /// and predicted state. `None`: it can.
    pub fn conflict(&self, tick_hz: u32, pos_step: f32) -> Option<String> {
        if let Some(hz) = self.tick_hz.filter(|hz| *hz != tick_hz) {
            return Some(format!(
                "the module runs at {hz} Hz and this zone at {tick_hz} Hz; restart the zone to change its tick rate"
            ));
        }
        if let Some(step) = self.pos_step.filter(|s| s.to_bits() != pos_step.to_bits()) {
            return Some(format!(
                "the module's position step is {step} and this zone's {pos_step}; restart the zone to change it"
            ));
        }
        None
    }
}
