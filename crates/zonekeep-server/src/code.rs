//! Zone kinds whose game code is data (modules), deployed at run time: kept in the store by
//! content address, installed on every host of the fleet, and reaching running zones through a
//! freeze barrier (see [`crate::upgrade`]).
//!
//! The server does not run modules itself: the binary hands it a [`CodeKinds`] that can check and
//! install code for its module kinds. A deploy through the admin API checks and compiles the
//! module on the host's [`Compiler`] (never on the network threads), stores it, installs it here,
//! upgrades this host's running zones of the kind and, unless a zone refused (then every zone is
//! rolled back, by default), records the kind's new version in the store. Every other host
//! follows the store's record ([`follow`]): it compiles the module the same way, installs it and
//! upgrades its own zones. A deploy refused at any step before the install leaves nothing behind:
//! nothing stored, nothing installed. A deploy that holds (and an operator's rollback) forgets the
//! failures of the kind's zones, so they may start again on the code now current.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use zonekeep_store::DeployCause;

use crate::upgrade::{UpgradeReport, Upgrader};

/// How often a host looks for deploys made through another host.
pub const FOLLOW_PERIOD: Duration = Duration::from_secs(1);

/// The module kinds of a host: what the server needs of a module host (see `zonekeep-wasm`).
pub trait CodeKinds: Send + Sync {
    /// The kinds whose game code is a module.
    fn kinds(&self) -> Vec<String>;
    /// The SHA-256 (lowercase hex) of the module `kind` runs now, if it has one.
    fn current(&self, kind: &str) -> Option<String>;
    /// Checks and compiles `code` for `kind` without installing it: why it was refused, or the
    /// compiled code for [`install`](Self::install). Slow (compiling is most of a deploy's
    /// cost): the server calls it only on its [`Compiler`]'s own threads.
    fn check(&self, kind: &str, code: &[u8]) -> Result<CheckedCode, String>;
    /// Makes `checked` (from [`check`](Self::check) for the same kind) the module new zones of
    /// `kind` run (the one it replaces is kept for [`revert`](Self::revert)); answers its
    /// SHA-256. Quick: nothing is compiled here.
    fn install(&self, kind: &str, checked: CheckedCode) -> Result<String, String>;
    /// Goes back to the module `kind` ran before the last install (undoing it); false when
    /// there is none.
    fn revert(&self, kind: &str) -> bool;
    /// The bytes of the module a [`revert`](Self::revert) would go back to, if any.
    fn previous(&self, kind: &str) -> Option<Vec<u8>>;
    /// Whether the module `kind` runs now keeps its players' characters (its settings say so,
    /// not the host's config for the kind); `None` when `kind` is not a module kind or has no
    /// module yet.
    fn keeps_characters(&self, kind: &str) -> Option<bool> {
        let _ = kind;
        None
    }
}

/// Whether zones of `kind` take their players' characters: a module kind's own settings decide,
/// another kind's config (`spec_characters`).
pub(crate) fn keeps_characters(
    code: Option<&Arc<dyn CodeKinds>>,
    kind: &str,
    spec_characters: bool,
) -> bool {
    code.and_then(|c| c.keeps_characters(kind))
        .unwrap_or(spec_characters)
}

/// Code checked and compiled by [`CodeKinds::check`], not yet installed: opaque to the server.
pub struct CheckedCode {
    sha256: String,
    code: Box<dyn Any + Send>,
}

impl std::fmt::Debug for CheckedCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedCode")
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl CheckedCode {
    /// `code` (whatever the [`CodeKinds`] implementation compiled), with its SHA-256.
    pub fn new(sha256: String, code: impl Any + Send) -> Self {
        Self {
            sha256,
            code: Box::new(code),
        }
    }

    /// The module's SHA-256 (lowercase hex).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The compiled code, if it is a `T`.
    pub fn into_inner<T: 'static>(self) -> Option<T> {
        self.code.downcast::<T>().ok().map(|b| *b)
    }
}

/// Module compilations waiting for the compiler, at most, before more are refused.
pub const COMPILE_QUEUE: usize = 4;

/// Where a host compiles modules: one compilation at a time on a blocking thread of its own (not
/// the network threads, not a simulation thread), a few more waiting, each bounded in wall time
/// from when it was asked. A compilation past its deadline is answered as refused at once; it
/// finishes on its thread (a compiler cannot be stopped midway) still holding the one slot, so
/// at most one core ever compiles, and what it made is dropped: nothing of it is installed.
/// A module's size and shape (functions, body sizes, locals) are bounded before compiling by
/// the module host itself, which bounds the compiler's memory.
#[derive(Debug)]
pub struct Compiler {
    metrics: CompileMetrics,
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    deadline: Duration,
    /// The module each kind was last refused, from the store's deploys: not compiled again
    /// every [`FOLLOW_PERIOD`].
    refused: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Compiler {
    /// A compiler refusing a compilation not done within `deadline` of being asked; its
    /// metrics go on `registry`.
    pub fn new(deadline: Duration, registry: &mut prometheus_client::registry::Registry) -> Self {
        let metrics = CompileMetrics::default();
        metrics.register(registry);
        Self {
            metrics,
            running: Arc::new(Semaphore::new(1)),
            waiting: AtomicUsize::new(0),
            deadline,
            refused: Default::default(),
        }
    }

    /// True when `sha256` was refused for `kind` the last time the store's deploys were followed.
    fn refused_before(&self, kind: &str, sha256: &str) -> bool {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(kind)
            .is_some_and(|s| s == sha256)
    }

    fn remember_refusal(&self, kind: &str, sha256: &str) {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.to_owned(), sha256.to_owned());
    }

    /// [`CodeKinds::check`] of `bytes` for `kind`, on the compiler's thread within its deadline.
    pub async fn check(
        &self,
        code: &Arc<dyn CodeKinds>,
        kind: &str,
        bytes: &Arc<[u8]>,
    ) -> Result<CheckedCode, DeployError> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) > COMPILE_QUEUE {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            self.metrics.outcome("busy");
            return Err(DeployError::Busy(format!(
                "{} module compilations are already running or waiting on this host; try again shortly",
                COMPILE_QUEUE + 1
            )));
        }
        let (code, kind_owned, bytes) = (code.clone(), kind.to_owned(), bytes.clone());
        let running = self.running.clone();
        let gauge = self.metrics.running.clone();
        let compiled = tokio::time::timeout(self.deadline, async move {
            let permit = running
                .acquire_owned()
                .await
                .map_err(|_| DeployError::Busy("the compiler has stopped".into()))?;
            gauge.inc();
            tokio::task::spawn_blocking(move || {
                let _slot = permit; // held until the compiler is done, even past the deadline
                let checked = code.check(&kind_owned, &bytes);
                gauge.dec();
                checked
            })
            .await
            .map_err(|e| DeployError::Refused(format!("the compiler failed: {e}")))?
            .map_err(DeployError::Refused)
        })
        .await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        match compiled {
            Ok(r) => {
                self.metrics
                    .outcome(if r.is_ok() { "compiled" } else { "refused" });
                r
            }
            Err(_) => {
                self.metrics.outcome("timeout");
                tracing::warn!(%kind, deadline_s = self.deadline.as_secs_f64(), "module refused: compiling took too long");
                Err(DeployError::CompileDeadline(self.deadline.as_millis()))
            }
        }
    }
}

/// The compiler's metrics.
#[derive(Debug, Default)]
struct CompileMetrics {
    running: prometheus_client::metrics::gauge::Gauge,
    outcomes: prometheus_client::metrics::family::Family<
        Vec<(&'static str, &'static str)>,
        prometheus_client::metrics::counter::Counter,
    >,
}

impl CompileMetrics {
    fn register(&self, r: &mut prometheus_client::registry::Registry) {
        r.register(
            "zonekeep_module_compiles_running",
            "Module compilations running now (at most one; a compilation past its deadline runs on until it ends)",
            self.running.clone(),
        );
        r.register(
            "zonekeep_module_compiles",
            "Module compilations asked for, by outcome (compiled, refused, timeout, busy)",
            self.outcomes.clone(),
        );
    }

    fn outcome(&self, outcome: &'static str) {
        self.outcomes
            .get_or_create(&vec![("outcome", outcome)])
            .inc();
    }
}

/// What to do when a running zone's new code refuses its save.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRefusal {
    /// Roll every zone of the kind back to the old code: all zones of a kind run one version.
    #[default]
    RollBack,
    /// Keep the zones that upgraded; the ones that refused stay on the old code.
    KeepUpgraded,
}

/// The result of a deploy on the host that took it.
#[derive(Debug, Clone, Serialize)]
pub struct DeployOutcome {
    /// The zone kind.
    pub kind: String,
    /// The deployed module's SHA-256.
    pub sha256: String,
    /// The kind's version in the store (absent for a host without a store, or when rolled back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// True when the deploy was rolled back (a zone refused and [`OnRefusal::RollBack`]).
    pub rolled_back: bool,
    /// What the upgrade did to each running zone.
    pub upgrade: UpgradeReport,
    /// When rolled back: what the rollback did to each zone that had upgraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<UpgradeReport>,
}

/// Why a deploy was refused before any zone was touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeployError {
    /// This host runs no module kind of that name.
    #[error("this host runs no module kind {0:?}")]
    UnknownKind(String),
    /// The module does not load (its import, export or ABI check failed, its settings or shape
    /// are past the host's limits, or it is empty).
    #[error("{0}")]
    Refused(String),
    /// Compiling it took longer than the host's compile deadline.
    #[error("compiling the module took longer than {0} ms; nothing was installed")]
    CompileDeadline(u128),
    /// The compiler has as much work waiting as it takes.
    #[error("{0}")]
    Busy(String),
    /// The store could not keep the module or record the deploy.
    #[error("store: {0}")]
    Store(String),
    /// A rollback with no earlier module on this host to go back to.
    #[error("zone kind {0:?} has no earlier module on this host to go back to")]
    NothingToRollBack(String),
    /// A rollback to a version the kind's stored history does not hold.
    #[error("zone kind {0:?} has no deploy version {1} in its history")]
    UnknownVersion(String, u64),
    /// A rollback to a version whose module the kind runs already.
    #[error("zone kind {0:?} already runs the module of version {1}")]
    AlreadyRunning(String, u64),
}

/// Deploys `code` to `kind` on this host (see the [module docs](self)). Run it on a task of
/// its own when the caller may go away: past the compile step it must run to its end.
pub async fn deploy(
    code: &Arc<dyn CodeKinds>,
    store: Option<&zonekeep_store::Store>,
    upgrader: &Upgrader,
    kind: &str,
    bytes: &[u8],
    on_refusal: OnRefusal,
) -> Result<DeployOutcome, DeployError> {
    if !code.kinds().iter().any(|k| k == kind) {
        return Err(DeployError::UnknownKind(kind.to_owned()));
    }
    if bytes.is_empty() {
        return Err(DeployError::Refused(
            "the module is empty: send the .wasm file as the request body".into(),
        ));
    }
    install_and_upgrade(
        code,
        store,
        upgrader,
        kind,
        bytes,
        on_refusal,
        DeployCause::Push,
    )
    .await
}

/// Checks, stores and installs `bytes` as `kind`'s module, upgrades the kind's running zones
/// into it and records it in the store under `cause`; a zone's refusal with
/// [`OnRefusal::RollBack`] takes every zone back instead, and nothing is recorded.
async fn install_and_upgrade(
    code: &Arc<dyn CodeKinds>,
    store: Option<&zonekeep_store::Store>,
    upgrader: &Upgrader,
    kind: &str,
    bytes: &[u8],
    on_refusal: OnRefusal,
    cause: DeployCause,
) -> Result<DeployOutcome, DeployError> {
    let bytes: Arc<[u8]> = Arc::from(bytes);
    let checked = upgrader.shared.compiler.check(code, kind, &bytes).await?;
    // Kept in the store only once it loads: a refused module leaves nothing behind.
    if let Some(store) = store {
        store
            .modules
            .put_module(&bytes)
            .await
            .map_err(|e| DeployError::Store(e.to_string()))?;
    }
    let sha256 = code.install(kind, checked).map_err(DeployError::Refused)?;
    let upgrade = upgrader.upgrade_kind(kind).await;
    let refused = upgrade.refused().count() > 0;
    if refused && on_refusal == OnRefusal::RollBack {
        code.revert(kind);
        let rollback = upgrader.upgrade_kind(kind).await;
        tracing::warn!(%kind, %sha256, "deploy rolled back: a zone refused its save in the new module");
        return Ok(DeployOutcome {
            kind: kind.to_owned(),
            sha256,
            version: None,
            rolled_back: true,
            upgrade,
            rollback: Some(rollback),
        });
    }
    let version = record(store, kind, &sha256, cause).await?;
    upgrader.kind_deployed(kind);
    tracing::info!(%kind, %sha256, ?version, cause = cause.as_str(), zones = upgrade.zones.len(), frozen_inputs = upgrade.frozen_inputs(), "module deployed");
    Ok(DeployOutcome {
        kind: kind.to_owned(),
        sha256,
        version,
        rolled_back: false,
        upgrade,
        rollback: None,
    })
}

/// Records `sha256` as the module `kind` runs in the store, when there is one: the kind's new
/// version, which every other host follows.
async fn record(
    store: Option<&zonekeep_store::Store>,
    kind: &str,
    sha256: &str,
    cause: DeployCause,
) -> Result<Option<u64>, DeployError> {
    let Some(store) = store else {
        return Ok(None);
    };
    let deployed = store
        .modules
        .deploy_module(kind, sha256, cause)
        .await
        .map_err(|e| DeployError::Store(e.to_string()))?;
    Ok(Some(deployed.version))
}

/// Takes `kind` back to the module of its stored deploy `version`, any entry of the kind's
/// history (an operator's choice in the console): the module is loaded from the store, checked
/// and installed as a push would be, every running zone is upgraded into it through the same
/// freeze barrier, and the store records it as the kind's new version, caused by a rollback, so
/// every other host follows. If a running zone refuses its save in that module, every zone stays
/// on the module it runs now and the rollback is refused, naming the zone and why.
pub async fn roll_back_to(
    code: &Arc<dyn CodeKinds>,
    store: &zonekeep_store::Store,
    upgrader: &Upgrader,
    kind: &str,
    version: u64,
) -> Result<DeployOutcome, DeployError> {
    if !code.kinds().iter().any(|k| k == kind) {
        return Err(DeployError::UnknownKind(kind.to_owned()));
    }
    let history = store
        .modules
        .module_history(kind, zonekeep_store::MAX_DEPLOY_HISTORY)
        .await
        .map_err(|e| DeployError::Store(e.to_string()))?;
    let target = history
        .into_iter()
        .find(|d| d.version == version)
        .ok_or_else(|| DeployError::UnknownVersion(kind.to_owned(), version))?;
    if code.current(kind).as_deref() == Some(target.sha256.as_str()) {
        return Err(DeployError::AlreadyRunning(kind.to_owned(), version));
    }
    let bytes = store
        .modules
        .get_module(&target.sha256)
        .await
        .map_err(|e| DeployError::Store(e.to_string()))?
        .ok_or_else(|| {
            DeployError::Store(format!(
                "version {version}'s module {} is not stored",
                target.sha256
            ))
        })?;
    let outcome = install_and_upgrade(
        code,
        Some(store),
        upgrader,
        kind,
        &bytes,
        OnRefusal::RollBack,
        DeployCause::Rollback,
    )
    .await?;
    if outcome.rolled_back {
        let why: Vec<String> = outcome
            .upgrade
            .refused()
            .map(|z| format!("{}: {}", z.zone, z.refused.as_deref().unwrap_or("refused")))
            .collect();
        return Err(DeployError::Refused(format!(
            "a zone refused its save in version {version}'s module ({}); every zone stays on the module it runs",
            why.join("; ")
        )));
    }
    tracing::warn!(%kind, to_version = version, new_version = ?outcome.version, "module kind rolled back to an earlier deploy by an operator");
    Ok(DeployOutcome {
        rolled_back: true,
        ..outcome
    })
}

/// Takes `kind` back to the module it ran before its last deploy on this host (an operator's
/// abort): every running zone is upgraded into it through the same freeze barrier, and the store
/// records it as the kind's new version, so every other host follows.
pub async fn roll_back(
    code: &Arc<dyn CodeKinds>,
    store: Option<&zonekeep_store::Store>,
    upgrader: &Upgrader,
    kind: &str,
) -> Result<DeployOutcome, DeployError> {
    if !code.kinds().iter().any(|k| k == kind) {
        return Err(DeployError::UnknownKind(kind.to_owned()));
    }
    let earlier = code
        .previous(kind)
        .ok_or_else(|| DeployError::NothingToRollBack(kind.to_owned()))?;
    // Kept in the store first (a module loaded from a file never was), so other hosts can load
    // it and nothing here has changed if the store refuses.
    if let Some(store) = store {
        store
            .modules
            .put_module(&earlier)
            .await
            .map_err(|e| DeployError::Store(e.to_string()))?;
    }
    if !code.revert(kind) {
        return Err(DeployError::NothingToRollBack(kind.to_owned()));
    }
    let sha256 = code.current(kind).unwrap_or_default();
    let upgrade = upgrader.upgrade_kind(kind).await;
    let version = record(store, kind, &sha256, DeployCause::Rollback).await?;
    upgrader.kind_deployed(kind);
    tracing::warn!(%kind, %sha256, ?version, zones = upgrade.zones.len(), "module deploy rolled back by an operator");
    Ok(DeployOutcome {
        kind: kind.to_owned(),
        sha256,
        version,
        rolled_back: true,
        upgrade,
        rollback: None,
    })
}

/// Brings this host's module kinds to the store's deploys once: each kind whose recorded module
/// differs from the one it runs installs it and upgrades its zones (a zone that refuses stays on
/// the old code). Returns the kinds that changed.
pub async fn sync_once(
    code: &Arc<dyn CodeKinds>,
    store: &zonekeep_store::Store,
    upgrader: &Upgrader,
) -> Result<Vec<String>, String> {
    let deploys = store
        .modules
        .module_kinds()
        .await
        .map_err(|e| e.to_string())?;
    let mine = code.kinds();
    let mut changed = Vec::new();
    for d in deploys.iter().filter(|d| mine.contains(&d.kind)) {
        let compiler = &upgrader.shared.compiler;
        if code.current(&d.kind).as_deref() == Some(d.sha256.as_str())
            || compiler.refused_before(&d.kind, &d.sha256)
        {
            continue;
        }
        let Some(bytes) = store
            .modules
            .get_module(&d.sha256)
            .await
            .map_err(|e| e.to_string())?
        else {
            tracing::error!(kind = %d.kind, sha256 = %d.sha256, "deployed module missing from the store");
            continue;
        };
        let bytes: Arc<[u8]> = Arc::from(bytes);
        let installed = match compiler.check(code, &d.kind, &bytes).await {
            Ok(checked) => code.install(&d.kind, checked),
            Err(e) => Err(e.to_string()),
        };
        match installed {
            Ok(_) => {
                upgrader.kind_deployed(&d.kind);
                let report = upgrader.upgrade_kind(&d.kind).await;
                let refused: BTreeMap<&str, &str> = report
                    .refused()
                    .map(|z| (z.zone.as_str(), z.refused.as_deref().unwrap_or("")))
                    .collect();
                tracing::info!(kind = %d.kind, sha256 = %d.sha256, version = d.version, zones = report.zones.len(), frozen_inputs = report.frozen_inputs(), ?refused, "module installed from the store");
                changed.push(d.kind.clone());
            }
            Err(e) => {
                tracing::error!(kind = %d.kind, sha256 = %d.sha256, error = %e, "deployed module does not load here; it is not tried again until the next deploy");
                compiler.remember_refusal(&d.kind, &d.sha256);
            }
        }
    }
    Ok(changed)
}

/// Follows the store's deploys every [`FOLLOW_PERIOD`] until `stop`.
pub async fn follow(
    code: Arc<dyn CodeKinds>,
    store: zonekeep_store::Store,
    upgrader: Upgrader,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(FOLLOW_PERIOD) => {}
        }
        if let Err(e) = sync_once(&code, &store, &upgrader).await {
            tracing::warn!(error = %e, "reading module deploys from the store");
        }
    }
}
