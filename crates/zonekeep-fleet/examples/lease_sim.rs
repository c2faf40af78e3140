//! Runs the lease protocol simulation over many seeds and prints a summary.
//!
//! ```text
//! cargo run --release -p zonekeep-fleet --example lease_sim -- --seeds 10000 [--start S]
//! ```
//!
//! Exits with status 1 when any seed violated an invariant, after printing the first violation in
//! full (its seed reproduces it: `--start SEED --seeds 1`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Instant;

use zonekeep_fleet::sim::{run, SimConfig, SimReport, Violation};

const USAGE: &str = "usage: lease_sim [--seeds N] [--start S]";

/// `--seeds N` (default 1000) and `--start S` (default 0).
fn parse(mut args: impl Iterator<Item = String>) -> Result<(u64, u64), String> {
    let (mut seeds, mut start) = (1_000, 0);
    while let Some(flag) = args.next() {
        let target = match flag.as_str() {
            "--seeds" => &mut seeds,
            "--start" => &mut start,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        };
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a number\n{USAGE}"))?;
        *target = value
            .parse()
            .map_err(|e| format!("{flag} {value:?}: {e}\n{USAGE}"))?;
    }
    Ok((seeds, start))
}

fn main() -> ExitCode {
    let (seeds, start) = match parse(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let config = SimConfig::default();
    let began = Instant::now();
    let mut total = SimReport::default();
    let mut violations: Vec<Violation> = Vec::new();
    let end = start.saturating_add(seeds);
    for seed in start..end {
        match run(seed, &config) {
            Ok(r) => add(&mut total, &r),
            Err(v) => violations.push(v),
        }
    }
    let took = began.elapsed();
    println!("seeds run:             {seeds} ({start}..{end})");
    println!("violations:            {}", violations.len());
    println!(
        "simulated time:        {:.1} h",
        total.simulated_ms as f64 / 3.6e6
    );
    println!("events:                {}", total.events);
    println!("takeovers:             {}", total.takeovers);
    println!("reloads by the owner:  {}", total.reloads);
    println!("claims refused:        {}", total.claims_refused);
    println!("writes accepted:       {}", total.writes_accepted);
    println!("stale writes refused:  {}", total.stale_writes_refused);
    println!("zones fenced out:      {}", total.fenced_drops);
    println!("lease lapses:          {}", total.lease_lapses);
    println!("expulsions:            {}", total.expulsions);
    println!("registrations delayed: {}", total.registrations_delayed);
    println!("pauses:                {}", total.pauses);
    println!("partitions:            {}", total.partitions);
    println!("crashes:               {}", total.crashes);
    println!("graceful stops:        {}", total.leaves);
    println!("restarts:              {}", total.restarts);
    println!("slow queries:          {}", total.slow_queries);
    println!("hung queries:          {}", total.hung_queries);
    println!("lost queries:          {}", total.lost_queries);
    println!("time taken:            {:.2} s", took.as_secs_f64());
    match violations.first() {
        None => ExitCode::SUCCESS,
        Some(first) => {
            let seeds: Vec<String> = violations.iter().map(|v| v.seed.to_string()).collect();
            println!("violating seeds:       {}", seeds.join(" "));
            println!("\nfirst violation:\n{first}");
            ExitCode::FAILURE
        }
    }
}

/// Adds `r`'s counts to `total` (all but the per-run seed and host count).
fn add(total: &mut SimReport, r: &SimReport) {
    total.simulated_ms += r.simulated_ms;
    total.events += r.events;
    total.takeovers += r.takeovers;
    total.reloads += r.reloads;
    total.first_claims += r.first_claims;
    total.claims_refused += r.claims_refused;
    total.writes_accepted += r.writes_accepted;
    total.stale_writes_refused += r.stale_writes_refused;
    total.fenced_drops += r.fenced_drops;
    total.lease_lapses += r.lease_lapses;
    total.expulsions += r.expulsions;
    total.registrations_delayed += r.registrations_delayed;
    total.pauses += r.pauses;
    total.partitions += r.partitions;
    total.crashes += r.crashes;
    total.leaves += r.leaves;
    total.restarts += r.restarts;
    total.slow_queries += r.slow_queries;
    total.hung_queries += r.hung_queries;
    total.lost_queries += r.lost_queries;
}
