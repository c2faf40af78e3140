//! `zonekeep`: run a host (`serve`) or mint a ticket (`ticket`).
//!
//! Configuration precedence for every setting: command-line flag >
//! environment variable (`ZONEKEEP_*`) > TOML file (`--config`) > default.

mod bench;
mod cli;
mod ledger_test;
mod persist_args;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zonekeep: {e:#}");
            ExitCode::FAILURE
        }
    }
}
