//! `zonekeep`: run a host (`serve`), mint a ticket (`ticket`), load-test a host (`bench`) or
//! replay a zone recording (`replay`), deploy a module (`module`), write typed client code
//! (`codegen`) or relay a host's zones to clients (`relay`).
//!
//! Configuration precedence for every setting: command-line flag >
//! environment variable (`ZONEKEEP_*`) > TOML file (`--config`) > default.
// Doc comments on the clap structs are the `--help` text, written for a terminal (`<pid>` is a
// placeholder there, not an HTML tag).
#![allow(rustdoc::invalid_html_tags)]

mod bench;
mod cli;
mod codegen;
mod kinds;
mod module_cmd;
mod modules;
mod persist_args;
mod relay_cmd;
mod replay;
mod static_site;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("zonekeep: {e:#}");
            ExitCode::FAILURE
        }
    }
}
