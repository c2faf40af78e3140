//! [`Call`]: a call's input, read whole before any hook runs.

use super::Op;
use crate::call::CallResult;
use crate::wire::{DecodeError, Reader};
use crate::zone::{LeaveReason, PlayerId, Role};
use zonekeep_abi::{call_result, returning};

/// A call's fields after the tick.
pub(super) enum Call<'a> {
    Create {
        seed: u64,
        zone_id: &'a str,
        params: &'a str,
        fact_prefix: &'a str,
    },
    Join {
        player: PlayerId,
        principal: &'a str,
        role: Role,
        claims: &'a str,
        /// The player's character (empty when it has none).
        character: &'a [u8],
    },
    Leave {
        player: PlayerId,
        why: LeaveReason,
    },
    Drop {
        player: PlayerId,
    },
    Rejoin {
        player: PlayerId,
    },
    Sanitize {
        player: PlayerId,
        payload: &'a [u8],
    },
    Inputs {
        inputs: Vec<(PlayerId, &'a [u8])>,
    },
    Tick {
        time_us: u64,
        dt_us: u32,
        inputs: Vec<(PlayerId, &'a [u8])>,
    },
    Timer {
        tag: u64,
    },
    Save,
    /// The seed is read and not used: the RNG comes back from the save.
    Restore {
        zone_id: &'a str,
        params: &'a str,
        fact_prefix: &'a str,
        save: &'a [u8],
    },
    StateHash,
    Config,
    Migrate {
        from: u32,
        save: &'a [u8],
    },
    Settled {
        key: &'a str,
        ok: bool,
        detail: &'a str,
    },
    TransferOut {
        player: PlayerId,
    },
    TransferIn {
        player: PlayerId,
        principal: &'a str,
        claims: &'a str,
        from_zone: &'a str,
        returning: bool,
        new_to_run: bool,
        state: &'a [u8],
        /// The player's character (empty when it has none).
        character: &'a [u8],
    },
    Message {
        from: &'a str,
        topic: u16,
        payload: &'a [u8],
    },
    Child {
        child: &'a str,
        topic: u16,
        payload: &'a [u8],
    },
    Undeliverable {
        group: bool,
        to: &'a str,
        topic: u16,
        reason: &'a str,
    },
    /// CALL_RESULT.
    Answer {
        key: &'a str,
        result: CallResult,
    },
}

/// `u32 n`, then `n` × (`u32 player`, `bytes payload`): inputs in the order they apply. The
/// count is checked against what remains (each input takes at least 8 bytes) before anything
/// is allocated for it.
fn read_inputs<'a>(r: &mut Reader<'a>) -> Result<Vec<(PlayerId, &'a [u8])>, DecodeError> {
    let n = r.u32()? as usize;
    if n > r.remaining() / 8 {
        return Err(DecodeError::Truncated {
            needed: n.saturating_mul(8),
            remaining: r.remaining(),
        });
    }
    let mut inputs = Vec::with_capacity(n);
    for _ in 0..n {
        inputs.push((PlayerId(r.u32()?), r.bytes()?));
    }
    Ok(inputs)
}

impl<'a> Call<'a> {
    /// Reads `op`'s fields (after the tick) from `r`.
    pub(super) fn read(op: Op, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let player = |r: &mut Reader<'a>| r.u32().map(PlayerId);
        Ok(match op {
            Op::Create => Call::Create {
                seed: r.u64()?,
                zone_id: r.str()?,
                params: r.str()?,
                fact_prefix: r.str()?,
            },
            Op::Join => Call::Join {
                player: player(r)?,
                principal: r.str()?,
                role: match r.u8()? {
                    0 => Role::Player,
                    1 => Role::Observer,
                    _ => return Err(DecodeError::Invalid("role must be 0 or 1")),
                },
                claims: r.str()?,
                character: r.bytes()?,
            },
            Op::Leave => Call::Leave {
                player: player(r)?,
                why: match r.u8()? {
                    0 => LeaveReason::Left,
                    1 => LeaveReason::Dropped,
                    2 => LeaveReason::Kicked,
                    3 => LeaveReason::Transferred,
                    _ => return Err(DecodeError::Invalid("leave reason must be 0..=3")),
                },
            },
            Op::Drop => Call::Drop { player: player(r)? },
            Op::Rejoin => Call::Rejoin { player: player(r)? },
            Op::Sanitize => Call::Sanitize {
                player: player(r)?,
                payload: r.bytes()?,
            },
            Op::Inputs => Call::Inputs {
                inputs: read_inputs(r)?,
            },
            Op::Tick => Call::Tick {
                time_us: r.u64()?,
                dt_us: r.u32()?,
                inputs: read_inputs(r)?,
            },
            Op::Timer => Call::Timer { tag: r.u64()? },
            Op::Save => Call::Save,
            Op::Restore => {
                // The seed is not used: the RNG comes back from the save.
                let _seed = r.u64()?;
                Call::Restore {
                    zone_id: r.str()?,
                    params: r.str()?,
                    fact_prefix: r.str()?,
                    save: r.bytes()?,
                }
            }
            Op::StateHash => Call::StateHash,
            Op::Config => Call::Config,
            Op::Migrate => Call::Migrate {
                from: r.u32()?,
                save: r.bytes()?,
            },
            Op::Settled => Call::Settled {
                key: r.str()?,
                ok: match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(DecodeError::Invalid("settled ok must be 0 or 1")),
                },
                detail: r.str()?,
            },
            Op::TransferOut => Call::TransferOut { player: player(r)? },
            Op::TransferIn => {
                let (player, principal, claims, from_zone) =
                    (player(r)?, r.str()?, r.str()?, r.str()?);
                let (returning, new_to_run) = match r.u8()? {
                    returning::ARRIVAL => (false, false),
                    returning::RETURN => (true, false),
                    returning::RETURN_NEW_TO_RUN => (true, true),
                    _ => return Err(DecodeError::Invalid("returning must be 0, 1 or 2")),
                };
                Call::TransferIn {
                    player,
                    principal,
                    claims,
                    from_zone,
                    returning,
                    new_to_run,
                    state: r.bytes()?,
                    character: r.bytes()?,
                }
            }
            Op::Message => Call::Message {
                from: r.str()?,
                topic: r.u16()?,
                payload: r.bytes()?,
            },
            Op::Child => Call::Child {
                child: r.str()?,
                topic: r.u16()?,
                payload: r.bytes()?,
            },
            Op::Undeliverable => Call::Undeliverable {
                group: match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(DecodeError::Invalid("target kind must be 0 or 1")),
                },
                to: r.str()?,
                topic: r.u16()?,
                reason: r.str()?,
            },
            Op::CallResult => Call::Answer {
                key: r.str()?,
                result: match r.u8()? {
                    call_result::OK => CallResult::Ok(r.str()?.to_owned()),
                    call_result::ERR => CallResult::Err {
                        code: r.str()?.to_owned(),
                        message: r.str()?.to_owned(),
                    },
                    _ => return Err(DecodeError::Invalid("call result kind must be 0 or 1")),
                },
            },
        })
    }
}
