//! Tests that take turns (`--schedule exclusive`): the daemon's data tests
//! are one client host's at a time. While a host holds the turn, its new
//! tests join it (flent's rrul starts eight netperfs and three UDP_RRs at
//! once from one host, super_netperf N netperfs: each is one test of the
//! same measurement); the turn ends when its host's last test ends, after
//! a short grace for tools that start their processes one after another.
//! Other hosts' tests wait in the order they asked, each up to
//! `--max-wait`, then are refused with the reason. Shared (the default),
//! every test goes at once, within the other budgets.

use std::{
    collections::{BTreeSet, VecDeque},
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

/// How tests share the daemon.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Every test at once (within the budgets).
    #[default]
    Shared,
    /// One client host's tests at a time; the others wait their turn.
    Exclusive,
}

/// Whether a session's test may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    Go,
    /// Waiting, this many ahead of it (the host holding the turn counted
    /// as one).
    Wait(usize),
}

/// After a host's last test ends, how long its turn stays its own: tools
/// that start their netperfs one after another (flent, a shell loop) keep
/// their measurement together.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// The host whose turn it is.
#[derive(Debug)]
struct Holder {
    host: IpAddr,
    /// Its sessions running a test.
    running: BTreeSet<usize>,
    since: Instant,
    /// Its last test ended: the turn passes on at this instant unless
    /// another of its tests comes.
    ends_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct State {
    holder: Option<Holder>,
    /// Sessions waiting (their loop token), their host, and since when.
    queue: VecDeque<(usize, IpAddr, Instant)>,
    /// Turns that have passed (for the metrics).
    turns: u64,
}

/// A turn that began: its host, and the sessions of that host that waited
/// for it (each starts its test now).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Began {
    pub host: IpAddr,
    pub sessions: Vec<usize>,
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

    /// The session of `token`, of client host `host`, asks to run a test.
    /// The host holding the turn (or the first to ask when none does) goes
    /// at once; any other waits.
    pub(crate) fn ask(&self, token: usize, host: IpAddr, now: Instant) -> Turn {
        if self.schedule == Schedule::Shared {
            return Turn::Go;
        }
        let Ok(mut s) = self.state.lock() else {
            return Turn::Go;
        };
        let host = host.to_canonical();
        match &mut s.holder {
            Some(h) if h.host == host => {
                h.running.insert(token);
                h.ends_at = None;
                return Turn::Go;
            }
            Some(_) => {}
            None => {
                s.holder = Some(Holder {
                    host,
                    running: BTreeSet::from([token]),
                    since: now,
                    ends_at: None,
                });
                s.turns += 1;
                return Turn::Go;
            }
        }
        if !s.queue.iter().any(|(t, _, _)| *t == token) {
            s.queue.push_back((token, host, now));
        }
        Turn::Wait(ahead(&s.queue, token))
    }

    /// The session of `token` is done with its test (or gone, or gave up
    /// waiting). Its host's turn, when that was its last test, passes on
    /// after the grace ([`Turns::hand_over`]).
    pub(crate) fn done(&self, token: usize, now: Instant) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        s.queue.retain(|(t, _, _)| *t != token);
        if let Some(h) = &mut s.holder
            && h.running.remove(&token)
            && h.running.is_empty()
        {
            h.ends_at = Some(now + GRACE);
        }
    }

    /// A turn whose grace ran out passes to the host that has waited
    /// longest: all its waiting sessions begin at once.
    pub(crate) fn hand_over(&self, now: Instant) -> Option<Began> {
        if self.schedule == Schedule::Shared {
            return None;
        }
        let mut s = self.state.lock().ok()?;
        if s.holder
            .as_ref()
            .is_some_and(|h| h.ends_at.is_none_or(|at| now < at))
        {
            return None;
        }
        s.holder = None;
        let &(_, host, _) = s.queue.front()?;
        let (mine, rest): (VecDeque<_>, VecDeque<_>) =
            s.queue.drain(..).partition(|(_, h, _)| *h == host);
        s.queue = rest;
        let sessions: Vec<usize> = mine.into_iter().map(|(t, _, _)| t).collect();
        s.holder = Some(Holder {
            host,
            running: sessions.iter().copied().collect(),
            since: now,
            ends_at: None,
        });
        s.turns += 1;
        Some(Began { host, sessions })
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
            .partition(|(_, _, since)| now.duration_since(*since) >= max);
        s.queue = kept.into();
        gone.into_iter().map(|(t, _, _)| t).collect()
    }

    /// When the clock next matters: the longest waiting session's wait
    /// runs out, or a turn's grace does.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let s = self.state.lock().ok()?;
        let wait = s.queue.front().map(|(_, _, since)| *since + self.max_wait);
        let grace = s.holder.as_ref().and_then(|h| h.ends_at);
        wait.into_iter().chain(grace).min()
    }

    /// Sessions waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.state.lock().map_or(0, |s| s.queue.len())
    }

    /// The host holding the turn, since when and its tests running; and
    /// the turns begun since start (for the metrics and the record).
    pub(crate) fn holder(&self) -> (Option<(IpAddr, Instant, usize)>, u64) {
        self.state.lock().map_or((None, 0), |s| {
            (
                s.holder
                    .as_ref()
                    .map(|h| (h.host, h.since, h.running.len())),
                s.turns,
            )
        })
    }

    /// The turn `token`'s test runs in: its host, and when the turn began
    /// (`None` where tests share the daemon).
    pub(crate) fn turn_of(&self, token: usize) -> Option<(IpAddr, Instant)> {
        let s = self.state.lock().ok()?;
        let h = s.holder.as_ref()?;
        h.running.contains(&token).then_some((h.host, h.since))
    }
}

/// Sessions ahead of `token`, as hosts take turns: the host holding the
/// turn, and each host whose first waiting session came before the first
/// of `token`'s host (a host's tests go together, in its turn).
fn ahead(queue: &VecDeque<(usize, IpAddr, Instant)>, token: usize) -> usize {
    let Some(mine) = queue
        .iter()
        .find(|(t, _, _)| *t == token)
        .map(|(_, h, _)| *h)
    else {
        return 1;
    };
    let mut hosts: Vec<IpAddr> = Vec::new();
    for (_, h, _) in queue {
        if *h == mine {
            break;
        }
        if !hosts.contains(h) {
            hosts.push(*h);
        }
    }
    1 + hosts.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 2));
    const C: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 3));

    #[test]
    fn a_turn_is_a_hosts_and_its_tests_join_it() {
        let t = Turns::new(Schedule::Exclusive, Duration::from_secs(60));
        let now = Instant::now();
        // A's rrul: eleven tests at once
        for token in 1..=11 {
            assert_eq!(t.ask(token, A, now), Turn::Go, "A's test {token}");
        }
        // B and C wait, told their place; B's two tests in one turn
        assert_eq!(t.ask(20, B, now), Turn::Wait(1));
        assert_eq!(t.ask(30, C, now), Turn::Wait(2));
        assert_eq!(t.ask(21, B, now), Turn::Wait(1));
        assert_eq!(
            t.ask(20, B, now),
            Turn::Wait(1),
            "asking again keeps its place"
        );
        // A's tests end; the turn lingers for the grace
        for token in 1..=11 {
            t.done(token, now);
        }
        assert_eq!(t.hand_over(now), None);
        assert_eq!(t.next_deadline(), Some(now + GRACE));
        // a late test of A's joins within the grace
        assert_eq!(t.ask(12, A, now + GRACE / 2), Turn::Go);
        t.done(12, now + GRACE / 2);
        let later = now + GRACE / 2 + GRACE;
        assert_eq!(
            t.hand_over(later),
            Some(Began {
                host: B,
                sessions: vec![20, 21]
            })
        );
        // A now waits behind C
        assert_eq!(t.ask(13, A, later), Turn::Wait(2));
        t.done(20, later);
        t.done(21, later);
        let c = t.hand_over(later + GRACE).expect("C's turn");
        assert_eq!(c.sessions, vec![30]);
        assert_eq!(t.holder().1, 3);
        let shared = Turns::new(Schedule::Shared, Duration::from_secs(60));
        assert_eq!(
            (shared.ask(1, A, now), shared.ask(2, B, now)),
            (Turn::Go, Turn::Go)
        );
    }

    #[test]
    fn a_wait_has_a_limit_and_an_idle_turn_is_let_go() {
        let t = Turns::new(Schedule::Exclusive, Duration::from_secs(10));
        let t0 = Instant::now();
        t.ask(1, A, t0);
        t.ask(2, B, t0);
        t.ask(3, C, t0 + Duration::from_secs(5));
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(t.expired(t0 + Duration::from_secs(11)), vec![2]);
        assert_eq!(t.waiting(), 1);
        t.done(1, t0 + Duration::from_secs(11));
        let began = t.hand_over(t0 + Duration::from_secs(13)).expect("C's turn");
        assert_eq!(began.sessions, vec![3]);
        // nobody waits: the turn is let go after the grace
        t.done(3, t0 + Duration::from_secs(14));
        assert_eq!(t.hand_over(t0 + Duration::from_secs(16)), None);
        assert_eq!(t.holder().0, None);
        assert_eq!(t.ask(4, B, t0 + Duration::from_secs(16)), Turn::Go);
    }
}
