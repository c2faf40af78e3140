//! What relays save the zone's host: one patch of a zone of 200 moving entities (100 walkers and
//! one per player, 100 players each sending an input a tick) seen by `N` observers with an
//! unbounded view, built three ways:
//!
//! - `relay/origin_direct/N`: the host builds every observer's frame (no relay);
//! - `relay/origin_relayed/N`: the observers are relayed over 4 links: the host builds only the
//!   players' frames, then the feed and each link's message;
//! - `relay/relay/N`: one relay's share: it applies its link's message and builds the frames of
//!   its N/4 observers.
//!
//! Run: `cargo bench -p zonekeep-core --bench relay`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use support::XorShift;
use zonekeep_core::relay::RelayZone;
use zonekeep_core::{
    Claims, Clock, Ctx, EntityId, InputRefusal, ManualClock, PlayerId, PlayerInfo, Principal, Role,
    Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::schema::KindDef;

const PLAYERS: u32 = 100;
const WALKERS: u32 = 100;
const LINKS: u64 = 4;
const MAP: f32 = 200.0;

/// Walkers moving at random; each player controls one more.
struct Walk {
    kind: zonekeep_core::KindId,
    walkers: Vec<(EntityId, f32, f32)>,
    rng: XorShift,
}

impl Walk {
    fn add(&mut self, ctx: &mut Ctx<'_>) -> EntityId {
        let (x, y) = (self.rng.next() * MAP, self.rng.next() * MAP);
        let id = ctx.world().spawn(self.kind, x, y).unwrap();
        self.walkers.push((id, x, y));
        id
    }
}

impl Zone for Walk {
    type Input = u8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![],
            })
            .unwrap();
        let mut zone = Self {
            kind,
            walkers: Vec::new(),
            rng: XorShift(0x2545_f491_4f6c_dd1d),
        };
        for _ in 0..WALKERS {
            zone.add(ctx);
        }
        Ok(zone)
    }

    fn uses_can_see(&self) -> bool {
        false
    }

    fn on_join(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &PlayerInfo,
    ) -> Result<(), zonekeep_core::JoinRefusal> {
        let id = self.add(ctx);
        ctx.set_control(p.id, Some(id));
        Ok(())
    }

    fn on_observe(
        &mut self,
        _ctx: &mut Ctx<'_>,
        _o: &PlayerInfo,
    ) -> Result<(), zonekeep_core::JoinRefusal> {
        Ok(())
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u8, InputRefusal> {
        payload
            .first()
            .copied()
            .ok_or_else(|| InputRefusal::new(1, "empty"))
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _dir: u8) {}

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for (id, x, y) in &mut self.walkers {
            *x = (*x + self.rng.next() - 0.5).clamp(0.0, MAP);
            *y = (*y + self.rng.next() - 0.5).clamp(0.0, MAP);
            ctx.world().set_pos(*id, *x, *y).unwrap();
        }
    }
}

/// A host with its players and `observers`, relayed over [`LINKS`] links or not, and a relay
/// following link 0.
struct Run {
    host: ZoneHost,
    clock: ManualClock,
    players: Vec<PlayerId>,
    seq: u32,
    relayed: bool,
    relay: RelayZone,
    message: Vec<u8>,
    started: bool,
}

impl Run {
    fn new(observers: u32, relayed: bool) -> Self {
        let clock = ManualClock::new();
        let mut config = ZoneConfig {
            max_players: PLAYERS,
            max_observers: observers,
            patch_every: 1,
            ..ZoneConfig::default()
        };
        config.replication.pos_step = 1.0 / 64.0;
        let init = ZoneInit {
            zone_id: "walk-1".into(),
            kind: "walk".into(),
            params: serde_json::Value::Null,
        };
        let mut host = ZoneHost::new::<Walk>(init, config, Arc::new(clock.clone())).unwrap();
        let players = (0..PLAYERS)
            .map(|i| {
                host.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                    .unwrap()
            })
            .collect();
        let mut relay = RelayZone::new(1 << 20, 1 << 20);
        for i in 0..observers {
            let o = host
                .handle_join(
                    Principal::new(format!("o{i}")),
                    Claims::new(),
                    Role::Observer,
                )
                .unwrap();
            if relayed {
                let link = u64::from(i) % LINKS;
                host.relay(o, link).unwrap();
                if link == 0 {
                    relay.attach(o);
                }
            }
        }
        if relayed {
            host.want_relay_image();
        }
        let mut run = Self {
            host,
            clock,
            players,
            seq: 0,
            relayed,
            relay,
            message: Vec::new(),
            started: false,
        };
        for _ in 0..20 {
            run.origin_patch();
            run.relay_patch();
        }
        run
    }

    /// One tick and its patch at the host: the frames it builds, and with relays each link's
    /// message (link 0's kept in `message`).
    fn origin_patch(&mut self) -> usize {
        self.seq += 1;
        for &p in &self.players {
            let _ = self.host.handle_input(p, self.seq, 0, &[1]);
        }
        self.clock.advance(Duration::from_millis(50));
        self.host.advance(self.clock.now());
        let mut bytes: usize = self
            .host
            .drain_frames()
            .unwrap()
            .map(|f| f.bytes.len())
            .sum();
        if self.relayed {
            let out = self.host.relay_output().unwrap();
            for link in 0..LINKS {
                let mut m = Vec::new();
                out.write_link(&mut m, !self.started, link).unwrap();
                bytes += m.len();
                if link == 0 {
                    self.message = m;
                }
            }
            self.started = true;
        }
        bytes
    }

    /// The links start over from the world's image at the next patch (the relay missed the
    /// host's patches while the host alone was measured).
    fn restart_links(&mut self) {
        self.host.want_relay_image();
        self.started = false;
        self.origin_patch();
        self.relay_patch();
        for _ in 0..5 {
            self.origin_patch();
            self.relay_patch();
        }
    }

    /// Link 0's relay applies its message and builds its observers' frames.
    fn relay_patch(&mut self) -> usize {
        if !self.relayed {
            return 0;
        }
        self.relay.apply(&self.message).unwrap();
        self.relay.drain_frames().map(|f| f.bytes.len()).sum()
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("relay");
    g.sample_size(20);
    for n in [100u32, 1_000, 10_000] {
        let mut direct = Run::new(n, false);
        g.bench_with_input(BenchmarkId::new("origin_direct", n), &n, |b, _| {
            b.iter(|| direct.origin_patch())
        });
        let mut relayed = Run::new(n, true);
        g.bench_with_input(BenchmarkId::new("origin_relayed", n), &n, |b, _| {
            b.iter(|| relayed.origin_patch())
        });
        // The relay is measured on its own: each iteration needs the host's next message.
        relayed.restart_links();
        g.bench_with_input(BenchmarkId::new("relay", n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    relayed.origin_patch();
                    let t = std::time::Instant::now();
                    relayed.relay_patch();
                    took += t.elapsed();
                }
                took
            })
        });
        println!(
            "relay/bytes/{n}: host writes {} B a patch with relays ({} B to each link), {} B without",
            relayed.origin_patch(),
            relayed.message.len(),
            direct.origin_patch(),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
