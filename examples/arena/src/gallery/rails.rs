//! The gallery's rails: where a target is at any tick, computed from the tick alone.
//!
//! A target slides back and forth along a horizontal rail at the rail's speed. Its position is a
//! pure function of the ticks since it appeared and the phase it appeared at, so the same tick
//! always gives the same position (determinism, and a test can say where a target was without
//! replaying the zone).

/// Width of the gallery in world units (x runs from 0 to this).
pub const GALLERY_W: f32 = 32.0;
/// Height of the gallery in world units (y runs from 0 to this).
pub const GALLERY_H: f32 = 20.0;
/// How far from either side wall a rail ends, world units.
pub const RAIL_MARGIN: f32 = 2.0;

/// One rail: a row the targets on it slide along.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rail {
    /// Height of the row, world units.
    pub y: f32,
    /// Speed along the rail, world units per second.
    pub speed: f32,
    /// Whether a target first moves towards +x (else towards −x).
    pub rightward: bool,
}

/// The gallery's rails, top to bottom. Speeds differ so targets cross each other's columns at
/// different moments; even the slowest moves well over a target's radius in a quarter second
/// (what a 150 ms link plus the interpolation delay hides), while the fastest moves less than a
/// third of a radius in one tick (what a view tick stamped as a whole tick may be off by).
pub const RAILS: [Rail; 5] = [
    Rail {
        y: 3.5,
        speed: 9.0,
        rightward: true,
    },
    Rail {
        y: 6.75,
        speed: 6.5,
        rightward: false,
    },
    Rail {
        y: 10.0,
        speed: 8.0,
        rightward: true,
    },
    Rail {
        y: 13.25,
        speed: 7.0,
        rightward: false,
    },
    Rail {
        y: 16.5,
        speed: 9.5,
        rightward: true,
    },
];

impl Rail {
    /// Length of the rail, world units.
    pub fn length(&self) -> f32 {
        GALLERY_W - 2.0 * RAIL_MARGIN
    }

    /// Where a target is after travelling `distance` world units from `phase` (a distance along
    /// the rail's back-and-forth path from its starting end). Any finite distance folds into the
    /// path, so a target never leaves the rail.
    pub fn position(&self, phase: f32, distance: f64) -> (f32, f32) {
        let len = f64::from(self.length());
        let s = (f64::from(phase) + distance).rem_euclid(2.0 * len);
        let along = if s <= len { s } else { 2.0 * len - s };
        let x = if self.rightward {
            f64::from(RAIL_MARGIN) + along
        } else {
            f64::from(GALLERY_W - RAIL_MARGIN) - along
        };
        (x as f32, self.y)
    }

    /// Where a target that appeared at tick `since` with `phase` is at tick `tick`, at `hz` ticks
    /// per second. Distances are computed in `f64` from whole ticks, so no error accumulates over a
    /// long-running zone.
    pub fn position_at(&self, phase: f32, since: u64, tick: u64, hz: u32) -> (f32, f32) {
        let ticks = tick.saturating_sub(since) as f64;
        let distance = ticks * f64::from(self.speed) / f64::from(hz.max(1));
        self.position(phase, distance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_bounces_between_the_rail_ends() {
        let rail = RAILS[0];
        let len = rail.length();
        assert_eq!(rail.position(0.0, 0.0), (RAIL_MARGIN, rail.y));
        assert_eq!(
            rail.position(0.0, f64::from(len)).0,
            GALLERY_W - RAIL_MARGIN
        );
        // Past the far end it comes back.
        assert_eq!(
            rail.position(0.0, f64::from(len) + 1.0).0,
            GALLERY_W - RAIL_MARGIN - 1.0
        );
        assert_eq!(rail.position(0.0, 2.0 * f64::from(len)).0, RAIL_MARGIN);
        let left = RAILS[1];
        assert_eq!(left.position(0.0, 1.0).0, GALLERY_W - RAIL_MARGIN - 1.0);
    }

    #[test]
    fn position_depends_only_on_ticks_elapsed() {
        let rail = RAILS[2];
        let a = rail.position_at(3.0, 100, 130, 30);
        let b = rail.position_at(3.0, 0, 30, 30);
        assert_eq!(a, b);
        // One second at 8 units per second from phase 3.
        assert_eq!(a, (RAIL_MARGIN + 11.0, rail.y));
        // Far into a zone's life the target is still on the rail.
        let (x, _) = rail.position_at(0.5, 0, u64::from(u32::MAX), 30);
        assert!((RAIL_MARGIN..=GALLERY_W - RAIL_MARGIN).contains(&x), "{x}");
    }

    #[test]
    fn every_rail_outruns_a_radius_in_a_quarter_second_but_not_in_a_tick() {
        for rail in RAILS {
            assert!(
                rail.speed * 0.25 > 1.5 * super::super::TARGET_RADIUS,
                "{rail:?}"
            );
            assert!(
                rail.speed / 30.0 < super::super::TARGET_RADIUS / 2.5,
                "{rail:?}"
            );
        }
    }
}
