//! A zone module that buys through durable calls: an external effect the zone asks for under its
//! own key, whose result comes back into the zone on a later tick. Built as a module, it is the
//! one the module host's tests run:
//!
//! ```sh
//! cargo build -p zonekeep-guest --example calls --target wasm32-unknown-unknown --profile module
//! ```
//!
//! Inputs: `[1, n]` buys item `n`: a call of `buy` under the key `order-n` with the arguments
//! `{"item":n}`; `[2]` tries a call whose arguments are not JSON, which the SDK refuses without
//! sending it. A result `Ok` whose JSON holds `"gold": g` puts `g` in the till; an `Err` counts
//! as a failed purchase. Either way the zone sends everyone an event (topic 1): the key, `=`,
//! then `ok` or the error's code.
//!
//! One entity of kind `till` shows the gold, the purchases waiting for their result, the failed
//! ones and the calls refused. The zone saves all of it, with the keys it waits for: the host
//! keeps the calls in flight with the zone's snapshot and sends them again after a restore, and
//! their results then find the purchases waiting.

use std::collections::BTreeSet;

use zonekeep_guest::{
    export_zone, log, CallResult, Ctx, Entity, EntityKind, EventTarget, Kind, Level, PlayerId,
    Reader, Writer, Zone,
};

/// What the till shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, EntityKind)]
struct Till {
    /// Gold the answered purchases brought.
    gold: u32,
    /// Purchases waiting for their result.
    waiting: u32,
    /// Purchases whose result was an error.
    failed: u32,
    /// Calls the SDK refused.
    refused: u32,
}

/// The zone: the till's entity, what it shows, and the keys of the purchases waiting.
struct Shop {
    till: Entity,
    shown: Till,
    now: Till,
    waiting: BTreeSet<String>,
}

impl Shop {
    /// A shop showing `now`, waiting for `waiting`.
    fn open(ctx: &mut Ctx<'_>, mut now: Till, waiting: BTreeSet<String>) -> Self {
        let kind: Kind = ctx.declare::<Till>();
        now.waiting = u32::try_from(waiting.len()).unwrap_or(u32::MAX);
        let till = ctx.spawn_with(kind, 0.0, 0.0, &now);
        Self {
            till,
            shown: now,
            now,
            waiting,
        }
    }

    /// Sends what changed on the till.
    fn show(&mut self, ctx: &mut Ctx<'_>) {
        self.now.waiting = u32::try_from(self.waiting.len()).unwrap_or(u32::MAX);
        ctx.update(self.till, &self.shown, &self.now);
        self.shown = self.now;
    }
}

/// The `gold` of a purchase's answer (0 when it names none).
fn gold(value: &str) -> u32 {
    serde_json::from_str::<serde_json::Value>(value)
        .ok()
        .and_then(|v| v.get("gold")?.as_u64())
        .map_or(0, |g| u32::try_from(g).unwrap_or(u32::MAX))
}

impl Zone for Shop {
    type Input = Vec<u8>;

    fn create(ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self::open(ctx, Till::default(), BTreeSet::new()))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: Vec<u8>) {
        let made = match input.as_slice() {
            [1, item] => {
                let key = format!("order-{item}");
                let made = ctx.call(&key, "buy", &format!("{{\"item\":{item}}}"));
                if made.is_ok() {
                    // A key still in flight is refused by the host, not here: it is waited for
                    // once.
                    self.waiting.insert(key);
                }
                made
            }
            [2] => ctx.call("order-bad", "buy", "{item"),
            _ => Ok(()),
        };
        if let Err(e) = made {
            log(Level::Warn, &format!("player {player}: {e}"));
            self.now.refused = self.now.refused.saturating_add(1);
        }
        self.show(ctx);
    }

    fn on_call_result(&mut self, ctx: &mut Ctx<'_>, key: &str, result: &CallResult) {
        self.waiting.remove(key);
        let said = match result {
            CallResult::Ok(value) => {
                self.now.gold = self.now.gold.saturating_add(gold(value));
                "ok"
            }
            CallResult::Err { code, .. } => {
                self.now.failed = self.now.failed.saturating_add(1);
                code.as_str()
            }
        };
        ctx.event(EventTarget::All, 1, format!("{key}={said}").as_bytes());
        self.show(ctx);
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    /// `u32 gold`, `u32 failed`, `u32 refused`, `u32 n`, then the `n` keys waiting.
    fn save(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(self.now.gold)
            .u32(self.now.failed)
            .u32(self.now.refused)
            .u32(u32::try_from(self.waiting.len()).unwrap_or(u32::MAX));
        for key in &self.waiting {
            w.str(key);
        }
        w.into_vec()
    }

    fn restore(ctx: &mut Ctx<'_>, _params: &str, bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let read =
            |r: &mut Reader<'_>| -> Result<(Till, BTreeSet<String>), zonekeep_guest::DecodeError> {
                let now = Till {
                    gold: r.u32()?,
                    failed: r.u32()?,
                    refused: r.u32()?,
                    waiting: 0,
                };
                let n = r.u32()?;
                let mut waiting = BTreeSet::new();
                for _ in 0..n {
                    waiting.insert(r.str()?.to_owned());
                }
                r.finish()?;
                Ok((now, waiting))
            };
        let (now, waiting) = read(&mut r).map_err(|e| format!("bad save: {e}"))?;
        Ok(Self::open(ctx, now, waiting))
    }
}

export_zone!(Shop);
