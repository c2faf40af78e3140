//! The durable calls a [`TestHost`] takes from its zone, kept as a host keeps them: the zone's
//! CALL commands put calls in flight (one a host would refuse is dropped), the host hands the
//! new ones to its sink ([`TestHost::drain_calls`]), and a result delivered for a call in flight
//! ([`TestHost::call_result`]) ends it.

use super::{Command, TestHost};
use crate::call::{CallResult, MAX_CALL_ARGS_BYTES, MAX_CALL_FUNCTION_LEN, MAX_CALL_KEY_LEN};
use crate::dispatch::{Fatal, Op};
use crate::zone::Zone;

/// A call the zone made, as a host hands it to its call sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The zone's key for the effect.
    pub key: String,
    /// The sink's function name.
    pub function: String,
    /// The arguments (JSON text).
    pub args: String,
}

/// The host's side of the calls: those in flight, in the order they were made, each with
/// whether it was handed out yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HostCalls {
    in_flight: Vec<(Call, bool)>,
}

impl HostCalls {
    /// The CALL commands of a call's answer, in order, as a host applies them: one with a bad
    /// key or function name, arguments too long or not JSON, or a key already in flight is
    /// refused (no call is made).
    pub(super) fn apply(&mut self, commands: &[Command]) {
        for c in commands {
            if let Command::Call {
                key,
                function,
                args,
            } = c
            {
                if self.accepts(key, function, args) {
                    let call = Call {
                        key: key.clone(),
                        function: function.clone(),
                        args: args.clone(),
                    };
                    self.in_flight.push((call, false));
                }
            }
        }
    }

    fn accepts(&self, key: &str, function: &str, args: &str) -> bool {
        (1..=MAX_CALL_KEY_LEN).contains(&key.len())
            && (1..=MAX_CALL_FUNCTION_LEN).contains(&function.len())
            && args.len() <= MAX_CALL_ARGS_BYTES
            && serde_json::from_str::<serde_json::Value>(args).is_ok()
            && !self.in_flight.iter().any(|(c, _)| c.key == key)
    }

    /// The calls not handed out yet, oldest first; they stay in flight.
    pub(super) fn drain(&mut self) -> Vec<Call> {
        self.in_flight
            .iter_mut()
            .filter(|(_, sent)| !*sent)
            .map(|(call, sent)| {
                *sent = true;
                call.clone()
            })
            .collect()
    }

    /// How many calls are in flight.
    pub(super) fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// Ends the call in flight under `key`; false when there is none.
    pub(super) fn answer(&mut self, key: &str) -> bool {
        let before = self.in_flight.len();
        self.in_flight.retain(|(c, _)| c.key != key);
        self.in_flight.len() < before
    }
}

impl<Z: Zone> TestHost<Z> {
    /// The calls the zone made since the last drain, oldest first, as a host hands them to its
    /// call sink. They stay in flight until [`call_result`](Self::call_result) answers them. A
    /// CALL a host refuses makes no call: a key already in flight, and what the SDK refuses
    /// before sending (a bad key or function name, arguments too long or not JSON). The zone's
    /// own bounds, from the host's config (calls in flight, `max_call_bytes`), are not kept
    /// here.
    ///
    /// ```
    /// use zonekeep_guest::testing::TestHost;
    /// use zonekeep_guest::{CallResult, Ctx, PlayerId, Zone};
    ///
    /// /// Each input buys an item; a granted purchase counts.
    /// #[derive(Default)]
    /// struct Shop {
    ///     bought: u32,
    /// }
    ///
    /// impl Zone for Shop {
    ///     type Input = Vec<u8>;
    ///     fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
    ///         Ok(Shop::default())
    ///     }
    ///     fn on_input(&mut self, ctx: &mut Ctx<'_>, _player: PlayerId, input: Vec<u8>) {
    ///         let item = input.first().copied().unwrap_or(0);
    ///         let _ = ctx.call(&format!("order-{item}"), "buy", &format!("{{\"item\":{item}}}"));
    ///     }
    ///     fn on_call_result(&mut self, _ctx: &mut Ctx<'_>, _key: &str, result: &CallResult) {
    ///         if matches!(result, CallResult::Ok(_)) {
    ///             self.bought += 1;
    ///         }
    ///     }
    ///     fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    /// }
    ///
    /// let mut host = TestHost::<Shop>::new(50_000);
    /// host.create(1, "shop-1", "{}").unwrap();
    /// host.input(1, &[7]).unwrap();
    /// let calls = host.drain_calls();
    /// assert_eq!((calls[0].key.as_str(), calls[0].args.as_str()), ("order-7", r#"{"item":7}"#));
    /// host.call_result("order-7", &CallResult::Ok("{}".into())).unwrap();
    /// assert_eq!(host.zone().unwrap().bought, 1);
    /// assert_eq!(host.calls_in_flight(), 0);
    /// ```
    pub fn drain_calls(&mut self) -> Vec<Call> {
        self.calls.drain()
    }

    /// How many calls are in flight (made, not answered yet).
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// CALL_RESULT (at the current tick; a host delivers a result at the start of the tick
    /// after it arrived): `result` for the call in flight under `key`, which it ends. As a host
    /// does, a result for a key not in flight (answered already, or never called) is dropped:
    /// the zone is not called, and no command comes back.
    pub fn call_result(&mut self, key: &str, result: &CallResult) -> Result<Vec<Command>, Fatal> {
        if !self.calls.answer(key) {
            return Ok(Vec::new());
        }
        let input = super::input::call_result(self.tick, key, result);
        self.call(Op::CallResult, &input)
    }
}
