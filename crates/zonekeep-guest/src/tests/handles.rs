//! Entity handles: never zero, unique among live entities, and reused once despawned, whether
//! taken from the pool directly or through `Ctx`.

use super::with_ctx;
use crate::ctx::Handles;
use crate::{Entity, Kind};

#[test]
fn handles_are_never_zero_unique_and_reused_after_despawn() {
    let mut h = Handles::new();
    let a = h.allocate();
    let b = h.allocate();
    let c = h.allocate();
    assert_eq!((a.handle(), b.handle(), c.handle()), (1, 2, 3));
    assert!(h.release(b));
    assert!(!h.release(b), "a second release changes nothing");
    assert!(!h.is_live(b));
    assert_eq!(h.live_count(), 2);
    let d = h.allocate();
    assert_eq!(d.handle(), 2, "the freed handle is reused");
    let e = h.allocate();
    assert_eq!(e.handle(), 4);
    assert_eq!(h.live_count(), 4);
    assert!(!h.release(Entity::from_handle(99).unwrap()));
    assert_eq!(Entity::from_handle(0), None);
}

#[test]
fn ctx_spawn_and_despawn_share_the_handle_pool() {
    with_ctx(|ctx| {
        let a = ctx.spawn(Kind(0), 0.0, 0.0);
        let b = ctx.spawn(Kind(0), 0.0, 0.0);
        ctx.despawn(a);
        let c = ctx.spawn(Kind(0), 0.0, 0.0);
        assert_eq!(c, a);
        assert_ne!(b, c);
    });
}
