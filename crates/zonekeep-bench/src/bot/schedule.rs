//! One bot's input schedule and payloads: the arena's open-loop circle (WORKLOADS.md arena §3: first input
//! after a phase offset of `b · interval / N`, then one per interval) or the generic templates.

use std::time::{Duration, Instant};

use crate::arena::math::{encode_input, ArenaConsts, BotParams, Mulberry32};
use crate::config::{BenchConfig, Workload};
use crate::template::{InputFormat, RenderCtx, Template};

/// Produces a bot's inputs.
#[derive(Debug, Clone)]
pub(crate) enum InputGen {
    Arena {
        consts: ArenaConsts,
        params: BotParams,
        j: u64,
    },
    Generic {
        templates: Vec<Template>,
        format: InputFormat,
        next: usize,
        rng: Mulberry32,
        bot: u32,
    },
    None,
}

/// One input: its payload and, for the arena, the displacement (the probe folds it).
#[derive(Debug, Clone)]
pub(crate) struct NextInput {
    pub payload: Vec<u8>,
    pub arena: Option<(f64, f64)>,
}

impl InputGen {
    pub fn new(cfg: &BenchConfig, bot: u32) -> Self {
        match &cfg.workload {
            Workload::Arena(p) => InputGen::Arena {
                consts: p.consts,
                params: BotParams::new(bot, p.consts.world),
                j: 0,
            },
            Workload::Generic { templates, format } if !templates.is_empty() => InputGen::Generic {
                templates: templates.clone(),
                format: *format,
                next: 0,
                rng: Mulberry32::new(0x5eed_0000 ^ bot),
                bot,
            },
            _ => InputGen::None,
        }
    }

    /// The next input, given the newest server tick seen.
    pub fn next(&mut self, tick: u64) -> Option<NextInput> {
        match self {
            InputGen::Arena { consts, params, j } => {
                let (dx, dy) = params.input(consts, *j);
                *j += 1;
                Some(NextInput {
                    payload: encode_input(dx, dy).to_vec(),
                    arena: Some((dx, dy)),
                })
            }
            InputGen::Generic {
                templates,
                format,
                next,
                rng,
                bot,
            } => {
                let t = templates.get(*next % templates.len().max(1))?;
                *next = next.wrapping_add(1);
                let payload = t.render_bytes(RenderCtx { bot: *bot, tick }, rng, *format);
                Some(NextInput {
                    payload,
                    arena: None,
                })
            }
            InputGen::None => None,
        }
    }
}

/// When a bot's first input goes out after its join: `index · interval / bots`, spreading the
/// bots' inputs evenly over each interval.
pub(crate) fn first_input_at(
    joined: Instant,
    interval: Duration,
    index: u32,
    bots: u32,
) -> Instant {
    let offset = interval.mul_f64(f64::from(index) / f64::from(bots.max(1)));
    joined + offset
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::arena::math::decode_input;
    use crate::arena::ArenaParams;
    use crate::config::Auth;

    fn cfg(w: Workload) -> BenchConfig {
        let mut c = BenchConfig::new(
            "ws://x",
            "z",
            100,
            Auth::Join {
                url: "http://x".into(),
            },
        );
        c.workload = w;
        c
    }

    #[test]
    fn arena_inputs_follow_the_circle() {
        let c = cfg(Workload::Arena(ArenaParams::default()));
        let mut g = InputGen::new(&c, 1);
        let consts = ArenaConsts::default();
        let bp = BotParams::new(1, consts.world);
        for j in 0..10 {
            let n = g.next(0).unwrap();
            assert_eq!(n.arena, Some(bp.input(&consts, j)));
            assert_eq!(decode_input(&n.payload), n.arena);
        }
    }

    #[test]
    fn generic_templates_rotate() {
        let c = cfg(Workload::Generic {
            templates: vec![
                Template::parse(r#"{"a":"$bot"}"#).unwrap(),
                Template::parse(r#"{"t":"$tick"}"#).unwrap(),
            ],
            format: InputFormat::Json,
        });
        let mut g = InputGen::new(&c, 4);
        assert_eq!(g.next(9).unwrap().payload, br#"{"a":4}"#);
        assert_eq!(g.next(9).unwrap().payload, br#"{"t":9}"#);
        assert_eq!(g.next(9).unwrap().payload, br#"{"a":4}"#);
        assert!(InputGen::new(
            &cfg(Workload::Idle {
                ping_every: Duration::from_secs(1)
            }),
            0
        )
        .next(0)
        .is_none());
    }

    #[test]
    fn phase_offsets_spread_over_one_interval() {
        let t0 = Instant::now();
        let i = Duration::from_millis(100);
        assert_eq!(first_input_at(t0, i, 0, 100), t0);
        assert_eq!(
            first_input_at(t0, i, 50, 100),
            t0 + Duration::from_millis(50)
        );
        assert_eq!(
            first_input_at(t0, i, 99, 100),
            t0 + Duration::from_millis(99)
        );
    }
}
