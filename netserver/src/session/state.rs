//! What a session is doing, one state at a time, and the moves between
//! states: sans-IO (no socket, no thread; `now` is passed in), generic
//! over what a waiting request, a running test and a third-party test
//! hold, so that the transitions are unit-tested without any of them (as
//! `proto::conn` is).
//!
//! A session is idle between tests; a wrong key's refusal may hold it
//! until its address's turn; a test may wait for its host's turn
//! (`--schedule exclusive`), then run; or the session runs a third-party
//! test for its client (`--fleet`). Each state holds what only it has,
//! so no field can say a test runs while another waits.

use std::time::{Duration, Instant};

/// What a session is doing.
#[derive(Debug)]
enum Activity<W, T, P> {
    /// Between tests.
    Idle,
    /// A wrong key's refusal waits until then (its address's turn):
    /// nothing is sent, and what comes is dropped unread.
    Held { until: Instant },
    /// A test waits for its host's turn, since then.
    Waiting { spec: W, since: Instant },
    /// A test runs.
    Testing(T),
    /// A third-party test runs for its client.
    ThirdParty(P),
}

/// A move the state it was asked in does not allow (the session refuses
/// what asked it; nothing changes).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("a session {state} cannot {asked}")]
pub(crate) struct Illegal {
    pub state: &'static str,
    pub asked: &'static str,
}

/// A session's state, and since when it has run nothing (it came, or its
/// last test ended): the longest idle makes room first.
#[derive(Debug)]
pub(crate) struct State<W, T, P> {
    activity: Activity<W, T, P>,
    idle_since: Instant,
}

impl<W, T, P> State<W, T, P> {
    pub(crate) fn new(now: Instant) -> State<W, T, P> {
        State {
            activity: Activity::Idle,
            idle_since: now,
        }
    }

    /// The state's name, as logs and refusals say it.
    pub(crate) fn name(&self) -> &'static str {
        match self.activity {
            Activity::Idle => "idle",
            Activity::Held { .. } => "held",
            Activity::Waiting { .. } => "waiting its turn",
            Activity::Testing(_) => "running a test",
            Activity::ThirdParty(_) => "running a third-party test",
        }
    }

    fn illegal(&self, asked: &'static str) -> Illegal {
        Illegal {
            state: self.name(),
            asked,
        }
    }

    /// Since when it has run nothing.
    pub(crate) fn idle_since(&self) -> Instant {
        self.idle_since
    }

    /// The running test.
    pub(crate) fn test(&self) -> Option<&T> {
        match &self.activity {
            Activity::Testing(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn test_mut(&mut self) -> Option<&mut T> {
        match &mut self.activity {
            Activity::Testing(t) => Some(t),
            _ => None,
        }
    }

    /// The running third-party test.
    pub(crate) fn third_party(&self) -> Option<&P> {
        match &self.activity {
            Activity::ThirdParty(p) => Some(p),
            _ => None,
        }
    }

    /// Whether a refusal holds it.
    pub(crate) fn is_held(&self) -> bool {
        matches!(self.activity, Activity::Held { .. })
    }

    /// Until when a refusal holds it.
    pub(crate) fn held_until(&self) -> Option<Instant> {
        match self.activity {
            Activity::Held { until } => Some(until),
            _ => None,
        }
    }

    /// Whether it runs something a client waits on (a test, a third-party
    /// test): such a session never makes room for another.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(
            self.activity,
            Activity::Testing(_) | Activity::ThirdParty(_)
        )
    }

    /// A wrong key's refusal waits until `until` (idle sessions only; a
    /// time already past holds nothing).
    pub(crate) fn hold(&mut self, until: Instant, now: Instant) -> Result<(), Illegal> {
        if !matches!(self.activity, Activity::Idle) {
            return Err(self.illegal("hold a refusal"));
        }
        if until > now {
            self.activity = Activity::Held { until };
        }
        Ok(())
    }

    /// Whether it is still held at `now` (released, idle again, once its
    /// time came).
    pub(crate) fn held_at(&mut self, now: Instant) -> bool {
        match self.activity {
            Activity::Held { until } if now < until => true,
            Activity::Held { .. } => {
                self.activity = Activity::Idle;
                false
            }
            _ => false,
        }
    }

    /// Whether it may begin something (`asked`): only an idle session may.
    pub(crate) fn ready(&self, asked: &'static str) -> Result<(), Illegal> {
        match self.activity {
            Activity::Idle => Ok(()),
            _ => Err(self.illegal(asked)),
        }
    }

    /// Move from idle to `to`, or say why not (nothing changes).
    fn begin(&mut self, to: Activity<W, T, P>, asked: &'static str) -> Result<(), Illegal> {
        self.ready(asked)?;
        self.activity = to;
        Ok(())
    }

    /// Leave the state `pick` takes, back to idle, with what it held;
    /// any other state stays as it is. A test or a third-party test left
    /// makes the session idle from `now`.
    fn leave<R>(
        &mut self,
        now: Instant,
        pick: impl FnOnce(Activity<W, T, P>) -> Result<R, Activity<W, T, P>>,
    ) -> Option<R> {
        let was = std::mem::replace(&mut self.activity, Activity::Idle);
        let ran = matches!(was, Activity::Testing(_) | Activity::ThirdParty(_));
        match pick(was) {
            Ok(r) => {
                if ran {
                    self.idle_since = now;
                }
                Some(r)
            }
            Err(other) => {
                self.activity = other;
                None
            }
        }
    }

    /// A test waits for its host's turn.
    pub(crate) fn wait(&mut self, spec: W, now: Instant) -> Result<(), Illegal> {
        self.begin(Activity::Waiting { spec, since: now }, "wait for a turn")
    }

    /// Its turn came, or it waited as long as it may: the test that
    /// waited, and how long (the session idle again, to start it or
    /// refuse it).
    pub(crate) fn end_wait(&mut self, now: Instant) -> Option<(W, Duration)> {
        self.leave(now, |a| match a {
            Activity::Waiting { spec, since } => Ok((spec, now.saturating_duration_since(since))),
            other => Err(other),
        })
    }

    /// A test starts (an idle session's, or one whose turn came).
    pub(crate) fn start(&mut self, test: T) -> Result<(), Illegal> {
        self.begin(Activity::Testing(test), "start a test")
    }

    /// A third-party test starts.
    pub(crate) fn start_third_party(&mut self, run: P) -> Result<(), Illegal> {
        self.begin(Activity::ThirdParty(run), "start a third-party test")
    }

    /// The running test is over (its results went out, or it failed): it,
    /// and the session idle from `now`.
    pub(crate) fn finish(&mut self, now: Instant) -> Option<T> {
        self.leave(now, |a| match a {
            Activity::Testing(t) => Ok(t),
            other => Err(other),
        })
    }

    /// The running third-party test is over: it, and the session idle
    /// from `now`.
    pub(crate) fn finish_third_party(&mut self, now: Instant) -> Option<P> {
        self.leave(now, |a| match a {
            Activity::ThirdParty(p) => Ok(p),
            other => Err(other),
        })
    }

    /// The client aborted: a waiting test is forgotten, a running one
    /// handed back to be stopped; the session idle (a held refusal and a
    /// third-party test stay as they are: the client cannot abort them).
    pub(crate) fn abort(&mut self, now: Instant) -> Option<T> {
        self.leave(now, |a| match a {
            Activity::Waiting { .. } => Ok(None),
            Activity::Testing(t) => Ok(Some(t)),
            other => Err(other),
        })
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type S = State<char, &'static str, u32>;

    fn spec() -> char {
        'w'
    }

    #[test]
    fn a_test_runs_from_idle_and_leaves_it_idle_since_its_end() {
        let t0 = Instant::now();
        let mut s = S::new(t0);
        assert_eq!(s.name(), "idle");
        s.start("tcp").unwrap();
        assert!(s.is_busy());
        assert_eq!(s.test(), Some(&"tcp"));
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(s.finish(t1), Some("tcp"));
        assert_eq!(s.idle_since(), t1);
        assert!(!s.is_busy() && s.test().is_none());
        // nothing to finish twice
        assert_eq!(s.finish(t1), None);
    }

    #[test]
    fn one_thing_at_a_time() {
        let now = Instant::now();
        let mut s = S::new(now);
        assert!(s.ready("start a test").is_ok());
        s.start("a").unwrap();
        assert!(s.ready("start a test").is_err());
        let e = s.start("b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a session running a test cannot start a test"
        );
        assert!(s.start_third_party(1).is_err());
        assert!(s.wait(spec(), now).is_err());
        assert!(s.hold(now + Duration::from_secs(1), now).is_err());
        assert_eq!(s.test(), Some(&"a"), "a refused move changes nothing");

        let mut s = S::new(now);
        s.start_third_party(7).unwrap();
        assert!(s.is_busy());
        assert!(s.start("a").is_err());
        assert!(s.wait(spec(), now).is_err());
        assert_eq!(s.abort(now), None);
        assert_eq!(s.third_party(), Some(&7), "a client cannot abort it");
        assert_eq!(s.finish(now), None);
        assert_eq!(s.finish_third_party(now), Some(7));
        assert_eq!(s.name(), "idle");
    }

    #[test]
    fn a_waiting_test_starts_at_its_turn_or_is_forgotten() {
        let t0 = Instant::now();
        let mut s = S::new(t0);
        s.wait(spec(), t0).unwrap();
        assert_eq!(s.name(), "waiting its turn");
        assert!(!s.is_busy(), "a waiting test holds nothing yet");
        assert!(s.start("x").is_err(), "not before its turn");
        let (_, waited) = s.end_wait(t0 + Duration::from_secs(3)).unwrap();
        assert_eq!(waited, Duration::from_secs(3));
        s.start("x").unwrap();
        assert!(s.end_wait(t0).is_none());

        let mut s = S::new(t0);
        s.wait(spec(), t0).unwrap();
        assert_eq!(s.abort(t0), None);
        assert_eq!(s.name(), "idle");
        assert_eq!(s.idle_since(), t0, "waiting was idle time");
    }

    #[test]
    fn a_held_refusal_holds_until_its_time_then_is_idle() {
        let t0 = Instant::now();
        let mut s = S::new(t0);
        // a time already past holds nothing
        s.hold(t0, t0).unwrap();
        assert!(!s.is_held());
        let until = t0 + Duration::from_secs(2);
        s.hold(until, t0).unwrap();
        assert!(s.is_held() && !s.is_busy());
        assert!(s.start("x").is_err(), "held: nothing runs");
        assert!(s.held_at(t0 + Duration::from_secs(1)));
        assert!(!s.held_at(until));
        assert_eq!(s.name(), "idle");
        s.start("x").unwrap();
    }

    #[test]
    fn an_abort_hands_back_the_running_test() {
        let t0 = Instant::now();
        let mut s = S::new(t0);
        s.start("x").unwrap();
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(s.abort(t1), Some("x"));
        assert_eq!(s.idle_since(), t1);
        assert_eq!(s.abort(t1), None);
        let mut held = S::new(t0);
        held.hold(t1, t0).unwrap();
        assert_eq!(held.abort(t0), None);
        assert!(held.is_held(), "an abort does not lift a refusal's hold");
    }
}
