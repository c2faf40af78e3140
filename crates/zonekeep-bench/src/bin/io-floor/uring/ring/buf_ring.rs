//! The provided-buffer ring an I/O thread's multishot receives pick their buffers from. Its
//! memory is shared with the kernel, so it lives as long as the ring it is registered with: the
//! I/O thread keeps it for as long as it keeps its ring, and never returns once that ring has
//! operations in flight.

use std::alloc::{self, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The provided-buffer group (one per ring).
pub(super) const GROUP: u16 = 0;

/// A provided-buffer ring: `count` buffers of `size` bytes the kernel picks from for multishot
/// receives, each given back once its bytes are parsed.
pub(super) struct BufRing {
    entries: *mut BufRingEntry,
    data: *mut u8,
    count: u16,
    size: usize,
    /// The tail as filled here; the kernel sees it once published.
    tail: u16,
}

impl BufRing {
    fn layouts(count: u16, size: usize) -> io::Result<(Layout, Layout)> {
        let entries = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(io::Error::other)?;
        let data =
            Layout::from_size_align(usize::from(count) * size, 64).map_err(io::Error::other)?;
        Ok((entries, data))
    }

    /// Allocate the ring and its buffers, register them with `ring` and give every buffer.
    pub(super) fn new(ring: &IoUring, count: u16, size: usize) -> io::Result<Self> {
        if !count.is_power_of_two() || size == 0 {
            return Err(io::Error::other("buffer count not a power of two"));
        }
        let (entries_layout, data_layout) = Self::layouts(count, size)?;
        // SAFETY: both layouts have a non-zero size; a null result is checked below.
        let (entries, data) = unsafe {
            (
                alloc::alloc_zeroed(entries_layout).cast::<BufRingEntry>(),
                alloc::alloc(data_layout),
            )
        };
        // Dropped, it frees what was allocated.
        let mut bufs = BufRing {
            entries,
            data,
            count,
            size,
            tail: 0,
        };
        if entries.is_null() || data.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        // SAFETY: `entries` is a zeroed, page-aligned array of `count` entries that lives as long
        // as this BufRing, which the I/O thread keeps as long as the ring (see the module doc).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, GROUP, 0)?
        };
        for bid in 0..count {
            bufs.give(bid);
        }
        bufs.publish();
        Ok(bufs)
    }

    /// Put buffer `bid` back at the tail (seen by the kernel once published).
    pub(super) fn give(&mut self, bid: u16) {
        let slot = usize::from(self.tail & (self.count - 1));
        // SAFETY: `slot` < `count`, inside the allocation. The kernel reads entries only below
        // the published tail and this one is at or past it, so nothing reads it meanwhile; its
        // setters write the address, length and id, never the tail word kept in entry 0.
        let entry = unsafe { &mut *self.entries.add(slot) };
        entry.set_addr(self.data as u64 + u64::from(bid) * self.size as u64);
        entry.set_len(u32::try_from(self.size).unwrap_or(u32::MAX));
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Let the kernel see the buffers given back.
    pub(super) fn publish(&self) {
        // SAFETY: the tail word lies inside entry 0 of the live, page-aligned allocation (so it is
        // aligned for an atomic u16); the kernel only ever reads it, atomically.
        let tail = unsafe { &*BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion has just handed over.
    pub(super) fn read(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid % self.count) * self.size;
        // SAFETY: the kernel wrote `len` bytes (at most `size`) into buffer `bid` and handed it
        // over with the completion; it writes to it again only after `give` returns it.
        unsafe { std::slice::from_raw_parts(self.data.add(start), len.min(self.size)) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        let Ok((entries_layout, data_layout)) = Self::layouts(self.count, self.size) else {
            return;
        };
        // SAFETY: allocated in `new` with these layouts (null if that failed). A BufRing is
        // dropped only when its thread's setup fails, before any receive used its buffers.
        unsafe {
            if !self.entries.is_null() {
                alloc::dealloc(self.entries.cast(), entries_layout);
            }
            if !self.data.is_null() {
                alloc::dealloc(self.data, data_layout);
            }
        }
    }
}
