//! Durable calls: an external effect a zone asks for under its own key, whose **result** comes
//! back into the zone.
//!
//! Facts are fire-and-settle; a call is a question. A zone calls
//! [`Ctx::call`](crate::Ctx::call)`(key, function, args)`; the call joins the zone's bounded
//! **in-flight** set. The server takes new calls with
//! [`ZoneHost::drain_calls`](crate::ZoneHost::drain_calls), journals each in its store, delivers
//! it at least once to the sink configured for calls, and hands the answer back with
//! [`ZoneHost::handle_call_result`](crate::ZoneHost::handle_call_result); the zone sees it on its
//! next tick through [`Zone::on_call_result`](crate::Zone::on_call_result), and only then does the
//! call leave the in-flight set.
//!
//! In-flight calls are part of every snapshot and are re-sent under the same keys after a
//! restore. The server's journal answers a re-sent call that already has a result without asking
//! the sink again, and a key journaled with different arguments is answered with the error code
//! [`KEY_REUSED`]. So from the zone's saved state, each call's result arrives exactly once: a
//! result the zone saw before a crash but had not saved yet arrives again after the restore.
//!
//! Keys are the zone's own (an order id, a purchase id): a key names one effect for good, so a
//! zone must not reuse one for a different effect, even after its result came back.

use std::collections::{BTreeMap, VecDeque};

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use crate::fact::image::{get_json, get_text, put_json, put_text};

/// Longest call key, in bytes (the store's limit).
pub const MAX_CALL_KEY_LEN: usize = 512;
/// Longest function name, in bytes.
pub const MAX_CALL_FUNCTION_LEN: usize = 128;
/// Largest call arguments any zone may send, in bytes of JSON text (the store's limit).
pub const MAX_CALL_ARGS_BYTES: usize = 64 * 1024;
/// The error code of a call whose key was used before with another function or other arguments.
pub const KEY_REUSED: &str = "KEY_REUSED";

/// A call's key: the zone's name for one external effect.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallKey(pub String);

impl CallKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One call, as handed to the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The zone's key for the effect.
    pub key: CallKey,
    /// What to do, e.g. `"grant_item"`: the sink's function name.
    pub function: String,
    /// The function's arguments.
    pub args: serde_json::Value,
    /// The tick that made the call.
    pub tick: u64,
}

/// A call's result, as the zone receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum CallResult {
    /// The effect took place; the sink's answer.
    Ok(serde_json::Value),
    /// The effect did not and will not take place: a short machine-readable `code` (such as
    /// [`KEY_REUSED`], or the sink's own) and a human-readable `message`.
    Err {
        /// The error's code.
        code: String,
        /// What went wrong.
        message: String,
    },
}

/// A call's result addressed to the call, for
/// [`ZoneHost::handle_call_result`](crate::ZoneHost::handle_call_result).
#[derive(Debug, Clone, PartialEq)]
pub struct CallAnswer {
    /// The call's key.
    pub key: CallKey,
    /// Its result.
    pub result: CallResult,
}

/// Why a call could not be made. A refused call never gets a result: the error is the zone's
/// only answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The zone already has `capacity` calls in flight; counted in the advance report.
    #[error("call queue full ({capacity} in flight)")]
    QueueFull {
        /// [`ZoneConfig::max_calls_in_flight`](crate::ZoneConfig::max_calls_in_flight).
        capacity: usize,
    },
    /// A call with this key is still in flight.
    #[error("call key {0:?} is already in flight")]
    DuplicateKey(String),
    /// An empty or over-long key or function name.
    #[error("invalid call: {0}")]
    Invalid(String),
    /// The arguments' JSON text is longer than the zone allows.
    #[error("call arguments of {bytes} bytes exceed the zone's max_call_bytes of {max}")]
    TooLarge {
        /// The arguments' length as JSON text.
        bytes: usize,
        /// [`ZoneConfig::max_call_bytes`](crate::ZoneConfig::max_call_bytes).
        max: usize,
    },
}

/// The zone's in-flight calls, new calls not yet taken, and results not yet delivered. Owned by
/// the host; reached by hooks through `Ctx`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallBook {
    capacity: usize,
    max_bytes: usize,
    /// In-flight calls by the order they were made in (the order they are re-sent in).
    in_flight: BTreeMap<u64, Call>,
    /// Key → order, to find an answered call.
    by_key: BTreeMap<CallKey, u64>,
    next_order: u64,
    /// Orders of calls not yet taken by the server.
    unsent: VecDeque<u64>,
    results: VecDeque<CallAnswer>,
    /// Calls refused because the set was full, since the host last took the count.
    pub(crate) overflowed: u64,
    /// Results for keys not in flight, dropped, since the host last took the count.
    pub(crate) unknown_results: u64,
}

impl CallBook {
    pub(crate) fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            capacity,
            max_bytes,
            in_flight: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_order: 0,
            unsent: VecDeque::new(),
            results: VecDeque::new(),
            overflowed: 0,
            unknown_results: 0,
        }
    }

    pub(crate) fn in_flight(&self) -> impl Iterator<Item = &Call> + '_ {
        self.in_flight.values()
    }

    pub(crate) fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    pub(crate) fn call(
        &mut self,
        tick: u64,
        key: &str,
        function: &str,
        args: serde_json::Value,
    ) -> Result<(), CallError> {
        check("key", key, MAX_CALL_KEY_LEN)?;
        check("function", function, MAX_CALL_FUNCTION_LEN)?;
        let key = CallKey(key.to_owned());
        if self.by_key.contains_key(&key) {
            return Err(CallError::DuplicateKey(key.0));
        }
        let bytes = crate::fact::json_len(&args);
        if bytes > self.max_bytes {
            return Err(CallError::TooLarge {
                bytes,
                max: self.max_bytes,
            });
        }
        if self.in_flight.len() >= self.capacity {
            self.overflowed = self.overflowed.saturating_add(1);
            return Err(CallError::QueueFull {
                capacity: self.capacity,
            });
        }
        self.insert(Call {
            key,
            function: function.to_owned(),
            args,
            tick,
        });
        Ok(())
    }

    /// Adds a call to the in-flight set and marks it to be sent. Used by `call` and by restore
    /// (which may exceed the capacity: saved calls are never dropped).
    pub(crate) fn insert(&mut self, call: Call) {
        if self.by_key.contains_key(&call.key) {
            return;
        }
        let order = self.next_order;
        self.next_order = self.next_order.saturating_add(1);
        self.by_key.insert(call.key.clone(), order);
        self.in_flight.insert(order, call);
        self.unsent.push_back(order);
    }

    pub(crate) fn take_unsent(&mut self) -> Vec<Call> {
        let mut out = Vec::with_capacity(self.unsent.len());
        while let Some(order) = self.unsent.pop_front() {
            if let Some(c) = self.in_flight.get(&order) {
                out.push(c.clone());
            }
        }
        out
    }

    /// Queues a result for the next tick. Results for keys not in flight (already answered, or
    /// never called here) are dropped and counted, which also bounds the queue by the in-flight
    /// bound.
    pub(crate) fn queue_result(&mut self, answer: CallAnswer) {
        if !self.by_key.contains_key(&answer.key)
            || self.results.iter().any(|q| q.key == answer.key)
        {
            self.unknown_results = self.unknown_results.saturating_add(1);
            return;
        }
        self.results.push_back(answer);
    }

    /// Removes the next queued result's call from flight and returns the result.
    pub(crate) fn next_result(&mut self) -> Option<CallAnswer> {
        let answer = self.results.pop_front()?;
        if let Some(order) = self.by_key.remove(&answer.key) {
            self.in_flight.remove(&order);
        }
        Some(answer)
    }

    /// Appends the book's part of a zone image: `varint overflowed`, `varint unknown_results`;
    /// `varint N` and the in-flight calls in the order they were made, each `str key`,
    /// `str function`, `str args` (JSON text), `varint tick` and `u8 sent` (taken by the
    /// server); `varint R` and the queued results, each `str key` then `u8 0, str value` (JSON
    /// text) or `u8 1, str code, str message`. The limits are not written: they come from the
    /// zone's config.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_varint(out, self.overflowed);
        put_varint(out, self.unknown_results);
        put_varint(out, self.in_flight.len() as u64);
        for (order, c) in &self.in_flight {
            put_text(out, c.key.as_str());
            put_text(out, &c.function);
            put_json(out, &c.args);
            put_varint(out, c.tick);
            out.push(u8::from(!self.unsent.contains(order)));
        }
        put_varint(out, self.results.len() as u64);
        for a in &self.results {
            put_text(out, a.key.as_str());
            match &a.result {
                CallResult::Ok(v) => {
                    out.push(0);
                    put_json(out, v);
                }
                CallResult::Err { code, message } => {
                    out.push(1);
                    put_text(out, code);
                    put_text(out, message);
                }
            }
        }
    }

    /// Reads what [`put_image`](CallBook::put_image) wrote into this (empty) book.
    pub(crate) fn read_image(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        self.overflowed = r.varint_u64()?;
        self.unknown_results = r.varint_u64()?;
        // A call takes at least 5 bytes (four empty texts' lengths and the flag).
        let n = r.count("calls in flight", r.remaining() / 5)?;
        for _ in 0..n {
            let key = CallKey(get_text(r)?);
            let function = get_text(r)?;
            let args = get_json(r)?;
            let tick = r.varint_u64()?;
            let sent = match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(DecodeError::Invalid("call sent flag other than 0 or 1")),
            };
            if self.by_key.contains_key(&key) {
                return Err(DecodeError::Invalid("a call key twice in flight"));
            }
            self.insert(Call {
                key,
                function,
                args,
                tick,
            });
            if sent {
                self.unsent.pop_back();
            }
        }
        let n = r.count("call results", r.remaining() / 3)?;
        for _ in 0..n {
            let key = CallKey(get_text(r)?);
            let result = match r.u8()? {
                0 => CallResult::Ok(get_json(r)?),
                1 => CallResult::Err {
                    code: get_text(r)?,
                    message: get_text(r)?,
                },
                _ => return Err(DecodeError::Invalid("call result kind other than 0 or 1")),
            };
            if !self.by_key.contains_key(&key) {
                return Err(DecodeError::Invalid(
                    "a call result for a call not in flight",
                ));
            }
            self.results.push_back(CallAnswer { key, result });
        }
        Ok(())
    }
}

fn check(what: &str, value: &str, max: usize) -> Result<(), CallError> {
    if value.is_empty() || value.len() > max {
        return Err(CallError::Invalid(format!(
            "{what} must be 1..={max} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn answer(key: &str) -> CallAnswer {
        CallAnswer {
            key: CallKey(key.into()),
            result: CallResult::Ok(json!({"granted": true})),
        }
    }

    #[test]
    fn calls_are_sent_once_and_stay_in_flight_until_answered() {
        let mut book = CallBook::new(4, 1024);
        book.call(1, "order-1", "grant", json!({"item": 7}))
            .unwrap();
        book.call(1, "order-2", "grant", json!({"item": 8}))
            .unwrap();
        let sent = book.take_unsent();
        assert_eq!(
            sent.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
            ["order-1", "order-2"]
        );
        assert!(book.take_unsent().is_empty(), "taken calls are not re-sent");
        book.queue_result(answer("order-2"));
        assert_eq!(book.in_flight_len(), 2, "a queued result is not yet seen");
        assert_eq!(book.next_result(), Some(answer("order-2")));
        assert_eq!(book.in_flight_len(), 1);
        assert_eq!(book.next_result(), None);
    }

    #[test]
    fn keys_are_unique_in_flight_and_reusable_after_the_result() {
        let mut book = CallBook::new(4, 1024);
        book.call(1, "k", "f", json!(null)).unwrap();
        assert_eq!(
            book.call(1, "k", "f", json!(null)),
            Err(CallError::DuplicateKey("k".into()))
        );
        book.queue_result(answer("k"));
        book.next_result();
        // The journal answers a repeated key (its result, or KEY_REUSED); the book only guards
        // against two calls of one key in flight at once.
        book.call(2, "k", "f", json!(null)).unwrap();
    }

    #[test]
    fn limits_refuse_without_making_the_call() {
        let mut book = CallBook::new(1, 16);
        assert!(matches!(
            book.call(1, "", "f", json!(null)),
            Err(CallError::Invalid(_))
        ));
        assert!(matches!(
            book.call(1, "k", &"f".repeat(MAX_CALL_FUNCTION_LEN + 1), json!(null)),
            Err(CallError::Invalid(_))
        ));
        assert_eq!(
            book.call(1, "k", "f", json!("a string longer than sixteen")),
            Err(CallError::TooLarge { bytes: 30, max: 16 })
        );
        book.call(1, "a", "f", json!(1)).unwrap();
        assert_eq!(
            book.call(1, "b", "f", json!(1)),
            Err(CallError::QueueFull { capacity: 1 })
        );
        assert_eq!(book.overflowed, 1);
        assert_eq!(book.in_flight_len(), 1);
    }

    #[test]
    fn results_for_unknown_or_repeated_keys_are_dropped_and_counted() {
        let mut book = CallBook::new(4, 1024);
        book.call(1, "k", "f", json!(null)).unwrap();
        book.queue_result(answer("nope"));
        book.queue_result(answer("k"));
        book.queue_result(answer("k"));
        assert_eq!(book.unknown_results, 2);
        assert_eq!(book.next_result(), Some(answer("k")));
        book.queue_result(answer("k"));
        assert_eq!(
            book.unknown_results, 3,
            "an answered key is no longer in flight"
        );
    }

    #[test]
    fn an_image_keeps_every_call_and_result_and_what_was_sent() {
        let mut book = CallBook::new(8, 1024);
        book.call(1, "a", "grant", json!({"n": 1})).unwrap();
        book.call(2, "b", "grant", json!([1, 2])).unwrap();
        book.take_unsent();
        book.call(3, "c", "charge", json!("x")).unwrap();
        book.queue_result(CallAnswer {
            key: CallKey("b".into()),
            result: CallResult::Err {
                code: "NO_STOCK".into(),
                message: "sold out".into(),
            },
        });
        book.overflowed = 2;
        let mut bytes = Vec::new();
        book.put_image(&mut bytes);
        let mut back = CallBook::new(8, 1024);
        let mut r = Reader::new(&bytes);
        back.read_image(&mut r).unwrap();
        r.finish().unwrap();
        assert_eq!(back.overflowed, 2);
        assert_eq!(back.take_unsent().len(), 1, "only the unsent call goes out");
        assert_eq!(back.next_result(), book.clone().next_result());
        assert_eq!(back.in_flight_len(), 2);
        for cut in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..cut]);
            assert!(CallBook::new(8, 1024).read_image(&mut r).is_err() || r.finish().is_err());
        }
    }

    #[test]
    fn restored_calls_go_out_again_beyond_the_capacity() {
        let mut book = CallBook::new(1, 1024);
        for k in ["a", "b"] {
            book.insert(Call {
                key: CallKey(k.into()),
                function: "f".into(),
                args: json!(null),
                tick: 3,
            });
        }
        assert_eq!(book.take_unsent().len(), 2);
    }
}
