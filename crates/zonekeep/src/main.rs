//! `zonekeep`: run a host (`serve`), mint a ticket (`ticket`) or load-test a host (`bench`).
//!
//! Configuration precedence for every setting: command-line flag >
//! environment variable (`ZONEKEEP_*`) > TOML file (`--config`) > default.
// Doc comments on the clap structs are the `--help` text, written for a terminal (`<pid>` is a
// placeholder there, not an HTML tag).
#![allow(rustdoc::invalid_html_tags)]

mod bench;
mod cli;
mod ledger_zone;
mod persist_args;
mod workload;

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
