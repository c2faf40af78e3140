//! `io-floor`: the cost of only moving the arena A workload's bytes, with no zone behind them.
//!
//! The host's I/O for arena scenario A (docs/WORKLOADS.md) is, per client, one ~3.2 kB binary
//! frame every 50 ms out, and 10 small inputs plus one clock ping (answered with a pong) a second
//! in. This program reproduces exactly that traffic: the server half in this process sends one
//! pre-built frame (the same `Bytes` for everyone, as the host does) to every client every
//! patch, and reads their records; the client half runs as a child process so that its CPU is
//! not counted. The server's CPU and context switches are read from `/proc` over a window after
//! a warm-up, optionally followed by `perf stat` on this process.
//!
//! ```text
//! cargo run --release -p zonekeep-bench --bin io-floor -- --clients 100 --variant a --seconds 20
//!   --variant a   WebSocket, one task per connection woken through its outbox (the host's shape)
//!   --variant b   WebSocket, one writer task per I/O thread writing all its connections in a loop
//!   --variant c   raw TCP in the host's shape (a without WebSocket framing)
//!   --variant d   raw TCP in shape b
//!   --variant e   WebSocket over io_uring: one ring per I/O thread, one submit of every
//!                 connection's send per patch, multishot recv (Linux; see `uring.rs`)
//!   --variant f   raw TCP in shape e
//!   --warmup S (5)  --io-threads K (2, shapes b, d, e, f)  --frame-bytes B (3200)
//!   --perf-seconds S (0)  --uring-recv multi|single (multi, shapes e, f)
//! cargo run --release -p zonekeep-bench --bin io-floor -- --attach PID --warmup 8 --seconds 15
//!   measures another process (a running host) the same way
//! ```
//!
//! The WebSocket server is tokio-tungstenite 0.29 (the `WebSocketStream` that axum 0.8's
//! WebSocket wraps), configured as the host configures it, without hyper's HTTP upgrade layer;
//! the io_uring variants do the same handshake with tungstenite and then frame the bytes
//! themselves (`frames.rs`). If the kernel refuses io_uring, they say why and exit non-zero.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod client;
mod frames;
mod measure;
mod server;
// Submitting io_uring operations is `unsafe`: only this module may.
#[allow(unsafe_code)]
mod uring;
mod wire;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::measure::{PerfCounts, Window};
use crate::server::Shape;
use crate::uring::Recv;
use crate::wire::Transport;

type Error = Box<dyn std::error::Error>;

/// The hidden flag that makes this binary the client half.
const CLIENT_HALF: &str = "--client-half";

/// What to run.
#[derive(Debug, Clone)]
struct Args {
    clients: usize,
    variant: char,
    seconds: f64,
    warmup: f64,
    io_threads: usize,
    frame_bytes: usize,
    perf_seconds: f64,
    attach: Option<u32>,
    uring_recv: Recv,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            clients: 100,
            variant: 'a',
            seconds: 20.0,
            warmup: 5.0,
            io_threads: 2,
            frame_bytes: 3200,
            perf_seconds: 0.0,
            attach: None,
            uring_recv: Recv::Multishot,
        }
    }
}

/// The shape and transport of a variant letter.
fn variant(v: char) -> Option<(Shape, Transport)> {
    match v {
        'a' => Some((Shape::PerConnection, Transport::Ws)),
        'b' => Some((Shape::PerThread, Transport::Ws)),
        'c' => Some((Shape::PerConnection, Transport::Raw)),
        'd' => Some((Shape::PerThread, Transport::Raw)),
        'e' => Some((Shape::Uring, Transport::Ws)),
        'f' => Some((Shape::Uring, Transport::Raw)),
        _ => None,
    }
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let num = |v: String| {
            v.parse::<f64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--clients" => a.clients = num(value()?)? as usize,
            "--variant" => {
                let v = value()?;
                a.variant = v
                    .chars()
                    .next()
                    .filter(|c| v.len() == 1 && variant(*c).is_some())
                    .ok_or_else(|| format!("--variant: a, b, c, d, e or f, not {v}"))?;
            }
            "--seconds" => a.seconds = num(value()?)?,
            "--warmup" => a.warmup = num(value()?)?,
            "--io-threads" => a.io_threads = num(value()?)? as usize,
            "--frame-bytes" => a.frame_bytes = num(value()?)? as usize,
            "--perf-seconds" => a.perf_seconds = num(value()?)?,
            "--attach" => a.attach = Some(num(value()?)? as u32),
            "--uring-recv" => {
                let v = value()?;
                a.uring_recv = Recv::parse(&v)
                    .ok_or_else(|| format!("--uring-recv: multi or single, not {v}"))?;
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if a.clients == 0 || a.seconds <= 0.0 && a.attach.is_none() {
        return Err("--clients and --seconds must be positive".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if args.first().map(String::as_str) == Some(CLIENT_HALF) {
        client_half(&args[1..])
    } else {
        match parse_args(&args) {
            Ok(a) if a.attach.is_some() => attach(&a),
            Ok(a) => server_half(&a),
            Err(e) => Err(e.into()),
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("io-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--client-half ADDR CLIENTS ws|raw FRAME_BYTES`
fn client_half(args: &[String]) -> Result<(), Error> {
    let [addr, clients, transport, frame_bytes] = args else {
        return Err("--client-half ADDR CLIENTS ws|raw FRAME_BYTES".into());
    };
    let transport = Transport::parse(transport).ok_or("transport: ws or raw")?;
    client::run(
        addr.parse::<SocketAddr>()?,
        clients.parse()?,
        transport,
        frame_bytes.parse()?,
    )
}

/// The client half as a child process, and the lines it prints.
struct ClientHalf {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl ClientHalf {
    fn spawn(a: &Args, addr: SocketAddr, transport: Transport) -> Result<Self, Error> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(CLIENT_HALF)
            .arg(addr.to_string())
            .arg(a.clients.to_string())
            .arg(transport.name())
            .arg(a.frame_bytes.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    fn line(&self, timeout: Duration) -> Result<String, Error> {
        self.lines
            .recv_timeout(timeout)
            .map_err(|_| "the client half stopped answering".into())
    }

    /// The client half's totals now: `(bytes, frames, sent, closed)`.
    fn mark(&mut self) -> Result<[u64; 4], Error> {
        writeln!(self.stdin, "mark")?;
        self.stdin.flush()?;
        let line = self.line(Duration::from_secs(10))?;
        client::parse_line(&line).ok_or_else(|| format!("unexpected line {line:?}").into())
    }
}

fn server_half(a: &Args) -> Result<(), Error> {
    let (shape, transport) = variant(a.variant).ok_or("unknown variant")?;
    let frame = Bytes::from((0..a.frame_bytes).map(|i| i as u8).collect::<Vec<u8>>());
    let running = server::start(shape, transport, a.io_threads, frame, a.uring_recv)?;
    let mut clients = ClientHalf::spawn(a, running.addr, transport)?;
    let connect_by = Instant::now() + Duration::from_secs(120);
    let ready = clients.line(Duration::from_secs(120))?;
    if ready != "ready" {
        return Err(format!("the client half said {ready:?}").into());
    }
    while running.established.load(Ordering::Relaxed) < a.clients {
        if Instant::now() > connect_by {
            return Err("not every connection was set up".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_secs_f64(a.warmup));
    let pid = std::process::id();
    let cpid = clients.child.id();
    let load = measure::loadavg();
    let t0 = clients.mark()?;
    let (s0, c0) = (measure::sample(pid)?, measure::sample(cpid)?);
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    let t1 = clients.mark()?;
    let (s1, c1) = (measure::sample(pid)?, measure::sample(cpid)?);
    let perf = run_perf(pid, a.perf_seconds)?;
    let w = measure::window(&s0, &s1);
    let cw = measure::window(&c0, &c1);
    let n = a.clients as f64;
    let per = |i: usize| (t1[i] - t0[i]) as f64 / w.seconds / n;
    let desc = match (shape, transport) {
        (Shape::PerConnection, Transport::Ws) => "WebSocket, one task per connection (host shape)",
        (Shape::PerThread, Transport::Ws) => "WebSocket, one writer task per I/O thread",
        (Shape::PerConnection, Transport::Raw) => "raw TCP, one task per connection",
        (Shape::PerThread, Transport::Raw) => "raw TCP, one writer task per I/O thread",
        (Shape::Uring, Transport::Ws) => "WebSocket, one io_uring per I/O thread",
        (Shape::Uring, Transport::Raw) => "raw TCP, one io_uring per I/O thread",
    };
    println!(
        "io-floor variant {} ({desc}), N = {}, frame {} B every {} ms{}",
        a.variant,
        a.clients,
        a.frame_bytes,
        server::PATCH.as_millis(),
        if shape != Shape::PerConnection {
            format!(", {} I/O threads", a.io_threads)
        } else {
            String::new()
        }
    );
    println!("load average at window start: {load}");
    print_window("server", &w);
    println!(
        "clients: recv {:.0} B/s and {:.2} frames/s per client, sent {:.2} records/s per client, \
         {} closed; client process {:.4} cores",
        per(0),
        per(1),
        per(2),
        t1[3],
        cw.cores
    );
    if let Some(report) = &running.uring {
        println!("{}", report.line());
    }
    print_perf(&perf, a.perf_seconds, " after the window");
    println!(
        "RESULT variant={} n={} cores={:.4} cs_per_s={:.0} vol_per_s={:.0} invol_per_s={:.0} \
         recv_per_client={:.0} frames_per_client={:.2} busy={:.2} load={}",
        a.variant,
        a.clients,
        w.cores,
        w.voluntary_per_s + w.involuntary_per_s,
        w.voluntary_per_s,
        w.involuntary_per_s,
        per(0),
        per(1),
        w.machine_busy,
        load.replace(' ', "/")
    );
    drop(clients.stdin);
    let _ = clients.child.wait();
    // The server's runtimes run on detached threads; leaving the process ends them.
    std::process::exit(0)
}

/// `--attach PID`: the same measurement of another process.
fn attach(a: &Args) -> Result<(), Error> {
    let pid = a.attach.ok_or("no pid")?;
    std::thread::sleep(Duration::from_secs_f64(a.warmup));
    let load = measure::loadavg();
    if a.seconds > 0.0 {
        let s0 = measure::sample(pid)?;
        std::thread::sleep(Duration::from_secs_f64(a.seconds));
        let s1 = measure::sample(pid)?;
        let w = measure::window(&s0, &s1);
        println!("load average at window start: {load}");
        print_window(&format!("pid {pid}"), &w);
        println!(
            "RESULT attach={pid} cores={:.4} cs_per_s={:.0} vol_per_s={:.0} invol_per_s={:.0} \
             busy={:.2} load={}",
            w.cores,
            w.voluntary_per_s + w.involuntary_per_s,
            w.voluntary_per_s,
            w.involuntary_per_s,
            w.machine_busy,
            load.replace(' ', "/")
        );
    }
    let perf = run_perf(pid, a.perf_seconds)?;
    let after = if a.seconds > 0.0 {
        " after the window"
    } else {
        ""
    };
    print_perf(&perf, a.perf_seconds, after);
    Ok(())
}

fn run_perf(pid: u32, seconds: f64) -> Result<Option<PerfCounts>, Error> {
    if seconds <= 0.0 {
        return Ok(None);
    }
    let out = measure::perf_stat(pid, seconds)?.wait_with_output()?;
    Ok(Some(measure::parse_perf_csv(&String::from_utf8_lossy(
        &out.stderr,
    ))))
}

fn print_window(who: &str, w: &Window) {
    println!(
        "{who}: {:.4} cores over {:.1} s; context switches {:.0}/s ({:.0} voluntary, {:.0} \
         involuntary); machine busy {:.2}",
        w.cores,
        w.seconds,
        w.voluntary_per_s + w.involuntary_per_s,
        w.voluntary_per_s,
        w.involuntary_per_s,
        w.machine_busy
    );
}

/// `after` says when perf ran ("after the window"), empty when there was no window.
fn print_perf(perf: &Option<PerfCounts>, seconds: f64, after: &str) {
    let Some(p) = perf else { return };
    let rate = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{:.0}/s", v / seconds));
    println!(
        "perf stat over {seconds} s{after}: task-clock {} ({}), context-switches {}, \
         cpu-migrations {}, syscalls {}",
        p.task_clock_ms
            .map_or("n/a".into(), |ms| format!("{ms:.0} ms")),
        p.task_clock_ms.map_or("n/a".into(), |ms| format!(
            "{:.4} cores",
            ms / 1000.0 / seconds
        )),
        rate(p.context_switches),
        rate(p.migrations),
        rate(p.syscalls)
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn flags_set_the_run_and_bad_ones_are_refused() {
        let a = args("--clients 500 --variant c --seconds 10 --perf-seconds 5").unwrap();
        assert_eq!(
            (a.clients, a.variant, a.seconds, a.perf_seconds),
            (500, 'c', 10.0, 5.0)
        );
        assert_eq!(a.warmup, 5.0);
        assert_eq!(variant('c'), Some((Shape::PerConnection, Transport::Raw)));
        assert_eq!(variant('e'), Some((Shape::Uring, Transport::Ws)));
        assert_eq!(variant('f'), Some((Shape::Uring, Transport::Raw)));
        assert_eq!(args("--variant f").unwrap().uring_recv, Recv::Multishot);
        assert_eq!(
            args("--variant e --uring-recv single").unwrap().uring_recv,
            Recv::Single
        );
        assert!(args("--uring-recv both").is_err());
        assert!(args("--variant g").is_err());
        assert!(args("--variant ab").is_err());
        assert!(args("--clients").is_err());
        assert!(args("--clients 0").is_err());
        assert!(args("--bots 10").is_err());
        assert_eq!(args("--attach 42 --seconds 0").unwrap().attach, Some(42));
    }
}
