//! One I/O thread: its ring, set up with the best flags the kernel takes and checked for the
//! operations the variants need, the connections dealt to it, and the loop that sends each patch
//! to all of them and answers what they send.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

use io_uring::types::Fd;
use io_uring::{cqueue, opcode, squeue, IoUring, Probe};

use super::buf_ring::{BufRing, GROUP};
use super::{refused, Ready, Shared, KIND, RECV, SEND, SLOT, WAKE};
use crate::frames::{self, Event, Parser};
use crate::server::OUTBOX_FRAMES;
use crate::uring::{Recv, Stats};

/// Submission queue entries of an I/O thread's ring: one send per connection per patch fits in
/// one submit up to this many connections per thread.
const SQ_ENTRIES: u32 = 2048;
/// Completion queue entries (the kernel keeps overflowing ones, but a roomy queue avoids that).
const CQ_ENTRIES: u32 = 8192;
/// Provided buffers per I/O thread (a power of two), and their size (the host reads 1 KiB).
const BUFFERS: u16 = 512;
const BUFFER_BYTES: usize = 1024;

/// Linux errno values a call or completion can carry.
const EINTR: i32 = 4;
const EAGAIN: i32 = 11;
const EBUSY: i32 = 16;
const EINVAL: i32 = 22;
const ENOBUFS: i32 = 105;

/// Something queued for a connection.
enum Out {
    /// The shared frame.
    Frame,
    /// The pong owed for a clock ping.
    Pong,
    /// Bytes of its own (a WebSocket Pong control frame).
    Owned(Box<[u8]>),
}

/// One connection of an I/O thread.
struct Conn {
    stream: TcpStream,
    parser: Parser,
    /// What is to be sent; the front is in flight while `sending`.
    queue: VecDeque<Out>,
    /// Bytes of the front already sent.
    sent: usize,
    sending: bool,
    /// A recv is armed.
    receiving: bool,
    /// Shut down: nothing more is sent or armed; the slot goes once nothing is in flight.
    closing: bool,
    /// Its own receive buffer when it receives single-shot.
    buf: Option<Box<[u8]>>,
}

/// One I/O thread: its ring and the connections it owns.
pub(super) struct IoThread {
    ring: IoUring,
    bufs: Option<BufRing>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    shared: Shared,
    inbox: mpsc::Receiver<TcpStream>,
    /// How new connections receive.
    recv: Recv,
}

/// Flags a ring setup adds to the builder.
type SetupFlags = fn(&mut io_uring::Builder);

/// The ring setups tried in turn: an older kernel refuses flags it does not know with `EINVAL`.
const SETUPS: [(&str, SetupFlags); 3] = [
    ("single issuer, deferred task work", |b| {
        b.setup_single_issuer()
            .setup_defer_taskrun()
            .setup_submit_all();
    }),
    ("cooperative task work", |b| {
        b.setup_coop_taskrun().setup_submit_all();
    }),
    ("plain setup", |_| {}),
];

fn build_ring() -> Result<(IoUring, &'static str), String> {
    let mut last = io::Error::from_raw_os_error(EINVAL);
    for (name, flags) in SETUPS {
        let mut b = IoUring::builder();
        b.setup_cqsize(CQ_ENTRIES);
        flags(&mut b);
        match b.build(SQ_ENTRIES) {
            Ok(ring) => return Ok((ring, name)),
            Err(e) if e.raw_os_error() == Some(EINVAL) => last = e,
            Err(e) => return Err(refused("io_uring_setup", &e)),
        }
    }
    Err(refused("io_uring_setup", &last))
}

impl IoThread {
    /// Set up the thread's ring (on the thread itself: a single-issuer ring belongs to the thread
    /// that made it) and check the kernel has what the variant needs.
    pub(super) fn new(
        shared: Shared,
        inbox: mpsc::Receiver<TcpStream>,
        recv: Recv,
    ) -> Result<(Self, Ready), String> {
        let (ring, setup) = build_ring()?;
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| refused("IORING_REGISTER_PROBE", &e))?;
        let needed = [
            (opcode::Send::CODE, "SEND"),
            (opcode::Recv::CODE, "RECV"),
            (opcode::MsgRingData::CODE, "MSG_RING"),
        ];
        for (code, name) in needed {
            if !probe.is_supported(code) {
                return Err(format!(
                    "this kernel's io_uring has no {name} operation; variants e and f need it"
                ));
            }
        }
        let (bufs, how) = match recv {
            Recv::Single => (None, "single-shot recv (asked for)".to_string()),
            Recv::Multishot => match BufRing::new(&ring, BUFFERS, BUFFER_BYTES) {
                Ok(b) => (
                    Some(b),
                    format!("multishot recv on {BUFFERS} × {BUFFER_BYTES} B provided buffers"),
                ),
                Err(e) => (
                    None,
                    format!("single-shot recv (the kernel refused a provided-buffer ring: {e})"),
                ),
            },
        };
        let ready = Ready {
            ring_fd: ring.as_raw_fd(),
            setup: format!("{setup}, {how}"),
        };
        let recv = if bufs.is_some() {
            Recv::Multishot
        } else {
            Recv::Single
        };
        let io = IoThread {
            ring,
            bufs,
            conns: Vec::new(),
            free: Vec::new(),
            shared,
            inbox,
            recv,
        };
        Ok((io, ready))
    }

    /// Run until a fatal error, which is returned.
    pub(super) fn run(&mut self) -> io::Error {
        match self.serve() {
            Ok(never) => match never {},
            Err(e) => e,
        }
    }

    fn serve(&mut self) -> io::Result<Infallible> {
        let mut completions: Vec<(u64, i32, u32)> = Vec::new();
        loop {
            if self.ring.completion().is_empty() {
                // Submits what completions queued (re-armed recvs, pongs) and waits.
                passing(self.ring.submit_and_wait(1))?;
            }
            completions.clear();
            completions.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            let mut patch = false;
            for &(data, result, flags) in &completions {
                let slot = (data & SLOT) as usize;
                match data & KIND {
                    WAKE => patch = true,
                    SEND => self.sent(slot, result)?,
                    RECV => self.received(slot, result, flags)?,
                    _ => {}
                }
            }
            if let Some(bufs) = &self.bufs {
                bufs.publish();
            }
            self.adopt()?;
            if patch {
                self.patch()?;
                // The patch's one submit: every connection's send at once.
                passing(self.ring.submit())?;
            }
        }
    }

    /// Take the connections the accept thread dealt to this thread and arm their receives.
    fn adopt(&mut self) -> io::Result<()> {
        while let Ok(stream) = self.inbox.try_recv() {
            let conn = Conn {
                stream,
                parser: Parser::new(self.shared.transport),
                queue: VecDeque::with_capacity(4),
                sent: 0,
                sending: false,
                receiving: false,
                closing: false,
                buf: (self.recv == Recv::Single)
                    .then(|| vec![0u8; BUFFER_BYTES].into_boxed_slice()),
            };
            let slot = match self.free.pop() {
                Some(slot) => slot,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            let c = self.conns[slot].insert(conn);
            arm_recv(&mut self.ring, &self.shared.stats, c, slot)?;
            self.shared.established.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// A patch: the frame to every connection (one send each, unless one is still in flight).
    fn patch(&mut self) -> io::Result<()> {
        let stats = &self.shared.stats;
        for (slot, entry) in self.conns.iter_mut().enumerate() {
            let Some(c) = entry.as_mut() else {
                continue;
            };
            if c.closing {
                continue;
            }
            if c.queue.len() >= OUTBOX_FRAMES {
                stats.slow_consumers.fetch_add(1, Ordering::Relaxed);
                end(c, stats);
            } else {
                c.queue.push_back(Out::Frame);
                if !c.sending {
                    send_next(&mut self.ring, &self.shared, c, slot)?;
                }
            }
            settle(entry, &mut self.free, slot);
        }
        Ok(())
    }

    /// A send completed: its remainder, the next in the queue, or the end of the connection.
    fn sent(&mut self, slot: usize, result: i32) -> io::Result<()> {
        let stats = &self.shared.stats;
        let Some(entry) = self.conns.get_mut(slot) else {
            return Ok(());
        };
        let Some(c) = entry.as_mut() else {
            return Ok(());
        };
        c.sending = false;
        if result <= 0 {
            // An error, or nothing written of a non-empty buffer: the connection is gone.
            end(c, stats);
        } else if !c.closing {
            let len = match c.queue.front() {
                Some(Out::Frame) => self.shared.frame.len(),
                Some(Out::Pong) => self.shared.pong.len(),
                Some(Out::Owned(b)) => b.len(),
                None => 0,
            };
            c.sent += result as usize;
            if c.sent < len {
                stats.partial_sends.fetch_add(1, Ordering::Relaxed);
            } else {
                c.queue.pop_front();
                c.sent = 0;
            }
            if !c.queue.is_empty() {
                send_next(&mut self.ring, &self.shared, c, slot)?;
            }
        }
        settle(entry, &mut self.free, slot);
        Ok(())
    }

    /// A receive completed: parse what came, answer pings, return the buffer, re-arm.
    fn received(&mut self, slot: usize, result: i32, flags: u32) -> io::Result<()> {
        let stats = &self.shared.stats;
        let Some(entry) = self.conns.get_mut(slot) else {
            return Ok(());
        };
        let Some(c) = entry.as_mut() else {
            return Ok(());
        };
        let more = cqueue::more(flags);
        if !more {
            c.receiving = false;
        }
        if result > 0 {
            let n = result as usize;
            let bid = cqueue::buffer_select(flags);
            let Conn {
                parser, queue, buf, ..
            } = &mut *c;
            let data: &[u8] = match (bid, &self.bufs, buf) {
                (Some(bid), Some(bufs), _) => bufs.read(bid, n),
                (None, _, Some(buf)) => &buf[..n.min(buf.len())],
                _ => &[],
            };
            let mut full = false;
            let parsed = parser.feed(data, |event| {
                let out = match event {
                    Event::ClockPing => Out::Pong,
                    Event::WsPing(payload) => {
                        stats.ws_pings.fetch_add(1, Ordering::Relaxed);
                        Out::Owned(frames::ws_pong(payload).into_boxed_slice())
                    }
                    Event::WsPong => {
                        stats.ws_pongs.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                };
                if queue.len() >= OUTBOX_FRAMES {
                    full = true;
                } else {
                    queue.push_back(out);
                }
            });
            if let (Some(bid), Some(bufs)) = (bid, &mut self.bufs) {
                bufs.give(bid);
            }
            if full && !c.closing {
                stats.slow_consumers.fetch_add(1, Ordering::Relaxed);
                end(c, stats);
            }
            if parsed.is_err() {
                end(c, stats);
            }
            if !c.closing && !c.sending && !c.queue.is_empty() {
                send_next(&mut self.ring, &self.shared, c, slot)?;
            }
            if !more && !c.closing {
                arm_recv(&mut self.ring, stats, c, slot)?;
            }
        } else if result == 0 {
            // The client closed.
            end(c, stats);
        } else if -result == ENOBUFS {
            // The provided buffers ran out; those used are given back before the next submit.
            stats.no_buffers.fetch_add(1, Ordering::Relaxed);
            if !more && !c.closing {
                arm_recv(&mut self.ring, stats, c, slot)?;
            }
        } else if -result == EINVAL && c.buf.is_none() && !c.closing {
            // A kernel with provided-buffer rings but without multishot recv: single-shot from
            // now on, for this connection and the thread's next ones.
            stats.recv_fallbacks.fetch_add(1, Ordering::Relaxed);
            self.recv = Recv::Single;
            c.buf = Some(vec![0u8; BUFFER_BYTES].into_boxed_slice());
            arm_recv(&mut self.ring, stats, c, slot)?;
        } else {
            end(c, stats);
        }
        settle(entry, &mut self.free, slot);
        Ok(())
    }
}

/// A submit's result, where an interrupted or busy one is no error: what it left in the
/// submission queue goes with the next.
fn passing(r: io::Result<usize>) -> io::Result<()> {
    match r {
        Err(e) if !matches!(e.raw_os_error(), Some(EINTR | EAGAIN | EBUSY)) => Err(e),
        _ => Ok(()),
    }
}

/// Shut a connection down (once): its operations in flight complete, and nothing new starts.
fn end(c: &mut Conn, stats: &Stats) {
    if !c.closing {
        c.closing = true;
        let _ = c.stream.shutdown(Shutdown::Both);
        stats.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Free a shut-down connection's slot once none of its operations is in flight (so no buffer it
/// owns is still the kernel's).
fn settle(entry: &mut Option<Conn>, free: &mut Vec<usize>, slot: usize) {
    if entry
        .as_ref()
        .is_some_and(|c| c.closing && !c.sending && !c.receiving)
    {
        *entry = None;
        free.push(slot);
    }
}

/// Queue `entry`, submitting first if the submission queue is full.
///
/// # Safety
///
/// Whatever `entry` points into must stay valid until its completion has been reaped.
unsafe fn push(ring: &mut IoUring, stats: &Stats, entry: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: the caller keeps what `entry` points into valid until its completion.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        stats.extra_submits.fetch_add(1, Ordering::Relaxed);
        if ring.submit()? == 0 {
            return Err(io::Error::other("the submission queue stays full"));
        }
    }
}

/// Queue the send of the rest of `c`'s front item.
fn send_next(ring: &mut IoUring, shared: &Shared, c: &mut Conn, slot: usize) -> io::Result<()> {
    let bytes: &[u8] = match c.queue.front() {
        Some(Out::Frame) => &shared.frame,
        Some(Out::Pong) => &shared.pong,
        Some(Out::Owned(b)) => b,
        None => return Ok(()),
    };
    let rest = &bytes[c.sent.min(bytes.len())..];
    let entry = opcode::Send::new(
        Fd(c.stream.as_raw_fd()),
        rest.as_ptr(),
        u32::try_from(rest.len()).unwrap_or(u32::MAX),
    )
    .build()
    .user_data(SEND | slot as u64);
    // SAFETY: `rest` lies in the thread's frame or pong, which the thread holds for its whole
    // life, or in a boxed buffer at the front of the connection's queue, which stays there (its
    // heap bytes unmoved) until this send's completion, the slot being kept while `sending`.
    unsafe { push(ring, &shared.stats, &entry)? };
    c.sending = true;
    Ok(())
}

/// Arm `c`'s receive: multishot on the provided buffers, or single-shot into its own buffer.
fn arm_recv(ring: &mut IoUring, stats: &Stats, c: &mut Conn, slot: usize) -> io::Result<()> {
    let fd = Fd(c.stream.as_raw_fd());
    let entry = match &mut c.buf {
        Some(buf) => opcode::Recv::new(
            fd,
            buf.as_mut_ptr(),
            u32::try_from(buf.len()).unwrap_or(u32::MAX),
        )
        .build(),
        None => opcode::RecvMulti::new(fd, GROUP).build(),
    }
    .user_data(RECV | slot as u64);
    // SAFETY: a single-shot recv writes into the connection's boxed buffer, freed only with the
    // connection after this recv's completion (the slot is kept while `receiving`); a multishot
    // recv writes only into provided buffers, which live as long as the ring.
    unsafe { push(ring, stats, &entry)? };
    c.receiving = true;
    Ok(())
}
