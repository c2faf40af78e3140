//! `zonekeep replay FILE`: re-run a zone recording with this build's zone kinds (the registry
//! `serve` uses) and report the first divergent tick.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use zonekeep_core::recording::{replay, ReplayReport, MAX_HEADER_BODY};
use zonekeep_server::Host;

/// Largest recording read: the admin API caps recordings well below this.
const MAX_FILE_BYTES: u64 = 2 * MAX_HEADER_BODY as u64 + (1 << 30);

/// Exit status when the replay differs from the recording.
const DIVERGED: u8 = 1;
/// Exit status when the file or its zone kind cannot be replayed.
const UNREPLAYABLE: u8 = 2;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The recording (as downloaded from `GET /admin/zones/{id}/recording/file`).
    file: PathBuf,
    /// Also register the dev and bench zone kinds, as `serve --dev` or `--dev-kinds` does
    /// (dots, ledger-test, arena-workload, arena-workload-budget, arena-workload-crowd).
    #[arg(long, alias = "dev")]
    dev_kinds: bool,
    /// A zone kind whose game code is a module, as KIND=FILE: the module the recorded zone ran.
    #[arg(long = "module", value_name = "KIND=FILE", value_parser = crate::modules::parse_module_arg)]
    modules: Vec<crate::modules::ModuleArg>,
}

/// Replay and print the report; the exit status says how it went.
pub fn run(args: &ReplayArgs) -> ExitCode {
    match replay_file(&args.file, args.dev_kinds, &args.modules) {
        Ok(report) => {
            println!("{report}");
            if report.matched() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(DIVERGED)
            }
        }
        Err(e) => {
            eprintln!("zonekeep replay: {e:#}");
            ExitCode::from(UNREPLAYABLE)
        }
    }
}

fn replay_file(
    path: &Path,
    dev_kinds: bool,
    modules: &[crate::modules::ModuleArg],
) -> Result<ReplayReport> {
    if let Some(m) = modules.iter().find(|m| m.file.is_none()) {
        bail!(
            "--module {}: a replay needs the module the zone ran, as --module {}=FILE",
            m.kind,
            m.kind
        );
    }
    let bytes = read_bounded(path)?;
    let builder = crate::kinds::register_kinds(Host::builder(), dev_kinds);
    let (builder, _) = crate::modules::register_modules(builder, modules)?;
    replay(builder.kinds(), &bytes).with_context(|| {
        let hint = if dev_kinds {
            ""
        } else {
            " (dev and bench kinds need --dev-kinds)"
        };
        format!("replaying {}{hint}", path.display())
    })
}

fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        bail!(
            "{} is larger than {MAX_FILE_BYTES} bytes: not a recording this tool reads",
            path.display()
        );
    }
    Ok(bytes)
}
