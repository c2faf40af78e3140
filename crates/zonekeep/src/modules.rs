//! `zonekeep serve --module KIND=FILE`: zone kinds whose game code is a WebAssembly module read
//! from a file, for local development. The file is watched: when it changes and the new module
//! loads, zones of the kind created or restored from then on run it (a zone already running
//! keeps its instance); when it does not load, the kind keeps the module it had and the log says
//! why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use zonekeep_core::ZoneConfig;
use zonekeep_server::HostBuilder;
use zonekeep_wasm::{ModuleEngine, ModuleKind, Sandbox, ZoneModule};

/// How often a module file is checked for a change.
const WATCH_PERIOD: Duration = Duration::from_millis(500);

/// One `--module KIND=FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleArg {
    /// The zone kind it registers.
    pub kind: String,
    /// The `.wasm` file.
    pub file: PathBuf,
}

/// Parses `KIND=FILE` (clap value parser).
pub(crate) fn parse_module_arg(s: &str) -> Result<ModuleArg, String> {
    let Some((kind, file)) = s.split_once('=') else {
        return Err(format!("expected KIND=FILE, got {s:?}"));
    };
    if kind.is_empty()
        || kind.len() > 64
        || !kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    {
        return Err(format!(
            "zone kind {kind:?}: 1 to 64 characters of a-z, A-Z, 0-9, '-' and '_'"
        ));
    }
    if file.is_empty() {
        return Err("the module file is empty".into());
    }
    Ok(ModuleArg {
        kind: kind.to_owned(),
        file: PathBuf::from(file),
    })
}

fn load(engine: &Arc<ModuleEngine>, file: &Path) -> Result<Arc<ZoneModule>> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    ZoneModule::load(engine, &bytes).with_context(|| format!("loading {}", file.display()))
}

/// What a file looks like now: a change of either means it was rewritten.
fn stamp(file: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(file).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Registers every `--module` kind on `builder`; each file must load now.
pub(crate) fn register_modules(
    mut builder: HostBuilder,
    args: &[ModuleArg],
) -> Result<HostBuilder> {
    if args.is_empty() {
        return Ok(builder);
    }
    let engine = ModuleEngine::new(Sandbox::default())?;
    for arg in args {
        if args.iter().filter(|a| a.kind == arg.kind).count() > 1 {
            bail!("zone kind {:?} is given more than one --module", arg.kind);
        }
        let module = load(&engine, &arg.file)?;
        tracing::info!(kind = %arg.kind, file = %arg.file.display(), sha256 = %module.digest_hex(), bytes = module.size(), "module loaded");
        let kind = ModuleKind::new(arg.kind.clone(), module);
        builder = builder.zone_factory(&arg.kind, ZoneConfig::default(), Value::Null, |kinds| {
            zonekeep_wasm::register(kinds, &kind)
        });
        watch(engine.clone(), kind, arg.file.clone())?;
    }
    Ok(builder)
}

/// Reloads `kind` from `file` whenever the file changes, for the life of the process.
fn watch(engine: Arc<ModuleEngine>, kind: Arc<ModuleKind>, file: PathBuf) -> Result<()> {
    let mut seen = stamp(&file);
    std::thread::Builder::new()
        .name(format!("zonekeep-module-watch-{}", kind.name()))
        .spawn(move || loop {
            std::thread::sleep(WATCH_PERIOD);
            let now = stamp(&file);
            if now == seen || now.is_none() {
                continue;
            }
            seen = now;
            match load(&engine, &file) {
                Ok(module) => {
                    let digest = module.digest_hex();
                    let old = kind.replace(module);
                    if old.digest() != kind.current().digest() {
                        tracing::info!(kind = %kind.name(), sha256 = %digest, "module reloaded: zones created or restored from now on run it");
                    }
                }
                Err(e) => {
                    tracing::error!(kind = %kind.name(), error = %format!("{e:#}"), "module changed but does not load; the kind keeps the module it had");
                }
            }
        })
        .context("starting the module watcher")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_args_are_kind_equals_file() {
        assert_eq!(
            parse_module_arg("tag=mods/tag.wasm"),
            Ok(ModuleArg {
                kind: "tag".into(),
                file: "mods/tag.wasm".into()
            })
        );
        for bad in ["tag", "=x.wasm", "tag=", "ta g=x.wasm", "t/x=y"] {
            assert!(parse_module_arg(bad).is_err(), "{bad}");
        }
    }
}
