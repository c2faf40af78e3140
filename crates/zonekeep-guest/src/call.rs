//! Durable calls: an external effect a zone asks for under its own key (grant an item, charge a
//! purchase), whose **result** comes back into the zone on a later tick
//! (`zonekeep_core::call` in the core's docs).
//!
//! [`Ctx::call`] sends a CALL command; the host journals the call, sends it to its call sink once
//! a save holding it has committed, and hands the result back with a CALL_RESULT call, which the
//! SDK passes to [`Zone::on_call_result`](crate::Zone::on_call_result). The host keeps the calls
//! in flight with the zone's snapshot and sends them again after a restore, so counted against
//! the zone's saved state each call's result arrives once: keep in the zone's own save what it
//! waits for, under the call's key.
//!
//! A key names one effect for good: the host's journal answers a key used before with the same
//! function and arguments with the same result, and one used with other ones with the error code
//! [`KEY_REUSED`]. Delivery to the sink is at least once, so the sink must treat a key as one
//! effect too.
//!
//! The SDK refuses what it can tell the host would refuse (a bad key or function name, arguments
//! that are not JSON or longer than any zone accepts) without sending anything. What only the
//! host knows (a key already in flight, the zone's bound on calls in flight or on their
//! arguments) the host refuses itself: the call is logged at debug and never gets a result.

use std::fmt;

use crate::ctx::{tag, Ctx};

/// The longest call key, in bytes (a key is at least 1 byte).
pub use zonekeep_abi::MAX_CALL_KEY_LEN;

/// The longest function name, in bytes (a name is at least 1 byte).
pub use zonekeep_abi::MAX_CALL_FUNCTION_LEN;

/// The longest call arguments any zone may send, in bytes of JSON text (64 KiB). A zone's host
/// may allow less (its `max_call_bytes`, 16 KiB by default, on the compact JSON).
pub use zonekeep_abi::MAX_CALL_ARGS_BYTES;

/// The error code of a call whose key was used before with another function or other arguments.
pub use zonekeep_abi::call_result::KEY_REUSED;

/// Why [`Ctx::call`] refused a call: nothing was sent, and the call will get no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// An empty or over-long key ([`MAX_CALL_KEY_LEN`]) or function name
    /// ([`MAX_CALL_FUNCTION_LEN`]).
    Invalid(String),
    /// The arguments are not JSON text.
    NotJson(String),
    /// The arguments are longer than [`MAX_CALL_ARGS_BYTES`].
    TooLarge {
        /// Their length, in bytes.
        bytes: usize,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(why) => write!(f, "invalid call: {why}"),
            Self::NotJson(why) => write!(f, "call arguments are not JSON: {why}"),
            Self::TooLarge { bytes, max } => write!(
                f,
                "call arguments of {bytes} bytes are over the {max}-byte limit"
            ),
        }
    }
}

impl std::error::Error for CallError {}

/// A call's result, as [`Zone::on_call_result`](crate::Zone::on_call_result) receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallResult {
    /// The effect took place: the sink's answer, as JSON text.
    Ok(String),
    /// The effect did not and will not take place.
    Err {
        /// A short machine-readable code: [`KEY_REUSED`], or the sink's own.
        code: String,
        /// What went wrong, for people.
        message: String,
    },
}

/// `value` is 1..=`max` bytes long.
fn check(what: &str, value: &str, max: usize) -> Result<(), CallError> {
    if value.is_empty() || value.len() > max {
        return Err(CallError::Invalid(format!(
            "{what} must be 1..={max} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

impl Ctx<'_> {
    /// Ask for an external effect under the zone's own `key`: `function` (the sink's name for
    /// it, e.g. `"grant_item"`) with `args` (JSON text). Never blocks. The host journals the
    /// call, sends it to its call sink once a save holding it has committed (the call asks for
    /// a prompt save), and the result comes back through
    /// [`on_call_result`](crate::Zone::on_call_result) on a later tick. The host keeps the calls
    /// in flight with the zone's snapshot and sends them again after a restore, so counted
    /// against the zone's saved state each result arrives once: keep what the zone waits for in
    /// its own save, under the key.
    ///
    /// A key names one effect for good, even after its result came back: the host's journal
    /// answers a key used before with the same function and arguments with the same result, and
    /// one used with others with the error code [`KEY_REUSED`]. The sink may see a key more than
    /// once and must apply it once.
    ///
    /// Refused here, sending nothing, for a key of 0 or more than [`MAX_CALL_KEY_LEN`] bytes, a
    /// function name of 0 or more than [`MAX_CALL_FUNCTION_LEN`] bytes, and arguments that are
    /// not JSON or longer than [`MAX_CALL_ARGS_BYTES`]. The host refuses (logging it at debug) a
    /// key still in flight, a call past the zone's bound on calls in flight (256 by default) and
    /// arguments over the zone's `max_call_bytes` (16 KiB of compact JSON by default); a refused
    /// call never gets a result.
    pub fn call(&mut self, key: &str, function: &str, args: &str) -> Result<(), CallError> {
        check("key", key, MAX_CALL_KEY_LEN)?;
        check("function", function, MAX_CALL_FUNCTION_LEN)?;
        if args.len() > MAX_CALL_ARGS_BYTES {
            return Err(CallError::TooLarge {
                bytes: args.len(),
                max: MAX_CALL_ARGS_BYTES,
            });
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(args) {
            return Err(CallError::NotJson(e.to_string()));
        }
        self.out.u8(tag::CALL).str(key).str(function).str(args);
        Ok(())
    }
}
