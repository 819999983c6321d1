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
    /// The traffic class each way, where the test packets asked (-Y).
    pub cos: Option<CosFigures>,
}

/// How the DSCP and ECN codepoint the test packets were sent with (and
/// their reflections asked to come back with) arrived, each way: toward
/// the reflector as its Class of Service answers say, back as read from
/// each reflection's IP header. Each reflection counted once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CosFigures {
    /// What was sent and asked.
    pub dscp: u8,
    pub ecn: u8,
    /// Reflections whose Class of Service answer came (the reflector
    /// understood the TLV).
    pub answered: u64,
    /// Of those: the test packet arrived with another DSCP (the last one
    /// seen), marked CE, or with its ECT codepoint gone (Not-ECT).
    pub forward_remarked: u64,
    pub forward_dscp_seen: Option<u8>,
    pub forward_ce: u64,
    pub forward_not_ect: u64,
    /// Reflections sent with the DSCP asked whose traffic class was read
    /// here, and of those, arriving with another DSCP (the last seen).
    pub back_dscp_read: u64,
    pub back_remarked: u64,
    pub back_dscp_seen: Option<u8>,
    /// Reflections sent with the ECN codepoint asked (RPE 0b11) whose
    /// traffic class was read here, and of those, CE or Not-ECT.
    pub back_ecn_read: u64,
    pub back_ce: u64,
    pub back_not_ect: u64,
}

impl CosFigures {
    /// The counts of `replies` (each test packet's first reflection) to
    /// test packets sent with traffic class `tos`.
    pub fn of<'a>(tos: u8, replies: impl Iterator<Item = &'a Reflected>) -> CosFigures {
        let (dscp, ecn) = (tos >> 2, tos & 0x03);
        let mut f = CosFigures {
            dscp,
            ecn,
            ..CosFigures::default()
        };
        for r in replies {
            let Some(c) = r.cos else { continue };
            f.answered += 1;
            if c.dscp2 != dscp {
                f.forward_remarked += 1;
                f.forward_dscp_seen = Some(c.dscp2);
            }
            f.forward_ce += u64::from(c.ec2 == 0b11);
            f.forward_not_ect += u64::from(ecn != 0 && c.ec2 == 0);
            let Some(back) = r.back_tos else { continue };
            if c.dscp_applied {
                f.back_dscp_read += 1;
                if back >> 2 != dscp {
                    f.back_remarked += 1;
                    f.back_dscp_seen = Some(back >> 2);
                }
            }
            if c.ecn_applied == Some(true) {
                f.back_ecn_read += 1;
                f.back_ce += u64::from(back & 0x03 == 0b11);
                f.back_not_ect += u64::from(ecn != 0 && back & 0x03 == 0);
            }
        }
        f
    }

    /// Its words in the STAMP line.
    fn words(&self) -> String {
        let seen = |n: u64, d: Option<u8>| match d {
            Some(d) if n > 0 => format!("{n} remarked (to DSCP {d})"),
            _ => format!("{n} remarked"),
        };
        let back = if self.back_dscp_read + self.back_ecn_read == 0 {
            "back unknown (the reflector did not say it marked its reflections as asked)".into()
        } else {
            format!(
                "back {}, {} CE, {} lost ECT (of {} and {})",
                seen(self.back_remarked, self.back_dscp_seen),
                self.back_ce,
                self.back_not_ect,
                self.back_dscp_read,
                self.back_ecn_read
            )
        };
        format!(
            "; sent DSCP {} ECN {}: toward the reflector {}, {} CE, {} lost ECT (of {}); {back}",
            self.dscp,
            self.ecn,
            seen(self.forward_remarked, self.forward_dscp_seen),
            self.forward_ce,
            self.forward_not_ect,
            self.answered
        )
    }
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
            cos: None,
        }
    }

    /// With the Class of Service counts of test packets sent with `tos`
    /// (each test packet's first reflection in `replies`).
    pub fn with_cos(mut self, tos: Option<u8>, replies: &[Reflected]) -> StampFigures {
        self.cos = tos.map(|t| {
            let mut seen = HashSet::new();
            CosFigures::of(t, replies.iter().filter(|r| seen.insert(r.sender_seq)))
        });
        self
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
        ) + &self.cos.map(|c| c.words()).unwrap_or_default()
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
    fn class_of_service_is_counted_each_way() {
        use proto::rfc_stamp::CosAnswer;
        // sent AF41 with ECT(0): 1 arrived CE, 2 remarked to CS1 on the
        // way there; back, 3 CE and 4 remarked to 0; 5 not answered
        let sent = (34 << 2) | 2;
        let answered = |dscp2, ec2| CosAnswer {
            dscp2,
            ec2,
            dscp_applied: true,
            ecn_applied: Some(true),
        };
        let mut replies = Vec::new();
        for (i, (cos, back)) in [
            (Some(answered(34, 2)), Some(sent)),
            (Some(answered(34, 3)), Some(sent)),
            (Some(answered(8, 2)), Some(sent)),
            (Some(answered(34, 2)), Some((34 << 2) | 3)),
            (Some(answered(34, 2)), Some(2)),
            (None, Some(sent)),
        ]
        .into_iter()
        .enumerate()
        {
            let mut x = r(i as u32, i as u32);
            x.cos = cos;
            x.back_tos = back;
            replies.push(x);
        }
        // a duplicate of the first counts once
        replies.push(replies[1]);
        let f = StampFigures::of(&replies, 6, 0).with_cos(Some(sent), &replies);
        let c = f.cos.unwrap();
        assert_eq!((c.dscp, c.ecn, c.answered), (34, 2, 5));
        assert_eq!(
            (
                c.forward_remarked,
                c.forward_dscp_seen,
                c.forward_ce,
                c.forward_not_ect
            ),
            (1, Some(8), 1, 0)
        );
        assert_eq!(
            (c.back_dscp_read, c.back_remarked, c.back_dscp_seen),
            (5, 1, Some(0))
        );
        assert_eq!((c.back_ecn_read, c.back_ce, c.back_not_ect), (5, 1, 0));
        assert!(
            f.line()
                .contains("toward the reflector 1 remarked (to DSCP 8), 1 CE"),
            "{}",
            f.line()
        );
        // none asked: none counted
        assert_eq!(StampFigures::of(&replies, 6, 0).cos, None);
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
