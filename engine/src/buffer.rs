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

/// One buffer of `size` bytes at its [`Placement`]: a ring of one.
#[derive(Debug)]
pub struct Buffer {
    ring: Ring,
}

impl Buffer {
    pub fn new(size: usize, at: Placement) -> Buffer {
        Buffer {
            ring: Ring::placed(size, 1, b"", at),
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.ring.buf(0)
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.ring.next_buf()
    }

    pub fn len(&self) -> usize {
        self.ring.size()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.size() == 0
    }
}

/// A ring of buffers in one block of memory, shaped as
/// [`proto::test::Ring`] says: its width within [`MAX_RING_BYTES`] with the
/// placement counted, and exactly [`proto::test::Ring::bytes`] allocated.
#[derive(Debug)]
pub struct Ring {
    storage: Vec<u8>,
    /// Where the first buffer starts in `storage`.
    start: usize,
    stride: usize,
    size: usize,
    width: usize,
    next: usize,
}

impl Ring {
    /// `width` buffers of `size` bytes, filled from `fill` (repeated), or
    /// with netperf's pattern when `fill` is empty.
    pub fn new(size: usize, width: usize, fill: &[u8]) -> Ring {
        Ring::placed(size, width, fill, Placement::default())
    }

    /// The shape of a ring of `width` buffers of `size` bytes at `at`.
    pub fn shape(size: usize, width: usize, at: Placement) -> proto::test::Ring {
        proto::test::Ring::placed(
            u32::try_from(size).unwrap_or(u32::MAX),
            u32::try_from(width).unwrap_or(u32::MAX),
            u32::try_from(at.align).unwrap_or(u32::MAX),
            u32::try_from(at.offset).unwrap_or(u32::MAX),
        )
    }

    /// As [`Ring::new`], each buffer at `at`.
    pub fn placed(size: usize, width: usize, fill: &[u8], at: Placement) -> Ring {
        let shape = Ring::shape(size.max(1), width, at);
        let width = shape.capped_width() as usize;
        let stride = shape.stride() as usize;
        let mut storage = vec![0u8; shape.bytes() as usize];
        let addr = storage.as_ptr() as usize;
        let start = addr.next_multiple_of(at.align) - addr + at.offset;
        let src = if fill.is_empty() { PATTERN } else { fill };
        let mut offset = 0usize;
        for i in 0..width {
            let from = start + i * stride;
            let buf = storage.get_mut(from..from + size).unwrap_or_default();
            fill_cycled(buf, src, offset);
            offset = (offset + size) % src.len();
        }
        Ring {
            storage,
            start,
            stride,
            size,
            width,
            next: 0,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Bytes the ring holds, lead and padding included.
    pub fn allocated(&self) -> usize {
        self.storage.len()
    }

    fn buf(&self, i: usize) -> &[u8] {
        let from = self.start + i * self.stride;
        self.storage.get(from..from + self.size).unwrap_or(&[])
    }

    /// The ring's contents, buffer after buffer (what TCP_SENDFILE's file
    /// holds).
    pub fn contents(&self) -> Vec<u8> {
        (0..self.width)
            .flat_map(|i| self.buf(i).iter().copied())
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
        self.next = if i + 1 >= self.width { 0 } else { i + 1 };
        let from = self.start + i * self.stride;
        (
            i,
            self.storage
                .get_mut(from..from + self.size)
                .unwrap_or(&mut []),
        )
    }
}

/// Fill `buf` with `src` repeated from its byte `offset` on, a copy a
/// run of `src` (a ring of 64 MiB is filled at memory speed, not a byte
/// at a time).
fn fill_cycled(buf: &mut [u8], src: &[u8], offset: usize) {
    if src.is_empty() {
        return;
    }
    let mut at = offset % src.len();
    let mut rest = buf;
    while !rest.is_empty() {
        let run = src.get(at..).unwrap_or_default();
        let n = run.len().min(rest.len());
        let (head, tail) = rest.split_at_mut(n);
        head.copy_from_slice(run.get(..n).unwrap_or_default());
        rest = tail;
        at = 0;
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
    fn a_fill_continues_the_pattern_from_buffer_to_buffer() {
        // as the byte-at-a-time fill did: the pattern cycles on through
        // the ring, each buffer starting where the last one stopped
        let src = b"abcdefg";
        let r = Ring::new(5, 4, src);
        let all: Vec<u8> = src.iter().cycle().take(20).copied().collect();
        assert_eq!(r.contents(), all);
        let mut buf = [0u8; 16];
        fill_cycled(&mut buf, src, 3);
        assert_eq!(&buf, b"defgabcdefgabcde");
        fill_cycled(&mut buf, b"", 0);
    }

    #[test]
    fn width_follows_netperf() {
        use proto::test::Ring as Shape;
        assert_eq!(Shape::width_for(16384, 16384), 2);
        assert_eq!(Shape::width_for(131072, 1024), 129);
        assert_eq!(Shape::width_for(0, 100), 2);
    }

    #[test]
    fn ring_memory_is_capped() {
        let r = Ring::new(1 << 20, 1000, b"x");
        assert!(r.width() * r.size() <= MAX_RING_BYTES);
        assert_eq!(
            Ring::shape(1 << 20, 1000, Placement::default()).capped_width() as usize,
            r.width()
        );
    }

    /// The placement counts: a one-byte message at the largest alignment
    /// and offset is no 64 KiB ring (65,536 x 4 MiB were once allocated),
    /// and what is allocated is exactly what the estimate says.
    #[test]
    fn placement_is_counted_and_allocated_as_estimated() {
        let max = proto::test::MAX_PLACEMENT as usize;
        for (size, width, align, offset) in [
            (1, 65_536, max, max - 1),
            (1, 65_536, 1, 0),
            (100, 3, 4096, 7),
            (16 << 20, 2, max, max),
            (64 * 1024, 4, 8, 0),
        ] {
            let at = Placement::new(align as u32, offset as u32);
            let r = Ring::placed(size, width, b"", at);
            let shape = Ring::shape(size, width, at);
            assert_eq!(
                r.allocated() as u64,
                shape.bytes(),
                "{size} {width} {align} {offset}"
            );
            assert_eq!(r.width(), shape.capped_width() as usize);
            // within the cap, unless one buffer and its placement exceed it
            assert!(
                r.allocated() <= MAX_RING_BYTES || r.width() == 1,
                "{size} {width} {align} {offset}: {} bytes",
                r.allocated()
            );
            assert!(r.allocated() <= MAX_RING_BYTES + size + 2 * max);
        }
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
