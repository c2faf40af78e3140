//! The zone kinds a host of this binary registers: the arena's always, and the dev and bench
//! kinds on request. The dev kinds are small, real zone kinds that the binary's end-to-end tests
//! drive through `zonekeep serve` ([`ledger`]: persistence, [`character`]: character leases,
//! [`call`]: durable calls); [`workload`] registers the bench's arena workload kinds.

mod call;
mod character;
mod ledger;
mod workload;

use serde_json::Value;
use zonekeep_arena::{Arena, Cell, Gallery};
use zonekeep_server::examples::{courier_config, Courier, Doors, Dots};
use zonekeep_server::HostBuilder;

use call::CallZone;
use character::{character_config, CharacterZone};
use ledger::LedgerZone;
use workload::RegisterArenaWorkload;

/// The zone kinds a host registers: the arena always (the default kind, its page at `/`); the
/// dev and bench kinds only when asked for, so a production host offers no test zones.
pub(crate) fn register_kinds(builder: HostBuilder, dev_kinds: bool) -> HostBuilder {
    let builder = builder
        .zone_with::<Arena>("arena", zonekeep_arena::zone_config(), Value::Null)
        .zone_with::<Gallery>("gallery", zonekeep_arena::gallery_config(), Value::Null)
        .zone_with::<Cell>(
            zonekeep_arena::cells::KIND_CELLS,
            zonekeep_arena::cells_config(),
            Value::Null,
        );
    if !dev_kinds {
        return builder;
    }
    builder
        .zone::<Dots>("dots")
        .zone::<Doors>("doors")
        .zone_with::<Courier>("courier", courier_config(), Value::Null)
        .arena_workload()
        .zone::<LedgerZone>("ledger-test")
        .zone_with::<CharacterZone>("character-test", character_config(), Value::Null)
        .zone::<CallZone>("call-test")
}
