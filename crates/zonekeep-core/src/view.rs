//! How a zone's participants are replicated: the zone-wide [`ReplicationSettings`] and the
//! per-participant view requests a zone makes through [`Ctx`](crate::Ctx).
//!
//! A player's view follows the entity it controls (set with
//! [`Ctx::set_control`](crate::Ctx::set_control)); an observer's view, or any view the zone pins,
//! is centred on a point ([`Ctx::set_view`](crate::Ctx::set_view)). The host turns these into the
//! replicator's [`SubscriberConfig`] before each patch.

use std::collections::{BTreeMap, BTreeSet};

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_f32, put_varint, Reader};

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

    /// Appends the requests' part of a zone image: `varint V` and the `V` requests by player id,
    /// each `varint player`, then `control`, `radius` and `focus`, each `u8 0` for none or `u8 1`
    /// and `varint entity`, `f32 radius` or `f32 x, f32 y` (bit patterns); then `varint D` and
    /// the `D` dirty players in the order they changed.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_varint(out, self.views.len() as u64);
        for (id, view) in &self.views {
            put_varint(out, u64::from(id.0));
            match view.control {
                None => out.push(0),
                Some(e) => {
                    out.push(1);
                    put_varint(out, u64::from(e.0));
                }
            }
            match view.radius {
                None => out.push(0),
                Some(r) => {
                    out.push(1);
                    put_f32(out, r);
                }
            }
            match view.focus {
                None => out.push(0),
                Some((x, y)) => {
                    out.push(1);
                    put_f32(out, x);
                    put_f32(out, y);
                }
            }
        }
        put_varint(out, self.dirty.len() as u64);
        for id in &self.dirty {
            put_varint(out, u64::from(id.0));
        }
    }

    /// Reads what [`ViewRequests::put_image`] wrote. Refused: requests not in ascending player
    /// order, and a player dirty twice. A dirty player need not have a request: one removed
    /// after its change stays listed until the host takes the list.
    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<ViewRequests, DecodeError> {
        // A request takes at least its id and three flag bytes.
        let n = r.count("view requests", r.remaining() / 4)?;
        let mut views = BTreeMap::new();
        let mut last: Option<PlayerId> = None;
        for _ in 0..n {
            let id = PlayerId(r.varint_u32()?);
            if last.is_some_and(|l| l >= id) {
                return Err(DecodeError::Invalid("view requests out of player order"));
            }
            last = Some(id);
            let control = match flag(r)? {
                false => None,
                true => Some(EntityId(r.varint_u32()?)),
            };
            let radius = match flag(r)? {
                false => None,
                true => Some(r.f32()?),
            };
            let focus = match flag(r)? {
                false => None,
                true => Some((r.f32()?, r.f32()?)),
            };
            views.insert(
                id,
                ViewRequest {
                    control,
                    radius,
                    focus,
                },
            );
        }
        let n = r.count("dirty views", r.remaining())?;
        let mut dirty = Vec::with_capacity(n);
        let mut seen = BTreeSet::new();
        for _ in 0..n {
            let id = PlayerId(r.varint_u32()?);
            if !seen.insert(id) {
                return Err(DecodeError::Invalid("a view listed dirty twice"));
            }
            dirty.push(id);
        }
        Ok(ViewRequests { views, dirty })
    }
}

/// Reads an option's presence byte: 0 or 1, nothing else.
fn flag(r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::Invalid("a view option flag other than 0 or 1")),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn image(v: &ViewRequests) -> Vec<u8> {
        let mut out = Vec::new();
        v.put_image(&mut out);
        out
    }

    fn read(bytes: &[u8]) -> Result<ViewRequests, DecodeError> {
        let mut r = Reader::new(bytes);
        let v = ViewRequests::get_image(&mut r)?;
        r.finish()?;
        Ok(v)
    }

    fn sample() -> ViewRequests {
        let mut v = ViewRequests::default();
        for id in [1, 2, 5, 9] {
            v.insert(PlayerId(id));
        }
        v.update(PlayerId(5), |r| {
            r.focus = Some((-0.0, f32::from_bits(0x7fc0_0042)))
        });
        v.update(PlayerId(1), |r| {
            r.control = Some(EntityId(77));
            r.radius = Some(f32::INFINITY);
        });
        v.update(PlayerId(9), |r| r.radius = Some(12.5));
        v.update(PlayerId(5), |r| r.control = Some(EntityId(0)));
        v.remove(PlayerId(9)); // stays dirty
        v
    }

    #[test]
    fn image_round_trip() {
        let mut v = sample();
        let bytes = image(&v);
        let mut copy = read(&bytes).unwrap();
        assert_eq!(image(&copy), bytes);
        assert_eq!(
            copy.views.keys().collect::<Vec<_>>(),
            v.views.keys().collect::<Vec<_>>()
        );
        for (a, b) in copy.views.values().zip(v.views.values()) {
            assert_eq!(a.control, b.control);
            assert_eq!(a.radius.map(f32::to_bits), b.radius.map(f32::to_bits));
            let bits = |f: Option<(f32, f32)>| f.map(|(x, y)| (x.to_bits(), y.to_bits()));
            assert_eq!(bits(a.focus), bits(b.focus));
        }
        assert_eq!(copy.dirty, [PlayerId(5), PlayerId(1), PlayerId(9)]);
        assert_eq!(copy.take_dirty(), v.take_dirty());
        // Empty requests too.
        let empty = ViewRequests::default();
        assert_eq!(image(&read(&image(&empty)).unwrap()), image(&empty));
    }

    #[test]
    fn damaged_view_images_are_refused() {
        let bytes = image(&sample());
        for len in 0..bytes.len() {
            assert!(read(&bytes[..len]).is_err(), "cut at {len}");
        }
        let mut twice = sample();
        twice.dirty.push(PlayerId(1));
        assert!(matches!(read(&image(&twice)), Err(DecodeError::Invalid(_))));
        // Requests out of player order: swap the first two ids on the wire.
        let mut v = ViewRequests::default();
        v.insert(PlayerId(1));
        v.insert(PlayerId(2));
        let mut bytes = image(&v);
        assert_eq!(bytes, [2, 1, 0, 0, 0, 2, 0, 0, 0, 0]);
        bytes.swap(1, 5);
        assert!(matches!(read(&bytes), Err(DecodeError::Invalid(_))));
        bytes.swap(1, 5);
        bytes[2] = 2;
        assert!(matches!(read(&bytes), Err(DecodeError::Invalid(_))));
    }
}
