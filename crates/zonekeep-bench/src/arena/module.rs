//! The arena workload run as a zone module (`examples/workload-module`) in a zone host, beside
//! the native [`ArenaZone`](super::zone::ArenaZone): what the module benchmark and its
//! equivalence test build.

use std::sync::Arc;

use zonekeep_core::{Clock, ZoneError, ZoneHost, ZoneInit};
use zonekeep_wasm::{ModuleEngine, ModuleZone, Sandbox, ZoneModule};

use super::zone::zone_config;
use super::KIND;

/// Loads the workload module's `bytes` on a new engine with the default sandbox.
pub fn load(bytes: &[u8]) -> Result<Arc<ZoneModule>, String> {
    let engine = ModuleEngine::new(Sandbox::default()).map_err(|e| e.to_string())?;
    ZoneModule::load(&engine, bytes).map_err(|e| e.to_string())
}

/// A zone `zone_id` of the workload with `params`, running `module`, configured as the native
/// kind is (the module's settings over the kind's).
pub fn host(
    module: &Arc<ZoneModule>,
    zone_id: &str,
    params: serde_json::Value,
    clock: Arc<dyn Clock>,
) -> Result<ZoneHost, ZoneError> {
    let init = ZoneInit {
        zone_id: zone_id.into(),
        kind: KIND.into(),
        params,
    };
    let config = module.settings().apply(zone_config(None));
    ZoneHost::create_with(init, config, clock, 1, |init, ctx| {
        ModuleZone::create(module, init, ctx)
    })
}
