//! `process_cpu_seconds_total` and `process_resident_memory_bytes`, read at scrape time.
//!
//! `/proc/self/stat` fields 14 and 15 (utime, stime) are in clock ticks and
//! `/proc/self/statm` field 2 (resident) is in pages; the tick rate and page
//! size come from the process's auxiliary vector (`AT_CLKTCK`, `AT_PAGESZ`),
//! which avoids `unsafe` `sysconf` calls.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

const AT_PAGESZ: u64 = 6;
const AT_CLKTCK: u64 = 17;

#[derive(Debug)]
pub(super) struct ProcessCollector;

fn auxv(key: u64) -> Option<u64> {
    let bytes = std::fs::read("/proc/self/auxv").ok()?;
    bytes.chunks_exact(16).find_map(|c| {
        let k = u64::from_ne_bytes(c.get(..8)?.try_into().ok()?);
        let v = u64::from_ne_bytes(c.get(8..16)?.try_into().ok()?);
        (k == key).then_some(v)
    })
}

fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may contain spaces: parse after its closing ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let hz = auxv(AT_CLKTCK).filter(|h| *h > 0).unwrap_or(100);
    Some((utime + stime) as f64 / hz as f64)
}

fn resident_bytes() -> Option<i64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: i64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = auxv(AT_PAGESZ).filter(|p| *p > 0).unwrap_or(4096);
    Some(pages.saturating_mul(i64::try_from(page).ok()?))
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(cpu) = cpu_seconds() {
            let c = ConstCounter::new(cpu);
            let e = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                c.metric_type(),
            )?;
            c.encode(e)?;
        }
        if let Some(rss) = resident_bytes() {
            let g = ConstGauge::new(rss);
            let e = encoder.encode_descriptor(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                None,
                g.metric_type(),
            )?;
            g.encode(e)?;
        }
        Ok(())
    }
}
