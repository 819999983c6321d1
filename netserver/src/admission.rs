//! What the daemon admits: its buffer memory budget ([`MemoryBudget`]),
//! sessions per client ([`Census`]), test workers ([`Workers`]), and the
//! pace of authentication failures ([`Failures`]). Each counts what it
//! admits before anything is allocated for it.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// The caps on control sessions: in all, and from one client address.
#[derive(Clone, Copy, Debug)]
pub struct SessionCaps {
    pub sessions: usize,
    pub per_client: usize,
}

/// The buffer memory all running tests share: each test reserves its
/// estimate ([`proto::TestSpec::server_memory`]) before it allocates, and
/// gives it back when it ends.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// A quarter of the host's memory, between 256 MiB and 64 GiB.
    pub fn for_this_host() -> MemoryBudget {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kib| kib.parse::<u64>().ok())
            })
            .map_or(4 << 30, |kib| kib * 1024);
        MemoryBudget::new((total / 4).clamp(256 << 20, 64 << 30))
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn in_use(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// Reserve `bytes`, or say how much is free.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Result<Reservation, u64> {
        let mut used = self.used.load(Ordering::SeqCst);
        loop {
            let free = self.limit.saturating_sub(used);
            if bytes > free {
                return Err(free);
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self.clone(),
                        bytes,
                    });
                }
                Err(now) => used = now,
            }
        }
    }
}

/// Memory reserved from a [`MemoryBudget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// Counts of sessions, for the caps.
#[derive(Debug, Default)]
pub(crate) struct Census {
    state: Mutex<CensusState>,
}

#[derive(Debug, Default)]
struct CensusState {
    active: usize,
    pending: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// Why a new connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Sessions(usize),
    PerClient(usize),
}

impl Refusal {
    /// Whose idle session may make room: anyone's at the daemon's cap,
    /// `ip`'s own at its per-address cap.
    pub(crate) fn only(self, ip: IpAddr) -> Option<IpAddr> {
        match self {
            Refusal::Sessions(_) => None,
            Refusal::PerClient(_) => Some(ip),
        }
    }
}

impl Census {
    /// Whether [`Census::admit`] would admit `ip` now (nothing reserved).
    pub(crate) fn would_admit(&self, ip: IpAddr, cfg: SessionCaps) -> Result<(), Refusal> {
        let Ok(s) = self.state.lock() else {
            return Err(Refusal::Sessions(cfg.sessions));
        };
        if s.active >= cfg.sessions {
            return Err(Refusal::Sessions(cfg.sessions));
        }
        if s.per_client.get(&ip).copied().unwrap_or(0) >= cfg.per_client {
            return Err(Refusal::PerClient(cfg.per_client));
        }
        Ok(())
    }

    pub(crate) fn admit(&self, ip: IpAddr, cfg: SessionCaps) -> Result<(), Refusal> {
        let Ok(mut s) = self.state.lock() else {
            return Err(Refusal::Sessions(cfg.sessions));
        };
        if s.active >= cfg.sessions {
            return Err(Refusal::Sessions(cfg.sessions));
        }
        let n = s.per_client.get(&ip).copied().unwrap_or(0);
        if n >= cfg.per_client {
            return Err(Refusal::PerClient(cfg.per_client));
        }
        s.active += 1;
        s.pending += 1;
        *s.per_client.entry(ip).or_insert(0) += 1;
        Ok(())
    }

    pub(crate) fn established(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.pending = s.pending.saturating_sub(1);
        }
    }

    pub(crate) fn leave(&self, ip: IpAddr, was_pending: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.active = s.active.saturating_sub(1);
            if was_pending {
                s.pending = s.pending.saturating_sub(1);
            }
            if let Some(n) = s.per_client.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.per_client.remove(&ip);
                }
            }
        }
    }
}

/// Test workers alive, those of aborted tests included: a session that
/// goes away does not wait for its worker, which ends on its own soon
/// after; this bounds how many can be alive at once, and lets the daemon
/// wait for them when it stops.
#[derive(Debug, Default)]
pub(crate) struct Workers {
    alive: Mutex<usize>,
    ended: Condvar,
}

/// One worker's place in [`Workers`], given back when dropped.
#[derive(Debug)]
pub(crate) struct WorkerSlot(Arc<Workers>);

impl Workers {
    /// A place for one more worker, if fewer than `max` are alive.
    pub(crate) fn enter(self: &Arc<Self>, max: usize) -> Result<WorkerSlot, usize> {
        let Ok(mut n) = self.alive.lock() else {
            return Err(max);
        };
        if *n >= max {
            return Err(*n);
        }
        *n += 1;
        Ok(WorkerSlot(self.clone()))
    }

    pub(crate) fn alive(&self) -> usize {
        self.alive.lock().map_or(0, |n| *n)
    }

    /// Wait until no worker is alive, at most `limit`.
    pub(crate) fn wait_none(&self, limit: Duration) -> bool {
        let Ok(guard) = self.alive.lock() else {
            return false;
        };
        match self.ended.wait_timeout_while(guard, limit, |n| *n > 0) {
            Ok((n, _)) => *n == 0,
            Err(_) => false,
        }
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        if let Ok(mut n) = self.0.alive.lock() {
            *n = n.saturating_sub(1);
        }
        self.0.ended.notify_all();
    }
}

/// Failed authentications per client address, to slow down guessing: past
/// a few failures, an address gets one attempt a second (each waits its
/// turn), never a lock-out, so that whoever shares an address (a host, a
/// NAT) with a guesser still gets in with the right key.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    map: Mutex<HashMap<IpAddr, Tries>>,
}

/// One address's failures within the window, and its next turn.
#[derive(Debug, Clone, Copy)]
struct Tries {
    failed: u32,
    since: Instant,
    next_turn: Instant,
}

/// When an attempt may try its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    Now,
    At(Instant),
}

impl Failures {
    /// Failures an address may have within [`Failures::WINDOW`] before its
    /// attempts are spaced out.
    const LIMIT: u32 = 5;
    const WINDOW: Duration = Duration::from_secs(60);
    /// Between two attempts of an address past its limit.
    const INTERVAL: Duration = Duration::from_secs(1);
    /// Addresses remembered at most (expired entries are dropped first).
    const MAX_ENTRIES: usize = 10_000;

    /// When an attempt from `ip` may try a key: now, or, for an address
    /// past its limit, at its next turn (which this takes).
    pub(crate) fn turn(&self, ip: IpAddr, now: Instant) -> Turn {
        let Ok(mut map) = self.map.lock() else {
            return Turn::Now;
        };
        let Some(t) = map.get_mut(&ip) else {
            return Turn::Now;
        };
        if t.failed < Self::LIMIT || now.duration_since(t.since) >= Self::WINDOW {
            return Turn::Now;
        }
        let at = t.next_turn.max(now);
        t.next_turn = at + Self::INTERVAL;
        if at <= now { Turn::Now } else { Turn::At(at) }
    }

    pub(crate) fn record(&self, ip: IpAddr) {
        let Ok(mut map) = self.map.lock() else {
            return;
        };
        let now = Instant::now();
        if map.len() >= Self::MAX_ENTRIES {
            map.retain(|_, t| now.duration_since(t.since) < Self::WINDOW);
            if map.len() >= Self::MAX_ENTRIES {
                return;
            }
        }
        let t = map.entry(ip).or_insert(Tries {
            failed: 0,
            since: now,
            next_turn: now,
        });
        if now.duration_since(t.since) >= Self::WINDOW {
            *t = Tries {
                failed: 0,
                since: now,
                next_turn: now,
            };
        }
        t.failed += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    #[test]
    fn workers_are_bounded_and_waited_for() {
        let w = Arc::new(Workers::default());
        let a = w.enter(2).unwrap();
        let b = w.enter(2).unwrap();
        assert_eq!(w.enter(2).unwrap_err(), 2);
        assert_eq!(w.alive(), 2);
        drop(a);
        let c = w.enter(2).unwrap();
        assert!(!w.wait_none(Duration::from_millis(10)));
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            drop((b, c));
        });
        assert!(w.wait_none(Duration::from_secs(5)));
        assert_eq!(w.alive(), 0);
        t.join().unwrap();
    }

    #[test]
    fn the_memory_budget_is_shared_and_given_back() {
        let b = Arc::new(MemoryBudget::new(100));
        let r1 = b.reserve(60).unwrap();
        assert_eq!(b.reserve(50).unwrap_err(), 40, "40 bytes free");
        let r2 = b.reserve(40).unwrap();
        assert_eq!(b.in_use(), 100);
        drop(r1);
        assert_eq!(b.in_use(), 40);
        drop(r2);
        assert_eq!(b.in_use(), 0);
        let host = MemoryBudget::for_this_host().limit();
        assert!((256 << 20..=64 << 30).contains(&host), "{host}");
    }
}
