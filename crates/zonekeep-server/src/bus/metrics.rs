//! The bus's counters in `/metrics` (OpenMetrics text, appended before `# EOF`). The label set
//! of `zonekeep_bus_undeliverable_total{reason}` is the bus's fixed list of reasons.

use std::fmt::Write as _;

use zonekeep_bus::BusStats;

/// Appends the bus's families to `out`, an OpenMetrics text ending in `# EOF`.
pub(crate) fn encode(stats: &BusStats, out: &mut String) {
    let eof = out.rfind("# EOF").unwrap_or(out.len());
    out.truncate(eof);
    let counter = |out: &mut String, name: &str, help: &str, v: u64| {
        let _ = write!(
            out,
            "# HELP {name} {help}.\n# TYPE {name} counter\n{name}_total {v}\n"
        );
    };
    counter(
        out,
        "zonekeep_bus_sent",
        "Envelopes the bus accepted for delivery",
        stats.sent(),
    );
    counter(
        out,
        "zonekeep_bus_published",
        "Messages published to NATS: an envelope alone or a batch of them",
        stats.published(),
    );
    counter(
        out,
        "zonekeep_bus_delivered",
        "Zone messages applied by zones of this host",
        stats.delivered(),
    );
    counter(
        out,
        "zonekeep_bus_duplicates",
        "Message copies dropped as duplicates (stream window or zone dedup)",
        stats.duplicates(),
    );
    counter(
        out,
        "zonekeep_bus_queue_full",
        "Sends refused because the outgoing bus queue was full",
        stats.queue_full(),
    );
    counter(
        out,
        "zonekeep_bus_decode_errors",
        "Bytes on a zone subject that were no envelope",
        stats.decode_errors(),
    );
    let _ = write!(
        out,
        "# HELP zonekeep_bus_undeliverable Messages the bus could not deliver, by reason.\n# TYPE zonekeep_bus_undeliverable counter\n"
    );
    for (reason, v) in stats.undeliverable() {
        let _ = writeln!(
            out,
            "zonekeep_bus_undeliverable_total{{reason=\"{reason}\"}} {v}"
        );
    }
    let _ = write!(
        out,
        "# HELP zonekeep_bus_connected Whether the bus reaches its transport (1) or not (0).\n# TYPE zonekeep_bus_connected gauge\nzonekeep_bus_connected {}\n# EOF\n",
        u8::from(stats.connected())
    );
}
