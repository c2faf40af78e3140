//! The aim workload (`zonekeep bench --aim KIND_OR_ENTITY`): bots draw the zone through their
//! interpolating replica, as a player's client does, and shoot at an entity of the named kind (or
//! the named entity) where they draw it, stamping the tick they drew; the zone's verdicts are
//! counted. The shots and verdicts are the shooting gallery's ([`Shot`], [`Verdict`]), so the
//! workload runs against a `gallery` zone and measures how many shots a player who aimed true gets
//! confirmed under load, lag and loss.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use zonekeep_arena::gallery::{Outcome, Shot, Verdict, TOPIC_VERDICT};
use zonekeep_client::Replica;
use zonekeep_protocol::schema::Schema;

/// What bots aim at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AimTarget {
    /// Any drawn entity of this kind (by name in the zone's schema).
    Kind(String),
    /// One entity, by id.
    Entity(u32),
}

impl AimTarget {
    /// A number is an entity id; anything else a kind name (1 to 64 bytes).
    pub fn parse(s: &str) -> Result<AimTarget, String> {
        if let Ok(id) = s.parse::<u32>() {
            return Ok(AimTarget::Entity(id));
        }
        if s.is_empty() || s.len() > 64 {
            return Err(format!(
                "--aim wants a kind name (1 to 64 bytes) or an entity id, not {s:?}"
            ));
        }
        Ok(AimTarget::Kind(s.to_owned()))
    }
}

/// Aimed shots and what became of them, over the measured window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AimCounts {
    /// Shots sent (each at an entity as drawn).
    pub shots: u64,
    /// Confirmed hits.
    pub hits: u64,
    /// Judged misses.
    pub misses: u64,
    /// Shots that hit a target as drawn that another shooter had already taken down (neither a
    /// hit nor a miss: the compensation was right, someone was faster).
    #[serde(default)]
    pub taken: u64,
    /// Shots the zone did not judge (the bot had not been sent the world yet).
    pub unjudged: u64,
    /// Shots the zone refused (InputRefused).
    pub refused: u64,
    /// Shots sent whose verdict never came (the session ended, or the bound on pending shots
    /// dropped them).
    pub unanswered: u64,
    /// Times a bot was due to shoot but drew nothing to aim at (no shot sent).
    pub nothing_drawn: u64,
}

impl AimCounts {
    /// Adds `o` (merging bots or runs).
    pub fn add(&mut self, o: &AimCounts) {
        self.shots += o.shots;
        self.hits += o.hits;
        self.misses += o.misses;
        self.taken += o.taken;
        self.unjudged += o.unjudged;
        self.refused += o.refused;
        self.unanswered += o.unanswered;
        self.nothing_drawn += o.nothing_drawn;
    }

    /// Confirmed hits over shots judged a hit or a miss (a shot beaten to its target is
    /// neither), or `None` before any was judged.
    pub fn hit_rate(&self) -> Option<f64> {
        let judged = self.hits + self.misses;
        (judged > 0).then(|| self.hits as f64 / judged as f64)
    }
}

/// Shots awaiting a verdict per bot at most (10 s of shots at 100/s); older ones are counted
/// unanswered.
const MAX_PENDING: usize = 1024;

/// One bot's aiming: which kind it shoots at, the shots awaiting a verdict, and its counts.
#[derive(Debug)]
pub struct Aimer {
    target: AimTarget,
    kind: Option<u32>,
    /// `(seq, counted)`: shots sent, oldest first; `counted` when sent in the measured window.
    pending: VecDeque<(u32, bool)>,
    turn: u32,
    counts: AimCounts,
}

impl Aimer {
    /// A bot aiming at `target`; `bot` spreads bots over the entities they may choose from.
    pub fn new(target: AimTarget, bot: u32) -> Self {
        Self {
            target,
            kind: None,
            pending: VecDeque::new(),
            turn: bot,
            counts: AimCounts::default(),
        }
    }

    /// A (new) Welcome: resolves the kind by name in its schema. A fresh player's sequence
    /// numbers start again, so shots still pending will never be answered.
    pub fn on_welcome(&mut self, schema: &Schema, resumed: bool) {
        if let AimTarget::Kind(name) = &self.target {
            self.kind = schema
                .kinds
                .iter()
                .position(|k| &k.name == name)
                .and_then(|i| u32::try_from(i).ok());
        }
        if !resumed {
            self.forget_pending();
        }
    }

    /// Where to shoot in the frame the replica last drew: the centre of one drawn entity of the
    /// target kind (bots take turns over them), or `None` when none is drawn.
    pub fn aim(&mut self, replica: &Replica) -> Option<(f32, f32)> {
        let chosen = match &self.target {
            AimTarget::Entity(id) => replica.get(*id).map(|e| (e.x, e.y)),
            AimTarget::Kind(_) => {
                let kind = self.kind?;
                let n = replica.iter().filter(|e| e.kind == kind).count();
                let i = (self.turn as usize).checked_rem(n)?;
                self.turn = self.turn.wrapping_add(1);
                replica
                    .iter()
                    .filter(|e| e.kind == kind)
                    .nth(i)
                    .map(|e| (e.x, e.y))
            }
        };
        chosen
    }

    /// The payload of a compensated shot at `at`.
    pub fn shot(at: (f32, f32)) -> [u8; zonekeep_arena::gallery::SHOT_LEN] {
        Shot {
            x: at.0,
            y: at.1,
            compensated: true,
        }
        .encode()
    }

    /// A bot was due to shoot but drew nothing to aim at.
    pub fn nothing_drawn(&mut self, measuring: bool) {
        if measuring {
            self.counts.nothing_drawn += 1;
        }
    }

    /// A shot went out with `seq`.
    pub fn fired(&mut self, seq: u32, measuring: bool) {
        if measuring {
            self.counts.shots += 1;
        }
        if self.pending.len() >= MAX_PENDING {
            if let Some((_, true)) = self.pending.pop_front() {
                self.counts.unanswered += 1;
            }
        }
        self.pending.push_back((seq, measuring));
    }

    /// Takes a pending shot by seq: whether it counts.
    fn answered(&mut self, seq: u32) -> Option<bool> {
        let i = self.pending.iter().position(|(s, _)| *s == seq)?;
        self.pending.remove(i).map(|(_, counted)| counted)
    }

    /// A zone event: a verdict on one of this bot's shots is counted; anything else is ignored.
    pub fn on_event(&mut self, topic: u16, payload: &[u8]) {
        if topic != TOPIC_VERDICT {
            return;
        }
        let Ok(v) = Verdict::decode(payload) else {
            return;
        };
        if self.answered(v.seq) != Some(true) {
            return;
        }
        match v.outcome {
            Outcome::Hit => self.counts.hits += 1,
            Outcome::Miss => self.counts.misses += 1,
            Outcome::Taken => self.counts.taken += 1,
            Outcome::Unjudged => self.counts.unjudged += 1,
        }
    }

    /// The zone refused the input `seq`.
    pub fn on_refused(&mut self, seq: u32) {
        if self.answered(seq) == Some(true) {
            self.counts.refused += 1;
        }
    }

    fn forget_pending(&mut self) {
        let lost = self
            .pending
            .drain(..)
            .filter(|(_, counted)| *counted)
            .count();
        self.counts.unanswered += lost as u64;
    }

    /// The counts so far; shots still pending are counted unanswered.
    pub fn finish(mut self) -> AimCounts {
        self.forget_pending();
        self.counts
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use zonekeep_client::{Patch, ReplicaConfig};
    use zonekeep_protocol::schema::KindDef;

    fn schema() -> Schema {
        let kind = |name: &str| KindDef {
            name: name.into(),
            fields: vec![],
        };
        Schema {
            pos_step: 0.01,
            kinds: vec![kind("player"), kind("target")],
        }
    }

    fn verdict(seq: u32, outcome: Outcome) -> Vec<u8> {
        Verdict {
            seq,
            outcome,
            compensated: true,
            target: 0,
            ticks_behind: 3,
            hits: 0,
            shots: 0,
        }
        .encode()
    }

    #[test]
    fn targets_parse_as_an_entity_id_or_a_kind() {
        assert_eq!(AimTarget::parse("17"), Ok(AimTarget::Entity(17)));
        assert_eq!(
            AimTarget::parse("target"),
            Ok(AimTarget::Kind("target".into()))
        );
        assert!(AimTarget::parse("").is_err());
        assert!(AimTarget::parse(&"k".repeat(65)).is_err());
    }

    #[test]
    fn bots_aim_at_entities_of_the_kind_where_the_replica_draws_them() {
        let mut replica = Replica::new(ReplicaConfig::for_zone(30, 1));
        let mut patch = Patch {
            tick: 10,
            ..Patch::default()
        };
        for (id, kind, x) in [(1, 0, 1.0), (2, 1, 5.0), (3, 1, 9.0)] {
            patch.spawns.push(zonekeep_client::SpawnedEntity {
                id,
                kind,
                x,
                y: 2.0,
                fields: vec![],
            });
        }
        replica.apply(&patch);
        replica.frame(zonekeep_client::Timing {
            server_tick: 20.0,
            one_way_ticks: 0.0,
            jitter_ticks: 0.0,
        });
        let mut aimer = Aimer::new(AimTarget::Kind("target".into()), 0);
        assert_eq!(
            aimer.aim(&replica),
            None,
            "no schema yet: the kind is unknown"
        );
        aimer.on_welcome(&schema(), false);
        // Turns go over the targets only, never the player.
        assert_eq!(aimer.aim(&replica), Some((5.0, 2.0)));
        assert_eq!(aimer.aim(&replica), Some((9.0, 2.0)));
        assert_eq!(aimer.aim(&replica), Some((5.0, 2.0)));
        let mut one = Aimer::new(AimTarget::Entity(3), 0);
        assert_eq!(one.aim(&replica), Some((9.0, 2.0)));
        let mut gone = Aimer::new(AimTarget::Entity(4), 0);
        assert_eq!(gone.aim(&replica), None);
        let shot = Shot::decode(&Aimer::shot((5.0, 2.0))).unwrap();
        assert!(shot.compensated);
        assert_eq!((shot.x, shot.y), (5.0, 2.0));
    }

    #[test]
    fn verdicts_are_counted_for_shots_of_the_measured_window_only() {
        let mut aimer = Aimer::new(AimTarget::Kind("target".into()), 0);
        aimer.on_welcome(&schema(), false);
        aimer.fired(1, false); // warm-up
        aimer.fired(2, true);
        aimer.fired(3, true);
        aimer.fired(4, true);
        aimer.fired(5, true);
        aimer.nothing_drawn(true);
        aimer.on_event(TOPIC_VERDICT, &verdict(1, Outcome::Hit));
        aimer.on_event(TOPIC_VERDICT, &verdict(2, Outcome::Hit));
        aimer.on_event(TOPIC_VERDICT, &verdict(3, Outcome::Miss));
        aimer.on_event(TOPIC_VERDICT, &verdict(5, Outcome::Taken));
        aimer.on_event(TOPIC_VERDICT, &verdict(3, Outcome::Hit)); // a repeat is not counted twice
        aimer.on_event(9, &verdict(4, Outcome::Hit)); // another topic
        aimer.on_event(TOPIC_VERDICT, &[1, 2, 3]); // malformed
        aimer.on_refused(4);
        let c = aimer.finish();
        assert_eq!(
            c,
            AimCounts {
                shots: 4,
                hits: 1,
                misses: 1,
                taken: 1,
                unjudged: 0,
                refused: 1,
                unanswered: 0,
                nothing_drawn: 1,
            }
        );
        assert_eq!(c.hit_rate(), Some(0.5));
    }

    #[test]
    fn a_fresh_join_leaves_pending_shots_unanswered_and_the_bound_holds() {
        let mut aimer = Aimer::new(AimTarget::Entity(1), 0);
        for seq in 1..=(MAX_PENDING as u32 + 10) {
            aimer.fired(seq, true);
        }
        assert_eq!(aimer.pending.len(), MAX_PENDING);
        aimer.on_welcome(&schema(), false);
        assert!(aimer.pending.is_empty());
        let c = aimer.finish();
        assert_eq!(c.unanswered, MAX_PENDING as u64 + 10);
    }
}
