//! File descriptors, a budgeted resource like memory.
//!
//! The daemon's open-files limit is split once, at start: a reserve for
//! the control plane (listeners, log and record, the metrics endpoint's
//! connections, one a session, the waiting room of new connections), and
//! the rest for tests' data sockets. Each test reserves what its server
//! side can hold at most ([`proto::TestSpec::server_descriptors`]) before
//! a socket is opened: within a test's share, its address's share, and the
//! daemon's whole budget for tests, or it is refused with the limit named.
//! An address also runs at most so many tests at once. So no client can
//! take the descriptors that new control connections, authentication and
//! other clients' tests need.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// The control plane's descriptors besides sessions and the waiting
/// room: listeners, log, record, signals, the loop's poll and waker, the
/// metrics endpoint (64 connections at most) and a margin.
pub(crate) const CONTROL_FIXED: u64 = 32 + 64;

/// Descriptors a small test holds (one flow: its socket, the waiting
/// room's 32, an event loop's): no share is smaller.
const SMALL_TEST: u64 = 64;

/// How the open-files limit is split, and the shares of tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdShares {
    /// The process's open-files limit it was made from.
    pub open_files: u64,
    /// Control sessions at once, at most (the administrator's
    /// `--max-sessions`, lowered to fit).
    pub sessions: usize,
    /// Connections waiting for their first message, at most (the
    /// administrator's `--max-pending`, lowered to fit).
    pub waiting: usize,
    /// What all tests together may hold.
    pub tests: u64,
    /// What one test may hold (`--max-test-fds`).
    pub per_test: u64,
    /// What the tests of one client address may hold together.
    pub per_address: u64,
    /// Tests one client address may run at once (`--max-tests-per-client`).
    pub tests_per_address: u32,
}

impl FdShares {
    /// Split `open_files`: the control plane's reserve (its own, at most an
    /// eighth of the limit; a descriptor a session, `max_sessions` of them
    /// and at most a quarter of the limit; the waiting room, at most an
    /// eighth), the rest for tests; a test may hold a quarter of that (or
    /// up to 1024 of it, never more than a third) unless `per_test` says
    /// otherwise, an address twice a test's but at most a third of the
    /// tests' (so that a third address always finds its share free; a
    /// third is never less than a small test's 64).
    pub fn split(
        open_files: u64,
        max_sessions: usize,
        max_pending: usize,
        per_test: Option<u64>,
        tests_per_address: u32,
    ) -> FdShares {
        let fixed = CONTROL_FIXED.min(open_files / 8);
        let sessions = (max_sessions as u64).min(open_files / 4).max(1);
        let waiting = (max_pending as u64).min(open_files / 8).max(1);
        let tests = open_files.saturating_sub(fixed + sessions + waiting);
        // an address holds at most a third of what tests have, so that two
        // cannot take it all (unless the administrator's test share is
        // larger: then that is what one address may hold)
        // (at least what a small test holds, so that a tiny limit still
        // runs one: 64)
        let third = (tests / 3).max(SMALL_TEST).min(tests);
        let per_test = per_test
            .unwrap_or((tests / 4).max(tests.min(1024)).min(third))
            .min(tests);
        FdShares {
            open_files,
            sessions: usize::try_from(sessions).unwrap_or(usize::MAX),
            waiting: usize::try_from(waiting).unwrap_or(usize::MAX),
            tests,
            per_test,
            per_address: per_test
                .saturating_mul(2)
                .min(third)
                .max(per_test)
                .min(tests),
            tests_per_address,
        }
    }
}

/// The descriptors tests hold, in all and by client address.
#[derive(Debug)]
pub(crate) struct Descriptors {
    shares: FdShares,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    fds: u64,
    /// By address: descriptors and tests.
    by_address: HashMap<IpAddr, (u64, u32)>,
}

/// Why a test's descriptors were not granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FdRefusal {
    /// More than one test may hold, whatever else runs.
    PerTest { need: u64, shares: FdShares },
    /// The address's tests hold their share already.
    PerAddress {
        need: u64,
        held: u64,
        shares: FdShares,
    },
    /// The address runs as many tests as it may.
    Tests { running: u32, shares: FdShares },
    /// Other tests hold the daemon's budget.
    Daemon {
        need: u64,
        free: u64,
        shares: FdShares,
    },
}

impl Descriptors {
    pub(crate) fn new(shares: FdShares) -> Descriptors {
        Descriptors {
            shares,
            held: Mutex::new(Held::default()),
        }
    }

    pub(crate) fn shares(&self) -> FdShares {
        self.shares
    }

    /// Descriptors tests hold now.
    pub(crate) fn in_use(&self) -> u64 {
        self.held.lock().map_or(0, |h| h.fds)
    }

    /// Reserve `need` descriptors for a test from `ip`, or say why not.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        ip: IpAddr,
        need: u64,
    ) -> Result<FdReservation, FdRefusal> {
        let shares = self.shares;
        if need > shares.per_test {
            return Err(FdRefusal::PerTest { need, shares });
        }
        let Ok(mut h) = self.held.lock() else {
            return Err(FdRefusal::Daemon {
                need,
                free: 0,
                shares,
            });
        };
        let (held, running) = h.by_address.get(&ip).copied().unwrap_or((0, 0));
        if running >= shares.tests_per_address {
            return Err(FdRefusal::Tests { running, shares });
        }
        if held + need > shares.per_address {
            return Err(FdRefusal::PerAddress { need, held, shares });
        }
        let free = shares.tests.saturating_sub(h.fds);
        if need > free {
            return Err(FdRefusal::Daemon { need, free, shares });
        }
        h.fds += need;
        h.by_address.insert(ip, (held + need, running + 1));
        Ok(FdReservation {
            budget: self.clone(),
            ip,
            fds: need,
        })
    }
}

/// Descriptors reserved for one test, given back when dropped (when its
/// worker has ended and closed them).
#[derive(Debug)]
pub(crate) struct FdReservation {
    budget: Arc<Descriptors>,
    ip: IpAddr,
    fds: u64,
}

impl Drop for FdReservation {
    fn drop(&mut self) {
        if let Ok(mut h) = self.budget.held.lock() {
            h.fds = h.fds.saturating_sub(self.fds);
            if let Some((fds, tests)) = h.by_address.get_mut(&self.ip) {
                *fds = fds.saturating_sub(self.fds);
                *tests = tests.saturating_sub(1);
                if *tests == 0 {
                    h.by_address.remove(&self.ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn the_limit_is_split_with_a_reserve_for_the_control_plane() {
        let s = FdShares::split(20_000, 256, 4096, None, 64);
        assert_eq!(
            (s.sessions, s.waiting),
            (256, 2_500),
            "an eighth of the limit"
        );
        assert_eq!(s.tests, 20_000 - 96 - 256 - 2_500);
        assert_eq!(s.per_test, s.tests / 4);
        assert_eq!(s.per_address, s.tests / 3);
        // a small limit: every part in proportion, a test (and an
        // address) a third of what tests have: two addresses at their
        // shares leave a third's share free
        let s = FdShares::split(1024, 256, 4096, None, 64);
        assert_eq!((s.sessions, s.waiting), (256, 128));
        assert_eq!(s.tests, 1024 - 96 - 256 - 128);
        assert_eq!((s.per_test, s.per_address), (s.tests / 3, s.tests / 3));
        assert!(s.tests - 2 * s.per_address >= s.per_test);
        // the finding's limit: 1398 for tests, of which two addresses took
        // all but 2
        let s = FdShares::split(1398 + 96 + 256 + 200, 256, 200, None, 64);
        assert_eq!(s.tests, 1398);
        assert!(s.tests - 2 * s.per_address >= s.per_test, "{s:?}");
        let s = FdShares::split(200, 500, 500, Some(500), 64);
        assert_eq!((s.sessions, s.waiting), (50, 25));
        assert_eq!((s.tests, s.per_test), (100, 100));
    }

    #[test]
    fn a_test_an_address_and_the_daemon_each_have_a_share() {
        // (an administrator's test share of 4,000, above a third's 5,716:
        // an address twice that, 8,000)
        let d = Arc::new(Descriptors::new(FdShares::split(
            20_000,
            256,
            4096,
            Some(4_000),
            3,
        )));
        let one_test = d.reserve(A, 4_001).unwrap_err();
        assert!(matches!(one_test, FdRefusal::PerTest { need: 4_001, .. }));
        let text = crate::admission::Refusal::Descriptors {
            why: one_test,
            flows: 2000,
        }
        .to_string();
        assert!(
            text.contains("--max-test-fds") && text.contains("20000"),
            "{text}"
        );
        // an address: a third of the tests' 17,148 (5,716)
        let a1 = d.reserve(A, 4_000).unwrap();
        assert!(matches!(
            d.reserve(A, 4_000).unwrap_err(),
            FdRefusal::PerAddress { held: 4_000, .. }
        ));
        let a2 = d.reserve(A, 1_716).unwrap();
        // another address is not held back by A
        let b1 = d.reserve(B, 4_000).unwrap();
        let b2 = d.reserve(B, 1_716).unwrap();
        assert_eq!(d.in_use(), 11_432);
        // two addresses at their shares: a third is served
        let c = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 3));
        let c1 = d.reserve(c, 4_000).unwrap();
        // and the daemon's budget is nearly spent
        let e = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 4));
        assert!(matches!(
            d.reserve(e, 4_000).unwrap_err(),
            FdRefusal::Daemon { free: 1_716, .. }
        ));
        drop((a1, b2, c1));
        assert_eq!(d.in_use(), 5_716);
        let _e = d.reserve(e, 4_000).unwrap();
        // tests an address runs at once
        let small: Vec<_> = (0..2).map(|_| d.reserve(B, 1).unwrap()).collect();
        assert!(matches!(
            d.reserve(B, 1).unwrap_err(),
            FdRefusal::Tests { running: 3, .. }
        ));
        drop((a2, b1, small));
    }
}
