//! Reading another process's cost from Linux `/proc` (WORKLOADS.md arena §6): CPU from `/proc/<pid>/stat`
//! fields 14 and 15, peak and current RSS from `/proc/<pid>/status`, and the whole machine's busy
//! fraction from `/proc/stat`.
//!
//! Parsers take the file's text so they are tested on fixed strings; the readers are thin.

use std::path::Path;
use thiserror::Error;

/// Kernel clock ticks per second for `utime`/`stime`. `sysconf(_SC_CLK_TCK)` is 100 on every Linux
/// architecture this runs on (it is fixed by the kernel ABI for user space, `USER_HZ`).
pub const CLK_TCK: f64 = 100.0;

/// Why a `/proc` figure could not be read.
#[derive(Debug, Error)]
pub enum ProcError {
    /// The file could not be read (no such process, not Linux, no permission).
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file did not have the expected shape.
    #[error("unexpected format in {0}")]
    Format(&'static str),
}

fn read(path: &Path) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// `utime + stime` in seconds from the text of `/proc/<pid>/stat`.
///
/// The command name (field 2) is in parentheses and may itself contain spaces and parentheses, so
/// fields are counted from the **last** `)`.
pub fn parse_stat_cpu_s(text: &str) -> Result<f64, ProcError> {
    let close = text
        .rfind(')')
        .ok_or(ProcError::Format("/proc/<pid>/stat"))?;
    let rest = text
        .get(close + 1..)
        .ok_or(ProcError::Format("/proc/<pid>/stat"))?;
    // After ")" come field 3 (state), 4, ...; utime is field 14, stime field 15.
    let mut fields = rest.split_ascii_whitespace();
    let utime = fields.nth(11).and_then(|f| f.parse::<u64>().ok());
    let stime = fields.next().and_then(|f| f.parse::<u64>().ok());
    match (utime, stime) {
        (Some(u), Some(s)) => Ok((u + s) as f64 / CLK_TCK),
        _ => Err(ProcError::Format("/proc/<pid>/stat")),
    }
}

/// A `kB` line of `/proc/<pid>/status` (e.g. `VmHWM`), in bytes.
pub fn parse_status_kb(text: &str, key: &'static str) -> Result<u64, ProcError> {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(key) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let kb = rest
            .split_ascii_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or(ProcError::Format("/proc/<pid>/status"))?;
        return Ok(kb * 1024);
    }
    Err(ProcError::Format("/proc/<pid>/status"))
}

/// `(busy, total)` jiffies of the whole machine from the first line of `/proc/stat`.
/// Idle and iowait count as not busy.
pub fn parse_machine_jiffies(text: &str) -> Result<(u64, u64), ProcError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or(ProcError::Format("/proc/stat"))?;
    let vals: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    if vals.len() < 4 {
        return Err(ProcError::Format("/proc/stat"));
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = vals.iter().take(8).sum();
    let idle = vals.get(3).copied().unwrap_or(0) + vals.get(4).copied().unwrap_or(0);
    Ok((total.saturating_sub(idle), total))
}

/// CPU seconds (`utime + stime`) used so far by process `pid` (`"self"` for this one).
pub fn cpu_seconds(pid: &str) -> Result<f64, ProcError> {
    parse_stat_cpu_s(&read(&Path::new("/proc").join(pid).join("stat"))?)
}

/// `(VmHWM, VmRSS)` of process `pid`, in bytes.
pub fn memory(pid: &str) -> Result<(u64, u64), ProcError> {
    let text = read(&Path::new("/proc").join(pid).join("status"))?;
    Ok((
        parse_status_kb(&text, "VmHWM")?,
        parse_status_kb(&text, "VmRSS")?,
    ))
}

/// The machine's `(busy, total)` jiffies so far.
pub fn machine_jiffies() -> Result<(u64, u64), ProcError> {
    parse_machine_jiffies(&read(Path::new("/proc/stat"))?)
}

/// Number of online CPUs (for the report's machine line).
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_paren() {
        let text =
            "1234 (we (ird) name) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 9 0 \
                    5000 100000000 2000 18446744073709551615";
        assert_eq!(parse_stat_cpu_s(text).unwrap(), 3.8);
        assert!(parse_stat_cpu_s("garbage").is_err());
        assert!(parse_stat_cpu_s("1 (x) S 1 2").is_err());
    }

    #[test]
    fn status_lines_are_found_by_key() {
        let text =
            "Name:\tzonekeep\nVmPeak:\t  200000 kB\nVmHWM:\t   16384 kB\nVmRSS:\t   12000 kB\n";
        assert_eq!(parse_status_kb(text, "VmHWM").unwrap(), 16384 * 1024);
        assert_eq!(parse_status_kb(text, "VmRSS").unwrap(), 12000 * 1024);
        assert!(parse_status_kb(text, "VmSwap").is_err());
    }

    #[test]
    fn machine_busy_excludes_idle_and_iowait() {
        let text = "cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_machine_jiffies(text).unwrap(), (160, 1000));
    }

    #[test]
    fn this_process_can_be_read() {
        assert!(cpu_seconds("self").unwrap() >= 0.0);
        let (hwm, rss) = memory("self").unwrap();
        assert!(hwm >= rss && rss > 0);
        let (busy, total) = machine_jiffies().unwrap();
        assert!(busy <= total);
    }
}
