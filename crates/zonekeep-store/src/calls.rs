//! The durable-call journal: the store's side of a zone's external calls (`ctx.call(key, function,
//! args)`), which the host delivers at least once to a sink (a webhook or an in-process handler).
//!
//! Each call is one row keyed by (zone, key). The host journals it before invoking the sink
//! ([`CallStore::begin_call`]) and records the sink's answer after ([`CallStore::finish_call`]).
//! A call sent again under the same key, with the same function and arguments (a zone restored
//! after a crash re-sends the calls it had in flight), finds the journal: an answered call is
//! answered from the journal without invoking the sink again; a pending one is invoked again
//! under the same key. The same key with another function or other arguments is refused
//! ([`CallBegin::KeyReused`]) rather than answered with another call's result. The first answer
//! recorded wins. Every write carries the zone owner's epoch and is checked against the zone's
//! fence in its own transaction, exactly like a fact ([`crate::FactRecord::epoch`]).
//!
//! The decisions are pure functions ([`decide_begin`], [`decide_finish`]) that both backends call
//! inside their transactions, so the two backends cannot drift apart.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::fence;
use crate::validate::{check_id, to_db};

/// Longest call key, in bytes.
pub const MAX_CALL_KEY: usize = 512;
/// Longest function name, in bytes.
pub const MAX_CALL_FUNCTION: usize = 128;
/// Largest call arguments, in bytes of JSON text (64 KiB).
pub const MAX_CALL_ARGS: usize = 64 * 1024;
/// Largest call answer, in bytes: the JSON text of a success, or a failure's code and message
/// together (64 KiB).
pub const MAX_CALL_ANSWER: usize = 64 * 1024;
/// Longest failure code, in bytes.
pub const MAX_CALL_CODE: usize = 64;
/// How long the journal keeps a call by default (7 days): the `keep` a host passes to
/// [`CallStore::sweep_calls`] unless configured otherwise.
pub const DEFAULT_CALL_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A call as the host journals it before invoking the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// The zone that made the call.
    pub zone_id: String,
    /// The call's key, unique within its zone: the zone's idempotency key for the effect.
    pub key: String,
    /// The epoch of the zone owner that made the call (from its
    /// [`claim`](crate::SaveStore::claim)), checked against the zone's fence like a fact's
    /// ([`crate::FactRecord::epoch`]): below the fence the call is
    /// [`StoreError::Fenced`](crate::StoreError::Fenced). `None` journals without the check, for
    /// a zone run without claims.
    pub epoch: Option<u64>,
    /// The function the sink is asked to run.
    pub function: String,
    /// The arguments as JSON text, compared byte for byte with a journaled call's.
    pub args: String,
}

/// A call's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallAnswer {
    /// The sink succeeded with this value, as JSON text.
    Ok(String),
    /// The sink failed.
    Failed {
        /// A short machine-readable code, 1..=[`MAX_CALL_CODE`] bytes.
        code: String,
        /// A human-readable message (may be empty).
        message: String,
    },
}

/// A call as stored, returned by [`CallStore::get_call`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCall {
    /// The zone that made the call.
    pub zone_id: String,
    /// The call's key.
    pub key: String,
    /// The function journaled with the key.
    pub function: String,
    /// The arguments journaled with the key, as JSON text.
    pub args: String,
    /// The recorded answer; `None` while the call is pending.
    pub answer: Option<CallAnswer>,
    /// When the call was first journaled, in milliseconds since the Unix epoch, by the
    /// database's clock.
    pub created_at_ms: u64,
    /// When its answer was recorded, by the database's clock; `None` while pending.
    pub settled_at_ms: Option<u64>,
}

/// The answer to [`CallStore::begin_call`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallBegin {
    /// New: journaled as pending; invoke the sink.
    Started,
    /// Journaled earlier with the same function and args, no answer yet: invoke the sink again
    /// under the same key.
    Pending,
    /// Answered earlier: deliver this answer, do not invoke the sink.
    Done(CallAnswer),
    /// The key was journaled with a different function or different args: nothing changed.
    KeyReused {
        /// The function the key was journaled with.
        function: String,
    },
}

/// The answer to [`CallStore::finish_call`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFinish {
    /// This answer is now the call's answer.
    Recorded,
    /// The call already had an answer (the first answer wins); deliver that one instead.
    AlreadyDone(CallAnswer),
}

/// The journal of zones' external calls, keyed by (zone, key).
///
/// Every method is atomic with respect to other stores on the same database: begins and finishes
/// of one call are serialized, so of two hosts beginning the same new call exactly one is told
/// [`CallBegin::Started`], and of two answers exactly one is [`CallFinish::Recorded`]. A begin or
/// finish carrying an owner epoch is checked against its zone's fence in the same transaction,
/// before anything else: below the fence it is [`StoreError::Fenced`] and changes nothing, even
/// for a call that is already answered (a fenced owner learns it was fenced, not an answer).
///
/// Zone ids are checked like every zone id, keys are 1..=[`MAX_CALL_KEY`] bytes, functions
/// 1..=[`MAX_CALL_FUNCTION`], args valid JSON of at most [`MAX_CALL_ARGS`] bytes, and answers
/// at most [`MAX_CALL_ANSWER`] bytes (an `Ok` value valid JSON, a failure code
/// 1..=[`MAX_CALL_CODE`] bytes); anything else is [`StoreError::InvalidArgument`], refused before
/// the database is touched.
#[async_trait]
pub trait CallStore: Send + Sync {
    /// Journals the call or finds it (keyed by (zone_id, key)); fenced by `call.epoch`.
    async fn begin_call(&self, call: &CallRecord) -> Result<CallBegin>;

    /// Records the answer of a journaled call (first answer wins); fenced by `epoch`. A call that
    /// was never begun (or was swept) is [`StoreError::CallUnknown`] and nothing is stored.
    async fn finish_call(
        &self,
        zone_id: &str,
        key: &str,
        epoch: Option<u64>,
        answer: &CallAnswer,
    ) -> Result<CallFinish>;

    /// One call as stored.
    async fn get_call(&self, zone_id: &str, key: &str) -> Result<Option<StoredCall>>;

    /// Deletes answered calls whose answer is at least `keep` old, and pending calls begun at
    /// least `keep` ago, by the database's clock; returns how many rows went. A swept call is
    /// forgotten: begun again it starts anew, and finishing it is [`StoreError::CallUnknown`].
    async fn sweep_calls(&self, keep: Duration) -> Result<u64>;

    /// How many calls are journaled (answered and pending).
    async fn count_calls(&self) -> Result<u64>;
}

/// Refuses `value` when empty or longer than `max` bytes.
fn check_len(what: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() || value.len() > max {
        return Err(StoreError::InvalidArgument(format!(
            "{what} must be 1..={max} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

/// Refuses text that is not one JSON value.
fn check_json(what: &str, text: &str) -> Result<()> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map(|_| ())
        .map_err(|e| StoreError::InvalidArgument(format!("{what} must be JSON: {e}")))
}

/// Refuses an out-of-bounds zone id or call key.
pub(crate) fn check_call_id(zone_id: &str, key: &str) -> Result<()> {
    check_id("zone id", zone_id)?;
    check_len("call key", key, MAX_CALL_KEY)
}

/// Refuses an epoch the database cannot hold.
fn check_epoch(epoch: Option<u64>) -> Result<()> {
    epoch.map_or(Ok(()), |e| to_db("epoch", e).map(|_| ()))
}

/// Refuses a call out of bounds: its ids, function, epoch and args (see [`CallStore`]).
pub(crate) fn check_call(call: &CallRecord) -> Result<()> {
    check_call_id(&call.zone_id, &call.key)?;
    check_len("call function", &call.function, MAX_CALL_FUNCTION)?;
    check_epoch(call.epoch)?;
    if call.args.len() > MAX_CALL_ARGS {
        return Err(StoreError::InvalidArgument(format!(
            "call args are {} bytes, over the limit of {MAX_CALL_ARGS}",
            call.args.len()
        )));
    }
    check_json("call args", &call.args)
}

/// Refuses an answer out of bounds (see [`CallStore`]).
pub(crate) fn check_answer(answer: &CallAnswer) -> Result<()> {
    let size = match answer {
        CallAnswer::Ok(value) => value.len(),
        CallAnswer::Failed { code, message } => {
            check_len("call failure code", code, MAX_CALL_CODE)?;
            code.len().saturating_add(message.len())
        }
    };
    if size > MAX_CALL_ANSWER {
        return Err(StoreError::InvalidArgument(format!(
            "call answer is {size} bytes, over the limit of {MAX_CALL_ANSWER}"
        )));
    }
    match answer {
        CallAnswer::Ok(value) => check_json("call answer", value),
        CallAnswer::Failed { .. } => Ok(()),
    }
}

/// Refuses the out-of-bounds arguments of a finish.
pub(crate) fn check_finish(
    zone_id: &str,
    key: &str,
    epoch: Option<u64>,
    answer: &CallAnswer,
) -> Result<()> {
    check_call_id(zone_id, key)?;
    check_epoch(epoch)?;
    check_answer(answer)
}

/// The args' SHA-256 in lowercase hex, stored beside them.
pub(crate) fn args_sha256(args: &str) -> String {
    crate::modules::digest(args.as_bytes())
}

/// `keep` in milliseconds for the sweep's SQL, capped so that the database's clock minus it
/// cannot overflow a 64-bit integer (a keep that long sweeps nothing anyway).
pub(crate) fn keep_ms(keep: Duration) -> i64 {
    const MAX_KEEP_MS: i64 = i64::MAX / 4;
    i64::try_from(keep.as_millis()).map_or(MAX_KEEP_MS, |ms| ms.min(MAX_KEEP_MS))
}

/// The stored answer columns of one answer: kind (`"ok"` or `"failed"`), Ok text, code, message.
pub(crate) fn answer_columns(
    answer: &CallAnswer,
) -> (&'static str, Option<&str>, Option<&str>, Option<&str>) {
    match answer {
        CallAnswer::Ok(value) => ("ok", Some(value), None, None),
        CallAnswer::Failed { code, message } => ("failed", None, Some(code), Some(message)),
    }
}

/// The answer of the stored answer columns (kind, Ok text, code, message), `None` for a pending
/// call; any other combination is [`StoreError::Corrupt`].
pub(crate) fn answer_of_columns(
    zone_id: &str,
    key: &str,
    kind: Option<String>,
    ok: Option<String>,
    code: Option<String>,
    message: Option<String>,
) -> Result<Option<CallAnswer>> {
    match (kind.as_deref(), ok, code, message) {
        (None, None, None, None) => Ok(None),
        (Some("ok"), Some(value), None, None) => Ok(Some(CallAnswer::Ok(value))),
        (Some("failed"), None, Some(code), Some(message)) => {
            Ok(Some(CallAnswer::Failed { code, message }))
        }
        (kind, ..) => Err(StoreError::Corrupt(format!(
            "call {key:?} of zone {zone_id:?}: answer columns do not match answer kind {kind:?}"
        ))),
    }
}

/// A journaled call, as [`decide_begin`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Journaled {
    /// The function journaled with the key.
    pub function: String,
    /// The journaled args' SHA-256 (lowercase hex).
    pub args_sha256: String,
    /// The journaled args.
    pub args: String,
    /// The recorded answer, `None` while pending.
    pub answer: Option<CallAnswer>,
}

/// Decides a begin of `call` (whose args hash to `args_sha256`) against the zone's `fence` (read
/// only when the call carries an epoch, 0 otherwise) and the call journaled under its key, if
/// any. [`CallBegin::Started`] tells the backend to journal the call as pending; every other
/// answer changes nothing.
pub(crate) fn decide_begin(
    call: &CallRecord,
    args_sha256: &str,
    fence: u64,
    stored: Option<Journaled>,
) -> Result<CallBegin> {
    if let Some(epoch) = call.epoch {
        fence::check_owner(fence, epoch)?;
    }
    let Some(stored) = stored else {
        return Ok(CallBegin::Started);
    };
    if stored.function != call.function
        || stored.args_sha256 != args_sha256
        || stored.args != call.args
    {
        return Ok(CallBegin::KeyReused {
            function: stored.function,
        });
    }
    Ok(match stored.answer {
        None => CallBegin::Pending,
        Some(answer) => CallBegin::Done(answer),
    })
}

/// Decides a finish of the call (`zone_id`, `key`) under `epoch` against the zone's `fence` (read
/// only when `epoch` is set, 0 otherwise) and the stored call: `None` when no call is journaled
/// under the key, `Some(None)` while it is pending, `Some(Some(answer))` once answered.
/// [`CallFinish::Recorded`] tells the backend to store the answer; every other answer changes
/// nothing.
pub(crate) fn decide_finish(
    zone_id: &str,
    key: &str,
    epoch: Option<u64>,
    fence: u64,
    stored: Option<Option<CallAnswer>>,
) -> Result<CallFinish> {
    if let Some(epoch) = epoch {
        fence::check_owner(fence, epoch)?;
    }
    match stored {
        None => Err(StoreError::CallUnknown {
            zone_id: zone_id.to_owned(),
            key: key.to_owned(),
        }),
        Some(None) => Ok(CallFinish::Recorded),
        Some(Some(first)) => Ok(CallFinish::AlreadyDone(first)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn call(epoch: Option<u64>, function: &str, args: &str) -> CallRecord {
        CallRecord {
            zone_id: "arena-1".into(),
            key: "pay-1".into(),
            epoch,
            function: function.into(),
            args: args.into(),
        }
    }

    fn journaled(function: &str, args: &str, answer: Option<CallAnswer>) -> Option<Journaled> {
        Some(Journaled {
            function: function.into(),
            args_sha256: args_sha256(args),
            args: args.into(),
            answer,
        })
    }

    fn begin(call: &CallRecord, fence: u64, stored: Option<Journaled>) -> Result<CallBegin> {
        decide_begin(call, &args_sha256(&call.args), fence, stored)
    }

    fn ok(text: &str) -> CallAnswer {
        CallAnswer::Ok(text.into())
    }

    #[test]
    fn a_new_call_starts_and_a_journaled_one_is_pending_or_done() {
        let c = call(Some(2), "pay", r#"{"gold":5}"#);
        assert_eq!(begin(&c, 2, None), Ok(CallBegin::Started));
        assert_eq!(
            begin(&c, 2, journaled("pay", r#"{"gold":5}"#, None)),
            Ok(CallBegin::Pending)
        );
        assert_eq!(
            begin(&c, 2, journaled("pay", r#"{"gold":5}"#, Some(ok("true")))),
            Ok(CallBegin::Done(ok("true")))
        );
    }

    #[test]
    fn another_function_or_other_args_under_the_key_are_key_reused() {
        let c = call(None, "pay", r#"{"gold":5}"#);
        for (function, args) in [
            ("refund", r#"{"gold":5}"#),
            ("pay", r#"{"gold":6}"#),
            ("pay", r#"{ "gold": 5 }"#),
        ] {
            for answer in [None, Some(ok("1"))] {
                assert_eq!(
                    begin(&c, 0, journaled(function, args, answer)),
                    Ok(CallBegin::KeyReused {
                        function: function.into()
                    }),
                    "{function} {args}"
                );
            }
        }
        // A stored hash that does not match the text is not the same call either.
        let mut stored = journaled("pay", r#"{"gold":5}"#, None).unwrap();
        stored.args_sha256 = args_sha256("other");
        assert!(matches!(
            begin(&c, 0, Some(stored)),
            Ok(CallBegin::KeyReused { .. })
        ));
    }

    #[test]
    fn a_stale_epoch_is_fenced_before_the_journal_is_consulted() {
        let fenced = Err(StoreError::Fenced {
            stored_epoch: 3,
            attempted: 2,
        });
        let c = call(Some(2), "pay", "{}");
        assert_eq!(begin(&c, 3, None), fenced);
        assert_eq!(begin(&c, 3, journaled("pay", "{}", Some(ok("1")))), fenced);
        assert_eq!(begin(&c, 3, journaled("other", "{}", None)), fenced);
        for stored in [None, Some(None), Some(Some(ok("1")))] {
            assert_eq!(
                decide_finish("z", "k", Some(2), 3, stored),
                Err(StoreError::Fenced {
                    stored_epoch: 3,
                    attempted: 2,
                })
            );
        }
        // The current epoch, a newer one, and no epoch at all pass.
        assert_eq!(
            begin(&call(Some(3), "pay", "{}"), 3, None),
            Ok(CallBegin::Started)
        );
        assert_eq!(
            begin(&call(Some(4), "pay", "{}"), 3, None),
            Ok(CallBegin::Started)
        );
        assert_eq!(
            begin(&call(None, "pay", "{}"), 0, None),
            Ok(CallBegin::Started)
        );
    }

    #[test]
    fn the_first_answer_wins_and_an_unknown_call_is_refused() {
        assert_eq!(
            decide_finish("z", "k", Some(1), 1, Some(None)),
            Ok(CallFinish::Recorded)
        );
        assert_eq!(
            decide_finish("z", "k", None, 0, Some(Some(ok("1")))),
            Ok(CallFinish::AlreadyDone(ok("1")))
        );
        assert_eq!(
            decide_finish("z", "k", Some(1), 1, None),
            Err(StoreError::CallUnknown {
                zone_id: "z".into(),
                key: "k".into()
            })
        );
    }

    #[test]
    fn calls_are_bounded() {
        let good = call(Some(1), "pay", "{}");
        assert_eq!(check_call(&good), Ok(()));
        let max_args = format!("\"{}\"", "x".repeat(MAX_CALL_ARGS - 2));
        let edited = |edit: &dyn Fn(&mut CallRecord)| {
            let mut c = good.clone();
            edit(&mut c);
            c
        };
        let bad = [
            edited(&|c| c.zone_id.clear()),
            edited(&|c| c.key.clear()),
            edited(&|c| c.key = "k".repeat(MAX_CALL_KEY + 1)),
            edited(&|c| c.function.clear()),
            edited(&|c| c.function = "f".repeat(MAX_CALL_FUNCTION + 1)),
            edited(&|c| c.epoch = Some(u64::MAX)),
            edited(&|c| c.args.clear()),
            edited(&|c| c.args = "{not json".into()),
            edited(&|c| c.args = "{} {}".into()),
            edited(&|c| c.args = format!("{max_args} ")),
        ];
        for c in bad {
            assert!(
                matches!(check_call(&c), Err(StoreError::InvalidArgument(_))),
                "{c:?}"
            );
        }
        let limits = CallRecord {
            key: "k".repeat(MAX_CALL_KEY),
            function: "f".repeat(MAX_CALL_FUNCTION),
            args: max_args,
            ..good
        };
        assert_eq!(check_call(&limits), Ok(()));
    }

    #[test]
    fn answers_are_bounded() {
        let failed = |code: &str, message: &str| CallAnswer::Failed {
            code: code.into(),
            message: message.into(),
        };
        let max_ok = format!("\"{}\"", "x".repeat(MAX_CALL_ANSWER - 2));
        for good in [
            ok("null"),
            ok(&max_ok),
            failed("timeout", ""),
            failed(&"c".repeat(MAX_CALL_CODE), "m"),
            failed("c", &"m".repeat(MAX_CALL_ANSWER - 1)),
        ] {
            assert_eq!(check_answer(&good), Ok(()), "{good:?}");
        }
        for bad in [
            ok(""),
            ok("nope"),
            ok(&format!("{max_ok} ")),
            failed("", "m"),
            failed(&"c".repeat(MAX_CALL_CODE + 1), "m"),
            failed("c", &"m".repeat(MAX_CALL_ANSWER)),
        ] {
            assert!(
                matches!(check_answer(&bad), Err(StoreError::InvalidArgument(_))),
                "{bad:?}"
            );
        }
        assert!(check_finish("z", "k", Some(u64::MAX), &ok("1")).is_err());
        assert!(check_finish("z", "", None, &ok("1")).is_err());
    }

    #[test]
    fn answers_round_trip_through_their_columns() {
        for answer in [
            ok("{\"a\":1}"),
            CallAnswer::Failed {
                code: "denied".into(),
                message: String::new(),
            },
        ] {
            let (kind, value, code, message) = answer_columns(&answer);
            let back = answer_of_columns(
                "z",
                "k",
                Some(kind.into()),
                value.map(str::to_owned),
                code.map(str::to_owned),
                message.map(str::to_owned),
            );
            assert_eq!(back, Ok(Some(answer)));
        }
        assert_eq!(
            answer_of_columns("z", "k", None, None, None, None),
            Ok(None)
        );
        assert!(matches!(
            answer_of_columns("z", "k", Some("ok".into()), None, None, None),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            answer_of_columns("z", "k", None, Some("1".into()), None, None),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn keep_is_capped() {
        assert_eq!(keep_ms(Duration::ZERO), 0);
        assert_eq!(keep_ms(DEFAULT_CALL_RETENTION), 7 * 24 * 3_600_000);
        assert_eq!(keep_ms(Duration::MAX), i64::MAX / 4);
    }
}
