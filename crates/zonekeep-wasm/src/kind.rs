//! A zone kind backed by a module, registered on a [`ZoneKinds`] registry.

use std::sync::{Arc, RwLock};

use zonekeep_core::{ZoneHost, ZoneKinds};

use crate::load::ZoneModule;
use crate::zone::ModuleZone;

/// The module a kind's new zones are made from. Replacing it changes what zones created or
/// restored from then on run; zones already running keep their instance.
#[derive(Debug)]
pub struct ModuleKind {
    name: String,
    current: RwLock<Arc<ZoneModule>>,
}

impl ModuleKind {
    /// Kind `name`, running `module`.
    pub fn new(name: impl Into<String>, module: Arc<ZoneModule>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            current: RwLock::new(module),
        })
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module new zones of this kind run.
    pub fn current(&self) -> Arc<ZoneModule> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `module` the one new zones of this kind run; returns the one it replaces.
    pub fn replace(&self, module: Arc<ZoneModule>) -> Arc<ZoneModule> {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut cur, module)
    }
}

/// Registers `kind` on `kinds`: its zones are created and restored by the kind's current module.
pub fn register(kinds: &mut ZoneKinds, kind: &Arc<ModuleKind>) {
    let (create, restore) = (kind.clone(), kind.clone());
    kinds.register_factory(
        kind.name.clone(),
        Arc::new(move |init, config, clock, epoch| {
            let module = create.current();
            ZoneHost::create_with(init, config, clock, epoch, |init, ctx| {
                ModuleZone::create(&module, init, ctx)
            })
        }),
        Some(Arc::new(move |init, config, clock, epoch, envelope| {
            let module = restore.current();
            ZoneHost::restore_with(init, config, clock, epoch, envelope, |init, ctx, save| {
                ModuleZone::restore(&module, init, ctx, save)
            })
        })),
    );
}
