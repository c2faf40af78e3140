//! `/metrics` scraped and parsed.

use zonekeep_protocol::messages::KickCode;

use crate::common::*;

#[tokio::test]
async fn metrics_are_scraped_parsed_and_zone_labels_bounded() {
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        metrics_zone_labels: 1,
        ..base_config()
    })
    .await;
    let (mut ws, _) = join(&server, "m1", &ticket("a", "m1")).await;
    let (_ws2, _) = join(&server, "m2", &ticket("b", "m2")).await;
    send_input(&mut ws, 1, &[1, 0]).await;
    assert_eq!(
        refused(&server, "m1", hello_bytes(&ticket("c", "wrong"), &[])).await,
        KickCode::TICKET_WRONG_ZONE
    );
    eventually("input accepted and counted", || async {
        metric(
            &server,
            "zonekeep_inputs_total{zone=\"m1\",outcome=\"accepted\"}",
        )
        .await
            >= 1.0
    })
    .await;

    let (status, text) = http(&server, "GET", "/metrics", None, None).await;
    assert_eq!(status, 200);
    let samples = parse_metrics(&text);
    let get = |k: &str| samples.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    assert!(get("zonekeep_ticks_total{zone=\"m1\"}").unwrap() > 0.0);
    assert_eq!(get("zonekeep_players{zone=\"m1\"}"), Some(1.0));
    // Only one zone gets its own label; the other folds into _other.
    assert_eq!(get("zonekeep_players{zone=\"_other\"}"), Some(1.0));
    assert!(get("zonekeep_players{zone=\"m2\"}").is_none());
    assert_eq!(get("zonekeep_zones"), Some(2.0));
    assert!(get("zonekeep_connections").unwrap() >= 2.0);
    assert_eq!(
        get("zonekeep_kicks_total{code=\"ticket_wrong_zone\"}"),
        Some(1.0)
    );
    assert!(get("zonekeep_frames_out_total{zone=\"m1\"}").unwrap() > 0.0);
    assert!(get("zonekeep_bytes_out_total{zone=\"m1\"}").unwrap() > 0.0);
    assert!(get("zonekeep_tick_duration_seconds_count{zone=\"m1\"}").unwrap() > 0.0);
    assert!(samples
        .iter()
        .any(|(k, _)| k.starts_with("zonekeep_tick_duration_seconds_bucket{")));
    assert_eq!(get("zonekeep_zone_tier{zone=\"m1\"}"), Some(0.0));
    assert_eq!(get("zonekeep_zones_by_tier{tier=\"hot\"}"), Some(2.0));
    if cfg!(target_os = "linux") {
        assert!(get("process_cpu_seconds_total").unwrap() >= 0.0);
        assert!(get("process_resident_memory_bytes").unwrap() > 0.0);
    }
    server.stop().await;
}
