//! The metrics' tests: zone labels are bounded, shared by `_other` past the bound and freed when
//! their zone stops; the process metrics are exported on Linux.

use super::*;

#[test]
fn zone_labels_are_bounded_and_released() {
    let m = Metrics::new(2);
    let mut a = m.zone("a");
    let b = m.zone("b");
    let mut c = m.zone("c");
    assert_eq!(a.label(), "a");
    assert_eq!(b.label(), "b");
    assert_eq!(c.label(), OTHER_ZONE);
    a.set_population(3, 1, 0);
    c.set_population(2, 0, 0);
    let text = m.encode();
    assert!(text.contains("zonekeep_players{zone=\"a\"} 3"), "{text}");
    assert!(
        text.contains("zonekeep_players{zone=\"_other\"} 2"),
        "{text}"
    );
    m.release_zone(a);
    let text = m.encode();
    assert!(!text.contains("zone=\"a\""), "{text}");
    let d = m.zone("d");
    assert_eq!(d.label(), "d");
    m.release_zone(c);
    assert!(m.encode().contains("zonekeep_players{zone=\"_other\"} 0"));
}

#[test]
fn process_metrics_present_on_linux() {
    let text = Metrics::new(1).encode();
    if cfg!(target_os = "linux") {
        assert!(text.contains("process_cpu_seconds_total"), "{text}");
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
    }
}
