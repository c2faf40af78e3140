//! What a process costs over a window: CPU from `/proc/<pid>/stat`, context switches summed over
//! its threads (`/proc/<pid>/status` alone holds only the main thread's), the machine's busy
//! fraction, and optionally `perf stat` counts.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use zonekeep_bench::procfs;

/// One reading of a process and the machine.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    at: Instant,
    cpu_s: f64,
    voluntary: u64,
    involuntary: u64,
    machine_busy: u64,
    machine_total: u64,
}

/// Process `pid`'s cost between two samples.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Wall-clock length, s.
    pub seconds: f64,
    /// CPU used (utime + stime), in cores.
    pub cores: f64,
    /// Voluntary context switches per second, all threads.
    pub voluntary_per_s: f64,
    /// Involuntary context switches per second, all threads.
    pub involuntary_per_s: f64,
    /// The whole machine's busy fraction.
    pub machine_busy: f64,
}

/// `(voluntary, involuntary)` context switches from the text of a `/proc/.../status` file.
pub fn parse_ctxt(text: &str) -> Option<(u64, u64)> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// Context switches of every live thread of `pid`.
fn ctxt(pid: u32) -> std::io::Result<(u64, u64)> {
    let mut sum = (0, 0);
    for task in std::fs::read_dir(Path::new("/proc").join(pid.to_string()).join("task"))? {
        // A thread that ended between the listing and the read is skipped.
        let Ok(text) = std::fs::read_to_string(task?.path().join("status")) else {
            continue;
        };
        if let Some((v, i)) = parse_ctxt(&text) {
            sum.0 += v;
            sum.1 += i;
        }
    }
    Ok(sum)
}

/// Read process `pid` and the machine now.
pub fn sample(pid: u32) -> Result<Sample, Box<dyn std::error::Error>> {
    let cpu_s = procfs::cpu_seconds(&pid.to_string())?;
    let (voluntary, involuntary) = ctxt(pid)?;
    let (machine_busy, machine_total) = procfs::machine_jiffies()?;
    Ok(Sample {
        at: Instant::now(),
        cpu_s,
        voluntary,
        involuntary,
        machine_busy,
        machine_total,
    })
}

/// The cost between `a` and the later `b`.
pub fn window(a: &Sample, b: &Sample) -> Window {
    let seconds = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let total = b.machine_total.saturating_sub(a.machine_total).max(1);
    Window {
        seconds,
        cores: (b.cpu_s - a.cpu_s) / seconds,
        voluntary_per_s: b.voluntary.saturating_sub(a.voluntary) as f64 / seconds,
        involuntary_per_s: b.involuntary.saturating_sub(a.involuntary) as f64 / seconds,
        machine_busy: b.machine_busy.saturating_sub(a.machine_busy) as f64 / total as f64,
    }
}

/// The load averages line of `/proc/loadavg` (first three fields).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Events counted by [`perf_stat`].
const PERF_EVENTS: &str = "task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter";

/// Start `perf stat` on every thread of `pid` for `seconds`; its CSV report comes on stderr.
pub fn perf_stat(pid: u32, seconds: f64) -> std::io::Result<Child> {
    Command::new("perf")
        .args(["stat", "-x", ",", "-e", PERF_EVENTS, "-p", &pid.to_string()])
        .args(["--", "sleep", &format!("{seconds}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

/// `perf stat` counts over its run.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfCounts {
    /// task-clock, ms.
    pub task_clock_ms: Option<f64>,
    /// context-switches.
    pub context_switches: Option<f64>,
    /// cpu-migrations.
    pub migrations: Option<f64>,
    /// System calls entered (`raw_syscalls:sys_enter`).
    pub syscalls: Option<f64>,
}

/// The counts in `perf stat -x,` output (`value,unit,event,...` lines; a `<not counted>` or
/// `<not supported>` value stays `None`).
pub fn parse_perf_csv(text: &str) -> PerfCounts {
    let mut c = PerfCounts::default();
    for line in text.lines() {
        let mut f = line.split(',');
        let (Some(value), Some(_unit), Some(event)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let v = value.trim().parse::<f64>().ok();
        match event.trim() {
            "task-clock" => c.task_clock_ms = v,
            "context-switches" => c.context_switches = v,
            "cpu-migrations" => c.migrations = v,
            "raw_syscalls:sys_enter" => c.syscalls = v,
            _ => {}
        }
    }
    c
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn context_switches_come_from_the_two_status_lines() {
        let text = "Name:\tio\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n";
        assert_eq!(parse_ctxt(text), Some((1234, 56)));
        assert_eq!(parse_ctxt("Name:\tio\n"), None);
    }

    #[test]
    fn every_thread_of_this_process_is_counted() {
        // `/proc/<pid>/status` holds the main thread's switches only; the sum must exceed them
        // once another thread has switched (a sleep is a voluntary switch).
        let pid = std::process::id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let main_thread = parse_ctxt(&status).unwrap();
        let (slept_tx, slept) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1));
            slept_tx.send(()).unwrap();
            done.recv().unwrap();
        });
        slept.recv().unwrap();
        let all = ctxt(pid).unwrap();
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert!(all.0 > main_thread.0, "{main_thread:?} vs {all:?}");
    }

    #[test]
    fn perf_csv_lines_are_read_by_event_name() {
        let text = "\n641.23,msec,task-clock,10001234,100.00,0.064,CPUs utilized\n\
                    6100,,context-switches,10001234,100.00,9.5,K/sec\n\
                    <not counted>,,cpu-migrations,0,0.00,,\n\
                    52000,,raw_syscalls:sys_enter,10001234,100.00,,\n";
        let c = parse_perf_csv(text);
        assert_eq!(c.task_clock_ms, Some(641.23));
        assert_eq!(c.context_switches, Some(6100.0));
        assert_eq!(c.migrations, None);
        assert_eq!(c.syscalls, Some(52000.0));
    }
}
