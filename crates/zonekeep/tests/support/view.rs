//! A client's view of the world built from the patches the SDK's connection shows it, with a
//! copy at every tick, for tests that compare what two clients were shown.

use std::collections::BTreeMap;
use std::time::Duration;

use zonekeep_client::{Connection, Event, Patch};
use zonekeep_protocol::schema::FieldValue;

/// One entity as a client was shown it: kind, position, fields.
pub type Shown = (u32, f32, f32, Vec<FieldValue>);

/// A client's view of the world, built from the patches it was shown, with a copy at every tick.
#[derive(Default)]
pub struct View {
    /// The world as last shown.
    pub world: BTreeMap<u32, Shown>,
    /// The world at every tick shown.
    pub seen: BTreeMap<u64, BTreeMap<u32, Shown>>,
    /// Every acknowledgement shown, in order.
    pub acks: Vec<u32>,
    /// The entity the player controls.
    pub control: Option<u32>,
}

impl View {
    /// Applies one patch, keeping a copy of the world at its tick and the acknowledgement shown.
    pub fn apply(&mut self, p: &Patch) {
        if p.baseline {
            self.world.clear();
        }
        for id in &p.despawns {
            self.world.remove(id);
        }
        for s in &p.spawns {
            self.world
                .insert(s.id, (s.kind, s.x, s.y, s.fields.clone()));
        }
        for u in &p.updates {
            let e = self
                .world
                .get_mut(&u.id)
                .expect("an update of a known entity");
            if let Some((x, y)) = u.pos {
                e.1 = x;
                e.2 = y;
            }
            for (i, v) in &u.fields {
                e.3[usize::from(*i)] = v.clone();
            }
        }
        if let Some(c) = p.control {
            self.control = c;
        }
        self.acks.push(p.ack);
        self.seen.insert(p.tick, self.world.clone());
    }

    /// Reads and applies what comes for `d`; the session must go on throughout.
    pub async fn read_for(&mut self, conn: &mut Connection, d: Duration) {
        let end = tokio::time::Instant::now() + d;
        while let Ok(ev) = tokio::time::timeout_at(end, conn.recv()).await {
            match ev {
                Some(Event::Delta(p)) => self.apply(&p),
                Some(Event::Kick(k)) => panic!("kicked: {k:?}"),
                Some(Event::Closed(r)) => panic!("closed: {r:?}"),
                None => panic!("the connection ended"),
                Some(_) => {}
            }
        }
    }
}
