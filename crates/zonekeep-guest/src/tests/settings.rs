//! A zone's settings as CONFIG answers them, before any zone is built.

use super::Ledger;
use crate::testing::TestHost;
use crate::{Ctx, Writer, Zone};

/// Asks the host for 30 Hz and a 0.01 quantum, leaving the rest to it.
struct Tuned;

impl Zone for Tuned {
    type Input = Vec<u8>;

    fn settings() -> crate::Settings {
        crate::Settings::new().tick_hz(30).pos_step(0.01)
    }

    fn create(_ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        Ok(Self)
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
}

#[test]
fn config_answers_the_zones_settings_before_any_zone_is_built() {
    let mut host = TestHost::<Tuned>::new(1000);
    assert_eq!(
        host.settings().unwrap(),
        crate::Settings::new().tick_hz(30).pos_step(0.01)
    );
    // A zone that asks for nothing answers zeros: the host's own settings.
    let mut plain = TestHost::<Ledger>::new(1000);
    assert_eq!(plain.settings().unwrap(), crate::Settings::default());
    // A lasting world says so after the seven.
    let mut w = Writer::new();
    crate::Settings::new().lasting().encode(&mut w);
    let bytes = w.into_vec();
    assert_eq!(bytes.len(), 7 * 4 + 4 + 1);
    assert_eq!(bytes.last(), Some(&1));
}
