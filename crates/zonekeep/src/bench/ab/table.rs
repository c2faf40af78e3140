//! The medians table: each build's median and min..max spread of every figure, and B/A; and the
//! line about one finished run.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::figures::{RunResult, WORK_COUNTERS};
use super::Build;

/// The table's sections: a title and its keys, in order.
fn sections(runs: &[RunResult]) -> Vec<(&'static str, Vec<String>)> {
    let mut counters: Vec<String> = WORK_COUNTERS.iter().map(|c| (*c).to_owned()).collect();
    let mut extra: BTreeSet<String> = BTreeSet::new();
    let mut stages: BTreeSet<String> = BTreeSet::new();
    for r in runs {
        extra.extend(
            r.work
                .keys()
                .filter(|k| !WORK_COUNTERS.contains(&k.as_str()))
                .cloned(),
        );
        stages.extend(r.stage_s.keys().cloned());
    }
    counters.extend(extra);
    vec![
        (
            "host over the window (times move with the machine's load)",
            [
                "server_cpu_cores",
                "tick_p50_ms",
                "tick_p99_ms",
                "tick_rate_hz",
                "rss_max_mb",
            ]
            .iter()
            .map(|k| (*k).to_owned())
            .collect(),
        ),
        (
            "work per tick (counts: runs of one workload should agree)",
            counters
                .iter()
                .filter(|c| *c != "ticks")
                .map(|c| format!("{c}_per_tick"))
                .collect(),
        ),
        ("work in the window", counters),
        (
            "stage time, mean per timed occurrence, µs",
            stages.iter().map(|s| format!("{s}_us_mean")).collect(),
        ),
    ]
}

/// Median, min and max of some values.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let median = if n % 2 == 1 {
        mid(n / 2)
    } else {
        (mid(n / 2 - 1) + mid(n / 2)) / 2.0
    };
    Some(Spread {
        median,
        min: mid(0),
        max: mid(n - 1),
        n,
    })
}

/// Four significant digits, never an exponent.
pub(super) fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 1000.0 {
        return format!("{v:.0}");
    }
    let digits = (3 - a.log10().floor() as i32).clamp(0, 7) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// B/A of two medians.
fn ratio(a: Option<Spread>, b: Option<Spread>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a.median != 0.0 => Some(b.median / a.median),
        (Some(a), Some(b)) if a.median == 0.0 && b.median == 0.0 => Some(1.0),
        _ => None,
    }
}

/// Medians by build and key.
pub(super) struct Medians {
    sections: Vec<(&'static str, Vec<String>)>,
    a: BTreeMap<String, Spread>,
    b: BTreeMap<String, Spread>,
}

impl Medians {
    pub(super) fn of(runs: &[RunResult]) -> Self {
        let sections = sections(runs);
        let figures: Vec<(Build, BTreeMap<String, f64>)> =
            runs.iter().map(|r| (r.build, r.figures())).collect();
        let of_build = |build: Build| {
            let mut out = BTreeMap::new();
            for key in sections.iter().flat_map(|(_, keys)| keys) {
                let values: Vec<f64> = figures
                    .iter()
                    .filter(|(b, _)| *b == build)
                    .filter_map(|(_, f)| f.get(key).copied())
                    .collect();
                if let Some(s) = spread(&values) {
                    out.insert(key.clone(), s);
                }
            }
            out
        };
        Self {
            a: of_build(Build::A),
            b: of_build(Build::B),
            sections,
        }
    }

    pub(super) fn table(&self) -> String {
        let dash = || "-".to_owned();
        let mut rows: Vec<Option<[String; 6]>> = vec![Some([
            String::new(),
            "A median".into(),
            "A min..max".into(),
            "B median".into(),
            "B min..max".into(),
            "B/A".into(),
        ])];
        let mut titles = Vec::new();
        for (title, keys) in &self.sections {
            let keys: Vec<&String> = keys
                .iter()
                .filter(|k| self.a.contains_key(*k) || self.b.contains_key(*k))
                .collect();
            if keys.is_empty() {
                continue;
            }
            titles.push((rows.len(), *title));
            rows.push(None);
            for key in keys {
                let (a, b) = (self.a.get(key).copied(), self.b.get(key).copied());
                let cells = |s: Option<Spread>| match s {
                    Some(s) => (num(s.median), format!("{}..{}", num(s.min), num(s.max))),
                    None => (dash(), dash()),
                };
                let ((am, asp), (bm, bsp)) = (cells(a), cells(b));
                rows.push(Some([
                    key.clone(),
                    am,
                    asp,
                    bm,
                    bsp,
                    ratio(a, b).map_or_else(dash, |r| format!("{r:.3}")),
                ]));
            }
        }
        let mut width = [0usize; 6];
        for row in rows.iter().flatten() {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (i, row) in rows.iter().enumerate() {
            match row {
                None => {
                    let title = titles.iter().find(|(at, _)| *at == i).map(|(_, t)| *t);
                    out.push_str(&format!("{}\n", title.unwrap_or_default()));
                }
                Some(cells) => {
                    let mut line = String::from("  ");
                    for (j, (c, w)) in cells.iter().zip(width).enumerate() {
                        let pad = w.saturating_sub(c.chars().count());
                        if j == 0 {
                            line.push_str(c);
                            line.push_str(&" ".repeat(pad));
                        } else {
                            line.push_str("  ");
                            line.push_str(&" ".repeat(pad));
                            line.push_str(c);
                        }
                    }
                    out.push_str(line.trim_end());
                    out.push('\n');
                }
            }
        }
        out
    }

    pub(super) fn json(&self) -> Value {
        let side = |m: &BTreeMap<String, Spread>| -> Value {
            m.iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        json!({"median": s.median, "min": s.min, "max": s.max, "runs": s.n}),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let ratios: serde_json::Map<String, Value> = self
            .sections
            .iter()
            .flat_map(|(_, keys)| keys)
            .filter_map(|k| {
                ratio(self.a.get(k).copied(), self.b.get(k).copied()).map(|r| (k.clone(), r.into()))
            })
            .collect();
        json!({"A": side(&self.a), "B": side(&self.b), "b_over_a": ratios})
    }
}

/// One line about a finished run.
pub(super) fn run_line(i: usize, total: usize, r: &RunResult) -> String {
    let s = &r.report.server;
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), num);
    format!(
        "run {}/{total} {}: cpu {} cores, tick p50 {} ms p99 {} ms; in the window {} ticks, {} frames",
        i + 1,
        r.build.name(),
        opt(s.cpu_util_cores),
        opt(s.tick_p50_ms),
        opt(s.tick_p99_ms),
        opt(r.work.get("ticks").copied()),
        opt(r.work.get("frames").copied()),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use zonekeep_bench::Report;

    #[test]
    fn medians_spreads_and_numbers() {
        assert_eq!(spread(&[]), None);
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(spread(&[4.0, 1.0]).unwrap().median, 2.5);
        assert_eq!(num(1234.56), "1235");
        assert_eq!(num(12.3456), "12.35");
        assert_eq!(num(0.000_123_46), "0.0001235");
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.0), "0");
    }

    #[test]
    fn the_table_shows_both_medians_spreads_and_the_ratio() {
        let run = |build, ticks: f64, frames: f64| RunResult {
            build,
            report: Report::default(),
            work: [("ticks".to_owned(), ticks), ("frames".to_owned(), frames)].into(),
            work_at_end: BTreeMap::new(),
            stage_s: BTreeMap::new(),
            stage_n: BTreeMap::new(),
        };
        let runs = [
            run(Build::A, 40.0, 80.0),
            run(Build::B, 40.0, 120.0),
            run(Build::B, 40.0, 120.0),
            run(Build::A, 42.0, 84.0),
        ];
        let t = Medians::of(&runs).table();
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("frames_per_tick"))
            .unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cells,
            ["frames_per_tick", "2", "2..2", "3", "3..3", "1.500"]
        );
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("ticks "))
            .unwrap();
        assert_eq!(line.split_whitespace().nth(2), Some("40..42"));
    }
}
