//! The requests in flight: each one's sequence number and send time,
//! oldest first. TCP's responses come back in order (the oldest is the one
//! answered); UDP's are found by the tag they echo, and a request older
//! than the timeout is given up.

use std::collections::VecDeque;

/// Requests in flight, oldest first.
#[derive(Debug)]
pub struct Window {
    slots: VecDeque<(u64, u64)>,
    room: usize,
}

impl Window {
    /// Room for `room` requests (at least one).
    pub fn new(room: usize) -> Window {
        let room = room.max(1);
        Window {
            slots: VecDeque::with_capacity(room),
            room,
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether request `seq` may go: there is room, and the requests in
    /// flight would span fewer than `distinct` sequence numbers (the tags
    /// tell that many apart; an unanswered request holds the span open
    /// until it times out), so that no two of them carry the same tag.
    #[inline]
    pub fn may_send(&self, seq: u64, distinct: u64) -> bool {
        self.slots.len() < self.room
            && self
                .slots
                .front()
                .is_none_or(|&(oldest, _)| seq - oldest < distinct)
    }

    /// When the oldest request in flight went (nanoseconds).
    #[inline]
    pub fn oldest_sent(&self) -> Option<u64> {
        self.slots.front().map(|&(_, t)| t)
    }

    /// Request `seq` went at `sent_at` (nanoseconds).
    #[inline]
    pub fn push(&mut self, seq: u64, sent_at: u64) {
        self.slots.push_back((seq, sent_at));
    }

    /// The oldest request is answered: its send time.
    #[inline]
    pub fn pop_oldest(&mut self) -> Option<u64> {
        self.slots.pop_front().map(|(_, t)| t)
    }

    /// The request whose first `tag.len()` bytes of sequence number (little
    /// endian) are `tag` is answered: its send time. `None` for a tag no
    /// request in flight carries (a response to a given-up request).
    #[inline]
    pub fn answer(&mut self, tag: &[u8]) -> Option<u64> {
        let n = tag.len();
        let i = self
            .slots
            .iter()
            .position(|(s, _)| s.to_le_bytes().get(..n) == Some(tag))?;
        self.slots.remove(i).map(|(_, t)| t)
    }

    /// Gives up every request sent `timeout_ns` or more before `now`;
    /// returns how many.
    #[inline]
    pub fn expire(&mut self, now: u64, timeout_ns: u64) -> u64 {
        let mut n = 0;
        while self
            .slots
            .front()
            .is_some_and(|&(_, t)| now.wrapping_sub(t) >= timeout_ns)
        {
            self.slots.pop_front();
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_by_tag_and_expires_the_oldest() {
        let mut w = Window::new(3);
        for s in 0..3 {
            assert!(w.may_send(s, 256));
            w.push(s, 100 + s);
        }
        assert!(!w.may_send(3, 256), "full");
        assert_eq!(w.answer(&[1]), Some(101));
        assert_eq!(w.answer(&[1]), None, "answered once");
        assert!(w.may_send(3, 256));
        // request 0 holds the span open: 256 would reuse its 1-byte tag
        assert!(!w.may_send(256, 256));
        assert_eq!(w.expire(150, 50), 1);
        assert_eq!(w.len(), 1);
        assert_eq!(w.pop_oldest(), Some(102));
        assert!(w.is_empty());
    }
}
