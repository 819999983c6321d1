//! What a STAMP session (RFC 8762) measured, beyond its round trips and
//! one-way queueing delay: loss each way, duplicates and reordering, from
//! the sequence numbers alone.
//!
//! Loss each way needs a stateful reflector, which numbers its own
//! reflections 0, 1, 2, ... in each session: the reflections it sent are
//! its highest number plus one, so the test packets that never reached it
//! are the packets sent less those, and the reflections lost on the way
//! back are those less the ones that arrived. (Packets lost after the last
//! reflection that arrived cannot be told apart: they count toward the
//! reflector.) A stateless reflector copies the sender's numbers: loss is
//! then round trip only. The sender's numbers start at a random value, so
//! the two kinds of reflector are told apart from the first reflection.

use std::collections::HashSet;

use engine::rfc_stamp::Reflected;

/// A STAMP session's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StampFigures {
    pub sent: u64,
    /// Test packets reflected at least once.
    pub reflected: u64,
    /// Reflections of a test packet already reflected.
    pub duplicates: u64,
    /// Reflections that arrived after one of a later test packet.
    pub reordered: u64,
    pub lost_round_trip: u64,
    /// Each way, where the reflector is stateful.
    pub lost_forward: Option<u64>,
    pub lost_backward: Option<u64>,
    pub stateful: bool,
    /// The least TTL (hop limit) the test packets arrived with.
    pub ttl: Option<u8>,
    /// Datagrams that were no reflection of this session's.
    pub foreign: u64,
}

impl StampFigures {
    /// The counts of `replies` (in arrival order) to `sent` test packets.
    pub fn of(replies: &[Reflected], sent: u64, foreign: u64) -> StampFigures {
        let mut seen = HashSet::new();
        let mut theirs = HashSet::new();
        let (mut duplicates, mut reordered) = (0, 0);
        let mut highest: Option<u32> = None;
        let mut stateful = false;
        for r in replies {
            if !seen.insert(r.sender_seq) {
                duplicates += 1;
                continue;
            }
            theirs.insert(r.seq);
            stateful |= r.seq != r.sender_seq;
            // (sequence numbers from the session's first: a wrap is a
            // long session's, and a difference reads through it)
            match highest {
                Some(h) if (r.sender_seq.wrapping_sub(h) as i32) < 0 => reordered += 1,
                _ => highest = Some(r.sender_seq),
            }
        }
        let reflected = seen.len() as u64;
        let (lost_forward, lost_backward) = if stateful {
            let by_reflector = theirs.iter().max().map_or(0, |&m| u64::from(m) + 1);
            (
                Some(sent.saturating_sub(by_reflector)),
                Some(by_reflector.saturating_sub(theirs.len() as u64)),
            )
        } else {
            (None, None)
        };
        StampFigures {
            sent,
            reflected,
            duplicates,
            reordered,
            lost_round_trip: sent.saturating_sub(reflected),
            lost_forward,
            lost_backward,
            stateful,
            ttl: replies.iter().map(|r| r.ttl).min(),
            foreign,
        }
    }

    /// The line a terminal and `-v 3` show.
    pub fn line(&self) -> String {
        let each_way = match (self.lost_forward, self.lost_backward) {
            (Some(f), Some(b)) => format!("{f} toward the reflector, {b} back"),
            _ => "each way unknown (a stateless reflector)".into(),
        };
        format!(
            "STAMP: {} test packets, {} reflected, {} lost ({each_way}), {} duplicated, {} reordered{}",
            self.sent,
            self.reflected,
            self.lost_round_trip,
            self.duplicates,
            self.reordered,
            self.ttl
                .map(|t| format!("; arrived with TTL {t}"))
                .unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(sender_seq: u32, seq: u32) -> Reflected {
        Reflected {
            sender_seq,
            seq,
            ttl: 64,
            ..Reflected::default()
        }
    }

    #[test]
    fn a_stateful_reflector_tells_loss_each_way() {
        // ten sent from 500; 503 and 507 lost toward it (it reflected 8,
        // numbered 0..8), its reflection 4 (of 505) lost back
        let sent: Vec<u32> = (500..510).filter(|s| *s != 503 && *s != 507).collect();
        let replies: Vec<Reflected> = sent
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 4)
            .map(|(i, &s)| r(s, i as u32))
            .collect();
        let f = StampFigures::of(&replies, 10, 0);
        assert!(f.stateful);
        assert_eq!(
            (
                f.reflected,
                f.lost_round_trip,
                f.lost_forward,
                f.lost_backward
            ),
            (7, 3, Some(2), Some(1))
        );
        assert_eq!((f.duplicates, f.reordered, f.ttl), (0, 0, Some(64)));
    }

    #[test]
    fn a_stateless_reflector_tells_round_trip_loss_alone() {
        let replies = [r(7, 7), r(9, 9), r(8, 8), r(9, 9)];
        let f = StampFigures::of(&replies, 4, 1);
        assert!(!f.stateful);
        assert_eq!((f.reflected, f.lost_round_trip), (3, 1));
        assert_eq!((f.lost_forward, f.lost_backward), (None, None));
        assert_eq!((f.duplicates, f.reordered, f.foreign), (1, 1, 1));
        assert!(f.line().contains("each way unknown"), "{}", f.line());
    }

    #[test]
    fn sequence_numbers_read_through_a_wrap() {
        let replies = [r(u32::MAX - 1, 0), r(u32::MAX, 1), r(0, 2), r(1, 3)];
        let f = StampFigures::of(&replies, 4, 0);
        assert_eq!(
            (f.reordered, f.lost_forward, f.lost_backward),
            (0, Some(0), Some(0))
        );
    }
}
