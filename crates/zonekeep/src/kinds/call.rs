//! `call-test`: a small, real zone kind that makes durable calls, for exercising them end to end
//! (the call crash test drives it through `zonekeep serve` with a call webhook). A dev kind:
//! registered only with `--dev` or `--dev-kinds`.
//!
//! - Input: 8 bytes, a `u64` LE number `n` the client picks (unique, so a test can tell calls
//!   apart across restarts).
//! - Each input makes the call `buy-{n}` of function `grant` with arguments `{"n": n}`.
//! - Each result is appended to the zone's saved list of answered keys (a result delivered twice
//!   would show as the key twice), and a successful one adds its `gold` to the zone's total.
//! - Save: JSON `{"v": 1, "answered": [key, ...], "gold": g}`.

use serde_json::{json, Value};
use zonekeep_core::{CallKey, CallResult, Ctx, InputRefusal, PlayerId, Zone, ZoneError, ZoneInit};

/// The save format version this code reads and writes.
const SAVE_VERSION: u64 = 1;

/// The zone: the calls answered so far and the gold they granted.
#[derive(Debug, Default)]
pub struct CallZone {
    answered: Vec<String>,
    gold: i64,
}

impl Zone for CallZone {
    type Input = u64;

    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(CallZone::default())
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<u64, InputRefusal> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "expected 8 bytes (u64 LE)"))?;
        Ok(u64::from_le_bytes(b))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, _player: PlayerId, n: u64) {
        if let Err(e) = ctx.call(&format!("buy-{n}"), "grant", json!({ "n": n })) {
            tracing::warn!(error = %e, "call-test: call not made");
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn on_call_result(&mut self, _ctx: &mut Ctx<'_>, key: &CallKey, result: &CallResult) {
        if let CallResult::Ok(v) = result {
            self.gold += v.get("gold").and_then(Value::as_i64).unwrap_or(0);
        }
        self.answered.push(key.as_str().to_owned());
    }

    fn save(&self) -> Option<Vec<u8>> {
        let v = json!({"v": SAVE_VERSION, "answered": self.answered, "gold": self.gold});
        Some(v.to_string().into_bytes())
    }

    fn restore(_init: &ZoneInit, _ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let bad = |what: &str| ZoneError::Restore(format!("call-test save: {what}"));
        let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
        if v.get("v").and_then(Value::as_u64) != Some(SAVE_VERSION) {
            return Err(bad("unknown version"));
        }
        let answered = v
            .get("answered")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("answered missing"))?
            .iter()
            .map(|k| {
                k.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad("a key is not text"))
            })
            .collect::<Result<_, _>>()?;
        let gold = v
            .get("gold")
            .and_then(Value::as_i64)
            .ok_or_else(|| bad("gold missing"))?;
        Ok(CallZone { answered, gold })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use zonekeep_core::{
        CallAnswer, Claims, Clock, ManualClock, Principal, Role, ZoneConfig, ZoneHost,
    };

    use super::*;

    #[test]
    fn an_input_makes_a_call_and_its_result_is_saved() {
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "c".into(),
            kind: "call-test".into(),
            params: Value::Null,
        };
        let mut h =
            ZoneHost::new::<CallZone>(init.clone(), ZoneConfig::default(), Arc::new(clock.clone()))
                .unwrap();
        let p = h
            .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
            .unwrap();
        assert!(h.handle_input(p, 1, 0, &4u64.to_le_bytes()).is_accepted());
        clock.advance(h.config().dt());
        h.advance(clock.now());
        let calls = h.drain_calls();
        assert_eq!(calls[0].key.as_str(), "buy-4");
        assert_eq!(calls[0].args, json!({"n": 4}));
        h.handle_call_result(CallAnswer {
            key: calls[0].key.clone(),
            result: CallResult::Ok(json!({"gold": 40})),
        });
        clock.advance(h.config().dt());
        h.advance(clock.now());
        let saved = h.zone::<CallZone>().unwrap().save().unwrap();
        let v: Value = serde_json::from_slice(&saved).unwrap();
        assert_eq!(v, json!({"v": 1, "answered": ["buy-4"], "gold": 40}));
    }
}
