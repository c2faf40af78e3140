//! Taking a zone image and building a host from one (see [`crate::image`] for what an image is).
//!
//! Body layout (varints are the protocol's; a `blob` is a varint length and the bytes):
//! `tick`, `next_player`, `idle_phase`, `u8 ticked_at_once`, then the tier, the RNG, the timers,
//! the fact book, the world, the view requests, the transfers, the mailbox, the characters and the
//! durable calls
//! (each in its own self-delimiting encoding, next to the struct it serializes), then the roster — a count, and per participant `id`,
//! `blob principal`, `u8 role` (0 player, 1 observer), `blob claims` (JSON), `u8 connected`,
//! `u8 dropped` and, if 1, the clock reading it dropped at in nanoseconds — then the input
//! queues — a count, and per player `id`, `highest` and `last_processed` (each `0` for none or
//! `1 + seq`), a count and per queued input `seq`, `view_tick` and `blob payload` — and last
//! `blob` the zone's own image.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_protocol::limits::{MAX_INPUT_PAYLOAD, MAX_TICKET};
use zonekeep_protocol::wire::{put_varint, Reader};

use super::slot::Slot;
use super::ZoneHost;
use crate::character::CharacterBook;
use crate::clock::Clock;
use crate::config::ZoneConfig;
use crate::fact::FactBook;
use crate::image::{open, seal, ImageError, MAX_IMAGE_BODY};
use crate::input::{InputMeta, QueueImage};
use crate::message::Mailbox;
use crate::player::{Claims, PlayerId, PlayerInfo, Principal, Role};
use crate::rng::{get_rng, put_rng};
use crate::tier::TierState;
use crate::timer::Timers;
use crate::transfer::Transfers;
use crate::view::ViewRequests;
use crate::world::World;
use crate::zone::{Zone, ZoneInit};

fn put_blob(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_opt(out: &mut Vec<u8>, v: Option<u32>) {
    put_varint(out, v.map_or(0, |s| u64::from(s) + 1));
}

fn get_opt(r: &mut Reader<'_>) -> Result<Option<u32>, ImageError> {
    match r.varint_u64()? {
        0 => Ok(None),
        n => u32::try_from(n - 1)
            .map(Some)
            .map_err(|_| ImageError::Malformed("sequence number past u32".into())),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ZoneHost {
    /// The zone's whole in-memory state as an image (see [`crate::image`]), for a recording that
    /// starts while the zone runs. Take it between two `advance` calls. Fails with
    /// [`ImageError::NoImage`] when the zone's kind keeps none.
    pub fn image(&self) -> Result<Vec<u8>, ImageError> {
        let zone = self
            .zone
            .image()
            .ok_or_else(|| ImageError::NoImage(self.init.kind.clone()))?;
        let mut b = Vec::with_capacity(zone.len() + 64 * self.core.world.len() + 256);
        put_varint(&mut b, self.core.tick);
        put_varint(&mut b, u64::from(self.next_player));
        put_varint(&mut b, self.idle_phase);
        b.push(u8::from(self.ticked_at_once));
        self.core.tier.put_image(&mut b);
        put_rng(&self.core.rng, &mut b);
        self.core.timers.put_image(&mut b);
        self.core.facts.put_image(&mut b);
        self.core.world.put_image(&mut b);
        self.core.views.put_image(&mut b);
        self.core.transfers.put_image(&mut b);
        self.core.mail.put_image(&mut b);
        self.core.characters.put_image(&mut b);
        self.core.calls.put_image(&mut b);
        put_varint(&mut b, self.core.roster.len() as u64);
        for p in self.core.roster.values() {
            put_varint(&mut b, u64::from(p.id.0));
            put_blob(&mut b, p.principal.as_str().as_bytes());
            b.push(match p.role {
                Role::Player => 0,
                Role::Observer => 1,
            });
            // A map of JSON values always serializes.
            let claims = serde_json::to_string(&p.claims).unwrap_or_default();
            put_blob(&mut b, claims.as_bytes());
            b.push(u8::from(p.connected));
            match self.dropped_at.get(p.id) {
                None => b.push(0),
                Some(at) => {
                    b.push(1);
                    put_varint(&mut b, nanos(at));
                }
            }
        }
        let queues = self.zone.queues_image();
        put_varint(&mut b, queues.len() as u64);
        for (id, q) in &queues {
            put_varint(&mut b, u64::from(id.0));
            put_opt(&mut b, q.highest);
            put_opt(&mut b, q.last_processed);
            put_varint(&mut b, q.queued.len() as u64);
            for (meta, payload) in &q.queued {
                put_varint(&mut b, u64::from(meta.seq));
                put_varint(&mut b, u64::from(meta.view_tick));
                put_blob(&mut b, payload);
            }
        }
        put_blob(&mut b, &zone);
        Ok(seal(&b))
    }

    /// Builds a host of zone type `Z` from an [`image`](ZoneHost::image) taken by this build:
    /// everything the host owns comes back as it was, the zone from [`Zone::from_image`], and
    /// every connected participant is subscribed afresh (its next frame is a BASELINE). The
    /// schedule starts at `clock.now()` with the image's tick as the last one run.
    pub fn from_image<Z: Zone>(
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        image: &[u8],
    ) -> Result<Self, ImageError> {
        let mut r = Reader::new(open(image)?);
        let tick = r.varint_u64()?;
        let next_player = r.varint_u32()?;
        let idle_phase = r.varint_u64()?;
        let ticked_at_once = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(ImageError::Malformed("ticked_at_once flag".into())),
        };
        let tier = TierState::get_image(&mut r)?;
        let rng = get_rng(&mut r)?;
        let timers = Timers::get_image(&mut r)?;
        let facts = FactBook::get_image(&mut r)?;
        let world = World::get_image(&mut r)?;
        let views = ViewRequests::get_image(&mut r)?;
        let transfers = Transfers::get_image(&mut r)?;
        let boot_epoch = facts.boot_epoch();
        let mail = Mailbox::get_image(&mut r, &init.zone_id, boot_epoch)?;
        let characters = CharacterBook::get_image(&mut r)?;
        let mut calls =
            crate::call::CallBook::new(config.max_calls_in_flight, config.max_call_bytes);
        calls.read_image(&mut r)?;
        let (roster, dropped_at) = get_roster(&mut r)?;
        let queues = get_queues(&mut r)?;
        let zone_bytes = r.bytes_named("zone image", MAX_IMAGE_BODY)?;
        r.finish()?;
        if let Some(p) = roster.keys().find(|id| views.get(**id).is_none()) {
            return Err(ImageError::Malformed(format!("{p} has no view request")));
        }
        let players: Vec<PlayerId> = roster
            .values()
            .filter(|p| p.role == Role::Player)
            .map(|p| p.id)
            .collect();
        if players.len() != queues.len() || players.iter().any(|id| !queues.contains_key(id)) {
            return Err(ImageError::Malformed(
                "input queues do not match the players".into(),
            ));
        }
        if let Some(p) = transfers.moving.keys().find(|id| !players.contains(id)) {
            return Err(ImageError::Malformed(format!("{p} moves but is no player")));
        }
        // A moving player gets no frames until its transfer comes back.
        let connected: Vec<PlayerId> = roster
            .values()
            .filter(|p| p.connected && !transfers.moving.contains_key(&p.id))
            .map(|p| p.id)
            .collect();
        let mut parts = Some((
            tier, rng, timers, facts, world, views, roster, transfers, mail, characters, calls,
        ));
        let mut host = Self::build_with(
            init,
            config,
            clock,
            boot_epoch,
            tick,
            |core| {
                if let Some((
                    tier,
                    rng,
                    timers,
                    facts,
                    world,
                    views,
                    roster,
                    transfers,
                    mail,
                    characters,
                    calls,
                )) = parts.take()
                {
                    core.characters = characters;
                    core.calls = calls;
                    core.transfers = transfers;
                    core.mail = mail;
                    core.tier = tier;
                    core.rng = rng;
                    core.timers = timers;
                    core.facts = facts;
                    core.world = world;
                    core.views = views;
                    core.roster = roster.into();
                }
            },
            |init, ctx| Ok(Box::new(Slot::new(Z::from_image(init, ctx, zone_bytes)?))),
        )?;
        host.next_player = next_player;
        host.idle_phase = idle_phase;
        host.ticked_at_once = ticked_at_once;
        host.dropped_at = dropped_at.into_iter().collect();
        let capacity = host.config.input_buffer;
        for (id, queue) in queues {
            host.zone.restore_queue(id, queue, capacity).map_err(|e| {
                ImageError::Malformed(format!(
                    "a queued input of {id} was refused: {} ({})",
                    e.reason, e.code
                ))
            })?;
        }
        for id in connected {
            host.subscribe(id);
        }
        Ok(host)
    }
}

/// The participants and when each dropped one dropped.
type RosterImage = (BTreeMap<PlayerId, PlayerInfo>, BTreeMap<PlayerId, Duration>);

fn get_roster(r: &mut Reader<'_>) -> Result<RosterImage, ImageError> {
    // A participant takes at least six bytes.
    let n = r.count("participants", r.remaining() / 6)?;
    let mut roster = BTreeMap::new();
    let mut dropped = BTreeMap::new();
    for _ in 0..n {
        let id = PlayerId(r.varint_u32()?);
        let principal = Principal::new(r.str(MAX_TICKET)?);
        let role = match r.u8()? {
            0 => Role::Player,
            1 => Role::Observer,
            _ => return Err(ImageError::Malformed("unknown role".into())),
        };
        let claims: Claims = serde_json::from_str(r.str(MAX_TICKET)?)
            .map_err(|e| ImageError::Malformed(format!("claims of {id}: {e}")))?;
        let connected = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(ImageError::Malformed("connected flag".into())),
        };
        match r.u8()? {
            0 => {}
            1 => {
                dropped.insert(id, Duration::from_nanos(r.varint_u64()?));
            }
            _ => return Err(ImageError::Malformed("dropped flag".into())),
        }
        let info = PlayerInfo {
            id,
            principal,
            role,
            claims,
            connected,
        };
        if roster.insert(id, info).is_some() {
            return Err(ImageError::Malformed(format!("{id} twice in the roster")));
        }
    }
    Ok((roster, dropped))
}

fn get_queues(r: &mut Reader<'_>) -> Result<BTreeMap<PlayerId, QueueImage>, ImageError> {
    // A queue takes at least four bytes, a queued input three.
    let n = r.count("input queues", r.remaining() / 4)?;
    let mut queues = BTreeMap::new();
    for _ in 0..n {
        let id = PlayerId(r.varint_u32()?);
        let highest = get_opt(r)?;
        let last_processed = get_opt(r)?;
        let count = r.count("queued inputs", r.remaining() / 3)?;
        let mut queued = Vec::with_capacity(count);
        for _ in 0..count {
            let seq = r.varint_u32()?;
            let view_tick = r.varint_u32()?;
            let payload = r.bytes_named("input payload", MAX_INPUT_PAYLOAD)?.to_vec();
            queued.push((InputMeta { seq, view_tick }, payload));
        }
        let queue = QueueImage {
            highest,
            last_processed,
            queued,
        };
        if queues.insert(id, queue).is_some() {
            return Err(ImageError::Malformed(format!("two input queues for {id}")));
        }
    }
    Ok(queues)
}
