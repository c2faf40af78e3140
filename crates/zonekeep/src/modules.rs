//! `zonekeep serve --module KIND[=FILE]`: zone kinds whose game code is a WebAssembly module.
//!
//! With a file (local development) the module is read at start and the file is watched: when it
//! changes, the new module is deployed to this host as an admin deploy would (running zones are
//! frozen, saved and restored into it; if one refuses its save, every zone stays on the old
//! module). A build rewrites the file over some time, so a change is deployed only once the file
//! has kept the same size and modification time for [`SETTLE`], and only if it loads: a
//! half-written file is never deployed, not even as a refused deploy. Without a file the kind runs what the store's deploys say (`zonekeep module push`),
//! as every host of a fleet does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::Value;
use zonekeep_core::ZoneConfig;
use zonekeep_server::code::{CheckedCode, CodeKinds, OnRefusal};
use zonekeep_server::upgrade::Upgrader;
use zonekeep_server::HostBuilder;
use zonekeep_wasm::{ModuleEngine, ModuleKind, Sandbox, ZoneModule};

/// How often a module file is checked for a change.
const WATCH_PERIOD: Duration = Duration::from_millis(250);

/// How long a changed module file must stay unchanged (size and modification time) before it
/// is deployed: a build writing it is done by then.
const SETTLE: Duration = Duration::from_millis(500);

/// What a file looks like: its modification time and size.
type Stamp = (SystemTime, u64);

/// Decides when a watched module file is ready to deploy: after it changed from what was last
/// deployed (or seen at start) and then kept one stamp for the settle time.
#[derive(Debug)]
struct Debounce {
    settle: Duration,
    /// The stamp last deployed or refused (a file is tried once per stamp).
    done: Option<Stamp>,
    /// A new stamp and when it was first seen.
    pending: Option<(Stamp, Instant)>,
}

impl Debounce {
    fn new(start: Option<Stamp>, settle: Duration) -> Self {
        Debounce {
            settle,
            done: start,
            pending: None,
        }
    }

    /// Feeds one look at the file (`None`: missing or unreadable); true when it should be
    /// deployed now.
    fn observe(&mut self, stamp: Option<Stamp>, now: Instant) -> bool {
        let Some(stamp) = stamp else {
            self.pending = None;
            return false;
        };
        if self.done == Some(stamp) {
            self.pending = None;
            return false;
        }
        match self.pending {
            Some((s, since)) if s == stamp => {
                if now.saturating_duration_since(since) >= self.settle {
                    self.done = Some(stamp);
                    self.pending = None;
                    return true;
                }
                false
            }
            _ => {
                self.pending = Some((stamp, now));
                false
            }
        }
    }
}

/// One `--module KIND[=FILE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleArg {
    /// The zone kind it registers.
    pub kind: String,
    /// The `.wasm` file; none: the store's deploy.
    pub file: Option<PathBuf>,
}

/// Parses `KIND` or `KIND=FILE` (clap value parser).
pub(crate) fn parse_module_arg(s: &str) -> Result<ModuleArg, String> {
    let (kind, file) = match s.split_once('=') {
        Some((kind, "")) => return Err(format!("{kind}=: the module file is empty")),
        Some((kind, file)) => (kind, Some(PathBuf::from(file))),
        None => (s, None),
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
    Ok(ModuleArg {
        kind: kind.to_owned(),
        file,
    })
}

/// This host's module kinds, on one engine: what the server deploys to (see
/// [`zonekeep_server::code`]).
#[derive(Debug)]
pub(crate) struct ModuleHost {
    engine: Arc<ModuleEngine>,
    kinds: BTreeMap<String, Arc<ModuleKind>>,
}

impl CodeKinds for ModuleHost {
    fn kinds(&self) -> Vec<String> {
        self.kinds.keys().cloned().collect()
    }

    fn current(&self, kind: &str) -> Option<String> {
        self.kinds.get(kind)?.current().map(|m| m.digest_hex())
    }

    fn check(&self, kind: &str, code: &[u8]) -> Result<CheckedCode, String> {
        if !self.kinds.contains_key(kind) {
            return Err(format!("no module kind {kind:?} here"));
        }
        let module = ZoneModule::load(&self.engine, code).map_err(|e| e.to_string())?;
        Ok(CheckedCode::new(module.digest_hex(), module))
    }

    fn install(&self, kind: &str, checked: CheckedCode) -> Result<String, String> {
        let k = self
            .kinds
            .get(kind)
            .ok_or_else(|| format!("no module kind {kind:?} here"))?;
        let digest = checked.sha256().to_owned();
        let module = checked
            .into_inner::<Arc<ZoneModule>>()
            .ok_or_else(|| format!("the code checked for {kind:?} is not a module"))?;
        k.replace(module);
        Ok(digest)
    }

    fn revert(&self, kind: &str) -> bool {
        self.kinds.get(kind).is_some_and(|k| k.revert())
    }

    fn previous(&self, kind: &str) -> Option<Vec<u8>> {
        Some(self.kinds.get(kind)?.previous()?.bytes().to_vec())
    }

    fn keeps_characters(&self, kind: &str) -> Option<bool> {
        Some(self.kinds.get(kind)?.current()?.settings().characters)
    }
}

fn read(file: &Path) -> Result<Vec<u8>> {
    std::fs::read(file).with_context(|| format!("reading {}", file.display()))
}

/// What a file looks like now: a change of either means it was rewritten.
fn stamp(file: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(file).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Registers every `--module` kind on `builder`; each file must load now.
pub(crate) fn register_modules(
    mut builder: HostBuilder,
    args: &[ModuleArg],
) -> Result<(HostBuilder, Option<Arc<ModuleHost>>)> {
    if args.is_empty() {
        return Ok((builder, None));
    }
    let engine = ModuleEngine::new(Sandbox::default())?;
    let mut kinds = BTreeMap::new();
    for arg in args {
        anyhow::ensure!(
            !kinds.contains_key(&arg.kind),
            "zone kind {:?} is given more than one --module",
            arg.kind
        );
        let kind = match &arg.file {
            Some(file) => {
                let module = ZoneModule::load(&engine, &read(file)?)
                    .with_context(|| format!("loading {}", file.display()))?;
                tracing::info!(kind = %arg.kind, file = %file.display(), sha256 = %module.digest_hex(), bytes = module.size(), "module loaded");
                ModuleKind::new(arg.kind.clone(), module)
            }
            None => ModuleKind::empty(arg.kind.clone()),
        };
        builder = builder.zone_factory(&arg.kind, ZoneConfig::default(), Value::Null, |k| {
            zonekeep_wasm::register(k, &kind)
        });
        kinds.insert(arg.kind.clone(), kind);
    }
    let host = Arc::new(ModuleHost { engine, kinds });
    Ok((builder.code_kinds(host.clone()), Some(host)))
}

/// Watches every `--module KIND=FILE` file for the life of the process, deploying it to this
/// host when it changes (see the [module docs](self)).
pub(crate) fn watch_files(
    host: &Arc<ModuleHost>,
    args: &[ModuleArg],
    upgrader: Upgrader,
) -> Result<()> {
    let runtime = tokio::runtime::Handle::current();
    for arg in args {
        let Some(file) = arg.file.clone() else {
            continue;
        };
        let code: Arc<dyn CodeKinds> = host.clone();
        let (host, kind, upgrader, runtime) =
            (code, arg.kind.clone(), upgrader.clone(), runtime.clone());
        let mut debounce = Debounce::new(stamp(&file), SETTLE);
        std::thread::Builder::new()
            .name(format!("zonekeep-module-watch-{kind}"))
            .spawn(move || loop {
                std::thread::sleep(WATCH_PERIOD);
                if !debounce.observe(stamp(&file), Instant::now()) {
                    continue;
                }
                let bytes = match read(&file) {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::error!(%kind, error = %format!("{e:#}"), "module file changed but cannot be read");
                        continue;
                    }
                };
                // Validated before the deploy: a file that does not load is reported here and
                // the kind is not touched (the next write of the file is tried again).
                if let Err(e) = host.check(&kind, &bytes) {
                    tracing::warn!(%kind, error = %e, "module file changed but does not load; not deployed, the kind keeps the module it had");
                    continue;
                }
                let deployed = runtime.block_on(zonekeep_server::code::deploy(
                    &host,
                    None,
                    &upgrader,
                    &kind,
                    &bytes,
                    OnRefusal::RollBack,
                ));
                match deployed {
                    Ok(o) if o.rolled_back => {
                        tracing::error!(%kind, refused = ?o.upgrade.refused().collect::<Vec<_>>(), "module file changed; a zone refused its save in it, so every zone stays on the module it had");
                    }
                    Ok(o) => {
                        tracing::info!(%kind, sha256 = %o.sha256, zones = o.upgrade.zones.len(), frozen_inputs = o.upgrade.frozen_inputs(), "module file changed; deployed");
                    }
                    Err(e) => {
                        tracing::error!(%kind, error = %e, "module file changed but does not load; the kind keeps the module it had");
                    }
                }
            })
            .context("starting the module watcher")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, len: u64) -> Option<Stamp> {
        Some((SystemTime::UNIX_EPOCH + Duration::from_secs(secs), len))
    }

    #[test]
    fn a_file_being_written_is_deployed_once_it_has_settled() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut d = Debounce::new(at(1, 100), Duration::from_millis(500));
        assert!(!d.observe(at(1, 100), ms(0)), "unchanged since start");
        // A build writes the file in pieces: the size grows at every look.
        assert!(!d.observe(at(2, 10), ms(250)));
        assert!(!d.observe(at(2, 4000), ms(500)));
        assert!(!d.observe(at(3, 9000), ms(750)));
        // Done writing: the same stamp must hold for the settle time.
        assert!(!d.observe(at(3, 9000), ms(1000)));
        assert!(!d.observe(at(3, 9000), ms(1249)));
        assert!(d.observe(at(3, 9000), ms(1250)), "settled: deploy");
        assert!(!d.observe(at(3, 9000), ms(1500)), "once per stamp");
        assert!(!d.observe(at(3, 9000), ms(5000)));
    }

    #[test]
    fn a_missing_file_or_a_return_to_the_deployed_one_deploys_nothing() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut d = Debounce::new(at(1, 100), Duration::from_millis(500));
        assert!(!d.observe(at(2, 50), ms(0)));
        // Removed mid-build (a build may replace the file): the wait starts over.
        assert!(!d.observe(None, ms(250)));
        assert!(!d.observe(at(2, 50), ms(600)));
        assert!(!d.observe(at(2, 50), ms(1000)));
        assert!(d.observe(at(2, 50), ms(1100)));
        // Put back as it was deployed: nothing new to deploy.
        assert!(!d.observe(at(2, 50), ms(2000)));
        assert!(!d.observe(at(2, 50), ms(9000)));
    }

    #[test]
    fn module_args_are_a_kind_with_an_optional_file() {
        assert_eq!(
            parse_module_arg("tag=mods/tag.wasm"),
            Ok(ModuleArg {
                kind: "tag".into(),
                file: Some("mods/tag.wasm".into())
            })
        );
        assert_eq!(
            parse_module_arg("tag"),
            Ok(ModuleArg {
                kind: "tag".into(),
                file: None
            })
        );
        for bad in ["=x.wasm", "tag=", "ta g=x.wasm", "t/x=y", ""] {
            assert!(parse_module_arg(bad).is_err(), "{bad}");
        }
    }
}
