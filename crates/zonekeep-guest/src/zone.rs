//! The [`Zone`] trait a module implements, its hook types, and input decoding ([`Input`]).

use std::fmt;

use zonekeep_protocol::contract::Contract;

use crate::call::CallResult;
use crate::ctx::Ctx;
use crate::settings::Settings;
use crate::wire::{DecodeError, Reader};

/// A participant's id, assigned by the host (from 1, never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlayerId(pub u32);

impl fmt::Display for PlayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a participant may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Controls something; may send inputs.
    Player,
    /// Watches read-only; the host refuses its inputs.
    Observer,
}

/// A participant asking to join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Player {
    /// Host-assigned id.
    pub id: PlayerId,
    /// The verified identity from its ticket.
    pub principal: String,
    /// Player or observer.
    pub role: Role,
    /// The ticket's claims other than the principal, as JSON object text (`{}` when none), as
    /// the ticket's signer wrote them: a display name, a team... Verified by the host's ticket
    /// check, not by this zone.
    pub claims: String,
}

/// Why a participant left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaveReason {
    /// Left on purpose.
    Left,
    /// Connection lost and not restored within the reconnect grace.
    Dropped,
    /// Removed by the zone or the host.
    Kicked,
    /// Moved to another zone.
    Transferred,
}

/// A zone's refusal of a join or of an input, with its own code (the meaning of codes is the
/// game's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Game-defined reason code.
    pub code: u16,
    /// Human-readable reason.
    pub reason: String,
}

impl Refusal {
    /// A refusal with `code` and `reason`.
    pub fn new(code: u16, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason, self.code)
    }
}

/// Why [`Zone::migrate`] gives no save of the zone's own state version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrateError {
    /// The zone has no migration from that state version (the default). The host then treats
    /// the save as one it cannot read: a deploy is refused and the running zones stay on the
    /// module they had; a lasting world does not start and keeps its save; another zone starts
    /// fresh.
    NoMigration,
    /// The migration failed, with why (a save it finds corrupt, a value out of range...). A
    /// deploy is refused with this reason; a zone starting from the save does not start, and
    /// the save is kept.
    Failed(String),
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoMigration => f.write_str("no migration from that state version"),
            Self::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for MigrateError {}

/// An old save that does not decode is a failed migration, so `?` works on a [`Reader`].
impl From<DecodeError> for MigrateError {
    fn from(e: DecodeError) -> Self {
        Self::Failed(format!("the old save does not decode: {e}"))
    }
}

/// How a player arrives through [`Zone::transfer_in`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival<'a> {
    /// The state the zone it comes from handed out.
    pub state: &'a [u8],
    /// The zone it comes from (for a return, the zone it failed to reach).
    pub from_zone: &'a str,
    /// The claims that zone handed over, as JSON object text.
    pub claims: &'a str,
    /// Coming back after a transfer that failed.
    pub returning: bool,
    /// A returning player is new to this run of the zone: its move was returned after the zone
    /// restarted and it joined again, so it has no entity here and `state` is all it carried.
    /// Always false when not `returning`.
    pub new_to_run: bool,
}

/// Who sent a zone message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageFrom<'a> {
    /// Another zone, by id.
    Zone(&'a str),
    /// The operator.
    Admin,
}

/// An activity tier, as a child's tier change reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Players present.
    Hot,
    /// Empty for a while.
    Idle,
    /// Saved and unloaded.
    Dormant,
}

/// What a child zone told its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEvent<'a> {
    /// Its tier changed.
    Tier {
        /// Before.
        from: Tier,
        /// After.
        to: Tier,
    },
    /// It sent a message with [`Ctx::to_parent`].
    Message {
        /// Game-defined topic.
        topic: u16,
        /// Game-defined bytes.
        payload: &'a [u8],
    },
}

/// The code the default [`Zone::sanitize`] refuses an undecodable payload with.
pub const REFUSE_UNDECODABLE: u16 = u16::MAX;

/// An input payload decoded from the bytes a client sent.
///
/// `#[derive(Input)]` implements it for a struct with named fields of `u8`, `u16`, `u32`, `u64`,
/// `i8`, `i16`, `i32`, `f32` and `bool`, read in field order, little-endian, with no byte left
/// over:
///
/// ```
/// use zonekeep_guest::Input;
///
/// #[derive(Debug, PartialEq, Input)]
/// struct Move {
///     dx: i8,
///     dy: i8,
/// }
///
/// assert_eq!(Move::decode(&[1, 0xff]), Ok(Move { dx: 1, dy: -1 }));
/// assert!(Move::decode(&[1]).is_err());
/// ```
///
/// Only named fields of those types are accepted:
///
/// ```compile_fail
/// #[derive(zonekeep_guest::Input)]
/// struct Tuple(u8, u8);
/// ```
///
/// ```compile_fail
/// #[derive(zonekeep_guest::Input)]
/// struct Text {
///     s: String,
/// }
/// ```
pub trait Input: Sized {
    /// Decode a whole payload.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;
}

impl Input for Vec<u8> {
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(bytes.to_vec())
    }
}

/// A type `#[derive(Input)]` can read as a field.
pub trait InputField: Sized {
    /// Read one value.
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

macro_rules! input_field {
    ($($t:ident),*) => {$(
        impl InputField for $t {
            fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                r.$t()
            }
        }
    )*};
}

input_field!(u8, u16, u32, u64, i8, i16, i32, f32, bool);

/// One zone: game code run by the host in its own WebAssembly instance, with the hooks of a
/// native zone. Export it with [`export_zone!`](crate::export_zone).
///
/// Hooks run one at a time. Within a tick the host applies each player's inputs
/// ([`on_input`](Zone::on_input)), runs [`tick`](Zone::tick), then fires due timers
/// ([`on_timer`](Zone::on_timer)). Take time only from [`Ctx::tick`]/[`Ctx::time`] and
/// randomness only from [`Ctx::rng`]: the same calls then give the same state.
pub trait Zone: Sized {
    /// A sanitized input, produced by [`sanitize`](Zone::sanitize).
    type Input: Input;

    /// The zone settings its rules depend on (tick rate, position quantum, view…), asked once
    /// when the host loads the module; the default leaves every one to the host.
    fn settings() -> Settings {
        Settings::default()
    }

    /// What this kind's clients send and hear besides entities: its input payload layouts,
    /// event types and named constants. The host reads it when it loads the module, and
    /// `zonekeep codegen --kind KIND --lang ts|cs|rust` writes typed client code from it. The
    /// default declares nothing.
    fn contract() -> Contract {
        Contract::new()
    }

    /// Build the zone from its create params (JSON text). Declare the entity kinds here. An
    /// `Err` stops the zone with the message.
    fn create(ctx: &mut Ctx<'_>, params: &str) -> Result<Self, String>;

    /// A participant asks to join (see [`Player::role`]); an `Err` turns it away.
    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        let _ = (ctx, player);
        Ok(())
    }

    /// A participant has left.
    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, why: LeaveReason) {
        let _ = (ctx, player, why);
    }

    /// A participant's connection was lost; it keeps its place during the reconnect grace.
    fn on_drop(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let _ = (ctx, player);
    }

    /// A dropped participant came back within the grace.
    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let _ = (ctx, player);
    }

    /// Decode, validate and clamp a raw input. Called when the input arrives (a refusal is
    /// reported to the client and the input is never applied) and again when it is applied,
    /// before [`on_input`](Zone::on_input): it must not change the simulation. The default
    /// decodes with [`Input::decode`] and refuses undecodable payloads with
    /// [`REFUSE_UNDECODABLE`].
    fn sanitize(&mut self, player: PlayerId, payload: &[u8]) -> Result<Self::Input, Refusal> {
        let _ = player;
        Self::Input::decode(payload)
            .map_err(|e| Refusal::new(REFUSE_UNDECODABLE, format!("undecodable input: {e}")))
    }

    /// Apply one sanitized input (inside a tick, before [`tick`](Zone::tick)).
    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: Self::Input) {
        let _ = (ctx, player, input);
    }

    /// Advance the simulation by one step of [`Ctx::dt`].
    fn tick(&mut self, ctx: &mut Ctx<'_>);

    /// A timer set with [`Ctx::timer_after`] or [`Ctx::timer_every`] fired.
    fn on_timer(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        let _ = (ctx, tag);
    }

    /// The zone's own state as bytes, for a save (the SDK adds its RNG state in front). The
    /// default saves nothing. Participants are not part of a save: after a restore they join
    /// again.
    fn save(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Rebuild the zone from bytes produced by [`save`](Zone::save), instead of
    /// [`create`](Zone::create): declare the same kinds and spawn the world again. An `Err`
    /// stops the zone with the message. The default refuses.
    fn restore(ctx: &mut Ctx<'_>, params: &str, bytes: &[u8]) -> Result<Self, String> {
        let _ = (ctx, params, bytes);
        Err("this zone kind cannot be restored from a save: it implements no Zone::restore (implement save and restore to be hot-deployable and to come back after a restart)".to_owned())
    }

    /// Turn the zone bytes of a save written under the older state version `from` into bytes of
    /// this module's state version ([`Settings::state_version`]), which
    /// [`restore`](Zone::restore) then reads. The host asks it of an instance no zone uses, only
    /// for a save older than the module's version: when a deploy carries running zones into a
    /// module of a higher state version, and when a zone starts from such a save. `save` and the
    /// answer are the zone's own bytes; the SDK keeps its part of the save (the RNG, the fact
    /// keys made) as it was.
    ///
    /// Answer [`MigrateError::NoMigration`] (the default) for a version it cannot read, and
    /// [`MigrateError::Failed`] when the save cannot be migrated; either refuses the deploy, and
    /// the zones stay on the module they had. Migrate from every version still saved anywhere,
    /// one step after another if need be: a version-3 module may be handed a version-1 save.
    ///
    /// ```
    /// use zonekeep_guest::{Ctx, MigrateError, Reader, Settings, Writer, Zone};
    ///
    /// /// Version 2 of a score keeper: version 1 saved the score as a `u32`; version 2 saves
    /// /// it as a `u64`, then the level.
    /// struct Score {
    ///     score: u64,
    ///     level: u8,
    /// }
    ///
    /// impl Zone for Score {
    ///     type Input = Vec<u8>;
    ///
    ///     fn settings() -> Settings {
    ///         Settings::new().state_version(2)
    ///     }
    ///
    ///     fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
    ///         Ok(Self { score: 0, level: 1 })
    ///     }
    ///
    ///     fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    ///
    ///     fn save(&self) -> Vec<u8> {
    ///         let mut w = Writer::new();
    ///         w.u64(self.score).u8(self.level);
    ///         w.into_vec()
    ///     }
    ///
    ///     fn restore(_ctx: &mut Ctx<'_>, _params: &str, bytes: &[u8]) -> Result<Self, String> {
    ///         let mut r = Reader::new(bytes);
    ///         let score = r.u64().map_err(|e| e.to_string())?;
    ///         let level = r.u8().map_err(|e| e.to_string())?;
    ///         Ok(Self { score, level })
    ///     }
    ///
    ///     fn migrate(from: u32, save: &[u8]) -> Result<Vec<u8>, MigrateError> {
    ///         match from {
    ///             1 => {
    ///                 let mut r = Reader::new(save);
    ///                 let score = r.u32()?;
    ///                 r.finish()?;
    ///                 let mut w = Writer::new();
    ///                 w.u64(u64::from(score)).u8(1);
    ///                 Ok(w.into_vec())
    ///             }
    ///             _ => Err(MigrateError::NoMigration),
    ///         }
    ///     }
    /// }
    ///
    /// assert_eq!(Score::migrate(1, &41u32.to_le_bytes()), Ok(vec![41, 0, 0, 0, 0, 0, 0, 0, 1]));
    /// assert!(matches!(Score::migrate(1, &[1]), Err(MigrateError::Failed(_))));
    /// assert_eq!(Score::migrate(7, &[]), Err(MigrateError::NoMigration));
    /// ```
    fn migrate(from: u32, save: &[u8]) -> Result<Vec<u8>, MigrateError> {
        let _ = (from, save);
        Err(MigrateError::NoMigration)
    }

    /// A hash of the whole simulation state, for determinism checks; `None` (the default): the
    /// host hashes the replicated world.
    fn state_hash(&self) -> Option<u64> {
        None
    }

    /// A transfer asked with [`Ctx::transfer`] leaves: despawn the player's entity and return
    /// the state the other zone needs (at most 256 KiB). The default returns nothing.
    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        let _ = (ctx, player);
        Vec::new()
    }

    /// A player arrives by transfer (`arrival.returning` false, in place of
    /// [`on_join`](Zone::on_join); its connection arrives later), or comes back after a transfer
    /// that failed (`returning` true, with the state [`transfer_out`](Zone::transfer_out)
    /// returned; the zone must take it back, a refusal is ignored; `new_to_run` when the zone
    /// restarted since and the player joined again, with no entity here). The default takes a
    /// player returning to the run it left without doing anything, and hands an arrival, or a
    /// returning player new to this run, to `on_join`.
    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: Player,
        arrival: Arrival<'_>,
    ) -> Result<(), Refusal> {
        if arrival.returning && !arrival.new_to_run {
            return Ok(());
        }
        self.on_join(ctx, player)
    }

    /// A message from another zone or the operator (never a player: clients only reach
    /// [`on_input`](Zone::on_input)).
    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: MessageFrom<'_>, topic: u16, payload: &[u8]) {
        let _ = (ctx, from, topic, payload);
    }

    /// A child zone (one that named this zone its parent) changed tier or sent a message with
    /// [`Ctx::to_parent`].
    fn on_child(&mut self, ctx: &mut Ctx<'_>, child: &str, event: ChildEvent<'_>) {
        let _ = (ctx, child, event);
    }

    /// A message this zone sent could not be delivered (`to_group`: it went to a group).
    fn on_undeliverable(
        &mut self,
        ctx: &mut Ctx<'_>,
        to: &str,
        to_group: bool,
        topic: u16,
        reason: &str,
    ) {
        let _ = (ctx, to, to_group, topic, reason);
    }

    /// A fact emitted with [`Ctx::emit_fact`] was settled: `Ok` with the sink's JSON result, or
    /// `Err` with the refusal.
    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, key: &str, outcome: Result<&str, &str>) {
        let _ = (ctx, key, outcome);
    }

    /// A call made with [`Ctx::call`] has its result: [`CallResult::Ok`] with the sink's answer
    /// (JSON text), or [`CallResult::Err`] with a code and a message. It comes on a tick after
    /// the call, at the tick's start (before its inputs). Counted against the zone's saved
    /// state, each call's result arrives once: after a restore, a call still in flight in the
    /// host's snapshot is sent again and its result arrives here then, so keep what the result
    /// completes in the zone's own save, under the key. The default ignores results.
    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &str, result: &CallResult) {
        let _ = (ctx, key, result);
    }
}
