//! [`Ctx`]: what a hook reads (tick, time, RNG) and the commands it sends to the host.

use std::num::NonZeroU32;
use std::time::Duration;

use crate::character::Characters;
pub(crate) use crate::handles::Handles;
use crate::rng::Rng;
use crate::wire::Writer;
use crate::zone::PlayerId;

/// Command tags (docs/MODULES.md, "Commands"), from the ABI crate.
pub use zonekeep_abi::tag;

/// An entity of the replicated world, named by the handle the SDK gave it (never 0).
///
/// Handles are unique among live entities; a despawned entity's handle may be given to a later
/// spawn, so drop an `Entity` when you despawn it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entity(NonZeroU32);

impl Entity {
    /// The handle the host knows this entity by.
    pub fn handle(self) -> u32 {
        self.0.get()
    }

    /// The entity named by `handle` (`None` for 0). Only handles returned by
    /// [`Ctx::spawn`] name live entities.
    pub fn from_handle(handle: u32) -> Option<Self> {
        NonZeroU32::new(handle).map(Self)
    }
}

/// A declared entity kind: its index in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind(pub u16);

/// A field's type and parameters: the types of PROTOCOL.md §3 and §5.4.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldType {
    /// 0: a float in `[min, max]`, quantized to `bits` (1..=32).
    Quant {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
        /// Bits of the code.
        bits: u8,
    },
    /// 1: a float in `[-range, range)`, quantized to `bits` (2..=32), 0 exact.
    Centered {
        /// Half-width.
        range: f32,
        /// Bits of the code.
        bits: u8,
    },
    /// 2: an angle in radians, wrapping, quantized to `bits` (1..=16).
    Angle {
        /// Bits of the code.
        bits: u8,
    },
    /// 3: a `u32`.
    Uint,
    /// 4: an `i32`.
    Sint,
    /// 5: a `bool`.
    Bool,
    /// 6: a UTF-8 string of at most `max_len` bytes.
    Str {
        /// Maximum length in bytes.
        max_len: u8,
    },
    /// 7: an exact `f32`.
    F32,
}

impl FieldType {
    /// The type's number in DECLARE_KIND.
    pub fn code(&self) -> u8 {
        match self {
            Self::Quant { .. } => 0,
            Self::Centered { .. } => 1,
            Self::Angle { .. } => 2,
            Self::Uint => 3,
            Self::Sint => 4,
            Self::Bool => 5,
            Self::Str { .. } => 6,
            Self::F32 => 7,
        }
    }

    /// Append the type's number and parameters.
    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.code());
        match *self {
            Self::Quant { min, max, bits } => {
                w.f32(min).f32(max).u8(bits);
            }
            Self::Centered { range, bits } => {
                w.f32(range).u8(bits);
            }
            Self::Angle { bits } => {
                w.u8(bits);
            }
            Self::Str { max_len } => {
                w.u8(max_len);
            }
            Self::Uint | Self::Sint | Self::Bool | Self::F32 => {}
        }
    }
}

/// An entity kind to declare: a name and its fields, in order (a field's index, used by the
/// `set_*` commands, is its position here, from 0).
///
/// ```
/// use zonekeep_guest::KindDef;
/// let player = KindDef::new("player").bool("it").uint("score").str("name", 24);
/// assert_eq!(player.fields().len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KindDef {
    name: String,
    fields: Vec<(String, FieldType)>,
}

impl KindDef {
    /// A kind named `name` with no fields yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            fields: Vec::new(),
        }
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fields declared so far, in order.
    pub fn fields(&self) -> &[(String, FieldType)] {
        &self.fields
    }

    /// Add a field of any type.
    pub fn field(mut self, name: impl Into<String>, ty: FieldType) -> Self {
        self.fields.push((name.into(), ty));
        self
    }

    /// Add a [`FieldType::Quant`] field.
    pub fn quant(self, name: impl Into<String>, min: f32, max: f32, bits: u8) -> Self {
        self.field(name, FieldType::Quant { min, max, bits })
    }

    /// Add a [`FieldType::Centered`] field.
    pub fn centered(self, name: impl Into<String>, range: f32, bits: u8) -> Self {
        self.field(name, FieldType::Centered { range, bits })
    }

    /// Add a [`FieldType::Angle`] field.
    pub fn angle(self, name: impl Into<String>, bits: u8) -> Self {
        self.field(name, FieldType::Angle { bits })
    }

    /// Add a [`FieldType::Uint`] field.
    pub fn uint(self, name: impl Into<String>) -> Self {
        self.field(name, FieldType::Uint)
    }

    /// Add a [`FieldType::Sint`] field.
    pub fn sint(self, name: impl Into<String>) -> Self {
        self.field(name, FieldType::Sint)
    }

    /// Add a [`FieldType::Bool`] field.
    pub fn bool(self, name: impl Into<String>) -> Self {
        self.field(name, FieldType::Bool)
    }

    /// Add a [`FieldType::Str`] field.
    pub fn str(self, name: impl Into<String>, max_len: u8) -> Self {
        self.field(name, FieldType::Str { max_len })
    }

    /// Add a [`FieldType::F32`] field.
    pub fn f32(self, name: impl Into<String>) -> Self {
        self.field(name, FieldType::F32)
    }

    /// Append the DECLARE_KIND command.
    ///
    /// # Panics
    /// With more than 255 fields (the host accepts far fewer: PROTOCOL.md §5.4).
    pub fn encode(&self, w: &mut Writer) {
        let n = match u8::try_from(self.fields.len()) {
            Ok(n) => n,
            Err(_) => panic!(
                "kind `{}` has {} fields; at most 255 can be declared",
                self.name,
                self.fields.len()
            ),
        };
        w.u8(tag::DECLARE_KIND).str(&self.name).u8(n);
        for (name, ty) in &self.fields {
            w.str(name);
            ty.encode(w);
        }
    }
}

/// Who an event is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventTarget {
    /// Every participant (players and observers).
    All,
    /// One participant.
    Player(PlayerId),
}

/// The SDK's own state, kept across calls: the RNG, the entity handles, the declared kinds, the
/// last step length and the characters of the players present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SdkState {
    pub(crate) rng: Rng,
    pub(crate) handles: Handles,
    pub(crate) kinds: u16,
    pub(crate) dt: Duration,
    /// What the host gave at CREATE/RESTORE to start the keys the SDK makes for facts: unique
    /// to this run of the zone (it holds the owner's epoch), so a key is never made twice even
    /// when a zone restarts from an older save.
    pub(crate) fact_prefix: String,
    /// Fact keys made so far under `fact_prefix`; kept in saves, so an in-place upgrade (same
    /// prefix) goes on counting.
    pub(crate) facts_made: u64,
    /// The zone's id, as CREATE or RESTORE named it (not part of a save: the host names the
    /// zone again at every RESTORE).
    pub(crate) zone_id: String,
    /// The SDK's copy of each present player's character (not part of a save: a restored zone's
    /// players come back through JOIN, each with its character).
    pub(crate) characters: Characters,
}

impl SdkState {
    pub(crate) fn new(rng: Rng) -> Self {
        Self {
            rng,
            handles: Handles::new(),
            kinds: 0,
            dt: Duration::ZERO,
            fact_prefix: String::new(),
            facts_made: 0,
            zone_id: String::new(),
            characters: Characters::default(),
        }
    }
}

/// What a hook may read and do. Every action appends a command to the buffer the current call
/// returns; the host applies them in order after the call.
pub struct Ctx<'a> {
    tick: u64,
    time: Duration,
    pub(crate) sdk: &'a mut SdkState,
    pub(crate) out: &'a mut Writer,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        tick: u64,
        time: Duration,
        sdk: &'a mut SdkState,
        out: &'a mut Writer,
    ) -> Self {
        Self {
            tick,
            time,
            sdk,
            out,
        }
    }

    /// The zone's id, as the host named it at CREATE or RESTORE: what another zone passes to
    /// [`transfer`](Ctx::transfer) or [`send_to_zone`](Ctx::send_to_zone) to reach this one.
    pub fn zone_id(&self) -> &str {
        &self.sdk.zone_id
    }

    /// The zone's current tick: inside TICK, its number; elsewhere the last tick run (at CREATE
    /// and RESTORE, the tick the zone starts at).
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Simulation time: inside TICK, the tick's time as the host sent it; elsewhere
    /// `tick × dt` (zero before the first TICK, when `dt` is not known yet).
    pub fn time(&self) -> Duration {
        self.time
    }

    /// The fixed step length, from the last TICK (zero before the first).
    pub fn dt(&self) -> Duration {
        self.sdk.dt
    }

    /// The zone's deterministic RNG (saved and restored by the SDK).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.sdk.rng
    }

    /// The commands appended so far in this call (for tests and tools).
    pub fn commands(&self) -> &[u8] {
        self.out.as_bytes()
    }

    /// Declare an entity kind; kinds are numbered in declaration order from 0. Declare them in
    /// [`create`](crate::Zone::create) and, identically, in [`restore`](crate::Zone::restore).
    ///
    /// # Panics
    /// Past 65,536 kinds, or with more than 255 fields in one kind.
    pub fn declare_kind(&mut self, kind: KindDef) -> Kind {
        let id = self.sdk.kinds;
        self.sdk.kinds = match id.checked_add(1) {
            Some(next) => next,
            None => panic!("at most 65,536 kinds can be declared"),
        };
        kind.encode(self.out);
        Kind(id)
    }

    /// Spawn an entity of `kind` at `(x, y)`; its fields start at their defaults.
    pub fn spawn(&mut self, kind: Kind, x: f32, y: f32) -> Entity {
        let e = self.sdk.handles.allocate();
        self.out
            .u8(tag::SPAWN)
            .u32(e.handle())
            .u16(kind.0)
            .f32(x)
            .f32(y);
        e
    }

    /// Despawn `entity`; its handle may be reused by a later spawn.
    pub fn despawn(&mut self, entity: Entity) {
        self.sdk.handles.release(entity);
        self.out.u8(tag::DESPAWN).u32(entity.handle());
    }

    /// Move `entity` to `(x, y)`.
    pub fn set_pos(&mut self, entity: Entity, x: f32, y: f32) {
        // The commonest command (every moving entity, every tick): its 13 bytes in one append.
        let mut cmd = [0u8; 13];
        cmd[0] = tag::SET_POS;
        cmd[1..5].copy_from_slice(&entity.handle().to_le_bytes());
        cmd[5..9].copy_from_slice(&x.to_le_bytes());
        cmd[9..13].copy_from_slice(&y.to_le_bytes());
        self.out.raw(&cmd);
    }

    /// Set a quant, centered, angle or f32 field (`field`: its index in the kind).
    pub fn set_f32(&mut self, entity: Entity, field: u8, v: f32) {
        self.out
            .u8(tag::SET_F32)
            .u32(entity.handle())
            .u8(field)
            .f32(v);
    }

    /// Set a uint field.
    pub fn set_uint(&mut self, entity: Entity, field: u8, v: u32) {
        self.out
            .u8(tag::SET_UINT)
            .u32(entity.handle())
            .u8(field)
            .u32(v);
    }

    /// Set a sint field.
    pub fn set_sint(&mut self, entity: Entity, field: u8, v: i32) {
        self.out
            .u8(tag::SET_SINT)
            .u32(entity.handle())
            .u8(field)
            .i32(v);
    }

    /// Set a bool field.
    pub fn set_bool(&mut self, entity: Entity, field: u8, v: bool) {
        self.out
            .u8(tag::SET_BOOL)
            .u32(entity.handle())
            .u8(field)
            .bool(v);
    }

    /// Set a str field (at most the field's `max_len` bytes).
    pub fn set_str(&mut self, entity: Entity, field: u8, v: &str) {
        self.out
            .u8(tag::SET_STR)
            .u32(entity.handle())
            .u8(field)
            .str(v);
    }

    /// Make `entity` global (sent to every participant whatever its view) or not.
    pub fn set_global(&mut self, entity: Entity, global: bool) {
        self.out
            .u8(tag::SET_GLOBAL)
            .u32(entity.handle())
            .bool(global);
    }

    /// Who may see `entity` while it is in their range (stealth, fog of war, teams): `Some(players)`
    /// only those players (and whoever controls it), `None` everyone again. The host answers
    /// replication's "can this viewer see it" from this list without calling the module.
    pub fn set_seen_by(&mut self, entity: Entity, players: Option<&[PlayerId]>) {
        self.out.u8(tag::SET_SEEN_BY).u32(entity.handle());
        match players {
            None => {
                self.out.u32(u32::MAX);
            }
            Some(list) => {
                self.out
                    .u32(u32::try_from(list.len()).unwrap_or(u32::MAX - 1));
                for p in list.iter().take(u32::MAX as usize - 1) {
                    self.out.u32(p.0);
                }
            }
        }
    }

    /// Say which entity `player` controls (`None`: none); its view follows that entity.
    pub fn set_control(&mut self, player: PlayerId, entity: Option<Entity>) {
        self.out
            .u8(tag::SET_CONTROL)
            .u32(player.0)
            .u32(entity.map_or(0, Entity::handle));
    }

    /// Override `player`'s view: `radius` (`None`: the zone default) and a fixed centre `focus`
    /// (`None`: follow the controlled entity).
    pub fn set_view(&mut self, player: PlayerId, radius: Option<f32>, focus: Option<(f32, f32)>) {
        let (flag, (fx, fy)) = match focus {
            Some(at) => (1, at),
            None => (0, (0.0, 0.0)),
        };
        self.out
            .u8(tag::SET_VIEW)
            .u32(player.0)
            .f32(radius.unwrap_or(f32::NAN))
            .u8(flag)
            .f32(fx)
            .f32(fy);
    }

    /// Ask the host to remove `player` after this call (it leaves as kicked).
    pub fn kick(&mut self, player: PlayerId, reason: &str) {
        self.out.u8(tag::KICK).u32(player.0).str(reason);
    }

    /// Send a transient event (`topic` and `payload` are the game's) to `target`.
    pub fn event(&mut self, target: EventTarget, topic: u16, payload: &[u8]) {
        let player = match target {
            EventTarget::All => 0,
            EventTarget::Player(p) => p.0,
        };
        self.out
            .u8(tag::EVENT)
            .u32(player)
            .u16(topic)
            .bytes(payload);
    }

    /// Fire [`on_timer`](crate::Zone::on_timer) with `tag` once, `ticks` ticks from now.
    pub fn timer_after(&mut self, ticks: u64, tag: u64) {
        self.out.u8(tag::TIMER_AFTER).u64(ticks).u64(tag);
    }

    /// Fire [`on_timer`](crate::Zone::on_timer) with `tag` every `ticks` ticks.
    pub fn timer_every(&mut self, ticks: u64, tag: u64) {
        self.out.u8(tag::TIMER_EVERY).u64(ticks).u64(tag);
    }

    /// Cancel every timer with `tag`.
    pub fn timer_cancel(&mut self, tag: u64) {
        self.out.u8(tag::TIMER_CANCEL).u64(tag);
    }

    /// Emit a fact: `kind`, its JSON `payload` text, the `principal` it is about and its
    /// idempotency `key`. Answers the key, which its settlement comes back with through
    /// [`on_fact_settled`](crate::Zone::on_fact_settled): keep what the settlement needs under
    /// it.
    ///
    /// With `key: None` the SDK makes one unique to this zone for good: the prefix the host gave
    /// for this run (it holds the owner's epoch) and a count the saves carry. A key of your own
    /// must be unique for the zone's whole life; the host drops a fact whose key is in flight
    /// already, and one it cannot queue (the zone's bound on facts in flight), logging both and
    /// counting the second, so keep your own count of unsettled facts well under that bound.
    pub fn emit_fact(
        &mut self,
        kind: &str,
        payload: &str,
        principal: Option<&str>,
        key: Option<&str>,
    ) -> String {
        let key = match key {
            Some(k) => k.to_owned(),
            None => {
                let n = self.sdk.facts_made;
                self.sdk.facts_made = n.saturating_add(1);
                format!("{}{n}", self.sdk.fact_prefix)
            }
        };
        self.out
            .u8(tag::FACT)
            .str(kind)
            .str(payload)
            .str(principal.unwrap_or(""))
            .str(&key);
        key
    }

    /// Move `player` to the zone `target` (1 to 128 bytes, not this zone), handing it `claims`
    /// (a JSON object's text, at most 16 KiB). After this call the host asks for the player's
    /// state with [`transfer_out`](crate::Zone::transfer_out) and the player is moving until
    /// the other zone takes it or it comes back through
    /// [`transfer_in`](crate::Zone::transfer_in) with `returning`. The host refuses (and the
    /// player simply stays) an observer, a player already moving, a bad target, claims too
    /// large and more than 64 transfers in a tick.
    pub fn transfer(&mut self, player: PlayerId, target: &str, claims_json: &str) {
        self.out
            .u8(tag::TRANSFER)
            .u32(player.0)
            .str(target)
            .str(claims_json);
    }

    fn send(&mut self, kind: u8, to: &str, topic: u16, payload: &[u8]) {
        self.out
            .u8(tag::SEND)
            .u8(kind)
            .str(to)
            .u16(topic)
            .bytes(payload);
    }

    /// Send a message to the zone `zone` (its [`on_message`](crate::Zone::on_message) gets
    /// it). Payloads up to 16 KiB, at most 256 sends a tick, topic `0xFFFF` reserved: the host
    /// counts what it refuses. Delivery is at least once and deduplicated, never on the tick's
    /// path; [`on_undeliverable`](crate::Zone::on_undeliverable) tells of a message that could
    /// not be delivered.
    pub fn send_to_zone(&mut self, zone: &str, topic: u16, payload: &[u8]) {
        self.send(0, zone, topic, payload);
    }

    /// Send a message to every zone in `group` (as [`send_to_zone`](Ctx::send_to_zone)).
    pub fn send_to_group(&mut self, group: &str, topic: u16, payload: &[u8]) {
        self.send(1, group, topic, payload);
    }

    /// Send a message to this zone's parent ([`set_parent`](Ctx::set_parent)); it receives it
    /// in [`on_child`](crate::Zone::on_child). Without a parent the host refuses it.
    pub fn to_parent(&mut self, topic: u16, payload: &[u8]) {
        self.send(2, "", topic, payload);
    }

    /// Join `group` (at most 32 groups; names 1 to 128 bytes); membership is saved by the host.
    pub fn join_group(&mut self, group: &str) {
        self.out.u8(tag::JOIN_GROUP).str(group);
    }

    /// Leave `group`.
    pub fn leave_group(&mut self, group: &str) {
        self.out.u8(tag::LEAVE_GROUP).str(group);
    }

    /// Ask the host to save the zone at the end of this tick instead of at its next periodic
    /// save: for a durable change (a purchase, a level, a score) that must not wait for the save
    /// interval, while movement and other volatile state are saved on the periodic cadence.
    /// Several requests make one save; the host takes them at most every 100 ms (a later one
    /// waits, never lost).
    pub fn save_now(&mut self) {
        self.out.u8(tag::SAVE_NOW);
    }

    /// Publish whether the zone takes players now and what it says of itself, for a lobby
    /// listing it: `metadata` is a JSON object (as text) of at most
    /// [`MAX_LISTING_BYTES`](zonekeep_abi::MAX_LISTING_BYTES). A match closes itself when it
    /// starts; a room names its map. The newest call wins. The host refuses (and logs at debug)
    /// metadata that is not a JSON object or is too large; nothing is published then.
    pub fn publish_listing(&mut self, open: bool, metadata: &str) {
        self.out
            .u8(tag::PUBLISH_LISTING)
            .u8(u8::from(open))
            .str(metadata);
    }

    /// Name this zone's parent (`None`: none); saved by the host, which tells the parent of
    /// every tier change of this zone.
    pub fn set_parent(&mut self, parent: Option<&str>) {
        self.out.u8(tag::SET_PARENT).str(parent.unwrap_or(""));
    }

    /// Refuse the join being decided (JOIN only; the SDK sends it for an `Err` of
    /// [`on_join`](crate::Zone::on_join)).
    pub(crate) fn refuse(&mut self, code: u16, reason: &str) {
        self.out.u8(tag::REFUSE).u16(code).str(reason);
    }
}
