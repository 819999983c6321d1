//! One-way delay probes (`UDP_STAMP`): the bytes of a probe and of its
//! answer. No clock is shared: each end writes its own monotonic clock's
//! nanoseconds, and only differences of one end's times with the other's
//! are ever taken, less their smallest (see the client's `report::one_way`).
//!
//! A probe is [`LEN`] bytes: its sequence number, then `t1`, the client's
//! send time. The answer is the probe's first 16 bytes, then `t2`, the
//! netserver's receive time, and `t3`, its send time. Integers are
//! little-endian.

/// Bytes of a probe and of its answer.
pub const LEN: usize = 32;

/// What one probe carried, there and back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    pub seq: u64,
    /// The client sent it (its clock).
    pub t1: u64,
    /// The netserver received it, and answered (its clock).
    pub t2: u64,
    pub t3: u64,
    /// The client received the answer (its clock).
    pub t4: u64,
}

fn word(b: &[u8], at: usize) -> Option<u64> {
    let w: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

fn put(b: &mut [u8], at: usize, v: u64) -> Option<()> {
    b.get_mut(at..at + 8)?.copy_from_slice(&v.to_le_bytes());
    Some(())
}

/// Write a probe into `buf` (at least [`LEN`] bytes; a shorter one is
/// left as it is).
pub fn write_probe(buf: &mut [u8], seq: u64, t1: u64) {
    if buf.len() >= 16 {
        let _ = put(buf, 0, seq).and_then(|()| put(buf, 8, t1));
    }
}

/// Turn a received probe (`n` bytes of `buf`) into its answer in place:
/// `t2` and `t3` written after the probe's own 16 bytes. `None` when it is
/// too short to be a probe (not answered).
pub fn answer_in_place(buf: &mut [u8], n: usize, t2: u64, t3: u64) -> Option<usize> {
    if n < 16 {
        return None;
    }
    buf.get(..LEN)?;
    put(buf, 16, t2)?;
    put(buf, 24, t3)?;
    Some(LEN)
}

/// Read an answer (`t4`: when it arrived, on the client's clock).
pub fn read_answer(b: &[u8], t4: u64) -> Option<Stamps> {
    if b.len() < LEN {
        return None;
    }
    Some(Stamps {
        seq: word(b, 0)?,
        t1: word(b, 8)?,
        t2: word(b, 16)?,
        t3: word(b, 24)?,
        t4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_and_its_answer_round_trip() {
        let mut b = [0u8; LEN];
        write_probe(&mut b, 7, 1_000);
        assert_eq!(
            answer_in_place(&mut b, 16, 86_400_000_000_123, 86_400_000_000_456),
            Some(LEN)
        );
        let s = read_answer(&b, 2_000).unwrap();
        assert_eq!(
            s,
            Stamps {
                seq: 7,
                t1: 1_000,
                t2: 86_400_000_000_123,
                t3: 86_400_000_000_456,
                t4: 2_000
            }
        );
        assert_eq!(answer_in_place(&mut b, 15, 1, 2), None);
        assert_eq!(read_answer(&b[..31], 3), None);
    }
}
