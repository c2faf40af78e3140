//! The server half: accepts the clients, sends each the same pre-built frame every patch and
//! reads their records, in one of three shapes.
//!
//! - [`Shape::PerConnection`] is the host's shape: a multi-threaded tokio runtime (default worker
//!   count, the accept loop on the thread that calls `block_on`), one task per connection that
//!   selects between its reader and its writer, and a patch thread (the host's simulation thread)
//!   that `try_send`s the shared frame into every connection's bounded outbox, waking each task.
//! - [`Shape::PerThread`]: one current-thread runtime per I/O thread; each runs one writer task
//!   that owns the write halves of its connections and, woken once per patch, writes the frame to
//!   all of them in a loop; per-connection reader tasks on the same thread pass pongs to it.
//! - [`Shape::Uring`]: one io_uring per I/O thread, no async runtime ([`crate::uring`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};

use crate::wire::{self, Reader, Transport, Writer, PONG_BYTES};

/// One patch every 50 ms (20 Hz).
pub const PATCH: Duration = Duration::from_millis(50);
/// The host's outbox bound (`outbox_frames`).
pub const OUTBOX_FRAMES: usize = 64;

/// How the server's work is laid out over tasks and threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One task per connection, woken through its outbox every patch (the host today).
    PerConnection,
    /// One writer task per I/O thread, writing all its connections' frames in a loop.
    PerThread,
    /// One io_uring per I/O thread: one send per connection per patch, all in one submit.
    Uring,
}

/// A running server half.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Connections set up (handshake done) so far.
    pub established: Arc<AtomicUsize>,
    /// The io_uring shape's setup and counts.
    pub uring: Option<crate::uring::Report>,
}

/// Start the server half on background threads; `frame` is sent to every client every patch.
/// `recv` is how the io_uring shape receives.
pub fn start(
    shape: Shape,
    transport: Transport,
    io_threads: usize,
    frame: Bytes,
    recv: crate::uring::Recv,
) -> std::io::Result<Running> {
    match shape {
        Shape::PerConnection => start_per_connection(transport, frame),
        Shape::PerThread => start_per_thread(transport, io_threads.max(1), frame),
        Shape::Uring => crate::uring::start(transport, io_threads.max(1), frame, recv),
    }
}

/// Run `patch` every [`PATCH`] on a thread of its own, as the host's simulation thread ticks.
pub fn spawn_patch_thread(mut patch: impl FnMut() + Send + 'static) -> std::io::Result<()> {
    thread::Builder::new()
        .name("patch".into())
        .spawn(move || {
            let mut next = Instant::now() + PATCH;
            loop {
                let now = Instant::now();
                if next > now {
                    thread::sleep(next - now);
                }
                patch();
                next += PATCH;
            }
        })
        .map(drop)
}

fn pong() -> Bytes {
    Bytes::from(vec![3u8; PONG_BYTES])
}

fn start_per_connection(transport: Transport, frame: Bytes) -> std::io::Result<Running> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("io")
        .build()?;
    let listener = {
        let _in_runtime = rt.enter();
        wire::listener()?
    };
    let addr = listener.local_addr()?;
    let outboxes: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>> = Arc::default();
    let established = Arc::new(AtomicUsize::new(0));
    let (o, e) = (outboxes.clone(), established.clone());
    thread::Builder::new()
        .name("accept".into())
        .spawn(move || rt.block_on(accept_per_connection(listener, transport, o, e)))?;
    spawn_patch_thread(move || {
        let list = outboxes.lock().unwrap_or_else(|p| p.into_inner());
        for tx in list.iter() {
            // Like the host: never wait; a full outbox would be a slow consumer.
            let _ = tx.try_send(frame.clone());
        }
    })?;
    Ok(Running {
        addr,
        established,
        uring: None,
    })
}

async fn accept_per_connection(
    listener: TcpListener,
    transport: Transport,
    outboxes: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>>,
    established: Arc<AtomicUsize>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(connection(
            stream,
            transport,
            outboxes.clone(),
            established.clone(),
        ));
    }
}

/// One connection in the host's shape: reader and writer selected in one task, the writer racing
/// each write against a stop signal registered once for the connection.
async fn connection(
    stream: TcpStream,
    transport: Transport,
    outboxes: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>>,
    established: Arc<AtomicUsize>,
) {
    let Some((mut writer, mut reader)) = wire::accept(stream, transport).await else {
        return;
    };
    let (tx, mut rx) = mpsc::channel::<Bytes>(OUTBOX_FRAMES);
    // The host's kick signal: never raised here, but registered and polled as the host does.
    let (_kick_tx, mut kick) = watch::channel(false);
    outboxes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(tx.clone());
    established.fetch_add(1, Ordering::Relaxed);
    let pong = pong();
    let read = async {
        while let Some(pings) = reader.next().await {
            for _ in 0..pings {
                // Pongs go through the outbox, as the host's do.
                if tx.send(pong.clone()).await.is_err() {
                    return;
                }
            }
        }
    };
    let write = async {
        let stop = kick.wait_for(|k| *k);
        tokio::pin!(stop);
        loop {
            let frame = tokio::select! {
                biased;
                _ = &mut stop => return,
                f = rx.recv() => match f {
                    Some(f) => f,
                    None => return,
                },
            };
            tokio::select! {
                biased;
                _ = &mut stop => return,
                ok = writer.send(frame) => if !ok { return },
            }
        }
    };
    tokio::select! {
        () = read => {}
        () = write => {}
    }
}

fn start_per_thread(
    transport: Transport,
    threads: usize,
    frame: Bytes,
) -> std::io::Result<Running> {
    let mut runtimes = Vec::with_capacity(threads);
    for _ in 0..threads {
        runtimes.push(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
        );
    }
    let listener = match runtimes.first() {
        Some(rt) => {
            let _in_runtime = rt.enter();
            wire::listener()?
        }
        None => return Err(std::io::Error::other("no I/O thread")),
    };
    let addr = listener.local_addr()?;
    let established = Arc::new(AtomicUsize::new(0));
    let (handoffs, inboxes): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::unbounded_channel::<std::net::TcpStream>())
        .unzip();
    let patches: Vec<Arc<Notify>> = (0..threads).map(|_| Arc::new(Notify::new())).collect();
    // The first I/O thread also accepts and deals the sockets out round-robin.
    let mut accept = Some((listener, handoffs));
    for (i, (rt, inbox)) in runtimes.into_iter().zip(inboxes).enumerate() {
        let io = IoThread {
            transport,
            frame: frame.clone(),
            inbox,
            patch: patches[i].clone(),
            established: established.clone(),
        };
        let accept = accept.take();
        thread::Builder::new()
            .name(format!("io-{i}"))
            .spawn(move || match accept {
                Some((listener, handoffs)) => rt.block_on(async move {
                    tokio::join!(io.run(), deal(listener, handoffs));
                }),
                None => rt.block_on(io.run()),
            })?;
    }
    spawn_patch_thread(move || {
        for n in &patches {
            n.notify_one();
        }
    })?;
    Ok(Running {
        addr,
        established,
        uring: None,
    })
}

/// Accept sockets and hand them to the I/O threads in turn.
async fn deal(listener: TcpListener, handoffs: Vec<mpsc::UnboundedSender<std::net::TcpStream>>) {
    let mut next = 0usize;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        if let Some(h) = handoffs.get(next % handoffs.len().max(1)) {
            let _ = h.send(stream);
        }
        next += 1;
    }
}

/// One I/O thread of [`Shape::PerThread`].
struct IoThread {
    transport: Transport,
    frame: Bytes,
    /// Accepted sockets dealt to this thread.
    inbox: mpsc::UnboundedReceiver<std::net::TcpStream>,
    /// Raised once per patch by the patch thread.
    patch: Arc<Notify>,
    established: Arc<AtomicUsize>,
}

impl IoThread {
    /// The thread's writer: owns every write half, wakes once per patch and writes the frame to
    /// each connection in turn; between patches it writes the pongs its readers ask for.
    async fn run(mut self) {
        let (ready_tx, mut ready) = mpsc::unbounded_channel::<(Writer, Reader)>();
        let (pong_tx, mut pongs) = mpsc::unbounded_channel::<usize>();
        let mut writers: Vec<Option<Writer>> = Vec::new();
        let pong = pong();
        loop {
            tokio::select! {
                biased;
                () = self.patch.notified() => {
                    for slot in writers.iter_mut() {
                        if let Some(w) = slot {
                            if !w.send(self.frame.clone()).await {
                                *slot = None;
                            }
                        }
                    }
                }
                Some(i) = pongs.recv() => {
                    if let Some(slot) = writers.get_mut(i) {
                        if let Some(w) = slot {
                            if !w.send(pong.clone()).await {
                                *slot = None;
                            }
                        }
                    }
                }
                Some(stream) = self.inbox.recv() => {
                    // The handshake runs as its own task so a slow client never holds up patches.
                    let (transport, ready_tx) = (self.transport, ready_tx.clone());
                    tokio::spawn(async move {
                        let Ok(stream) = TcpStream::from_std(stream) else { return };
                        if let Some(halves) = wire::accept(stream, transport).await {
                            let _ = ready_tx.send(halves);
                        }
                    });
                }
                Some((w, r)) = ready.recv() => {
                    let index = writers.len();
                    writers.push(Some(w));
                    self.established.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(read_for(r, index, pong_tx.clone()));
                }
            }
        }
    }
}

/// A connection's reader in [`Shape::PerThread`]: pongs owed go to the thread's writer.
async fn read_for(mut reader: Reader, index: usize, pongs: mpsc::UnboundedSender<usize>) {
    while let Some(n) = reader.next().await {
        for _ in 0..n {
            if pongs.send(index).is_err() {
                return;
            }
        }
    }
}
