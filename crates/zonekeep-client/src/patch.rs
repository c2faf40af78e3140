//! `Patch`: one Delta as the application sees it — absolute positions instead of wire deltas.
//!
//! The connection decodes each Delta against its mirror (which tracks the quantized positions the
//! server last sent), then hands out a `Patch` whose positions are plain `f32` world coordinates, so
//! the replica and the game never deal with quantization or the known set.

use zonekeep_protocol::schema::FieldValue;

/// An entity that entered the view, with its full state.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnedEntity {
    /// Entity id.
    pub id: u32,
    /// Kind index into the schema.
    pub kind: u32,
    /// Position x (dequantized).
    pub x: f32,
    /// Position y (dequantized).
    pub y: f32,
    /// Every field of the kind, in schema order.
    pub fields: Vec<FieldValue>,
}

/// A change to an entity already known.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdatedEntity {
    /// Entity id.
    pub id: u32,
    /// The new position, if it moved.
    pub pos: Option<(f32, f32)>,
    /// Changed fields as (field index, new value), ascending by index.
    pub fields: Vec<(u8, FieldValue)>,
}

/// One decoded Delta, resolved to ids and absolute positions. Events travel as separate
/// [`crate::Event::Event`]s right after the patch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Patch {
    /// The server tick of this patch.
    pub tick: u64,
    /// The last input sequence the zone processed for this player (0 = none).
    pub ack: u32,
    /// The known set was cleared before this patch (first after Welcome, after a resume).
    pub baseline: bool,
    /// `Some(x)` when the controlled entity changed: `Some(Some(id))` or `Some(None)` for none.
    pub control: Option<Option<u32>>,
    /// Entities that left the view or the world.
    pub despawns: Vec<u32>,
    /// Entities already known that changed.
    pub updates: Vec<UpdatedEntity>,
    /// Entities that entered the view.
    pub spawns: Vec<SpawnedEntity>,
    /// Size of the Delta message (payload bytes, without WebSocket framing).
    pub bytes: usize,
}

/// The change from what the application was shown (`prev`) to the newest state (`next`), as one
/// patch. Over WebTransport a State is written against an older acknowledged state, so its own
/// changes are not the change from what was last shown (an entity that entered and left since
/// the base appears in neither, yet was shown); the difference of the two states is.
pub(crate) fn between(
    prev: &zonekeep_protocol::mirror::Mirror,
    next: &zonekeep_protocol::mirror::Mirror,
    tick: u64,
    ack: u32,
    pos_step: f32,
    bytes: usize,
) -> Patch {
    use zonekeep_protocol::quant::pos_decode;
    let mut patch = Patch {
        tick,
        ack,
        baseline: false,
        control: (prev.control() != next.control()).then_some(next.control()),
        bytes,
        ..Patch::default()
    };
    // Both iterate ascending by id: one merge.
    let mut old = prev.iter().peekable();
    for (id, e) in next.iter() {
        while let Some((oid, _)) = old.peek() {
            if *oid >= id {
                break;
            }
            patch.despawns.push(*oid);
            old.next();
        }
        match old.peek() {
            Some((oid, o)) if *oid == id && o.kind == e.kind => {
                let moved = (o.qx, o.qy) != (e.qx, e.qy);
                let fields: Vec<(u8, FieldValue)> = e
                    .fields
                    .iter()
                    .zip(&o.fields)
                    .enumerate()
                    .filter(|(_, (n, p))| n != p)
                    .map(|(i, (n, _))| (i as u8, n.clone()))
                    .collect();
                if moved || !fields.is_empty() {
                    patch.updates.push(UpdatedEntity {
                        id,
                        pos: moved
                            .then(|| (pos_decode(e.qx, pos_step), pos_decode(e.qy, pos_step))),
                        fields,
                    });
                }
                old.next();
            }
            other => {
                // A different kind under the same id cannot happen (ids are never reused), but
                // if it did, the old one leaves and the new one enters.
                if let Some((oid, _)) = other {
                    if *oid == id {
                        patch.despawns.push(id);
                        old.next();
                    }
                }
                patch.spawns.push(SpawnedEntity {
                    id,
                    kind: e.kind,
                    x: pos_decode(e.qx, pos_step),
                    y: pos_decode(e.qy, pos_step),
                    fields: e.fields.clone(),
                });
            }
        }
    }
    patch.despawns.extend(old.map(|(id, _)| id));
    patch
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use zonekeep_protocol::delta::{Delta, Spawn, Update};
    use zonekeep_protocol::mirror::Mirror;
    use zonekeep_protocol::PosForm;

    fn spawn(id: u32, qx: i32) -> Spawn {
        Spawn {
            id,
            kind: 0,
            qx,
            qy: 0,
            fields: vec![FieldValue::U(1)],
        }
    }

    fn delta(tick: u64, baseline: bool) -> Delta {
        Delta {
            base: None,
            tick,
            ack: 0,
            baseline,
            control: None,
            despawns: vec![],
            updates: vec![],
            spawns: vec![],
            events: None,
        }
    }

    #[test]
    fn the_change_between_two_states_spawns_moves_and_removes_exactly() {
        let mut a = Mirror::new();
        a.apply(&Delta {
            spawns: vec![spawn(1, 0), spawn(2, 0), spawn(5, 0)],
            ..delta(1, true)
        })
        .unwrap();
        // From a: 1 moves, 2 leaves, 5 changes a field, 7 enters.
        let mut b = a.clone();
        b.apply(&Delta {
            despawns: vec![2],
            updates: vec![
                Update {
                    index: 0,
                    id: 1,
                    pos: Some(PosForm::Absolute { qx: 10, qy: 0 }),
                    mask: 0,
                    fields: vec![],
                },
                Update {
                    index: 1,
                    id: 5,
                    pos: None,
                    mask: 1,
                    fields: vec![(0, FieldValue::U(9))],
                },
            ],
            spawns: vec![spawn(7, 3)],
            ..delta(2, false)
        })
        .unwrap();
        let p = between(&a, &b, 2, 0, 0.5, 0);
        assert_eq!(p.despawns, vec![2]);
        assert_eq!(p.spawns.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7]);
        assert_eq!(p.spawns[0].x, 1.5);
        assert_eq!(p.updates.len(), 2);
        assert_eq!(p.updates[0].pos, Some((5.0, 0.0)));
        assert_eq!(p.updates[1].fields, vec![(0, FieldValue::U(9))]);
        // Nothing between a state and itself.
        let none = between(&b, &b, 3, 0, 0.5, 0);
        assert!(none.despawns.is_empty() && none.updates.is_empty() && none.spawns.is_empty());
    }
}
