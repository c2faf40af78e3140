//! Registers the bench's arena workload kinds on a host. It lives with the binary, which
//! assembles the host, so the `zonekeep-bench` library needs no server to run its bots.

use zonekeep_bench::arena::zone::{
    zone_config, ArenaZone, BUDGET_BYTES, CROWD_OBSERVER_PATCH_EVERY, KIND_BUDGET, KIND_CROWD,
};
use zonekeep_bench::arena::KIND;
use zonekeep_server::HostBuilder;

/// Registers the arena kinds ([`KIND`], [`KIND_BUDGET`] and [`KIND_CROWD`]) on a host.
pub fn register(builder: HostBuilder) -> HostBuilder {
    builder
        .zone_with::<ArenaZone>(KIND, zone_config(None), serde_json::Value::Null)
        .zone_with::<ArenaZone>(
            KIND_BUDGET,
            zone_config(Some(BUDGET_BYTES)),
            serde_json::json!({ "budget": BUDGET_BYTES }),
        )
        .zone_with::<ArenaZone>(
            KIND_CROWD,
            zonekeep_core::ZoneConfig {
                observer_patch_every: CROWD_OBSERVER_PATCH_EVERY,
                ..zone_config(None)
            },
            serde_json::Value::Null,
        )
}

/// Registers the arena workload kinds on a [`HostBuilder`] inside a builder chain:
/// `Host::builder()….arena_workload().build()`.
pub trait RegisterArenaWorkload {
    /// See [`register`].
    fn arena_workload(self) -> Self;
}

impl RegisterArenaWorkload for HostBuilder {
    fn arena_workload(self) -> Self {
        register(self)
    }
}
