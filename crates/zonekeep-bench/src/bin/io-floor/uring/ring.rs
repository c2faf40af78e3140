//! The rings themselves (Linux): the shape started, and the patch thread's wake-ups. Each I/O
//! thread's ring setup, the checks that the kernel can run the variants and the thread's loop
//! are in `io_thread`, the provided-buffer ring in `buf_ring`, the accept thread in `accept`.
//!
//! Every buffer an operation points into outlives it: frames and pongs are held by their I/O
//! thread for its whole life; a queued buffer and a connection's receive buffer are freed only
//! with the connection, whose slot is kept until none of its operations is in flight; provided
//! buffers live as long as their ring. An I/O thread never returns once its ring has operations
//! in flight: a fatal error ends the process.

mod accept;
mod buf_ring;
mod io_thread;
use accept::{accept, std_listener};
use io_thread::IoThread;

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicUsize;
use std::sync::{mpsc, Arc};
use std::thread;

use bytes::Bytes;
use io_uring::types::Fd;
use io_uring::{opcode, IoUring};

use super::{Recv, Report, Stats};
use crate::frames;
use crate::server::{self, Running};
use crate::wire::{Transport, PONG_BYTES};

/// A completion's user data: the operation's kind in the top half, the connection's slot in the
/// bottom half.
const WAKE: u64 = 1 << 32;
const SEND: u64 = 2 << 32;
const RECV: u64 = 3 << 32;
const KIND: u64 = 0xFFFF_FFFF << 32;
const SLOT: u64 = 0xFFFF_FFFF;

/// See [`super::start`].
pub fn start(
    transport: Transport,
    threads: usize,
    frame: Bytes,
    recv: Recv,
) -> io::Result<Running> {
    // The patch thread's ring first: where the kernel refuses io_uring, this is where it shows.
    let wake_entries = u32::try_from(threads.next_power_of_two().max(8)).unwrap_or(8);
    let mut waker = IoUring::builder()
        .build(wake_entries)
        .map_err(|e| io::Error::other(refused("io_uring_setup", &e)))?;
    let listener = std_listener()?;
    let addr = listener.local_addr()?;
    let (frame, pong) = match transport {
        Transport::Ws => (
            Bytes::from(frames::ws_binary(&frame)),
            Bytes::from(frames::ws_binary(&[3u8; PONG_BYTES])),
        ),
        Transport::Raw => (frame, Bytes::from(vec![3u8; PONG_BYTES])),
    };
    let stats = Arc::new(Stats::default());
    let established = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<Ready, String>>();
    let mut inboxes = Vec::with_capacity(threads);
    for i in 0..threads {
        let (inbox_tx, inbox) = mpsc::channel();
        inboxes.push(inbox_tx);
        let shared = Shared {
            transport,
            frame: frame.clone(),
            pong: pong.clone(),
            established: established.clone(),
            stats: stats.clone(),
        };
        let ready_tx = ready_tx.clone();
        thread::Builder::new()
            .name(format!("uring-{i}"))
            .spawn(move || match IoThread::new(shared, inbox, recv) {
                Ok((mut io, ready)) => {
                    let _ = ready_tx.send(Ok(ready));
                    let e = io.run();
                    fatal(&format!("io_uring I/O thread {i}: {e}"))
                }
                Err(reason) => {
                    let _ = ready_tx.send(Err(reason));
                }
            })?;
    }
    drop(ready_tx);
    let mut targets = Vec::with_capacity(threads);
    let mut setups: Vec<String> = Vec::new();
    for _ in 0..threads {
        let ready = ready_rx
            .recv()
            .map_err(|_| io::Error::other("an io_uring I/O thread ended during setup"))?
            .map_err(io::Error::other)?;
        targets.push(ready.ring_fd);
        if !setups.contains(&ready.setup) {
            setups.push(ready.setup);
        }
    }
    thread::Builder::new()
        .name("accept".into())
        .spawn(move || accept(listener, transport, inboxes))?;
    server::spawn_patch_thread(move || wake(&mut waker, &targets))?;
    Ok(Running {
        addr,
        established,
        uring: Some(Report {
            setup: format!("{threads} rings, {}", setups.join(" | ")),
            stats,
        }),
    })
}

/// The one-line reason io_uring cannot be used.
fn refused(call: &str, e: &io::Error) -> String {
    format!("io_uring is unavailable here ({call}: {e}); variants e and f need it")
}

/// Print `msg` and end the process (an I/O thread must not unwind with operations in flight).
fn fatal(msg: &str) -> ! {
    eprintln!("io-floor: {msg}");
    std::process::exit(1)
}

/// One patch's wake-up: a `MSG_RING` message to every I/O thread's ring, all in one submit.
fn wake(ring: &mut IoUring, targets: &[RawFd]) {
    {
        let mut sq = ring.submission();
        for &fd in targets {
            let entry = opcode::MsgRingData::new(Fd(fd), 0, WAKE, None)
                .build()
                .user_data(WAKE);
            // SAFETY: a MSG_RING entry points into no memory of this process; its target is an
            // I/O thread's ring, which that thread keeps open for the life of the process.
            if unsafe { sq.push(&entry) }.is_err() {
                fatal("the patch thread's submission queue is full");
            }
        }
    }
    if let Err(e) = ring.submit() {
        fatal(&format!("waking the io_uring I/O threads: {e}"));
    }
    for c in ring.completion() {
        if c.result() < 0 {
            fatal(&format!(
                "waking an io_uring I/O thread: {}",
                io::Error::from_raw_os_error(-c.result())
            ));
        }
    }
}

/// What every I/O thread shares.
struct Shared {
    transport: Transport,
    /// The frame as it goes on the wire (for WebSocket with its server frame header).
    frame: Bytes,
    /// The pong as it goes on the wire.
    pong: Bytes,
    established: Arc<AtomicUsize>,
    stats: Arc<Stats>,
}

/// An I/O thread's word to [`start`] once its ring is set up.
struct Ready {
    ring_fd: RawFd,
    setup: String,
}
