//! A board as configured (`--board NAME[:op=incr|best|set][:order=desc|asc]
//! [:period=all|daily|weekly][:total=NAME][:keep=N]`).

use zonekeep_store::{check_board_name, BoardDef, BoardOp, BoardOrder, BoardPeriod};

/// Parses one `--board` value into the board's settings; the error says what is wrong.
/// Defaults: `op=incr`, `order=desc`, `period=all`, no total, `keep=8`.
pub fn parse(text: &str) -> Result<BoardDef, String> {
    let mut parts = text.split(':');
    let name = parts.next().unwrap_or_default();
    check_board_name(name).map_err(|e| format!("board {text:?}: {e}"))?;
    let mut def = BoardDef {
        name: name.to_owned(),
        order: BoardOrder::Desc,
        op: BoardOp::Incr,
        period: BoardPeriod::All,
        total: None,
        keep_periods: 8,
    };
    for part in parts {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!("board {name}: {part:?} is not key=value"));
        };
        let bad = |allowed: &str| format!("board {name}: {key} must be one of {allowed}");
        match key {
            "op" => {
                def.op = match value {
                    "incr" => BoardOp::Incr,
                    "best" => BoardOp::Best,
                    "set" => BoardOp::Set,
                    _ => return Err(bad("incr, best, set")),
                }
            }
            "order" => {
                def.order = match value {
                    "desc" => BoardOrder::Desc,
                    "asc" => BoardOrder::Asc,
                    _ => return Err(bad("desc, asc")),
                }
            }
            "period" => {
                def.period = match value {
                    "all" => BoardPeriod::All,
                    "daily" => BoardPeriod::Daily,
                    "weekly" => BoardPeriod::Weekly,
                    _ => return Err(bad("all, daily, weekly")),
                }
            }
            "total" => def.total = Some(value.to_owned()),
            "keep" => {
                def.keep_periods = value
                    .parse::<u32>()
                    .ok()
                    .filter(|k| *k <= zonekeep_store::MAX_KEEP_PERIODS)
                    .ok_or_else(|| {
                        format!(
                            "board {name}: keep must be a number 0..={}",
                            zonekeep_store::MAX_KEEP_PERIODS
                        )
                    })?
            }
            other => return Err(format!("board {name}: unknown setting {other:?}")),
        }
    }
    if let Some(total) = &def.total {
        if total.is_empty() || total.len() > 128 {
            return Err(format!("board {name}: total must be 1..=128 bytes"));
        }
        if def.op != BoardOp::Incr {
            return Err(format!(
                "board {name}: a board following a total adds to it (op=incr)"
            ));
        }
    }
    Ok(def)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_every_setting_parse() {
        let d = parse("score:total=score").unwrap();
        assert_eq!(
            (d.op, d.order, d.period, d.total.as_deref(), d.keep_periods),
            (
                BoardOp::Incr,
                BoardOrder::Desc,
                BoardPeriod::All,
                Some("score"),
                8
            )
        );
        let d = parse("laps.weekly:op=best:order=asc:period=weekly:keep=4").unwrap();
        assert_eq!(
            (d.op, d.order, d.period, d.keep_periods),
            (BoardOp::Best, BoardOrder::Asc, BoardPeriod::Weekly, 4)
        );
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        for (text, says) in [
            ("", "board name"),
            ("a b", "board name"),
            ("s:op", "not key=value"),
            ("s:op=max", "incr, best, set"),
            ("s:order=up", "desc, asc"),
            ("s:period=hourly", "all, daily, weekly"),
            ("s:keep=999", "keep"),
            ("s:colour=red", "unknown setting"),
            ("s:op=best:total=score", "op=incr"),
            ("s:total=", "total must be"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
