//! netperf 2.7's control frame: 656 bytes, 164 words of 32 bits. Words are
//! big-endian on the wire where the sender converted them (which words
//! depends on the message, see the decoders); strings are raw bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Bytes of every frame, both ways.
pub const FRAME_LEN: usize = 656;
/// Words of a frame.
pub const WORDS: usize = FRAME_LEN / 4;

/// One frame.
#[derive(Clone, PartialEq, Eq)]
pub struct Frame(pub [u8; FRAME_LEN]);

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Frame(type {}, second {})", self.word(0), self.int(1))
    }
}

impl Default for Frame {
    fn default() -> Frame {
        Frame([0; FRAME_LEN])
    }
}

/// The word index of test-specific byte offset `ts` (the area starts at
/// byte 8).
pub const fn ts(offset: usize) -> usize {
    2 + offset / 4
}

impl Frame {
    /// A frame of `kind` with the second word `second` (a request's CPU
    /// affinity, a response's errno).
    pub fn new(kind: u32, second: i32) -> Frame {
        let mut f = Frame::default();
        f.set_word(0, kind);
        f.set_int(1, second);
        f
    }

    /// The first [`FRAME_LEN`] bytes of `b`, if there are as many.
    pub fn from_bytes(b: &[u8]) -> Option<Frame> {
        let a: [u8; FRAME_LEN] = b.get(..FRAME_LEN)?.try_into().ok()?;
        Some(Frame(a))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Word `i`, big-endian (0 past the end).
    pub fn word(&self, i: usize) -> u32 {
        self.0
            .get(4 * i..4 * i + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map_or(0, u32::from_be_bytes)
    }

    pub fn set_word(&mut self, i: usize, v: u32) {
        if let Some(w) = self.0.get_mut(4 * i..4 * i + 4) {
            w.copy_from_slice(&v.to_be_bytes());
        }
    }

    pub fn int(&self, i: usize) -> i32 {
        self.word(i) as i32
    }

    pub fn set_int(&mut self, i: usize, v: i32) {
        self.set_word(i, v as u32);
    }

    /// An IEEE-754 binary32 in word `i`.
    pub fn float(&self, i: usize) -> f32 {
        f32::from_bits(self.word(i))
    }

    pub fn set_float(&mut self, i: usize, v: f32) {
        self.set_word(i, v.to_bits());
    }

    /// A 64-bit counter in words `i` (high) and `i + 1` (low).
    pub fn u64(&self, i: usize) -> u64 {
        (u64::from(self.word(i)) << 32) | u64::from(self.word(i + 1))
    }

    pub fn set_u64(&mut self, i: usize, v: u64) {
        self.set_word(i, (v >> 32) as u32);
        self.set_word(i + 1, v as u32);
    }

    /// A binary64 in words `i` and `i + 1`, big-endian (classic results).
    pub fn double(&self, i: usize) -> f64 {
        f64::from_bits(self.u64(i))
    }

    pub fn set_double(&mut self, i: usize, v: f64) {
        self.set_u64(i, v.to_bits());
    }

    /// A NUL-padded string of at most `len` bytes at byte `at`.
    pub fn string(&self, at: usize, len: usize) -> String {
        let b = self.0.get(at..at + len).unwrap_or_default();
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(b.get(..end).unwrap_or_default()).into_owned()
    }

    /// Write `s` at byte `at`, NUL-padded to `len` bytes (cut to `len - 1`).
    pub fn set_string(&mut self, at: usize, len: usize, s: &str) {
        if let Some(area) = self.0.get_mut(at..at + len) {
            area.fill(0);
            let n = s.len().min(len.saturating_sub(1));
            if let (Some(to), Some(from)) = (area.get_mut(..n), s.as_bytes().get(..n)) {
                to.copy_from_slice(from);
            }
        }
    }

    /// An address in the four words from `i`, of netperf's address family
    /// number (4 or 6); `None` when it is all zeros (not given).
    ///
    /// IPv4 is word `i` read big-endian (dotted order on the wire). IPv6's
    /// 16 bytes were copied into four words and each word converted by an
    /// x86 sender, so each group of four bytes arrives reversed.
    pub fn addr(&self, i: usize, nf_family: u32) -> Option<IpAddr> {
        let w = [
            self.word(i),
            self.word(i + 1),
            self.word(i + 2),
            self.word(i + 3),
        ];
        if w == [0; 4] {
            return None;
        }
        if nf_family == NF_INET6 {
            let mut b = [0u8; 16];
            for (chunk, word) in b.chunks_exact_mut(4).zip(w) {
                chunk.copy_from_slice(&word.to_le_bytes());
            }
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        } else {
            Some(IpAddr::V4(Ipv4Addr::from(w[0])))
        }
    }

    /// Write an address as [`Frame::addr`] reads it (zeros for `None`).
    pub fn set_addr(&mut self, i: usize, a: Option<IpAddr>) {
        let w = match a {
            None => [0; 4],
            Some(IpAddr::V4(v4)) => [u32::from(v4), 0, 0, 0],
            Some(IpAddr::V6(v6)) => {
                let b = v6.octets();
                let mut w = [0u32; 4];
                for (word, chunk) in w.iter_mut().zip(b.chunks_exact(4)) {
                    *word = chunk.try_into().map(u32::from_le_bytes).unwrap_or_default();
                }
                w
            }
        };
        for (k, v) in w.into_iter().enumerate() {
            self.set_word(i + k, v);
        }
    }
}

/// netperf's own address family numbers (not AF_*).
pub const NF_UNSPEC: u32 = 0;
pub const NF_INET: u32 = 4;
pub const NF_INET6: u32 = 6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_floats_counters_strings_and_addresses() {
        let mut f = Frame::new(97, -1);
        assert_eq!(&f.0[..8], &[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff]);
        f.set_float(5, 1.0);
        assert_eq!(f.word(5), 0x3f80_0000);
        f.set_u64(6, 1_363_771_392 + (7 << 32));
        assert_eq!((f.word(6), f.word(7)), (7, 1_363_771_392));
        f.set_string(176, 16, "bbr");
        assert_eq!(f.string(176, 16), "bbr");
        f.set_double(10, 1.436e9);
        assert_eq!(f.double(10), 1.436e9);
        // ::1 arrives as 00000000 00000000 00000000 01000000
        let v6: IpAddr = "::1".parse().unwrap();
        f.set_addr(30, Some(v6));
        assert_eq!(f.word(33), 0x0100_0000);
        assert_eq!(f.addr(30, NF_INET6), Some(v6));
        let v4: IpAddr = "127.0.0.2".parse().unwrap();
        f.set_addr(34, Some(v4));
        assert_eq!(f.word(34), 0x7f00_0002);
        assert_eq!(f.addr(34, NF_INET), Some(v4));
        assert_eq!(Frame::default().addr(0, NF_INET), None);
        assert!(Frame::from_bytes(&[0; 655]).is_none());
    }
}
