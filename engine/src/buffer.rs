//! Rings of send buffers.
//!
//! Like netperf, a sender cycles through several buffers rather than sending
//! one over and over, so that the data does not stay hot in one cache line
//! set. The ring is as wide as the socket buffer holds messages, plus one,
//! at least two, and never more than [`MAX_RING_BYTES`] in all.

/// Cap of the memory one ring may take.
pub const MAX_RING_BYTES: usize = 4 * 1024 * 1024;

/// The pattern netperf fills its buffers with, so captures show what they are.
const PATTERN: &[u8] = b"netperf";

#[derive(Debug)]
pub struct SendRing {
    bufs: Vec<Vec<u8>>,
    next: usize,
}

impl SendRing {
    /// `width` buffers of `size` bytes, filled from `fill` (repeated), or
    /// with netperf's pattern when `fill` is empty.
    pub fn new(size: usize, width: usize, fill: &[u8]) -> SendRing {
        let size = size.max(1);
        let width = width.clamp(1, (MAX_RING_BYTES / size).max(1));
        let src = if fill.is_empty() { PATTERN } else { fill };
        let mut offset = 0usize;
        let bufs = (0..width)
            .map(|_| {
                let b: Vec<u8> = (0..size).map(|i| src[(offset + i) % src.len()]).collect();
                offset = (offset + size) % src.len();
                b
            })
            .collect();
        SendRing { bufs, next: 0 }
    }

    /// netperf's ring width for a socket buffer and message size.
    pub fn width_for(sock_buf: u32, msg: u32) -> usize {
        let w = (sock_buf / msg.max(1)) as usize + 1;
        w.max(2)
    }

    pub fn size(&self) -> usize {
        self.bufs.first().map_or(0, Vec::len)
    }

    /// The next buffer to send.
    #[inline]
    pub fn next_buf(&mut self) -> &mut [u8] {
        let i = self.next;
        self.next = if i + 1 == self.bufs.len() { 0 } else { i + 1 };
        &mut self.bufs[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_cycles_and_fills() {
        let mut r = SendRing::new(10, 3, b"");
        assert_eq!(r.size(), 10);
        let a = r.next_buf().to_vec();
        assert_eq!(&a[..7], b"netperf");
        r.next_buf();
        r.next_buf();
        assert_eq!(r.next_buf().to_vec(), a);
    }

    #[test]
    fn width_follows_netperf() {
        assert_eq!(SendRing::width_for(16384, 16384), 2);
        assert_eq!(SendRing::width_for(131072, 1024), 129);
        assert_eq!(SendRing::width_for(0, 100), 2);
    }

    #[test]
    fn ring_memory_is_capped() {
        let r = SendRing::new(1 << 20, 1000, b"x");
        assert!(r.bufs.len() * r.size() <= MAX_RING_BYTES);
    }
}
