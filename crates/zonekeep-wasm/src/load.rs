//! Loading a module: compiled once per content digest, checked against the ABI before any zone
//! runs it (imports, exports, ABI version), then instantiated once per zone.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::{ExternType, FuncType, Linker, Module, ValType};

use crate::error::LoadError;
use crate::guest::{Guest, GuestState};
use crate::sandbox::ModuleEngine;
use crate::settings::ModuleSettings;

/// The only import a module may have.
pub const LOG_IMPORT: (&str, &str) = ("zonekeep", "log");

/// A loaded, checked module: what zones of one kind are instantiated from.
pub struct ZoneModule {
    engine: Arc<ModuleEngine>,
    module: Module,
    linker: Linker<GuestState>,
    digest: [u8; 32],
    /// The module as loaded: what a rollback stores again, so every host can load it.
    bytes: Arc<[u8]>,
    /// The zone settings it asks for.
    settings: ModuleSettings,
    contract: zonekeep_protocol::contract::Contract,
}

impl std::fmt::Debug for ZoneModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneModule")
            .field("digest", &self.digest_hex())
            .field("size", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// A required export: its name, what it must be, and for a function its parameter and result
/// types.
type Export = (
    &'static str,
    &'static str,
    Option<(&'static [ValType], &'static [ValType])>,
);

fn func_type(ty: &FuncType) -> String {
    let list = |v: &mut dyn Iterator<Item = ValType>| {
        v.map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
    };
    format!(
        "({}) -> ({})",
        list(&mut ty.params()),
        list(&mut ty.results())
    )
}

fn is_func(ty: &ExternType, params: &[ValType], results: &[ValType]) -> bool {
    let ExternType::Func(f) = ty else {
        return false;
    };
    let same = |a: &mut dyn ExactSizeIterator<Item = ValType>, b: &[ValType]| {
        a.len() == b.len() && a.zip(b).all(|(x, y)| ValType::eq(&x, y))
    };
    same(&mut f.params(), params) && same(&mut f.results(), results)
}

impl ZoneModule {
    /// Compiles `bytes` and checks them against the ABI (docs/MODULES.md): the log as the only
    /// import, the four exports, the ABI version of `zonekeep_abi` (asked of a throwaway instance, under the
    /// sandbox's budgets, so a module that traps or loops while starting is refused here).
    pub fn load(engine: &Arc<ModuleEngine>, bytes: &[u8]) -> Result<Arc<Self>, LoadError> {
        let limit = engine.sandbox().module_bytes;
        if bytes.len() > limit {
            return Err(LoadError::TooLarge {
                size: bytes.len(),
                limit,
            });
        }
        if !bytes.starts_with(b"\0asm") {
            return Err(LoadError::Invalid(
                "a WebAssembly binary starts with \\0asm (text modules are not accepted)".into(),
            ));
        }
        crate::shape::check(bytes, engine.sandbox())?;
        let module = Module::new(engine.engine(), bytes)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        for import in module.imports() {
            let (m, n) = (import.module(), import.name());
            if (m, n) != LOG_IMPORT {
                let hint = if m.starts_with("wasi") {
                    " (it was built for WASI: build it for wasm32-unknown-unknown)"
                } else {
                    ""
                };
                return Err(LoadError::ForbiddenImport {
                    module: m.to_owned(),
                    name: n.to_owned(),
                    hint,
                });
            }
            let ty = import.ty();
            if !is_func(&ty, &[ValType::I32, ValType::I32, ValType::I32], &[]) {
                let found = match &ty {
                    ExternType::Func(f) => func_type(f),
                    other => format!("{other:?}"),
                };
                return Err(LoadError::LogSignature(found));
            }
        }
        let exports: [Export; 4] = [
            ("memory", "a memory", None),
            (
                "zk_abi",
                "a function () -> i32",
                Some((&[], &[ValType::I32])),
            ),
            (
                "zk_alloc",
                "a function (i32) -> i32",
                Some((&[ValType::I32], &[ValType::I32])),
            ),
            (
                "zk_call",
                "a function (i32, i32) -> i64",
                Some((&[ValType::I32, ValType::I32], &[ValType::I64])),
            ),
        ];
        for (name, expected, func) in exports {
            let ok = match (module.get_export(name), func) {
                (Some(ExternType::Memory(_)), None) => true,
                (Some(ty), Some((p, r))) => is_func(&ty, p, r),
                _ => false,
            };
            if !ok {
                return Err(LoadError::MissingExport { name, expected });
            }
        }
        let linker = crate::guest::linker(engine)?;
        let digest: [u8; 32] = Sha256::digest(bytes).into();
        let loaded = Arc::new(Self {
            engine: engine.clone(),
            module,
            linker,
            digest,
            bytes: Arc::from(bytes),
            settings: ModuleSettings::default(),
            contract: zonekeep_protocol::contract::Contract::new(),
        });
        let (version, settings) = Guest::probe(&loaded)?;
        if !(zonekeep_abi::OLDEST_ABI_VERSION..=zonekeep_abi::ABI_VERSION).contains(&version) {
            return Err(LoadError::AbiVersion(version));
        }
        let (settings, contract) = ModuleSettings::decode(&settings)?;
        // Not shared yet: the settings go in place before anyone else sees the module.
        let mut loaded = loaded;
        match Arc::get_mut(&mut loaded) {
            Some(m) => {
                m.settings = settings;
                m.contract = contract;
            }
            None => {
                return Err(LoadError::Start(
                    "the module was shared while loading".into(),
                ))
            }
        }
        Ok(loaded)
    }

    /// The module's content address: the SHA-256 of its bytes.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// [`digest`](Self::digest) in lowercase hex.
    pub fn digest_hex(&self) -> String {
        self.digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The module's size in bytes.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The module's bytes, as loaded.
    pub fn bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }

    /// The zone settings the module asks for: every zone of its kind is created with them.
    pub fn settings(&self) -> &ModuleSettings {
        &self.settings
    }

    /// The kind's client contract: its inputs, events and constants (empty when the module
    /// declares none).
    pub fn contract(&self) -> &zonekeep_protocol::contract::Contract {
        &self.contract
    }

    pub(crate) fn engine(&self) -> &Arc<ModuleEngine> {
        &self.engine
    }

    pub(crate) fn module(&self) -> &Module {
        &self.module
    }

    pub(crate) fn linker(&self) -> &Linker<GuestState> {
        &self.linker
    }
}
