//! Zone kinds whose game code is data (modules), deployed at run time: kept in the store by
//! content address, installed on every host of the fleet, and reaching running zones through a
//! freeze barrier (see [`crate::upgrade`]).
//!
//! The server does not run modules itself: the binary hands it a [`CodeKinds`] that can check and
//! install code for its module kinds. A deploy through the admin API stores the module, installs
//! it here, upgrades this host's running zones of the kind and, unless a zone refused (then every
//! zone is rolled back, by default), records the kind's new version in the store. Every other host
//! follows the store's record ([`follow`]): it installs the module and upgrades its own zones.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::upgrade::{UpgradeReport, Upgrader};

/// How often a host looks for deploys made through another host.
pub const FOLLOW_PERIOD: Duration = Duration::from_secs(1);

/// The module kinds of a host: what the server needs of a module host (see `zonekeep-wasm`).
pub trait CodeKinds: Send + Sync {
    /// The kinds whose game code is a module.
    fn kinds(&self) -> Vec<String>;
    /// The SHA-256 (lowercase hex) of the module `kind` runs now, if it has one.
    fn current(&self, kind: &str) -> Option<String>;
    /// Checks `code` and makes it the module new zones of `kind` run (the one it replaces is
    /// kept for [`revert`](Self::revert)); answers its SHA-256, or why it was refused.
    fn install(&self, kind: &str, code: &[u8]) -> Result<String, String>;
    /// Goes back to the module `kind` ran before the last install (undoing it); false when
    /// there is none.
    fn revert(&self, kind: &str) -> bool;
    /// The bytes of the module a [`revert`](Self::revert) would go back to, if any.
    fn previous(&self, kind: &str) -> Option<Vec<u8>>;
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
    /// The module does not load (its import, export or ABI check failed).
    #[error("{0}")]
    Refused(String),
    /// The store could not keep the module or record the deploy.
    #[error("store: {0}")]
    Store(String),
    /// A rollback with no earlier module on this host to go back to.
    #[error("zone kind {0:?} has no earlier module on this host to go back to")]
    NothingToRollBack(String),
}

/// Deploys `code` to `kind` on this host (see the [module docs](self)).
pub async fn deploy(
    code: &dyn CodeKinds,
    store: Option<&zonekeep_store::Store>,
    upgrader: &Upgrader,
    kind: &str,
    bytes: &[u8],
    on_refusal: OnRefusal,
) -> Result<DeployOutcome, DeployError> {
    if !code.kinds().iter().any(|k| k == kind) {
        return Err(DeployError::UnknownKind(kind.to_owned()));
    }
    if let Some(store) = store {
        store
            .modules
            .put_module(bytes)
            .await
            .map_err(|e| DeployError::Store(e.to_string()))?;
    }
    let sha256 = code.install(kind, bytes).map_err(DeployError::Refused)?;
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
    let version = record(store, kind, &sha256).await?;
    tracing::info!(%kind, %sha256, ?version, zones = upgrade.zones.len(), frozen_inputs = upgrade.frozen_inputs(), "module deployed");
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
) -> Result<Option<u64>, DeployError> {
    let Some(store) = store else {
        return Ok(None);
    };
    let deployed = store
        .modules
        .deploy_module(kind, sha256)
        .await
        .map_err(|e| DeployError::Store(e.to_string()))?;
    Ok(Some(deployed.version))
}

/// Takes `kind` back to the module it ran before its last deploy on this host (an operator's
/// abort): every running zone is upgraded into it through the same freeze barrier, and the store
/// records it as the kind's new version, so every other host follows.
pub async fn roll_back(
    code: &dyn CodeKinds,
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
    let version = record(store, kind, &sha256).await?;
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
    code: &dyn CodeKinds,
    store: &zonekeep_store::Store,
    upgrader: Option<&Upgrader>,
) -> Result<Vec<String>, String> {
    let deploys = store
        .modules
        .module_kinds()
        .await
        .map_err(|e| e.to_string())?;
    let mine = code.kinds();
    let mut changed = Vec::new();
    for d in deploys.iter().filter(|d| mine.contains(&d.kind)) {
        if code.current(&d.kind).as_deref() == Some(d.sha256.as_str()) {
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
        match code.install(&d.kind, &bytes) {
            Ok(_) => {
                let report = match upgrader {
                    Some(u) => u.upgrade_kind(&d.kind).await,
                    None => UpgradeReport::default(),
                };
                let refused: BTreeMap<&str, &str> = report
                    .refused()
                    .map(|z| (z.zone.as_str(), z.refused.as_deref().unwrap_or("")))
                    .collect();
                tracing::info!(kind = %d.kind, sha256 = %d.sha256, version = d.version, zones = report.zones.len(), frozen_inputs = report.frozen_inputs(), ?refused, "module installed from the store");
                changed.push(d.kind.clone());
            }
            Err(e) => {
                tracing::error!(kind = %d.kind, sha256 = %d.sha256, error = %e, "deployed module does not load here");
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
        if let Err(e) = sync_once(code.as_ref(), &store, Some(&upgrader)).await {
            tracing::warn!(error = %e, "reading module deploys from the store");
        }
    }
}
