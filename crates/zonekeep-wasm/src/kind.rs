//! A zone kind backed by a module, registered on a [`ZoneKinds`] registry.

use std::sync::{Arc, RwLock};

use zonekeep_core::{ZoneError, ZoneHost, ZoneKinds};

use crate::load::ZoneModule;
use crate::zone::ModuleZone;

/// Earlier modules kept for [`ModuleKind::revert`], at most.
const HISTORY: usize = 8;

/// The module a kind runs now and the ones it ran before, latest last.
#[derive(Debug, Default)]
struct Versions {
    current: Option<Arc<ZoneModule>>,
    history: Vec<Arc<ZoneModule>>,
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

    /// The module a [`revert`](Self::revert) would make current again, if any.
    pub fn previous(&self) -> Option<Arc<ZoneModule>> {
        self.versions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .history
            .last()
            .cloned()
    }

    /// Makes `module` the one new zones of this kind run; the one it replaces is kept for
    /// [`revert`](Self::revert) (the last few) and returned.
    pub fn replace(&self, module: Arc<ZoneModule>) -> Option<Arc<ZoneModule>> {
        let mut v = self.versions.write().unwrap_or_else(|p| p.into_inner());
        let old = v.current.replace(module);
        if let Some(old) = &old {
            if v.history.len() == HISTORY {
                v.history.remove(0);
            }
            v.history.push(old.clone());
        }
        old
    }

    /// Undoes the last [`replace`](Self::replace): the module run before it is current again,
    /// and the replaced one is forgotten (so undoing a deploy that was refused leaves no trace,
    /// and a second revert goes one version further back). False when there is none.
    pub fn revert(&self) -> bool {
        let mut v = self.versions.write().unwrap_or_else(|p| p.into_inner());
        match v.history.pop() {
            Some(prev) => {
                v.current = Some(prev);
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

/// The build a module zone's saves record: the module's content hash.
fn build_id(module: &ZoneModule) -> String {
    format!("module sha256:{}", module.digest_hex())
}

/// Registers `kind` on `kinds`: its zones are created and restored by the kind's current module.
/// A save of an older state version than the module's is restored through the module's
/// migration ([`ModuleZone::migrate`]); every zone's saves record the module that wrote them.
pub fn register(kinds: &mut ZoneKinds, kind: &Arc<ModuleKind>) {
    let (create, restore) = (kind.clone(), kind.clone());
    kinds.register_factory(
        kind.name.clone(),
        Arc::new(move |init, config, clock, epoch| {
            let module = create.module()?;
            let config = module.settings().apply(config);
            let mut host = ZoneHost::create_with(init, config, clock, epoch, |init, ctx| {
                ModuleZone::create(&module, init, ctx)
            })?;
            host.set_build_id(build_id(&module));
            Ok(host)
        }),
        Some(Arc::new(move |init, config, clock, epoch, envelope| {
            let module = restore.module()?;
            let config = module.settings().apply(config);
            let mut host = ZoneHost::restore_with(
                init,
                config,
                clock,
                epoch,
                envelope,
                |init, ctx, save| ModuleZone::restore(&module, init, ctx, save),
                |from, save| ModuleZone::migrate(&module, from, save),
            )?;
            host.set_build_id(build_id(&module));
            Ok(host)
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
                (func (export "zk_abi") (result i32) i32.const 5)
                (func (export "zk_alloc") (param i32) (result i32) i32.const 0)
                (func (export "zk_call") (param i32 i32) (result i64) i64.const 0)
                (func (result i32) i32.const {abi_extra}))"#
        );
        ZoneModule::load(engine, &wat::parse_str(text).unwrap()).unwrap()
    }

    #[test]
    fn revert_undoes_replaces_one_at_a_time() {
        let engine = ModuleEngine::new(Sandbox::default()).unwrap();
        let (a, b, c) = (module(&engine, 1), module(&engine, 2), module(&engine, 3));
        let kind = ModuleKind::empty("k");
        assert!(kind.current().is_none());
        assert!(!kind.revert(), "nothing to go back to");
        kind.replace(a.clone());
        kind.replace(b.clone());
        kind.replace(c);
        // A refused deploy of c is undone: b again, and a still behind it.
        assert!(kind.revert());
        assert_eq!(kind.current().unwrap().digest(), b.digest());
        assert!(kind.revert());
        assert_eq!(kind.current().unwrap().digest(), a.digest());
        assert!(!kind.revert(), "a was the first");
        assert_eq!(kind.current().unwrap().digest(), a.digest());
    }
}
