//! Tests that take turns (`--schedule exclusive`): one data test at a time
//! on this daemon, the others waiting in the order they asked, each up to
//! `--max-wait`, then refused with the reason. Shared (the default), every
//! test goes at once, within the other budgets.

use std::{
    collections::VecDeque,
    sync::Mutex,
    time::{Duration, Instant},
};

/// How tests share the daemon.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Every test at once (within the budgets).
    #[default]
    Shared,
    /// One data test at a time; the rest wait their turn.
    Exclusive,
}

/// Whether a session's test may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    Go,
    /// Waiting, this many ahead of it (the running test counted).
    Wait(usize),
}

#[derive(Debug, Default)]
struct State {
    running: Option<usize>,
    /// Sessions waiting (their loop token), and since when.
    queue: VecDeque<(usize, Instant)>,
}

/// The turn queue of a daemon.
#[derive(Debug)]
pub(crate) struct Turns {
    schedule: Schedule,
    max_wait: Duration,
    state: Mutex<State>,
}

impl Turns {
    pub(crate) fn new(schedule: Schedule, max_wait: Duration) -> Turns {
        Turns {
            schedule,
            max_wait,
            state: Mutex::new(State::default()),
        }
    }

    pub(crate) fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// The session of `token` asks to run a test.
    pub(crate) fn ask(&self, token: usize, now: Instant) -> Turn {
        if self.schedule == Schedule::Shared {
            return Turn::Go;
        }
        let Ok(mut s) = self.state.lock() else {
            return Turn::Go;
        };
        if s.running.is_none() || s.running == Some(token) {
            s.running = Some(token);
            return Turn::Go;
        }
        if let Some(i) = s.queue.iter().position(|(t, _)| *t == token) {
            return Turn::Wait(i + 1);
        }
        s.queue.push_back((token, now));
        Turn::Wait(s.queue.len())
    }

    /// The session of `token` is done with its test (or gone, or gave
    /// up waiting): the session whose turn it is now, if one waits.
    pub(crate) fn done(&self, token: usize) -> Option<usize> {
        let mut s = self.state.lock().ok()?;
        s.queue.retain(|(t, _)| *t != token);
        if s.running != Some(token) {
            return None;
        }
        s.running = s.queue.pop_front().map(|(t, _)| t);
        s.running
    }

    /// Sessions that waited past `--max-wait` (taken out of the queue).
    pub(crate) fn expired(&self, now: Instant) -> Vec<usize> {
        let Ok(mut s) = self.state.lock() else {
            return Vec::new();
        };
        let max = self.max_wait;
        let (gone, kept): (Vec<_>, Vec<_>) = s
            .queue
            .drain(..)
            .partition(|(_, since)| now.duration_since(*since) >= max);
        s.queue = kept.into();
        gone.into_iter().map(|(t, _)| t).collect()
    }

    /// When the longest waiting session's wait runs out.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let s = self.state.lock().ok()?;
        s.queue.front().map(|(_, since)| *since + self.max_wait)
    }

    /// Sessions waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.state.lock().map_or(0, |s| s.queue.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_at_a_time_in_the_order_they_asked() {
        let t = Turns::new(Schedule::Exclusive, Duration::from_secs(60));
        let now = Instant::now();
        assert_eq!(t.ask(1, now), Turn::Go);
        assert_eq!(t.ask(2, now), Turn::Wait(1));
        assert_eq!(t.ask(3, now), Turn::Wait(2));
        assert_eq!(t.ask(2, now), Turn::Wait(1), "asking again keeps its place");
        assert_eq!(t.done(3), None, "3 gave up");
        assert_eq!(t.done(1), Some(2));
        assert_eq!(t.ask(2, now), Turn::Go);
        assert_eq!(t.done(2), None);
        assert_eq!(t.ask(4, now), Turn::Go);
        let shared = Turns::new(Schedule::Shared, Duration::from_secs(60));
        assert_eq!(
            (shared.ask(1, now), shared.ask(2, now)),
            (Turn::Go, Turn::Go)
        );
    }

    #[test]
    fn a_wait_has_a_limit() {
        let t = Turns::new(Schedule::Exclusive, Duration::from_secs(10));
        let t0 = Instant::now();
        t.ask(1, t0);
        t.ask(2, t0);
        t.ask(3, t0 + Duration::from_secs(5));
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(t.expired(t0 + Duration::from_secs(11)), vec![2]);
        assert_eq!(t.waiting(), 1);
        assert_eq!(t.done(1), Some(3));
    }
}
