//! Drive a zone natively, as the host would: [`TestHost`] encodes each call's input, runs
//! [`dispatch`] and decodes the command buffer into [`Command`]s, and keeps the players'
//! characters ([`CharacterWrite`]) and the zone's durable calls ([`Call`]) as a host keeps them.
//! For unit tests of zone modules; nothing here is used by the exports.

use crate::dispatch::{dispatch, Fatal, Guest, Op};
use crate::wire::{DecodeError, Reader};
use crate::zone::{LeaveReason, MigrateError, Role, Zone};

mod calls;
mod characters;
mod command;
pub mod input;

pub use calls::Call;
use calls::HostCalls;
pub use characters::CharacterWrite;
use characters::HostCharacters;
pub use command::{decode_commands, Command};

/// A stand-in host for one zone: keeps the tick and the clock, and turns each call into its
/// input bytes and its output back into values.
///
/// In a kind with characters ([`Settings::characters`](crate::Settings#structfield.characters))
/// it keeps them as a host does: a player joins with one ([`join`](Self::join): a new, empty
/// one; [`join_with_character`](Self::join_with_character): one it had), the zone's
/// SET_CHARACTER and COMMIT_CHARACTER commands change it (a change the host would refuse is
/// ignored), and [`drain_character_writes`](Self::drain_character_writes) answers what the host
/// would write to its store: at a [`save`](Self::save) the characters changed since their last
/// write, at once those the zone committed, and last, as a release, a player's as it leaves or
/// its join is refused.
///
/// It keeps the zone's durable calls as a host does too: the zone's CALL commands put calls in
/// flight, [`drain_calls`](Self::drain_calls) hands out the new ones and
/// [`call_result`](Self::call_result) delivers a result.
///
/// ```
/// use zonekeep_guest::testing::TestHost;
/// use zonekeep_guest::{Ctx, LeaveReason, PlayerId, Settings, Zone};
///
/// /// Each input earns its player a coin, kept in the player's character.
/// struct Mine;
///
/// impl Zone for Mine {
///     type Input = Vec<u8>;
///     fn settings() -> Settings {
///         Settings::new().characters()
///     }
///     fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
///         Ok(Mine)
///     }
///     fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _input: Vec<u8>) {
///         let coins = ctx.character(player).map_or(0, |c| c.len());
///         let _ = ctx.set_character(player, vec![b'$'; coins + 1]);
///     }
///     fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
/// }
///
/// let mut host = TestHost::<Mine>::new(50_000);
/// host.create(1, "mine-1", "{}").unwrap();
/// host.join_with_character(1, "ann", b"$$").unwrap();
/// host.input(1, &[]).unwrap();
/// assert_eq!(host.character(1), Some(&b"$$$"[..]));
/// host.leave(1, LeaveReason::Left).unwrap();
/// let writes = host.drain_character_writes();
/// assert_eq!((writes[0].data.as_slice(), writes[0].release), (&b"$$$"[..], true));
/// ```
pub struct TestHost<Z> {
    guest: Guest<Z>,
    tick: u64,
    dt_us: u32,
    out: Vec<u8>,
    characters: HostCharacters,
    calls: HostCalls,
}

impl<Z: Zone> TestHost<Z> {
    /// A host stepping `dt_us` microseconds a tick, at tick 0, before CREATE.
    pub fn new(dt_us: u32) -> Self {
        Self {
            guest: Guest::new(),
            tick: 0,
            dt_us,
            out: Vec::new(),
            characters: HostCharacters::default(),
            calls: HostCalls::default(),
        }
    }

    /// The zone, once created.
    pub fn zone(&self) -> Option<&Z> {
        self.guest.zone()
    }

    /// The module's state (zone and SDK).
    pub fn guest(&self) -> &Guest<Z> {
        &self.guest
    }

    /// The last tick run.
    pub fn tick_number(&self) -> u64 {
        self.tick
    }

    /// Run `op` on raw `input` bytes; the raw output.
    pub fn call_raw(&mut self, op: u32, input: &[u8]) -> Result<Vec<u8>, Fatal> {
        dispatch(&mut self.guest, op, input, &mut self.out)?;
        Ok(self.out.clone())
    }

    /// Run `op` on `input`; the decoded commands (their character commands applied to the
    /// host's characters, their calls made).
    ///
    /// # Panics
    /// If the output is not a valid command buffer (a bug of the SDK, which the test shows).
    pub fn call(&mut self, op: Op, input: &[u8]) -> Result<Vec<Command>, Fatal> {
        let out = self.call_raw(op.number(), input)?;
        match decode_commands(&out) {
            Ok(commands) => {
                self.apply(&commands);
                Ok(commands)
            }
            Err(e) => panic!("{op:?} wrote a bad command buffer: {e}"),
        }
    }

    /// What the host keeps of a call's commands: the characters they change, the calls they
    /// make.
    fn apply(&mut self, commands: &[Command]) {
        self.characters.apply(commands);
        self.calls.apply(commands);
    }

    /// `player`'s character as the host holds it (the zone's changes applied); `None` when it
    /// has none here.
    pub fn character(&self, player: u32) -> Option<&[u8]> {
        self.characters.get(player)
    }

    /// The character writes due, oldest first, as the host would make them to its store (see
    /// [`TestHost`]).
    pub fn drain_character_writes(&mut self) -> Vec<CharacterWrite> {
        self.characters.drain()
    }

    /// CREATE.
    pub fn create(
        &mut self,
        seed: u64,
        zone_id: &str,
        params: &str,
    ) -> Result<Vec<Command>, Fatal> {
        let input = input::create(self.tick, seed, zone_id, params);
        self.call(Op::Create, &input)
    }

    /// JOIN, with no claims; a player of a kind with characters brings a new, empty one.
    pub fn join(
        &mut self,
        player: u32,
        principal: &str,
        role: Role,
    ) -> Result<Vec<Command>, Fatal> {
        self.join_with_claims(player, principal, role, "{}")
    }

    /// JOIN with the ticket's `claims` (JSON object text); a player of a kind with characters
    /// brings a new, empty one.
    pub fn join_with_claims(
        &mut self,
        player: u32,
        principal: &str,
        role: Role,
        claims: &str,
    ) -> Result<Vec<Command>, Fatal> {
        self.join_as(player, principal, role, claims, &[])
    }

    /// JOIN of a player, with no claims, bringing `character` (the one its store holds). In a
    /// kind without characters the host gives none, as a real host does: the zone is passed an
    /// empty one and the host keeps nothing.
    pub fn join_with_character(
        &mut self,
        player: u32,
        principal: &str,
        character: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        self.join_as(player, principal, Role::Player, "{}", character)
    }

    fn join_as(
        &mut self,
        player: u32,
        principal: &str,
        role: Role,
        claims: &str,
        character: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        let keeps = role == Role::Player && Z::settings().characters;
        let character = if keeps { character } else { &[] };
        let input = input::join(self.tick, player, principal, role, claims, character);
        if keeps {
            self.characters.admit(player, character);
        }
        let commands = self.call(Op::Join, &input)?;
        if commands.iter().any(|c| matches!(c, Command::Refuse { .. })) {
            // A refused join hands its character back.
            self.characters.release(player);
        }
        Ok(commands)
    }

    /// LEAVE; the player's character is handed back after it (as a releasing write).
    pub fn leave(&mut self, player: u32, why: LeaveReason) -> Result<Vec<Command>, Fatal> {
        let input = input::leave(self.tick, player, why);
        let commands = self.call(Op::Leave, &input)?;
        self.characters.release(player);
        Ok(commands)
    }

    /// DROP.
    pub fn drop_player(&mut self, player: u32) -> Result<Vec<Command>, Fatal> {
        let input = input::player(self.tick, player);
        self.call(Op::Drop, &input)
    }

    /// REJOIN.
    pub fn rejoin(&mut self, player: u32) -> Result<Vec<Command>, Fatal> {
        let input = input::player(self.tick, player);
        self.call(Op::Rejoin, &input)
    }

    /// SANITIZE: `Ok(None)` accepted, `Ok(Some((code, reason)))` refused.
    pub fn sanitize(
        &mut self,
        player: u32,
        payload: &[u8],
    ) -> Result<Option<(u16, String)>, Fatal> {
        let input = input::payload(self.tick, player, payload);
        let out = self.call_raw(Op::Sanitize.number(), &input)?;
        if out.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(&out);
        let refusal = r
            .u16()
            .and_then(|code| Ok((code, r.str()?.to_owned())))
            .and_then(|refusal| r.finish().map(|()| refusal));
        match refusal {
            Ok(refusal) => Ok(Some(refusal)),
            Err(e) => panic!("SANITIZE wrote a bad refusal: {e}"),
        }
    }

    /// INPUTS with one input (applied at the next tick's number, as the host does inside a
    /// tick).
    pub fn input(&mut self, player: u32, payload: &[u8]) -> Result<Vec<Command>, Fatal> {
        let input = input::inputs(self.tick + 1, &[(player, payload)]);
        self.call(Op::Inputs, &input)
    }

    /// TICK: advance the tick by one and run it.
    pub fn tick(&mut self) -> Result<Vec<Command>, Fatal> {
        self.tick += 1;
        let time_us = self.tick.saturating_mul(u64::from(self.dt_us));
        let input = input::tick(self.tick, time_us, self.dt_us);
        self.call(Op::Tick, &input)
    }

    /// TIMER (at the current tick).
    pub fn timer(&mut self, tag: u64) -> Result<Vec<Command>, Fatal> {
        let input = input::timer(self.tick, tag);
        self.call(Op::Timer, &input)
    }

    /// SAVE: the save's bytes (the SDK's header, then the zone's). The characters changed
    /// since their last write are written with it.
    pub fn save(&mut self) -> Result<Vec<u8>, Fatal> {
        let input = input::bare(self.tick);
        let save = self.call_raw(Op::Save.number(), &input)?;
        self.characters.commit_dirty();
        Ok(save)
    }

    /// RESTORE, at the current tick.
    pub fn restore(
        &mut self,
        seed: u64,
        zone_id: &str,
        params: &str,
        save: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        let input = input::restore(self.tick, seed, zone_id, params, save);
        self.call(Op::Restore, &input)
    }

    /// STATE_HASH.
    ///
    /// # Panics
    /// If the output is neither empty nor 8 bytes.
    pub fn state_hash(&mut self) -> Result<Option<u64>, Fatal> {
        let input = input::bare(self.tick);
        let out = self.call_raw(Op::StateHash.number(), &input)?;
        if out.is_empty() {
            return Ok(None);
        }
        match <[u8; 8]>::try_from(out.as_slice()) {
            Ok(bytes) => Ok(Some(u64::from_le_bytes(bytes))),
            Err(_) => panic!("STATE_HASH wrote {} bytes", out.len()),
        }
    }

    /// SETTLED.
    pub fn settled(&mut self, key: &str, ok: bool, detail: &str) -> Result<Vec<Command>, Fatal> {
        let input = input::settled(self.tick, key, ok, detail);
        self.call(Op::Settled, &input)
    }

    /// TRANSFER_OUT: the state the zone hands out, and the commands after it. The player's
    /// character goes back right after, as the hook left it (a releasing write): the zone it
    /// moves to takes it from there.
    pub fn transfer_out(&mut self, player: u32) -> Result<(Vec<u8>, Vec<Command>), Fatal> {
        let out = self.call_raw(Op::TransferOut.number(), &input::player(self.tick, player))?;
        let mut r = Reader::new(&out);
        let bad = |error| Fatal::Malformed {
            op: Op::TransferOut,
            error,
        };
        let state = r.bytes().map_err(bad)?.to_vec();
        let commands = decode_commands(r.rest()).map_err(bad)?;
        self.apply(&commands);
        self.characters.release(player);
        Ok((state, commands))
    }

    /// TRANSFER_IN: a player arrives with `state`, or comes back: `returning` is one of
    /// [`zonekeep_abi::returning`]'s codes (re-exported as [`crate::returning`]). In a kind with
    /// characters, a player coming back takes again the character its move out gave back, if
    /// that write was not drained yet; otherwise (and for an arrival) it brings a new, empty
    /// one: see [`transfer_in_with_character`](Self::transfer_in_with_character).
    pub fn transfer_in(
        &mut self,
        player: u32,
        principal: &str,
        claims: &str,
        from_zone: &str,
        returning: u8,
        state: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        self.transfer_in_as(player, principal, claims, from_zone, returning, state, &[])
    }

    /// TRANSFER_IN, with no claims, of a player bringing `character` (the one its host took
    /// from the store for this zone). As with [`transfer_in`](Self::transfer_in), a player
    /// coming back whose move out's write was not drained yet takes that one instead (it is
    /// newer); in a kind without characters the zone is passed an empty one.
    pub fn transfer_in_with_character(
        &mut self,
        player: u32,
        principal: &str,
        from_zone: &str,
        returning: u8,
        state: &[u8],
        character: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        self.transfer_in_as(
            player, principal, "{}", from_zone, returning, state, character,
        )
    }

    // One argument per field of the call, in the ABI's order.
    #[allow(clippy::too_many_arguments)]
    fn transfer_in_as(
        &mut self,
        player: u32,
        principal: &str,
        claims: &str,
        from_zone: &str,
        returning: u8,
        state: &[u8],
        character: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        let arrival = returning == crate::returning::ARRIVAL;
        let taken_back = if arrival {
            None
        } else {
            self.characters.take_back(player)
        };
        let character = match taken_back {
            Some(data) => data,
            None if Z::settings().characters => {
                self.characters.admit(player, character);
                character.to_vec()
            }
            None => Vec::new(),
        };
        let input = input::transfer_in(
            self.tick, player, principal, claims, from_zone, returning, state, &character,
        );
        let commands = self.call(Op::TransferIn, &input)?;
        if arrival && commands.iter().any(|c| matches!(c, Command::Refuse { .. })) {
            // A refused arrival hands its character back; a returning player stays.
            self.characters.release(player);
        }
        Ok(commands)
    }

    /// MESSAGE from `from` (`"admin"` or `"zone:<id>"`).
    pub fn message(
        &mut self,
        from: &str,
        topic: u16,
        payload: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        let input = input::message(self.tick, from, topic, payload);
        self.call(Op::Message, &input)
    }

    /// CHILD from the zone `child`.
    pub fn child(
        &mut self,
        child: &str,
        topic: u16,
        payload: &[u8],
    ) -> Result<Vec<Command>, Fatal> {
        let input = input::message(self.tick, child, topic, payload);
        self.call(Op::Child, &input)
    }

    /// UNDELIVERABLE: a message to `to` could not be delivered.
    pub fn undeliverable(
        &mut self,
        group: bool,
        to: &str,
        topic: u16,
        reason: &str,
    ) -> Result<Vec<Command>, Fatal> {
        let input = input::undeliverable(self.tick, group, to, topic, reason);
        self.call(Op::Undeliverable, &input)
    }

    /// MIGRATE: `save` (a whole save, as [`save`](Self::save) returns it) written under the older
    /// state version `from`, as the zone's [`Zone::migrate`] turns it into a save of its own
    /// version (the SDK's header kept), ready for [`restore`](Self::restore); or why not. Asked
    /// as the host asks it, of the module and not of this host's zone, which it leaves alone.
    ///
    /// ```
    /// use zonekeep_guest::testing::TestHost;
    /// use zonekeep_guest::{Ctx, MigrateError, Zone};
    ///
    /// /// Version 1 saved a `u8`; version 2 saves a `u16`.
    /// struct Counter(u16);
    ///
    /// impl Zone for Counter {
    ///     type Input = Vec<u8>;
    ///     fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
    ///         Ok(Self(0))
    ///     }
    ///     fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    ///     fn save(&self) -> Vec<u8> {
    ///         self.0.to_le_bytes().to_vec()
    ///     }
    ///     fn restore(_ctx: &mut Ctx<'_>, _params: &str, b: &[u8]) -> Result<Self, String> {
    ///         let b: [u8; 2] = b.try_into().map_err(|_| "two bytes".to_owned())?;
    ///         Ok(Self(u16::from_le_bytes(b)))
    ///     }
    ///     fn migrate(from: u32, save: &[u8]) -> Result<Vec<u8>, MigrateError> {
    ///         match (from, save) {
    ///             (1, [n]) => Ok(u16::from(*n).to_le_bytes().to_vec()),
    ///             (1, _) => Err(MigrateError::Failed("one byte".into())),
    ///             _ => Err(MigrateError::NoMigration),
    ///         }
    ///     }
    /// }
    ///
    /// // A save as version 1 wrote it: the SDK's header, then the zone's byte.
    /// let mut v1 = TestHost::<Counter>::new(50_000);
    /// v1.create(1, "c-1", "{}").unwrap();
    /// let mut save = v1.save().unwrap();
    /// save.truncate(save.len() - 2);
    /// save.push(7);
    ///
    /// let mut v2 = TestHost::<Counter>::new(50_000);
    /// let migrated = v2.migrate(1, &save).unwrap().unwrap();
    /// v2.restore(1, "c-1", "{}", &migrated).unwrap();
    /// assert_eq!(v2.zone().unwrap().0, 7);
    /// assert_eq!(v2.migrate(5, &save).unwrap(), Err(MigrateError::NoMigration));
    /// ```
    ///
    /// # Panics
    /// If the answer is malformed (a bug of the SDK, which the test shows).
    pub fn migrate(
        &mut self,
        from: u32,
        save: &[u8],
    ) -> Result<Result<Vec<u8>, MigrateError>, Fatal> {
        let out = self.call_raw(Op::Migrate.number(), &input::migrate(from, save))?;
        let mut r = Reader::new(&out);
        let read = |r: &mut Reader<'_>| -> Result<Result<Vec<u8>, MigrateError>, DecodeError> {
            Ok(match r.u8()? {
                zonekeep_abi::migration::NONE => {
                    r.finish()?;
                    Err(MigrateError::NoMigration)
                }
                zonekeep_abi::migration::MIGRATED => Ok(r.rest().to_vec()),
                zonekeep_abi::migration::FAILED => {
                    let why = r.str()?.to_owned();
                    r.finish()?;
                    Err(MigrateError::Failed(why))
                }
                _ => return Err(DecodeError::Invalid("unknown MIGRATE answer")),
            })
        };
        match read(&mut r) {
            Ok(answer) => Ok(answer),
            Err(e) => panic!("MIGRATE wrote a bad answer: {e}"),
        }
    }

    /// CONFIG: the settings the zone asks for.
    ///
    /// # Panics
    /// If the output is not the seven settings, or the seven with `max_entities`, `lasting`,
    /// `state_version`, `characters`, the contract and `observer_patch_every` (each only after
    /// the one before).
    pub fn settings(&mut self) -> Result<crate::Settings, Fatal> {
        let out = self.call_raw(Op::Config.number(), &input::bare(self.tick))?;
        let mut r = Reader::new(&out);
        let read = |r: &mut Reader<'_>| -> Result<crate::Settings, DecodeError> {
            let mut s = crate::Settings {
                tick_hz: r.u32()?,
                patch_every: r.u32()?,
                max_players: r.u32()?,
                max_observers: r.u32()?,
                pos_step: r.f32()?,
                view_radius: r.f32()?,
                cell_size: r.f32()?,
                lasting: false,
                state_version: 0,
                characters: false,
                observer_patch_every: 0,
            };
            if !r.is_empty() {
                let _max_entities = r.u32()?;
                s.lasting = r.bool()?;
            }
            if !r.is_empty() {
                s.state_version = r.u32()?;
            }
            if !r.is_empty() {
                s.characters = r.bool()?;
            }
            if !r.is_empty() {
                // The kind's contract, which `Zone::contract` gives a test directly.
                let _contract = r.bytes()?;
            }
            if !r.is_empty() {
                s.observer_patch_every = r.u32()?;
            }
            r.finish()?;
            Ok(s)
        };
        match read(&mut r) {
            Ok(s) => Ok(s),
            Err(e) => panic!("CONFIG wrote bad settings: {e}"),
        }
    }
}
