//! Rings of send buffers, and receive buffers, placed as netperf places
//! them.
//!
//! Like netperf, a sender cycles through several buffers rather than sending
//! one over and over, so that the data does not stay hot in one cache line
//! set. The ring is as wide as the socket buffer holds messages, plus one,
//! at least two, and never more than [`MAX_RING_BYTES`] in all.
//!
//! netperf's global `-a`/`-A` (alignment) and `-o`/`-O` (offset) say where
//! each buffer starts: at an address that is a multiple of the alignment
//! (8 by default), plus the offset (0 by default). [`Placement`] carries
//! both; the system calls then see exactly those addresses.

/// Cap of the memory one ring may take.
pub use proto::test::MAX_RING_BYTES;

/// The pattern netperf fills its buffers with, so captures show what they are.
const PATTERN: &[u8] = b"netperf";

/// Where a buffer starts: a multiple of `align`, plus `offset` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub align: usize,
    pub offset: usize,
}

impl Default for Placement {
    /// netperf's defaults: 8-byte aligned, no offset.
    fn default() -> Self {
        Placement {
            align: 8,
            offset: 0,
        }
    }
}

impl Placement {
    pub fn new(align: u32, offset: u32) -> Placement {
        Placement {
            align: (align as usize).max(1),
            offset: offset as usize,
        }
    }
}

/// One buffer of `size` bytes at its [`Placement`].
#[derive(Debug)]
pub struct Buffer {
    storage: Vec<u8>,
    start: usize,
    size: usize,
}

impl Buffer {
    pub fn new(size: usize, at: Placement) -> Buffer {
        let storage = vec![0u8; size + at.align + at.offset];
        let addr = storage.as_ptr() as usize;
        let start = addr.next_multiple_of(at.align) - addr + at.offset;
        Buffer {
            storage,
            start,
            size,
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.storage
            .get(self.start..self.start + self.size)
            .unwrap_or(&[])
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let end = self.start + self.size;
        self.storage.get_mut(self.start..end).unwrap_or(&mut [])
    }

    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

#[derive(Debug)]
pub struct Ring {
    bufs: Vec<Buffer>,
    next: usize,
}

impl Ring {
    /// `width` buffers of `size` bytes, filled from `fill` (repeated), or
    /// with netperf's pattern when `fill` is empty.
    pub fn new(size: usize, width: usize, fill: &[u8]) -> Ring {
        Ring::placed(size, width, fill, Placement::default())
    }

    /// As [`Ring::new`], each buffer at `at`.
    pub fn placed(size: usize, width: usize, fill: &[u8], at: Placement) -> Ring {
        let size = size.max(1);
        let width = width.clamp(1, (MAX_RING_BYTES / size).max(1));
        let src = if fill.is_empty() { PATTERN } else { fill };
        let mut offset = 0usize;
        let bufs = (0..width)
            .map(|_| {
                let mut b = Buffer::new(size, at);
                let pattern = src.iter().cycle().skip(offset);
                for (byte, &p) in b.as_mut_slice().iter_mut().zip(pattern) {
                    *byte = p;
                }
                offset = (offset + size) % src.len();
                b
            })
            .collect();
        Ring { bufs, next: 0 }
    }

    /// netperf's ring width for a socket buffer and message size.
    pub fn width_for(sock_buf: u32, msg: u32) -> usize {
        let w = (sock_buf / msg.max(1)) as usize + 1;
        w.max(2)
    }

    /// The width a ring of `size`-byte buffers really gets: `width`, within
    /// the memory cap.
    pub fn capped_width(size: usize, width: usize) -> usize {
        width.clamp(1, (MAX_RING_BYTES / size.max(1)).max(1))
    }

    pub fn size(&self) -> usize {
        self.bufs.first().map_or(0, Buffer::len)
    }

    pub fn width(&self) -> usize {
        self.bufs.len()
    }

    /// The ring's contents, buffer after buffer (what TCP_SENDFILE's file
    /// holds).
    pub fn contents(&self) -> Vec<u8> {
        self.bufs
            .iter()
            .flat_map(|b| b.as_slice().iter().copied())
            .collect()
    }

    /// The next buffer to send.
    #[inline]
    pub fn next_buf(&mut self) -> &mut [u8] {
        self.next_slot().1
    }

    /// The next buffer to send, and its place in the ring.
    #[inline]
    pub fn next_slot(&mut self) -> (usize, &mut [u8]) {
        let i = self.next;
        self.next = if i + 1 == self.bufs.len() { 0 } else { i + 1 };
        match self.bufs.get_mut(i) {
            Some(b) => (i, b.as_mut_slice()),
            None => (i, &mut []),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_cycles_and_fills() {
        let mut r = Ring::new(10, 3, b"");
        assert_eq!(r.size(), 10);
        let a = r.next_buf().to_vec();
        assert_eq!(&a[..7], b"netperf");
        r.next_buf();
        r.next_buf();
        assert_eq!(r.next_buf().to_vec(), a);
        assert_eq!(r.contents().len(), 30);
    }

    #[test]
    fn width_follows_netperf() {
        assert_eq!(Ring::width_for(16384, 16384), 2);
        assert_eq!(Ring::width_for(131072, 1024), 129);
        assert_eq!(Ring::width_for(0, 100), 2);
    }

    #[test]
    fn ring_memory_is_capped() {
        let r = Ring::new(1 << 20, 1000, b"x");
        assert!(r.width() * r.size() <= MAX_RING_BYTES);
        assert_eq!(Ring::capped_width(1 << 20, 1000), r.width());
    }

    #[test]
    fn buffers_start_where_alignment_and_offset_say() {
        for (align, offset) in [(8, 0), (4096, 0), (64, 3), (1, 7), (16, 15)] {
            let mut r = Ring::placed(100, 3, b"", Placement::new(align, offset));
            for _ in 0..3 {
                let p = r.next_buf().as_ptr() as usize;
                assert_eq!(
                    (p - offset as usize) % align as usize,
                    0,
                    "align {align} offset {offset}"
                );
            }
            let b = Buffer::new(10, Placement::new(align, offset));
            assert_eq!(
                (b.as_slice().as_ptr() as usize - offset as usize) % align as usize,
                0
            );
            assert_eq!(b.len(), 10);
        }
    }
}
