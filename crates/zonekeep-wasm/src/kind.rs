//! A zone kind backed by a module, registered on a [`ZoneKinds`] registry.

use std::sync::{Arc, RwLock};

use zonekeep_core::{ZoneError, ZoneHost, ZoneKinds};

use crate::load::ZoneModule;
use crate::zone::ModuleZone;

/// The module a kind runs now and the one it ran before.
#[derive(Debug, Default)]
struct Versions {
    current: Option<Arc<ZoneModule>>,
    previous: Option<Arc<ZoneModule>>,
}

/// The module a kind's new zones are made from. Replacing it changes what zones created or
/// restored from then on run; zones already running keep their instance until they are
/// upgraded (restored from their save through the kind).
#[derive(Debug)]
pub struct ModuleKind {
    name: String,
    versions: RwLock<Versions>,
}

impl ModuleKind {
    /// Kind `name`, running `module`.
    pub fn new(name: impl Into<String>, module: Arc<ZoneModule>) -> Arc<Self> {
        let kind = Self::empty(name);
        kind.replace(module);
        kind
    }

    /// Kind `name` with no module yet: its zones cannot be created until one is installed.
    pub fn empty(name: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            versions: RwLock::new(Versions::default()),
        })
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module new zones of this kind run, if it has one.
    pub fn current(&self) -> Option<Arc<ZoneModule>> {
        self.versions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .current
            .clone()
    }

    /// Makes `module` the one new zones of this kind run; the one it replaces is kept for
    /// [`revert`](Self::revert) and returned.
    pub fn replace(&self, module: Arc<ZoneModule>) -> Option<Arc<ZoneModule>> {
        let mut v = self.versions.write().unwrap_or_else(|p| p.into_inner());
        let old = v.current.replace(module);
        v.previous.clone_from(&old);
        old
    }

    /// Goes back to the module run before the last [`replace`](Self::replace); false when
    /// there is none.
    pub fn revert(&self) -> bool {
        let mut v = self.versions.write().unwrap_or_else(|p| p.into_inner());
        match v.previous.take() {
            Some(prev) => {
                v.previous = v.current.replace(prev);
                true
            }
            None => false,
        }
    }

    fn module(&self) -> Result<Arc<ZoneModule>, ZoneError> {
        self.current().ok_or_else(|| {
            ZoneError::Failed(format!(
                "no module is deployed for zone kind {:?}",
                self.name
            ))
        })
    }
}

/// Registers `kind` on `kinds`: its zones are created and restored by the kind's current module.
pub fn register(kinds: &mut ZoneKinds, kind: &Arc<ModuleKind>) {
    let (create, restore) = (kind.clone(), kind.clone());
    kinds.register_factory(
        kind.name.clone(),
        Arc::new(move |init, config, clock, epoch| {
            let module = create.module()?;
            ZoneHost::create_with(init, config, clock, epoch, |init, ctx| {
                ModuleZone::create(&module, init, ctx)
            })
        }),
        Some(Arc::new(move |init, config, clock, epoch, envelope| {
            let module = restore.module()?;
            ZoneHost::restore_with(init, config, clock, epoch, envelope, |init, ctx, save| {
                ModuleZone::restore(&module, init, ctx, save)
            })
        })),
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{ModuleEngine, Sandbox};

    fn module(engine: &Arc<ModuleEngine>, abi_extra: i32) -> Arc<ZoneModule> {
        // Two different modules: the same ABI, a different constant in an unused function.
        let text = format!(
            r#"(module (memory (export "memory") 1)
                (func (export "zk_abi") (result i32) i32.const 1)
                (func (export "zk_alloc") (param i32) (result i32) i32.const 0)
                (func (export "zk_call") (param i32 i32) (result i64) i64.const 0)
                (func (result i32) i32.const {abi_extra}))"#
        );
        ZoneModule::load(engine, &wat::parse_str(text).unwrap()).unwrap()
    }

    #[test]
    fn revert_goes_back_one_version_and_forth() {
        let engine = ModuleEngine::new(Sandbox::default()).unwrap();
        let (a, b) = (module(&engine, 1), module(&engine, 2));
        let kind = ModuleKind::empty("k");
        assert!(kind.current().is_none());
        assert!(!kind.revert(), "nothing to go back to");
        kind.replace(a.clone());
        kind.replace(b.clone());
        assert_eq!(kind.current().unwrap().digest(), b.digest());
        assert!(kind.revert());
        assert_eq!(kind.current().unwrap().digest(), a.digest());
        assert!(kind.revert(), "revert of a revert goes forward again");
        assert_eq!(kind.current().unwrap().digest(), b.digest());
    }
}
