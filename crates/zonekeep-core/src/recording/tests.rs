#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use rand_core::RngCore;

use super::*;
use crate::{
    Claims, Clock, Ctx, EntityId, FactOutcome, InputRefusal, JoinRefusal, KindId, LeaveReason,
    ManualClock, PlayerId, PlayerInfo, Principal, Role, Settlement, StateHasher, TimerId, Zone,
    ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds,
};

thread_local! {
    /// A tick at which the zone does something no recording can know about.
    static CHAOS_AT: Cell<u64> = const { Cell::new(0) };
}

/// Walkers on a line: inputs move them, byte 100 scores (a fact), a timer beats every 10 ticks.
/// Its save holds everything its hash covers, so it can be recorded while running.
struct Walkers {
    kind: KindId,
    walkers: BTreeMap<PlayerId, (EntityId, i32, String)>,
    saved: BTreeMap<String, i32>,
    beats: u64,
    score: u64,
}

impl Walkers {
    fn spawn(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo, x: i32) -> Result<(), JoinRefusal> {
        let e = ctx
            .world()
            .spawn(self.kind, x as f32, 0.0)
            .map_err(|e| JoinRefusal::new(1, e.to_string()))?;
        ctx.set_control(p.id, Some(e));
        self.walkers
            .insert(p.id, (e, x, p.principal.as_str().to_owned()));
        Ok(())
    }
}

impl Zone for Walkers {
    type Input = i8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(zonekeep_protocol::schema::KindDef {
                name: "walker".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        ctx.timers()
            .every(10, 7)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Self {
            kind,
            walkers: BTreeMap::new(),
            saved: BTreeMap::new(),
            beats: 0,
            score: 0,
        })
    }

    fn restore(init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let mut z = Self::create(init, ctx)?;
        let v: (BTreeMap<String, i32>, u64, u64) =
            serde_json::from_slice(bytes).map_err(|e| ZoneError::Restore(e.to_string()))?;
        (z.saved, z.beats, z.score) = v;
        Ok(z)
    }

    fn save(&self) -> Option<Vec<u8>> {
        let pos: BTreeMap<&str, i32> = self
            .walkers
            .values()
            .map(|(_, x, p)| (p.as_str(), *x))
            .collect();
        serde_json::to_vec(&(pos, self.beats, self.score)).ok()
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let x = match self.saved.remove(p.principal.as_str()) {
            Some(x) => x,
            None => (ctx.rng().next_u32() % 100) as i32,
        };
        self.spawn(ctx, p, x)
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some((e, _, _)) = self.walkers.remove(&player) {
            let _ = ctx.world().despawn(e);
        }
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(*b as i8),
            _ => Err(InputRefusal::new(1, "one byte")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, step: i8) {
        if step == 100 {
            let _ = ctx.emit_fact("scored", serde_json::json!({"by": player.0}), None, None);
            return;
        }
        if let Some((e, x, _)) = self.walkers.get_mut(&player) {
            *x += i32::from(step);
            let _ = ctx.world().set_pos(*e, *x as f32, 0.0);
        }
    }

    fn uses_can_see(&self) -> bool {
        false
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if CHAOS_AT.with(Cell::get) == ctx.tick() {
            if let Some((_, x, _)) = self.walkers.values_mut().next() {
                *x += 1;
            }
        }
    }

    fn on_timer(&mut self, _ctx: &mut Ctx<'_>, _id: TimerId, _tag: u64) {
        self.beats += 1;
    }

    fn on_fact_settled(&mut self, _ctx: &mut Ctx<'_>, _s: &Settlement) {
        self.score += 1;
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        for (id, (_, x, _)) in &self.walkers {
            id.0.hash(&mut h);
            x.hash(&mut h);
        }
        self.beats.hash(&mut h);
        self.score.hash(&mut h);
        Some(h.finish())
    }
}

fn kinds() -> ZoneKinds {
    let mut k = ZoneKinds::new();
    k.register::<Walkers>("walkers");
    k
}

/// Drives a host the way the server does and keeps what it records.
struct Driver {
    host: ZoneHost,
    clock: ManualClock,
    file: Vec<u8>,
    /// The tick of the last patch handed out.
    last_patch: u64,
}

impl Driver {
    fn new() -> Self {
        let clock = ManualClock::new();
        clock.set(Duration::from_millis(1234));
        let init = ZoneInit {
            zone_id: "walk-1".into(),
            kind: "walkers".into(),
            params: serde_json::json!({"any": "params"}),
        };
        let config = ZoneConfig {
            world_seed: 42,
            lasting: true,
            state_version: 3,
            ..ZoneConfig::default()
        };
        let host = kinds()
            .create_at(init, config, Arc::new(clock.clone()), 3)
            .unwrap();
        Self {
            host,
            clock,
            file: Vec::new(),
            last_patch: 0,
        }
    }

    fn join(&mut self, name: &str, role: Role) -> PlayerId {
        let mut claims = Claims::new();
        claims.insert("name".into(), name.into());
        self.host
            .handle_join(Principal::new(name), claims, role)
            .unwrap()
    }

    /// One server step: `ms` later, advance, hand out frames and facts (settling each fact),
    /// take the recorded bytes.
    fn step(&mut self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
        let report = self.host.advance(self.clock.now());
        if let Some(&t) = report.patch_ticks.last() {
            self.last_patch = t;
            let n = self.host.drain_frames().unwrap().count();
            assert!(n <= 16);
        }
        for f in self.host.drain_facts() {
            self.host.handle_settlement(Settlement {
                key: f.key,
                outcome: FactOutcome::Ok(serde_json::json!({"total": 1})),
            });
        }
        self.file.extend(self.host.take_recorded());
    }

    fn finish(mut self) -> Vec<u8> {
        let (rest, status) = self.host.end_recording().unwrap();
        self.file.extend(rest);
        assert_eq!(status.bytes, self.file.len() as u64);
        self.file
    }
}

/// A session touching every call: joins (a refused one too), inputs of every outcome, facts and
/// settlements, a drop and rejoin, a drop and rejoin from a resume point, a resync, a spell of
/// relayed frames, a leave, and steps of uneven length.
fn play(d: &mut Driver) -> (PlayerId, PlayerId) {
    let a = d.join("ann", Role::Player);
    let b = d.join("bob", Role::Player);
    let _watcher = d.join("eve", Role::Observer);
    let mut seq = 0;
    let mut resume = None;
    for i in 0..60u32 {
        seq += 1;
        let step = if i % 7 == 3 { 100u8 } else { (i % 5) as u8 };
        d.host.handle_input(a, seq, i, &[step]);
        d.host.handle_input(b, seq, i, &[(i % 3) as u8, 1]); // refused: two bytes
        if i == 10 {
            // Ann's client takes States in datagrams from here on, acknowledging as it goes.
            d.host.use_datagrams(a, Some(1200));
        }
        if i > 12 && i % 3 == 0 {
            d.host.ack_state(a, d.last_patch);
        }
        if i == 20 {
            d.host.handle_input(a, seq, i, &[1]); // duplicate
            d.host.handle_drop(b).unwrap();
        }
        if i == 30 {
            d.host.handle_rejoin(b).unwrap();
            d.host.resync(b);
            d.host.set_rtt(a, Duration::from_millis(85));
        }
        if i == 40 {
            // Dropped, and back next step from the frame it last got: continues with a Delta.
            let (count, hash) = d.host.known_set_check(b).unwrap();
            resume = Some(zonekeep_protocol::ResumeFrom {
                tick: d.last_patch,
                count,
                hash,
            });
            d.host.handle_drop(b).unwrap();
        }
        if i == 41 {
            let from = resume.take().unwrap();
            let resumed = d.host.handle_rejoin_from(b, from).unwrap();
            assert_eq!(resumed, crate::ResumeOutcome::Delta);
        }
        if i == 45 {
            // A relay builds Bob's frames for a while: the host builds none for him.
            d.host.relay(b, 1).unwrap();
        }
        if i == 50 {
            d.host.unrelay(b);
        }
        d.step(if i % 4 == 0 { 50 } else { 33 });
    }
    d.host.handle_leave(b, LeaveReason::Left).unwrap();
    d.step(100);
    (a, b)
}

fn recorded_session() -> Vec<u8> {
    let mut d = Driver::new();
    d.host.start_recording(RecordLimits::default()).unwrap();
    d.file.extend(d.host.take_recorded());
    play(&mut d);
    d.finish()
}

#[test]
fn a_recorded_session_replays_to_a_match() {
    let file = recorded_session();
    let report = replay(&kinds(), &file).unwrap();
    assert!(report.matched(), "{report}");
    assert!(report.from_creation && report.frames_compared);
    assert_eq!(report.ended, Some(StopReason::Requested));
    // 60 steps of 33–50 ms plus one of 100 ms at 30 Hz.
    assert!(report.ticks_matched > 60, "{report}");
    assert_eq!(report.zone_id, "walk-1");
}

#[test]
fn the_file_holds_every_call_and_effect() {
    let file = recorded_session();
    let (header, mut reader) = RecordReader::open(&file).unwrap();
    assert_eq!(header.kind, "walkers");
    assert_eq!(header.boot_epoch, 3);
    assert_eq!(header.config.world_seed, 42);
    assert!(header.config.lasting, "a lasting world replays as one");
    assert_eq!(
        header.config.state_version, 3,
        "and under its state version"
    );
    assert_eq!(header.start, Duration::from_millis(1234));
    assert_eq!(header.origin, Origin::Created);
    let mut seen = std::collections::BTreeSet::new();
    let mut last_tick = 0;
    while let Some(r) = reader.next_record().unwrap() {
        if let Record::Tick { tick, .. } = r {
            assert_eq!(tick, last_tick + 1, "ticks are numbered in order");
            last_tick = tick;
        }
        let name = format!("{r:?}");
        seen.insert(name.split([' ', '(', '{']).next().unwrap().to_owned());
    }
    for kind in [
        "Join",
        "Input",
        "Drop",
        "Rejoin",
        "RejoinFrom",
        "Leave",
        "Settle",
        "Resync",
        "Relay",
        "Rtt",
        "Datagrams",
        "AckState",
        "Advance",
        "DrainFrames",
        "DrainFacts",
        "Clock",
        "Outcome",
        "Tick",
        "Frames",
        "Facts",
        "End",
    ] {
        assert!(seen.contains(kind), "no {kind} record in {seen:?}");
    }
}

#[test]
fn an_unrecorded_change_is_reported_at_its_tick() {
    let file = recorded_session();
    CHAOS_AT.with(|c| c.set(17));
    let report = replay(&kinds(), &file);
    CHAOS_AT.with(|c| c.set(0));
    let report = report.unwrap();
    let d = report.divergence.clone().expect("diverged");
    assert_eq!(d.tick, 17, "{report}");
    assert_eq!(d.last_match, Some(16));
    assert!(
        d.expected.starts_with("tick 17 state hash"),
        "{}",
        d.expected
    );
    assert!(d.actual.starts_with("tick 17 state hash"), "{}", d.actual);
    assert_ne!(d.expected, d.actual);
    // The stimuli since tick 16 include the advance that ran tick 17 and the inputs before it.
    assert!(d.stimuli.iter().any(|s| s.starts_with("advance")), "{d:?}");
    assert!(d.stimuli.iter().any(|s| s.starts_with("input")), "{d:?}");
    assert!(report.to_string().contains("DIVERGED at tick 17"));
}

#[test]
fn a_flipped_input_byte_diverges_where_the_input_is_consumed() {
    let mut file = recorded_session();
    // The 25th accepted input's payload byte; note the tick it was offered at.
    let (_, mut reader) = RecordReader::open(&file).unwrap();
    let (mut tick, mut n) = (0, 0);
    let at = loop {
        let r = reader.next_record().unwrap().unwrap();
        match r {
            Record::Tick { tick: t, .. } => tick = t,
            Record::Input { payload, .. } if payload.len() == 1 && payload[0] < 5 => {
                n += 1;
                if n == 25 {
                    break (reader.offset() - 1, tick);
                }
            }
            _ => {}
        }
    };
    let (byte, offered_at) = at;
    file[byte] ^= 0x40;
    let report = replay(&kinds(), &file).unwrap();
    let d = report.divergence.expect("diverged");
    // One input per tick, one buffered: it is consumed by the next tick.
    assert_eq!(d.tick, offered_at + 1);
    assert_eq!(d.last_match, Some(offered_at));
    assert!(
        d.stimuli
            .iter()
            .any(|s| s.contains(&format!("[{:02x}]", file[byte]))),
        "the flipped input is listed: {:?}",
        d.stimuli
    );
}

#[test]
fn a_running_zone_is_recorded_from_its_snapshot() {
    let mut d = Driver::new();
    let (a, _b) = play(&mut d);
    d.file.clear();
    d.host.start_recording(RecordLimits::default()).unwrap();
    d.file.extend(d.host.take_recorded());
    for i in 0..40u32 {
        d.host.handle_input(a, 1000 + i, i, &[(i % 3) as u8]);
        d.step(33);
    }
    let file = d.finish();
    let (header, _) = RecordReader::open(&file).unwrap();
    assert!(
        matches!(header.origin, Origin::Snapshot { ref connected, .. } if connected == &[a, PlayerId(3)])
    );
    let report = replay(&kinds(), &file).unwrap();
    assert!(report.matched(), "{report}");
    assert!(!report.from_creation);
    assert!(!report.frames_compared);
    assert!(report.ticks_matched >= 39, "{report}");
}

#[test]
fn the_size_cap_stops_the_recording_and_what_was_kept_replays() {
    let mut d = Driver::new();
    d.host
        .start_recording(RecordLimits {
            max_bytes: 4096,
            max_buffered: 1 << 20,
        })
        .unwrap();
    play(&mut d);
    let status = d.host.recording_status().unwrap();
    assert_eq!(status.stopped, Some(StopReason::SizeCap));
    let file = d.finish();
    assert!(file.len() <= 4096);
    let report = replay(&kinds(), &file).unwrap();
    assert!(report.matched(), "{report}");
    assert_eq!(report.ended, Some(StopReason::SizeCap));
    assert!(report.ticks_matched > 5);
}

#[test]
fn bytes_not_taken_stop_the_recording_at_the_buffer_bound() {
    let mut d = Driver::new();
    d.host
        .start_recording(RecordLimits {
            max_bytes: 1 << 30,
            max_buffered: 2048,
        })
        .unwrap();
    let a = d.join("ann", Role::Player);
    for i in 0..200u32 {
        d.host.handle_input(a, i + 1, 0, &[1]);
        d.clock.advance(Duration::from_millis(33));
        d.host.advance(d.clock.now());
    }
    let status = d.host.recording_status().unwrap();
    assert_eq!(status.stopped, Some(StopReason::BufferFull));
    let bytes = d.host.take_recorded();
    assert!(bytes.len() < 2048 + MAX_RECORD_BODY, "bounded");
    assert!(replay(&kinds(), &bytes).unwrap().matched());
}

#[test]
fn a_second_recording_and_a_kind_without_saves_are_refused() {
    let mut d = Driver::new();
    d.host.start_recording(RecordLimits::default()).unwrap();
    assert_eq!(
        d.host.start_recording(RecordLimits::default()),
        Err(StartRecordingError::AlreadyRecording)
    );
    let tiny = RecordLimits {
        max_bytes: 16,
        max_buffered: 16,
    };
    let mut fresh = Driver::new();
    assert!(matches!(
        fresh.host.start_recording(tiny),
        Err(StartRecordingError::TooLarge { .. })
    ));
    fresh.host.dispose();
    assert_eq!(
        fresh.host.start_recording(RecordLimits::default()),
        Err(StartRecordingError::Disposed)
    );
}

#[test]
fn an_unknown_kind_is_a_typed_error() {
    let file = recorded_session();
    assert_eq!(
        replay(&ZoneKinds::new(), &file),
        Err(ReplayError::UnknownKind("walkers".into()))
    );
}

#[test]
fn bad_magic_and_unknown_versions_are_typed_errors() {
    let mut file = recorded_session();
    file[4] = (RECORDING_VERSION + 1) as u8;
    assert_eq!(
        replay(&kinds(), &file),
        Err(ReplayError::Recording(RecordingError::UnsupportedVersion {
            found: RECORDING_VERSION + 1
        }))
    );
    file[0] = b'X';
    assert_eq!(
        replay(&kinds(), &file),
        Err(ReplayError::Recording(RecordingError::BadMagic))
    );
    assert!(matches!(
        replay(&kinds(), b"ZK"),
        Err(ReplayError::Recording(RecordingError::Truncated { .. }))
    ));
}

#[test]
fn every_truncation_is_an_error_or_a_shorter_match() {
    let file = recorded_session();
    let header_end = {
        let (_, r) = RecordReader::open(&file).unwrap();
        r.offset()
    };
    for cut in (0..file.len()).step_by(7) {
        match replay(&kinds(), &file[..cut]) {
            Ok(report) => {
                assert!(cut >= header_end);
                assert!(report.ended.is_none() || cut == file.len());
            }
            Err(ReplayError::Recording(RecordingError::Truncated { .. })) => {}
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
}

#[test]
fn corrupt_bytes_never_panic() {
    let file = recorded_session();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut bad = file.clone();
        let at = (seed % bad.len() as u64) as usize;
        bad[at] ^= (seed >> 32) as u8 | 1;
        // Whatever it is, it is an answer, not a panic.
        let _ = replay(&kinds(), &bad);
    }
}
