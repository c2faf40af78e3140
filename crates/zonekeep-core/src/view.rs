//! How a zone's participants are replicated: the zone-wide [`ReplicationSettings`] and the
//! per-participant view requests a zone makes through [`Ctx`](crate::Ctx).
//!
//! A player's view follows the entity it controls (set with
//! [`Ctx::set_control`](crate::Ctx::set_control)); an observer's view, or any view the zone pins,
//! is centred on a point ([`Ctx::set_view`](crate::Ctx::set_view)). The host turns these into the
//! replicator's [`SubscriberConfig`] before each patch.

use std::collections::BTreeMap;

use crate::error::ConfigError;
use crate::player::{PlayerId, Role};
use crate::replicate::{Focus, SubscriberConfig};
use crate::world::EntityId;

/// Zone-wide replication settings (part of [`ZoneConfig`](crate::ZoneConfig)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicationSettings {
    /// Position quantum sent to clients (PROTOCOL.md §3.4), e.g. `0.01` world units.
    pub pos_step: f32,
    /// Interest grid cell size; about the typical view radius.
    pub cell_size: f32,
    /// Default view radius (`f32::INFINITY`: every participant sees every entity).
    pub view_radius: f32,
    /// Leave hysteresis: an entity in view leaves only beyond `view_radius + margin`.
    pub margin: f32,
    /// Byte budget per Delta (`None` = unlimited).
    pub budget: Option<usize>,
    /// Distance at which an entity's replication priority weight halves.
    pub priority_distance: f32,
}

impl Default for ReplicationSettings {
    fn default() -> Self {
        Self {
            pos_step: 0.01,
            cell_size: 64.0,
            view_radius: f32::INFINITY,
            margin: 4.0,
            budget: None,
            priority_distance: 16.0,
        }
    }
}

impl ReplicationSettings {
    /// Check the values; a host refuses an invalid configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = |v: f32| v.is_finite() && v > 0.0;
        if !positive(self.pos_step) {
            return Err(ConfigError::Replication("pos_step must be finite and > 0"));
        }
        if !positive(self.cell_size) {
            return Err(ConfigError::Replication("cell_size must be finite and > 0"));
        }
        if self.view_radius.is_nan() || self.view_radius <= 0.0 {
            return Err(ConfigError::Replication("view_radius must be > 0"));
        }
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            return Err(ConfigError::Replication("margin must be finite and >= 0"));
        }
        if !positive(self.priority_distance) {
            return Err(ConfigError::Replication(
                "priority_distance must be finite and > 0",
            ));
        }
        if self.budget == Some(0) {
            return Err(ConfigError::Replication("budget must be > 0 bytes"));
        }
        Ok(())
    }
}

/// What one participant's view is: what the zone asked for, over the zone's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ViewRequest {
    pub(crate) control: Option<EntityId>,
    pub(crate) radius: Option<f32>,
    pub(crate) focus: Option<(f32, f32)>,
}

/// Every participant's view request, plus which changed since the host last applied them.
#[derive(Debug, Default)]
pub(crate) struct ViewRequests {
    views: BTreeMap<PlayerId, ViewRequest>,
    dirty: Vec<PlayerId>,
}

impl ViewRequests {
    pub(crate) fn insert(&mut self, id: PlayerId) {
        self.views.insert(
            id,
            ViewRequest {
                control: None,
                radius: None,
                focus: None,
            },
        );
    }

    pub(crate) fn remove(&mut self, id: PlayerId) {
        self.views.remove(&id);
    }

    pub(crate) fn get(&self, id: PlayerId) -> Option<&ViewRequest> {
        self.views.get(&id)
    }

    /// Apply `change` to a present participant's request and mark it dirty; ignores unknown ids.
    pub(crate) fn update(&mut self, id: PlayerId, change: impl FnOnce(&mut ViewRequest)) {
        if let Some(v) = self.views.get_mut(&id) {
            let before = *v;
            change(v);
            if *v != before && !self.dirty.contains(&id) {
                self.dirty.push(id);
            }
        }
    }

    pub(crate) fn take_dirty(&mut self) -> Vec<PlayerId> {
        std::mem::take(&mut self.dirty)
    }
}

/// The replicator settings for a participant with `role` and request `view`.
pub(crate) fn subscriber_config(
    settings: &ReplicationSettings,
    role: Role,
    view: &ViewRequest,
) -> SubscriberConfig {
    let focus = match (view.focus, view.control, role) {
        (Some((x, y)), _, _) => Focus::Point(x, y),
        (None, Some(e), _) => Focus::Entity(e),
        (None, None, _) => Focus::Point(0.0, 0.0),
    };
    SubscriberConfig {
        radius: view.radius.unwrap_or(settings.view_radius),
        margin: settings.margin,
        budget: settings.budget,
        focus,
        control: view.control,
    }
}
