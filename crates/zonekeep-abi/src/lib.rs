//! The numbers of the host↔module ABI (docs/MODULES.md): the ABI version, the calls a host makes,
//! the command tags a module answers with, the log levels, and the limits both sides check (the
//! largest character; a durable call's key, function name and arguments). The module host
//! (`zonekeep-wasm`) and the guest SDK (`zonekeep-guest`) both take them from here, so a number
//! stands once.
//!
//! This crate owns only these constants. It must depend on nothing (it is compiled into every
//! module) and holds no logic: the byte layouts around the numbers live with each side's reader
//! and writer, checked against each other by their tests.

/// The ABI version (`zk_abi`).
pub const ABI_VERSION: i32 = 6;

/// The oldest ABI version a host still runs: version 6 only added an output
/// ([`tag::PUBLISH_LISTING`]) that a version 5 module never sends, so a host runs both.
pub const OLDEST_ABI_VERSION: i32 = 5;

/// The largest listing metadata a zone publishes ([`tag::PUBLISH_LISTING`]), as JSON text in
/// bytes.
pub const MAX_LISTING_BYTES: usize = 4096;

/// The largest character a player may have, in bytes (256 KiB): the host refuses a
/// [`tag::SET_CHARACTER`] past it, and the guest SDK refuses to write one.
pub const MAX_CHARACTER_BYTES: usize = 256 * 1024;

/// The longest key of a durable call ([`tag::CALL`]), in bytes; a key is at least 1 byte.
pub const MAX_CALL_KEY_LEN: usize = 512;

/// The longest function name of a durable call ([`tag::CALL`]), in bytes; a name is at least
/// 1 byte.
pub const MAX_CALL_FUNCTION_LEN: usize = 128;

/// The longest arguments of a durable call ([`tag::CALL`]) any zone may send, in bytes of JSON
/// text (64 KiB): the host refuses longer ones before reading them, and the guest SDK refuses to
/// send them. A zone's own bound (its config's `max_call_bytes`, on the compact JSON) may be
/// lower.
pub const MAX_CALL_ARGS_BYTES: usize = 64 * 1024;

/// The `u8 returning` of [`op::TRANSFER_IN`]: how the player comes.
pub mod returning {
    /// A player arrives by transfer from another zone.
    pub const ARRIVAL: u8 = 0;
    /// A transfer this run of the zone asked for failed: its player comes back, and the zone
    /// still holds what it knew of it.
    pub const RETURN: u8 = 1;
    /// A transfer of an earlier run of the zone was returned after the zone restarted, and its
    /// player joined again: the player comes back with the state it left with, and is new to
    /// this run (it has no entity here).
    pub const RETURN_NEW_TO_RUN: u8 = 2;
}

/// The calls (`op` of `zk_call`), docs/MODULES.md "Calls".
pub mod op {
    /// `u64 seed`, `str zone_id`, `str params`, `str fact_prefix`: build the zone.
    pub const CREATE: u32 = 1;
    /// `u32 player`, `str principal`, `u8 role`, `str claims`, `bytes character` (the player's
    /// character; empty when it has none: an observer, or a kind without characters): a
    /// participant asks to join.
    pub const JOIN: u32 = 2;
    /// `u32 player`, `u8 why`: a participant left.
    pub const LEAVE: u32 = 3;
    /// `u32 player`: a participant's connection was lost.
    pub const DROP: u32 = 4;
    /// `u32 player`: a dropped participant came back.
    pub const REJOIN: u32 = 5;
    /// `u32 player`, `bytes payload`: accept or refuse a raw input.
    pub const SANITIZE: u32 = 6;
    /// `u32 n`, then `n` × (`u32 player`, `bytes payload`): apply accepted inputs.
    pub const INPUTS: u32 = 7;
    /// `u64 time_us`, `u32 dt_us`, then the tick's inputs as in [`INPUTS`]: run one tick.
    pub const TICK: u32 = 8;
    /// `u64 tag`: a timer fired.
    pub const TIMER: u32 = 9;
    /// The save's bytes.
    pub const SAVE: u32 = 10;
    /// `u64 seed`, `str zone_id`, `str params`, `str fact_prefix`, `bytes save`: rebuild the
    /// zone from a save.
    pub const RESTORE: u32 = 11;
    /// Empty, or `u64`: the zone's state hash.
    pub const STATE_HASH: u32 = 12;
    /// `str key`, `u8 ok`, `str detail`: a fact was settled.
    pub const SETTLED: u32 = 13;
    /// Nothing after the tick; answers the zone settings the module asks for: `u32 tick_hz`,
    /// `u32 patch_every`, `u32 max_players`, `u32 max_observers`, `f32 pos_step`,
    /// `f32 view_radius`, `f32 cell_size` (0: the host's own), then optionally
    /// `u32 max_entities` (0: the host's), `u8 lasting`, `u32 state_version` (0: version 1) and
    /// `u8 characters` (1: the kind's players bring their characters) and `bytes contract` (the
    /// kind's client contract, docs/MODULES.md "The client contract"), each only after the one
    /// before it; or nothing (all the host's). Asked once, when the module is loaded, of an
    /// instance no zone uses.
    pub const CONFIG: u32 = 14;
    /// `u32 player`: a transfer the zone asked for leaves; answers `bytes state`, then commands.
    pub const TRANSFER_OUT: u32 = 15;
    /// `u32 player`, `str principal`, `str claims` (the player's claims as JSON: its ticket's,
    /// with those the other zone handed over merged over them), `str from_zone`,
    /// `u8 returning` (a [`crate::returning`] code), `bytes state`, `bytes character` (as in
    /// [`JOIN`]): a player arrives by transfer (or comes back after one failed); answered like
    /// [`JOIN`].
    pub const TRANSFER_IN: u32 = 16;
    /// `str from` (`"admin"` or `"zone:<id>"`), `u16 topic`, `bytes payload`: a zone message.
    pub const MESSAGE: u32 = 17;
    /// `str child`, `u16 topic`, `bytes payload`: a child zone's message (topic `0xFFFF`: its
    /// tier changed, payload `[from, to]`).
    pub const CHILD: u32 = 18;
    /// `u8 kind` (0 zone, 1 group), `str to`, `u16 topic`, `str reason`: a message the zone
    /// sent could not be delivered.
    pub const UNDELIVERABLE: u32 = 19;
    /// `u32 from_version`, `bytes save`: turn a save written under the older state version
    /// `from_version` into the module's own version. Answers a [`crate::migration`] code: `u8 0`
    /// (no migration from that version), `u8 1` then the migrated save (the rest of the output),
    /// or `u8 2` then `str reason` (the migration failed). Asked of an instance no zone uses,
    /// and only of a module whose CONFIG declared a state version.
    pub const MIGRATE: u32 = 20;
    /// `str key`, then a [`crate::call_result`] code: `u8 0` and `str value` (the sink's answer,
    /// JSON text), or `u8 1`, `str code` and `str message`: the result of a call the zone made
    /// with [`tag::CALL`](crate::tag::CALL) (on a later tick); answered with commands.
    pub const CALL_RESULT: u32 = 21;
}

/// The `u8` after the key of [`op::CALL_RESULT`]: how the call ended.
pub mod call_result {
    /// The effect took place: `str value` (the sink's answer, JSON text) follows.
    pub const OK: u8 = 0;
    /// The effect did not and will not take place: `str code`, `str message` follow.
    pub const ERR: u8 = 1;
    /// The error code of a call whose key was used before with another function or other
    /// arguments: the host's journal answers it without asking the sink.
    pub const KEY_REUSED: &str = "KEY_REUSED";
}

/// The first byte of [`op::MIGRATE`]'s answer.
pub mod migration {
    /// The module has no migration from that state version.
    pub const NONE: u8 = 0;
    /// The migrated save follows (the rest of the output).
    pub const MIGRATED: u8 = 1;
    /// The migration failed: `str reason` follows.
    pub const FAILED: u8 = 2;
}

/// Command tags (docs/MODULES.md, "Commands").
pub mod tag {
    /// `str name`, `u8 n`, then `n` × (`str field`, `u8 type`, params).
    pub const DECLARE_KIND: u8 = 1;
    /// `u32 handle`, `u16 kind`, `f32 x`, `f32 y`.
    pub const SPAWN: u8 = 2;
    /// `u32 handle`.
    pub const DESPAWN: u8 = 3;
    /// `u32 handle`, `f32 x`, `f32 y`.
    pub const SET_POS: u8 = 4;
    /// `u32 handle`, `u8 field`, `f32`.
    pub const SET_F32: u8 = 5;
    /// `u32 handle`, `u8 field`, `u32`.
    pub const SET_UINT: u8 = 6;
    /// `u32 handle`, `u8 field`, `i32`.
    pub const SET_SINT: u8 = 7;
    /// `u32 handle`, `u8 field`, `u8`.
    pub const SET_BOOL: u8 = 8;
    /// `u32 handle`, `u8 field`, `str`.
    pub const SET_STR: u8 = 9;
    /// `u32 handle`, `u8`.
    pub const SET_GLOBAL: u8 = 10;
    /// `u32 player`, `u32 handle` (0: none).
    pub const SET_CONTROL: u8 = 11;
    /// `u32 player`, `f32 radius`, `u8 focus`, `f32 fx`, `f32 fy`.
    pub const SET_VIEW: u8 = 12;
    /// `u32 player`, `str reason`.
    pub const KICK: u8 = 13;
    /// `u32 player` (0: everyone), `u16 topic`, `bytes payload`.
    pub const EVENT: u8 = 14;
    /// `u64 ticks`, `u64 tag`.
    pub const TIMER_AFTER: u8 = 15;
    /// `u64 ticks`, `u64 tag`.
    pub const TIMER_EVERY: u8 = 16;
    /// `u64 tag`.
    pub const TIMER_CANCEL: u8 = 17;
    /// `u16 code`, `str reason`.
    pub const REFUSE: u8 = 18;
    /// `str kind`, `str payload`, `str principal`, `str key`.
    pub const FACT: u8 = 19;
    /// `u32 handle`, `u32 n` (`u32::MAX`: everyone in range again), then `n` × `u32 player`.
    pub const SET_SEEN_BY: u8 = 20;
    /// `u32 player`, `str target`, `str claims` (a JSON object).
    pub const TRANSFER: u8 = 21;
    /// `u8 kind` (0 zone, 1 group, 2 parent), `str to` (empty for the parent), `u16 topic`,
    /// `bytes payload`.
    pub const SEND: u8 = 22;
    /// `str group`.
    pub const JOIN_GROUP: u8 = 23;
    /// `str group`.
    pub const LEAVE_GROUP: u8 = 24;
    /// `str parent` (empty: none).
    pub const SET_PARENT: u8 = 25;
    /// Nothing: save the zone at the end of this tick (a durable change).
    pub const SAVE_NOW: u8 = 26;
    /// `u32 player`, `bytes data`: replace the player's character (at most
    /// [`MAX_CHARACTER_BYTES`](crate::MAX_CHARACTER_BYTES)); the host writes it at the zone's
    /// next save, or at once after [`COMMIT_CHARACTER`].
    pub const SET_CHARACTER: u8 = 27;
    /// `u32 player`: ask the host to write the player's character at the end of this call.
    pub const COMMIT_CHARACTER: u8 = 28;
    /// `str key` (1..=[`MAX_CALL_KEY_LEN`](crate::MAX_CALL_KEY_LEN) bytes), `str function`
    /// (1..=[`MAX_CALL_FUNCTION_LEN`](crate::MAX_CALL_FUNCTION_LEN) bytes), `str args` (JSON
    /// text, at most [`MAX_CALL_ARGS_BYTES`](crate::MAX_CALL_ARGS_BYTES)): a durable call, whose
    /// result comes back with [`op::CALL_RESULT`](crate::op::CALL_RESULT) on a later tick.
    pub const CALL: u8 = 29;
    /// `u8 open` (0 or 1), `str metadata` (a JSON object, at most
    /// [`MAX_LISTING_BYTES`](crate::MAX_LISTING_BYTES)): what the zone publishes for a lobby
    /// listing it (version 6).
    pub const PUBLISH_LISTING: u8 = 30;
}

/// Log levels of the `zonekeep.log` import.
pub mod level {
    /// Trace.
    pub const TRACE: i32 = 0;
    /// Debug.
    pub const DEBUG: i32 = 1;
    /// Info.
    pub const INFO: i32 = 2;
    /// Warn.
    pub const WARN: i32 = 3;
    /// Error.
    pub const ERROR: i32 = 4;
    /// A panic's message: the call that logs it is about to trap.
    pub const PANIC: i32 = 5;
}
