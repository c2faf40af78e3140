//! Applying a module's command buffer to its zone: the world, views, kicks, events, timers,
//! facts, characters and durable calls, in the order the module wrote them (docs/MODULES.md,
//! "Commands").

use std::collections::{BTreeMap, BTreeSet, HashMap};

use zonekeep_core::{
    CallError, CharacterError, Ctx, EntityId, EventTarget, JoinRefusal, KindId, MessageTarget,
    PlayerId, TimerId, MAX_CHARACTER_BYTES,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

use crate::error::Failure;
use crate::handles::HandleMap;
use crate::wire::Reader;
use zonekeep_abi::{tag, MAX_CALL_ARGS_BYTES};

/// What the host keeps of a module zone to apply its command buffers: its entity handles, its
/// declared kinds and its timers by tag. [`ModuleZone`](crate::ModuleZone) applies every call's
/// answer with one; a tool running a guest's Rust code natively (a benchmark comparing it with
/// its module) applies the same buffers with another.
#[derive(Debug, Default)]
pub struct CommandApplier {
    handles: HandleMap,
    kinds: Vec<KindId>,
    timers: BTreeMap<u64, Vec<TimerId>>,
    repeating: BTreeSet<TimerId>,
    /// Entities only some players may see (sorted lists); absent: everyone in range.
    seen_by: HashMap<EntityId, Vec<PlayerId>>,
}

fn refused(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::Command(format!("{what}: {e}"))
}

/// Why a CALL command made no call: arguments too long to read or not JSON, or the core's
/// refusal (a bad key or function name, arguments over the zone's bound, a key in flight, a full
/// queue).
#[derive(Debug, thiserror::Error)]
enum CallRefused {
    /// Arguments longer than any zone accepts, refused unread.
    #[error(
        "call arguments of {0} bytes are past the {MAX_CALL_ARGS_BYTES} bytes any zone accepts"
    )]
    TooLong(usize),
    /// Arguments that are not JSON text.
    #[error("call arguments are not JSON: {0}")]
    NotJson(zonekeep_core::serde_json::Error),
    /// The core refused the call.
    #[error(transparent)]
    Refused(#[from] CallError),
}

/// Makes the call a CALL command asks for. Arguments past [`MAX_CALL_ARGS_BYTES`] of text (more
/// than any zone accepts) are refused before they are parsed: the host never parses arguments
/// no zone could take.
fn make_call(ctx: &mut Ctx<'_>, key: &str, function: &str, args: &str) -> Result<(), CallRefused> {
    if args.len() > MAX_CALL_ARGS_BYTES {
        return Err(CallRefused::TooLong(args.len()));
    }
    let args = zonekeep_core::serde_json::from_str(args).map_err(CallRefused::NotJson)?;
    Ok(ctx.call(key, function, args)?)
}

fn field_type(r: &mut Reader<'_>) -> Result<FieldType, Failure> {
    Ok(match r.u8("field type")? {
        0 => FieldType::Quant {
            min: r.f32("quant min")?,
            max: r.f32("quant max")?,
            bits: r.u8("quant bits")?,
        },
        1 => FieldType::Centered {
            range: r.f32("centered range")?,
            bits: r.u8("centered bits")?,
        },
        2 => FieldType::Angle {
            bits: r.u8("angle bits")?,
        },
        3 => FieldType::UInt,
        4 => FieldType::SInt,
        5 => FieldType::Bool,
        6 => FieldType::Str {
            max_len: r.u8("str max_len")?,
        },
        7 => FieldType::F32,
        t => return Err(Failure::Abi(format!("unknown field type {t}"))),
    })
}

impl CommandApplier {
    fn entity(&self, handle: u32) -> Result<EntityId, Failure> {
        self.handles
            .get(handle)
            .ok_or_else(|| Failure::Command(format!("no live entity has handle {handle}")))
    }

    /// Whether `viewer` may see `entity` while it is in range (SET_SEEN_BY); answered here, so
    /// replication never calls into the module.
    pub fn can_see(&self, viewer: PlayerId, entity: EntityId) -> bool {
        self.seen_by
            .get(&entity)
            .is_none_or(|list| list.binary_search(&viewer).is_ok())
    }

    /// Whether any entity is hidden from someone (replication may skip [`can_see`](Self::can_see)
    /// otherwise).
    pub fn hides_anything(&self) -> bool {
        !self.seen_by.is_empty()
    }

    /// A timer fired (before its TIMER call): a one-shot timer is forgotten.
    pub fn timer_fired(&mut self, id: TimerId, tag: u64) {
        if self.repeating.contains(&id) {
            return;
        }
        if let Some(ids) = self.timers.get_mut(&tag) {
            ids.retain(|t| *t != id);
            if ids.is_empty() {
                self.timers.remove(&tag);
            }
        }
    }

    /// Applies the command buffer `buf` to the zone through `ctx`. In a JOIN's or a
    /// TRANSFER_IN's answer (`join`) a REFUSE is allowed and returned; anywhere else it is an
    /// ABI error.
    pub fn apply(
        &mut self,
        ctx: &mut Ctx<'_>,
        buf: &[u8],
        join: bool,
    ) -> Result<Option<JoinRefusal>, Failure> {
        let mut r = Reader::new(buf);
        let mut refusal = None;
        while !r.is_empty() {
            match r.u8("command tag")? {
                tag::DECLARE_KIND => {
                    let name = r.str("kind name")?.to_owned();
                    let n = r.u8("field count")?;
                    let mut fields = Vec::with_capacity(usize::from(n));
                    for _ in 0..n {
                        let name = r.str("field name")?.to_owned();
                        fields.push(FieldDef {
                            name,
                            ty: field_type(&mut r)?,
                        });
                    }
                    let def = KindDef { name, fields };
                    let id = ctx
                        .world()
                        .declare_kind(def)
                        .map_err(|e| refused("declare kind", e))?;
                    self.kinds.push(id);
                }
                tag::SPAWN => {
                    let handle = r.u32("handle")?;
                    let kind = r.u16("kind")?;
                    let (x, y) = (r.f32("x")?, r.f32("y")?);
                    if handle == 0 || self.handles.contains(handle) {
                        return Err(Failure::Command(format!(
                            "spawn: handle {handle} is 0 or already live"
                        )));
                    }
                    let kind = *self.kinds.get(usize::from(kind)).ok_or_else(|| {
                        Failure::Command(format!("spawn: kind {kind} was not declared"))
                    })?;
                    let id = ctx
                        .world()
                        .spawn(kind, x, y)
                        .map_err(|e| refused("spawn", e))?;
                    self.handles.insert(handle, id);
                }
                tag::DESPAWN => {
                    let handle = r.u32("handle")?;
                    let id = self.entity(handle)?;
                    self.handles.remove(handle);
                    self.seen_by.remove(&id);
                    ctx.world().despawn(id).map_err(|e| refused("despawn", e))?;
                }
                tag::SET_POS => {
                    let id = self.entity(r.u32("handle")?)?;
                    let (x, y) = (r.f32("x")?, r.f32("y")?);
                    ctx.world()
                        .set_pos(id, x, y)
                        .map_err(|e| refused("set_pos", e))?;
                }
                t @ (tag::SET_F32
                | tag::SET_UINT
                | tag::SET_SINT
                | tag::SET_BOOL
                | tag::SET_STR) => {
                    let id = self.entity(r.u32("handle")?)?;
                    let field = usize::from(r.u8("field")?);
                    let world = ctx.world();
                    let done = match t {
                        tag::SET_F32 => world.set_f32(id, field, r.f32("value")?),
                        tag::SET_UINT => world.set_uint(id, field, r.u32("value")?),
                        tag::SET_SINT => world.set_int(id, field, r.i32("value")?),
                        tag::SET_BOOL => world.set_bool(id, field, r.u8("value")? != 0),
                        _ => world.set_str(id, field, r.str("value")?),
                    };
                    done.map_err(|e| refused("set field", e))?;
                }
                tag::SET_GLOBAL => {
                    let id = self.entity(r.u32("handle")?)?;
                    let global = r.u8("global")? != 0;
                    ctx.world()
                        .set_global(id, global)
                        .map_err(|e| refused("set_global", e))?;
                }
                tag::SET_CONTROL => {
                    let player = PlayerId(r.u32("player")?);
                    let handle = r.u32("handle")?;
                    let entity = if handle == 0 {
                        None
                    } else {
                        Some(self.entity(handle)?)
                    };
                    ctx.set_control(player, entity);
                }
                tag::SET_VIEW => {
                    let player = PlayerId(r.u32("player")?);
                    let radius = r.f32("radius")?;
                    let focus = r.u8("focus")? != 0;
                    let (fx, fy) = (r.f32("focus x")?, r.f32("focus y")?);
                    let radius = (!radius.is_nan()).then_some(radius);
                    ctx.set_view(player, radius, focus.then_some((fx, fy)));
                }
                tag::KICK => {
                    let player = PlayerId(r.u32("player")?);
                    let reason = r.str("reason")?.to_owned();
                    ctx.kick(player, reason);
                }
                tag::EVENT => {
                    let player = r.u32("player")?;
                    let topic = r.u16("topic")?;
                    let payload = r.bytes("payload")?.to_vec();
                    let target = if player == 0 {
                        EventTarget::All
                    } else {
                        EventTarget::Player(PlayerId(player))
                    };
                    ctx.emit_event(target, topic, payload);
                }
                t @ (tag::TIMER_AFTER | tag::TIMER_EVERY) => {
                    let ticks = r.u64("ticks")?;
                    let tag = r.u64("tag")?;
                    let every = t == tag::TIMER_EVERY;
                    let timers = ctx.timers();
                    let id = if every {
                        timers.every(ticks, tag)
                    } else {
                        timers.after(ticks, tag)
                    }
                    .map_err(|e| refused("timer", e))?;
                    if every {
                        self.repeating.insert(id);
                    }
                    self.timers.entry(tag).or_default().push(id);
                }
                tag::TIMER_CANCEL => {
                    let tag = r.u64("tag")?;
                    for id in self.timers.remove(&tag).unwrap_or_default() {
                        self.repeating.remove(&id);
                        ctx.timers().cancel(id);
                    }
                }
                tag::REFUSE => {
                    let code = r.u16("code")?;
                    let reason = r.str("reason")?;
                    if !join {
                        return Err(Failure::Abi("REFUSE outside a JOIN".into()));
                    }
                    refusal = Some(JoinRefusal::new(code, reason));
                }
                tag::FACT => {
                    let kind = r.str("fact kind")?;
                    let payload = r.str("fact payload")?;
                    let principal = r.str("fact principal")?;
                    let key = r.str("fact key")?;
                    let payload: zonekeep_core::serde_json::Value =
                        zonekeep_core::serde_json::from_str(payload)
                            .map_err(|e| refused("fact payload is not JSON", e))?;
                    let principal = (!principal.is_empty()).then_some(principal);
                    let key = (!key.is_empty()).then(|| key.to_owned());
                    // A refusal (too large, over the rate, a full queue) is counted by the host
                    // and logged there at a bounded rate, as for a native zone that ignores the
                    // error; the module cannot be answered mid-buffer, and a line per refused
                    // fact here would let a module flood the log.
                    let _ = ctx.emit_fact(kind, payload, principal, key);
                }
                tag::SET_SEEN_BY => {
                    let id = self.entity(r.u32("handle")?)?;
                    let n = r.u32("player count")?;
                    if n == u32::MAX {
                        self.seen_by.remove(&id);
                        continue;
                    }
                    // Each player takes 4 bytes: a count the buffer cannot hold is refused before
                    // anything is allocated for it.
                    if n as usize > r.remaining() / 4 {
                        return Err(Failure::Abi(format!(
                            "{n} players run past the end of the buffer"
                        )));
                    }
                    let mut list = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        list.push(PlayerId(r.u32("player")?));
                    }
                    list.sort_unstable();
                    list.dedup();
                    self.seen_by.insert(id, list);
                }
                tag::TRANSFER => {
                    let player = PlayerId(r.u32("player")?);
                    let target = r.str("transfer target")?;
                    let claims = r.str("transfer claims")?;
                    let claims = match zonekeep_core::serde_json::from_str(claims) {
                        Ok(zonekeep_core::serde_json::Value::Object(m)) => m,
                        _ => {
                            return Err(Failure::Command(
                                "transfer claims are not a JSON object".into(),
                            ))
                        }
                    };
                    // A refusal is the host's answer the module cannot be given mid-buffer: it
                    // learns of it by its player staying (as for a refused fact).
                    if let Err(e) = ctx.transfer(player, target, claims) {
                        tracing::debug!(target: "zonekeep::module", %player, target, error = %e, "transfer refused");
                    }
                }
                tag::SEND => {
                    let kind = r.u8("send kind")?;
                    let to = r.str("send target")?;
                    let topic = r.u16("topic")?;
                    let payload = r.bytes("payload")?;
                    // Refusals are counted by the host (AdvanceReport::messages_refused).
                    let _ = match kind {
                        0 => ctx.send(MessageTarget::Zone(to.to_owned()), topic, payload),
                        1 => ctx.send(MessageTarget::Group(to.to_owned()), topic, payload),
                        2 => ctx.to_parent(topic, payload),
                        k => return Err(Failure::Abi(format!("unknown send kind {k}"))),
                    };
                }
                tag::JOIN_GROUP => {
                    let group = r.str("group")?;
                    if let Err(e) = ctx.join_group(group) {
                        tracing::debug!(target: "zonekeep::module", group, error = %e, "group join refused");
                    }
                }
                tag::LEAVE_GROUP => ctx.leave_group(r.str("group")?),
                tag::SET_PARENT => {
                    let parent = r.str("parent")?;
                    ctx.set_parent((!parent.is_empty()).then_some(parent));
                }
                tag::SAVE_NOW => ctx.save_now(),
                tag::PUBLISH_LISTING => {
                    let open = r.u8("listing open")? != 0;
                    let metadata = r.str("listing metadata")?;
                    // Refused (too large, not JSON, not an object) as a refused group join is:
                    // logged at debug, nothing published, the zone runs on. Too large is refused
                    // before it is parsed.
                    let published = if metadata.len() > zonekeep_abi::MAX_LISTING_BYTES {
                        Err(format!(
                            "listing metadata of {} bytes is past {}",
                            metadata.len(),
                            zonekeep_abi::MAX_LISTING_BYTES
                        ))
                    } else {
                        zonekeep_core::serde_json::from_str(metadata)
                            .map_err(|e| format!("listing metadata is not JSON: {e}"))
                            .and_then(|m| ctx.publish_listing(open, m).map_err(|e| e.to_string()))
                    };
                    if let Err(e) = published {
                        tracing::debug!(target: "zonekeep::module", error = %e, "listing refused");
                    }
                }
                tag::SET_CHARACTER => {
                    let player = PlayerId(r.u32("player")?);
                    let data = r.bytes("character")?;
                    // Refused (no character here, too large) as a refused transfer is: the
                    // module cannot be answered mid-buffer, the character stays as it was, and
                    // the zone runs on. An oversized one is refused before it is copied.
                    let set = if data.len() > MAX_CHARACTER_BYTES {
                        Err(CharacterError::TooLarge {
                            size: data.len(),
                            max: MAX_CHARACTER_BYTES,
                        })
                    } else {
                        ctx.set_character(player, data.to_vec())
                    };
                    if let Err(e) = set {
                        tracing::debug!(target: "zonekeep::module", %player, error = %e, "character change refused");
                    }
                }
                tag::COMMIT_CHARACTER => {
                    let player = PlayerId(r.u32("player")?);
                    if let Err(e) = ctx.commit_character(player) {
                        tracing::debug!(target: "zonekeep::module", %player, error = %e, "character commit refused");
                    }
                }
                tag::CALL => {
                    let key = r.str("call key")?;
                    let function = r.str("call function")?;
                    let args = r.str("call args")?;
                    // Refused as a refused character change is: the module cannot be answered
                    // mid-buffer, no call is made (it never gets a result), and the zone runs on.
                    // A full queue is also counted by the host (`calls_overflowed`).
                    if let Err(e) = make_call(ctx, key, function, args) {
                        tracing::debug!(target: "zonekeep::module", error = %e, "call refused");
                    }
                }
                t => return Err(Failure::Abi(format!("unknown command tag {t}"))),
            }
        }
        Ok(refusal)
    }
}
