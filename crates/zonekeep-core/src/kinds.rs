//! The zone-kind registry: a server holds many kinds of zone, each created by name from a
//! ticket's or an admin's request, as one non-generic [`ZoneHost`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::ZoneConfig;
use crate::error::ZoneError;
use crate::host::ZoneHost;
use crate::image::ImageError;
use crate::snapshot::RestoreError;
use crate::zone::{Zone, ZoneInit};

/// Builds a host for one zone kind, under a boot epoch (see
/// [`ZoneHost::with_boot_epoch`]).
pub type ZoneFactory = Arc<
    dyn Fn(ZoneInit, ZoneConfig, Arc<dyn Clock>, u64) -> Result<ZoneHost, ZoneError> + Send + Sync,
>;

/// Rebuilds a host of one zone kind from a snapshot envelope (see
/// [`ZoneHost::restore`]).
pub type RestoreFactory = Arc<
    dyn Fn(ZoneInit, ZoneConfig, Arc<dyn Clock>, u64, &[u8]) -> Result<ZoneHost, RestoreError>
        + Send
        + Sync,
>;

/// Builds a host of one zone kind from a zone image ([`ZoneHost::from_image`]).
pub type ImageFactory = Arc<
    dyn Fn(ZoneInit, ZoneConfig, Arc<dyn Clock>, &[u8]) -> Result<ZoneHost, ImageError>
        + Send
        + Sync,
>;

#[derive(Clone)]
struct KindEntry {
    create: ZoneFactory,
    restore: Option<RestoreFactory>,
    image: Option<ImageFactory>,
}

/// Maps zone kind names to factories.
#[derive(Clone, Default)]
pub struct ZoneKinds {
    factories: BTreeMap<String, KindEntry>,
}

impl std::fmt::Debug for ZoneKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

impl ZoneKinds {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `Z` under `kind` (replacing any earlier registration).
    pub fn register<Z: Zone>(&mut self, kind: impl Into<String>) -> &mut Self {
        self.factories.insert(
            kind.into(),
            KindEntry {
                create: Arc::new(ZoneHost::with_boot_epoch::<Z>),
                restore: Some(Arc::new(ZoneHost::restore::<Z>)),
                image: Some(Arc::new(ZoneHost::from_image::<Z>)),
            },
        );
        self
    }

    /// Register factories under `kind` (replacing any earlier registration): for kinds whose
    /// zones are made from data loaded at run time, such as a module (see
    /// [`ZoneHost::create_with`]). Without `restore`, zones of the kind cannot be restored from
    /// a snapshot; such kinds have no image either.
    pub fn register_factory(
        &mut self,
        kind: impl Into<String>,
        create: ZoneFactory,
        restore: Option<RestoreFactory>,
    ) -> &mut Self {
        self.factories.insert(
            kind.into(),
            KindEntry {
                create,
                restore,
                image: None,
            },
        );
        self
    }

    /// Whether `kind` is registered.
    pub fn contains(&self, kind: &str) -> bool {
        self.factories.contains_key(kind)
    }

    /// Registered kind names, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &str> + '_ {
        self.factories.keys().map(String::as_str)
    }

    /// Create a host for `init.kind` (boot epoch 0).
    pub fn create(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<ZoneHost, ZoneError> {
        self.create_at(init, config, clock, 0)
    }

    /// Create a host for `init.kind` under `boot_epoch` (the owner's claim epoch).
    pub fn create_at(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
    ) -> Result<ZoneHost, ZoneError> {
        let entry = self
            .factories
            .get(&init.kind)
            .ok_or_else(|| ZoneError::UnknownKind(init.kind.clone()))?;
        (entry.create)(init, config, clock, boot_epoch)
    }

    /// Rebuild a host for `init.kind` from a snapshot envelope; see [`ZoneHost::restore`].
    pub fn restore(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        boot_epoch: u64,
        envelope: &[u8],
    ) -> Result<ZoneHost, RestoreError> {
        let entry = self
            .factories
            .get(&init.kind)
            .ok_or_else(|| ZoneError::UnknownKind(init.kind.clone()))?;
        let restore = entry
            .restore
            .as_ref()
            .ok_or_else(|| ZoneError::NotRestorable(init.kind.clone()))?;
        restore(init, config, clock, boot_epoch, envelope)
    }

    /// Builds a zone of `init.kind` from a zone image (see [`ZoneHost::from_image`]).
    pub fn from_image(
        &self,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        image: &[u8],
    ) -> Result<ZoneHost, ImageError> {
        let entry = self
            .factories
            .get(&init.kind)
            .ok_or_else(|| ZoneError::UnknownKind(init.kind.clone()))?;
        let from_image = entry
            .image
            .as_ref()
            .ok_or_else(|| ImageError::NoImage(init.kind.clone()))?;
        from_image(init, config, clock, image)
    }
}
