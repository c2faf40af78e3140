//! [`EntityKind`]: an entity kind declared from a Rust struct (`#[derive(EntityKind)]`), and the
//! [`Ctx`] methods that declare, spawn and update entities from such structs.

use crate::ctx::{Ctx, Entity, Kind, KindDef};

/// An entity kind whose fields are a struct's: its [`KindDef`], and the `set_*` commands that
/// bring an entity's fields to the struct's values. Derive it rather than writing field indexes
/// by hand.
///
/// `#[derive(EntityKind)]` takes a struct with named fields; each field is a field of the kind,
/// in declaration order (its index is its position, from 0), named as the Rust field (without
/// `r#`). The Rust type gives the wire type (PROTOCOL.md §5.4):
///
/// | Rust field | attribute | [`FieldType`](crate::FieldType) |
/// | --- | --- | --- |
/// | `u32` | none | `Uint` |
/// | `i32` | none | `Sint` |
/// | `bool` | none | `Bool` |
/// | `f32` | none | `F32` (exact) |
/// | `f32` | `#[field(quant(min = A, max = B, bits = N))]` (N in 1..=32, A < B) | `Quant` |
/// | `f32` | `#[field(centered(range = R, bits = N))]` (N in 2..=32, R > 0) | `Centered` |
/// | `f32` | `#[field(angle(bits = N))]` (N in 1..=16) | `Angle` |
/// | `String` | `#[field(str(max_len = N))]` (required; N in 1..=255 bytes) | `Str` |
///
/// The kind's name is the struct's in snake_case (`BigRock` → `big_rock`) unless
/// `#[entity(name = "...")]` gives it. Each field also gets an inherent constant
/// `FIELD_<NAME>: u8` (the field's name in upper case) holding its index, for the raw setters
/// ([`Ctx::set_uint`] and the others). Anything else (another type, an attribute that does not
/// fit the type, a parameter out of range, more than 255 fields, a tuple struct or an enum) is
/// a compile error pointing at it. The host takes at most 32 fields in a kind and names of at
/// most 64 bytes (PROTOCOL.md §5.4); it refuses a longer `str` value, so keep strings within
/// their `max_len` (the SDK does not cut them).
///
/// Declare the kind with [`Ctx::declare`], spawn an entity with its fields with
/// [`Ctx::spawn_with`], and send what changed with [`Ctx::update`]:
///
/// ```
/// use zonekeep_guest::testing::{Command, TestHost};
/// use zonekeep_guest::{Ctx, Entity, EntityKind, FieldType, Kind, Player, Refusal, Role, Zone};
///
/// #[derive(Debug, Clone, Default, PartialEq, EntityKind)]
/// #[entity(name = "player")]
/// struct Runner {
///     #[field(str(max_len = 24))]
///     name: String,
///     score: u32,
///     #[field(angle(bits = 10))]
///     facing: f32,
/// }
///
/// /// One runner, scoring a point a tick.
/// struct Race {
///     kind: Kind,
///     runner: Option<(Entity, Runner)>,
/// }
///
/// impl Zone for Race {
///     type Input = Vec<u8>;
///
///     fn create(ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
///         Ok(Self { kind: ctx.declare::<Runner>(), runner: None })
///     }
///
///     fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
///         let runner = Runner { name: player.principal, ..Runner::default() };
///         let entity = ctx.spawn_with(self.kind, 1.0, 2.0, &runner);
///         self.runner = Some((entity, runner));
///         Ok(())
///     }
///
///     fn tick(&mut self, ctx: &mut Ctx<'_>) {
///         if let Some((entity, runner)) = &mut self.runner {
///             let before = runner.clone();
///             runner.score += 1;
///             ctx.update(*entity, &before, runner);
///         }
///     }
/// }
///
/// let mut host = TestHost::<Race>::new(50_000);
/// assert_eq!(
///     host.create(1, "race-1", "{}").unwrap(),
///     [Command::DeclareKind {
///         name: "player".into(),
///         fields: vec![
///             ("name".into(), FieldType::Str { max_len: 24 }),
///             ("score".into(), FieldType::Uint),
///             ("facing".into(), FieldType::Angle { bits: 10 }),
///         ],
///     }]
/// );
/// // A spawn sets the fields that are not at their defaults: here, the name only.
/// assert_eq!(
///     host.join(7, "ann", Role::Player).unwrap(),
///     [
///         Command::Spawn { handle: 1, kind: 0, x: 1.0, y: 2.0 },
///         Command::SetStr { handle: 1, field: Runner::FIELD_NAME, value: "ann".into() },
///     ]
/// );
/// // An update sets the fields that changed: here, the score.
/// assert_eq!(Runner::FIELD_SCORE, 1);
/// assert_eq!(
///     host.tick().unwrap(),
///     [Command::SetUint { handle: 1, field: Runner::FIELD_SCORE, value: 1 }]
/// );
/// ```
///
/// A `String` needs its `max_len`:
///
/// ```compile_fail
/// #[derive(zonekeep_guest::EntityKind)]
/// struct Sign {
///     text: String,
/// }
/// ```
///
/// Only `u32`, `i32`, `bool`, `f32` and `String` fields are entity fields:
///
/// ```compile_fail
/// #[derive(zonekeep_guest::EntityKind)]
/// struct Clock {
///     ticks: u64,
/// }
/// ```
///
/// Quantization is for `f32` fields only:
///
/// ```compile_fail
/// #[derive(zonekeep_guest::EntityKind)]
/// struct Crate {
///     #[field(quant(min = 0.0, max = 1.0, bits = 8))]
///     count: u32,
/// }
/// ```
///
/// Parameters are checked as the host checks them:
///
/// ```compile_fail
/// #[derive(zonekeep_guest::EntityKind)]
/// struct Turret {
///     #[field(angle(bits = 17))]
///     aim: f32,
/// }
/// ```
///
/// ```compile_fail
/// #[derive(zonekeep_guest::EntityKind)]
/// struct Sign {
///     #[field(str(max_len = 0))]
///     text: String,
/// }
/// ```
///
/// A field's name is its name in the kind, so a tuple struct has none to give:
///
/// ```compile_fail
/// #[derive(zonekeep_guest::EntityKind)]
/// struct Point(f32, f32);
/// ```
pub trait EntityKind {
    /// The kind's name: `#[entity(name = "...")]`, else the struct's name in snake_case.
    const NAME: &'static str;

    /// The kind to declare: [`NAME`](EntityKind::NAME) and the struct's fields in declaration
    /// order, each with its wire type.
    fn kind_def() -> KindDef;

    /// Send `entity` (of this kind) the fields where `self` differs from `before`, in field
    /// order, each with its setter (`set_uint`, `set_sint`, `set_bool`, `set_str` or
    /// `set_f32`); floats are compared by their bits (so `-0.0` differs from `0.0`, and a NaN
    /// is unchanged if its bits are).
    fn write_changed(&self, before: &Self, ctx: &mut Ctx<'_>, entity: Entity);

    /// Send `entity` (of this kind) the fields of `self` that differ from a new entity's: not
    /// 0, `false`, `""` or `0.0` (by bits). What a spawn needs, since the host starts every
    /// field at its default.
    fn write_set(&self, ctx: &mut Ctx<'_>, entity: Entity);
}

impl Ctx<'_> {
    /// Declare `K`'s entity kind ([`EntityKind::kind_def`]), as
    /// [`declare_kind`](Ctx::declare_kind) does: in [`create`](crate::Zone::create) and,
    /// identically, in [`restore`](crate::Zone::restore).
    ///
    /// # Panics
    /// As [`declare_kind`](Ctx::declare_kind): past 65,536 kinds.
    pub fn declare<K: EntityKind>(&mut self) -> Kind {
        self.declare_kind(K::kind_def())
    }

    /// Spawn an entity of `kind` (the one [`declare`](Ctx::declare) gave for `K`) at `(x, y)`
    /// with `fields`: the spawn, then [`EntityKind::write_set`].
    pub fn spawn_with<K: EntityKind>(&mut self, kind: Kind, x: f32, y: f32, fields: &K) -> Entity {
        let entity = self.spawn(kind, x, y);
        fields.write_set(self, entity);
        entity
    }

    /// Bring `entity`'s fields from `before` (what it holds) to `after`: the fields that
    /// changed ([`EntityKind::write_changed`]), nothing if none did.
    pub fn update<K: EntityKind>(&mut self, entity: Entity, before: &K, after: &K) {
        after.write_changed(before, self, entity);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use crate::ctx::SdkState;
    use crate::testing::{decode_commands, Command};
    use crate::{Ctx, Entity, EntityKind, FieldType, Kind, KindDef, Rng, Writer};

    /// Every field type and attribute.
    #[derive(Debug, Clone, Default, PartialEq, EntityKind)]
    #[entity(name = "player")]
    struct Runner {
        #[field(str(max_len = 24))]
        name: String,
        score: u32,
        it: bool,
        team: i32,
        radius: f32,
        #[field(quant(min = 0.0, max = 1.0, bits = 8))]
        health: f32,
        #[field(centered(range = 10.0, bits = 12))]
        vx: f32,
        #[field(angle(bits = 10))]
        facing: f32,
    }

    /// Named by default; a raw identifier, full paths, negative and integer parameters, the
    /// bounds of every range.
    #[derive(Debug, Clone, Default, PartialEq, EntityKind)]
    struct BigRock {
        r#type: core::primitive::u32,
        #[field(str(max_len = 255))]
        label: std::string::String,
        #[field(quant(min = -2, max = 0.5, bits = 32))]
        tilt: f32,
        #[field(centered(range = 1e3, bits = 2))]
        drift: f32,
        #[field(angle(bits = 16))]
        spin: f32,
        #[field(angle(bits = 1))]
        side: f32,
    }

    /// No fields at all: a kind with a position only.
    #[derive(Debug, Clone, Default, PartialEq, EntityKind)]
    struct Marker;

    /// The commands `f` writes on a fresh context.
    fn commands(f: impl FnOnce(&mut Ctx<'_>)) -> Vec<Command> {
        let mut sdk = SdkState::new(Rng::for_zone(1, "z"));
        let mut w = Writer::new();
        let mut ctx = Ctx::new(0, Duration::ZERO, &mut sdk, &mut w);
        f(&mut ctx);
        decode_commands(ctx.commands()).unwrap()
    }

    fn entity() -> Entity {
        Entity::from_handle(1).unwrap()
    }

    fn runner() -> Runner {
        Runner {
            name: "ann".into(),
            score: 3,
            it: true,
            team: -2,
            radius: 0.5,
            health: 0.75,
            vx: -1.25,
            facing: 3.0,
        }
    }

    #[test]
    fn kind_def_matches_a_hand_written_kind_def_for_every_type() {
        assert_eq!(Runner::NAME, "player");
        assert_eq!(
            Runner::kind_def(),
            KindDef::new("player")
                .str("name", 24)
                .uint("score")
                .bool("it")
                .sint("team")
                .f32("radius")
                .quant("health", 0.0, 1.0, 8)
                .centered("vx", 10.0, 12)
                .angle("facing", 10)
        );
        assert_eq!(BigRock::NAME, "big_rock");
        assert_eq!(
            BigRock::kind_def(),
            KindDef::new("big_rock")
                .uint("type")
                .str("label", 255)
                .field(
                    "tilt",
                    FieldType::Quant {
                        min: -2.0,
                        max: 0.5,
                        bits: 32
                    }
                )
                .centered("drift", 1000.0, 2)
                .angle("spin", 16)
                .angle("side", 1)
        );
        assert_eq!(Marker::NAME, "marker");
        assert_eq!(Marker::kind_def(), KindDef::new("marker"));
    }

    #[test]
    fn field_constants_are_the_indexes() {
        assert_eq!(
            [
                Runner::FIELD_NAME,
                Runner::FIELD_SCORE,
                Runner::FIELD_IT,
                Runner::FIELD_TEAM,
                Runner::FIELD_RADIUS,
                Runner::FIELD_HEALTH,
                Runner::FIELD_VX,
                Runner::FIELD_FACING,
            ],
            [0, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!((BigRock::FIELD_TYPE, BigRock::FIELD_SIDE), (0, 5));
    }

    #[test]
    fn declare_writes_the_kind_def() {
        let mut kinds = Vec::new();
        let out = commands(|ctx| {
            kinds.push(ctx.declare::<Runner>());
            kinds.push(ctx.declare::<Marker>());
        });
        assert_eq!(kinds, [Kind(0), Kind(1)]);
        let expected = commands(|ctx| {
            ctx.declare_kind(Runner::kind_def());
            ctx.declare_kind(Marker::kind_def());
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn write_set_skips_defaults() {
        assert_eq!(
            commands(|ctx| Runner::default().write_set(ctx, entity())),
            []
        );
        assert_eq!(commands(|ctx| Marker.write_set(ctx, entity())), []);
        let (e, h) = (entity(), 1);
        assert_eq!(
            commands(|ctx| runner().write_set(ctx, e)),
            [
                Command::SetStr {
                    handle: h,
                    field: 0,
                    value: "ann".into()
                },
                Command::SetUint {
                    handle: h,
                    field: 1,
                    value: 3
                },
                Command::SetBool {
                    handle: h,
                    field: 2,
                    value: 1
                },
                Command::SetSint {
                    handle: h,
                    field: 3,
                    value: -2
                },
                Command::SetF32 {
                    handle: h,
                    field: 4,
                    value: 0.5
                },
                Command::SetF32 {
                    handle: h,
                    field: 5,
                    value: 0.75
                },
                Command::SetF32 {
                    handle: h,
                    field: 6,
                    value: -1.25
                },
                Command::SetF32 {
                    handle: h,
                    field: 7,
                    value: 3.0
                },
            ]
        );
        // Only what is away from the default; -0.0 is not 0.0 by bits.
        let some = Runner {
            team: 5,
            vx: -0.0,
            ..Runner::default()
        };
        let out = commands(|ctx| some.write_set(ctx, e));
        assert!(
            matches!(
                out[..],
                [
                    Command::SetSint {
                        handle: 1,
                        field: 3,
                        value: 5
                    },
                    Command::SetF32 {
                        handle: 1,
                        field: 6,
                        value
                    },
                ] if value.to_bits() == (-0.0f32).to_bits()
            ),
            "{out:?}"
        );
    }

    #[test]
    fn spawn_with_spawns_then_sets_the_fields() {
        let some = Runner {
            score: 9,
            ..Runner::default()
        };
        let mut spawned = None;
        let out = commands(|ctx| {
            let kind = ctx.declare::<Runner>();
            spawned = Some(ctx.spawn_with(kind, 4.0, 5.0, &some));
        });
        let handle = spawned.unwrap().handle();
        assert_eq!(
            out[1..],
            [
                Command::Spawn {
                    handle,
                    kind: 0,
                    x: 4.0,
                    y: 5.0
                },
                Command::SetUint {
                    handle,
                    field: Runner::FIELD_SCORE,
                    value: 9
                },
            ]
        );
        // All defaults: the spawn alone.
        let out = commands(|ctx| {
            ctx.spawn_with(Kind(0), 0.0, 0.0, &Runner::default());
        });
        assert!(matches!(out[..], [Command::Spawn { .. }]), "{out:?}");
    }

    #[test]
    fn write_changed_writes_exactly_the_changed_fields() {
        let before = runner();
        assert_eq!(
            commands(|ctx| ctx.update(entity(), &before, &before.clone())),
            []
        );
        let after = Runner {
            name: "bob".into(),
            it: false,
            health: 0.0,
            facing: 3.5,
            ..before.clone()
        };
        assert_eq!(
            commands(|ctx| ctx.update(entity(), &before, &after)),
            [
                Command::SetStr {
                    handle: 1,
                    field: Runner::FIELD_NAME,
                    value: "bob".into()
                },
                Command::SetBool {
                    handle: 1,
                    field: Runner::FIELD_IT,
                    value: 0
                },
                Command::SetF32 {
                    handle: 1,
                    field: Runner::FIELD_HEALTH,
                    value: 0.0
                },
                Command::SetF32 {
                    handle: 1,
                    field: Runner::FIELD_FACING,
                    value: 3.5
                },
            ]
        );
        // Each other field alone, with its setter.
        let score = Runner {
            score: 4,
            ..before.clone()
        };
        let team = Runner {
            team: 7,
            ..before.clone()
        };
        let radius = Runner {
            radius: 2.0,
            ..before.clone()
        };
        let vx = Runner {
            vx: 1.0,
            ..before.clone()
        };
        assert_eq!(
            commands(|ctx| {
                ctx.update(entity(), &before, &score);
                ctx.update(entity(), &before, &team);
                ctx.update(entity(), &before, &radius);
                ctx.update(entity(), &before, &vx);
            }),
            [
                Command::SetUint {
                    handle: 1,
                    field: Runner::FIELD_SCORE,
                    value: 4
                },
                Command::SetSint {
                    handle: 1,
                    field: Runner::FIELD_TEAM,
                    value: 7
                },
                Command::SetF32 {
                    handle: 1,
                    field: Runner::FIELD_RADIUS,
                    value: 2.0
                },
                Command::SetF32 {
                    handle: 1,
                    field: Runner::FIELD_VX,
                    value: 1.0
                },
            ]
        );
    }

    #[test]
    fn floats_compare_by_bits() {
        let nan = Runner {
            radius: f32::NAN,
            ..Runner::default()
        };
        assert_eq!(commands(|ctx| ctx.update(entity(), &nan, &nan.clone())), []);
        let minus_zero = Runner {
            radius: -0.0,
            ..Runner::default()
        };
        let out = commands(|ctx| ctx.update(entity(), &Runner::default(), &minus_zero));
        assert!(
            matches!(
                out[..],
                [Command::SetF32 { field: 4, value, .. }]
                    if value.to_bits() == (-0.0f32).to_bits()
            ),
            "{out:?}"
        );
    }
}
