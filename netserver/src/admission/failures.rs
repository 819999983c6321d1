//! Failed authentications per client address, to slow down guessing
//! without ever keeping the right key out.
//!
//! Every attempt's proof is checked when it comes: the right key is served
//! at once, whatever others at its address (a host, a NAT) did. What is
//! slowed is what a guesser learns: the refusal of a wrong key. Each
//! address has a bucket of [`Failures::BURST`] refusals told at once,
//! refilled at one a second ([`Failures::INTERVAL`]); past it, a wrong
//! key's refusal waits its turn (the connection is held, silent, and
//! closed when its peer closes). Only failures take turns: a hello refused
//! for any other reason, or never finished, moves nobody's turn.
//!
//! A guesser with `C` connections held at once learns at most
//! `BURST + t + C` verdicts in `t` seconds (and `C` is bounded by the
//! sessions an address may hold, `--max-per-client`); turns further than
//! [`Failures::MAX_HOLD`] ahead are told then.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

#[derive(Debug, Default)]
pub(crate) struct Failures {
    /// Each address's theoretical arrival time (GCRA): when its bucket
    /// would be full again.
    map: Mutex<HashMap<IpAddr, Instant>>,
}

impl Failures {
    /// Refusals an address is told at once before its turns begin.
    const BURST: u32 = 5;
    /// Between two turns of an address past its burst.
    const INTERVAL: Duration = Duration::from_secs(1);
    /// The longest a refusal is held.
    pub(crate) const MAX_HOLD: Duration = Duration::from_secs(30);
    /// Addresses remembered at most (those whose bucket is full again are
    /// forgotten first).
    const MAX_ENTRIES: usize = 10_000;

    /// A wrong key from `ip` at `now`: when its refusal may be told (now,
    /// or its address's next turn).
    pub(crate) fn refusal_at(&self, ip: IpAddr, now: Instant) -> Instant {
        let Ok(mut map) = self.map.lock() else {
            return now;
        };
        if map.len() >= Self::MAX_ENTRIES && !map.contains_key(&ip) {
            map.retain(|_, tat| *tat > now);
            if map.len() >= Self::MAX_ENTRIES {
                return now;
            }
        }
        let tolerance = Self::INTERVAL * (Self::BURST - 1);
        let tat = map.entry(ip).or_insert(now);
        let from = (*tat).max(now);
        let at = from.checked_sub(tolerance).unwrap_or(now).max(now);
        // (a debt beyond what is ever held is not kept)
        *tat = (from + Self::INTERVAL).min(now + tolerance + Self::MAX_HOLD);
        at.min(now + Self::MAX_HOLD)
    }

    /// Whether `ip` has failed lately (its refusals are being spaced out).
    #[cfg(test)]
    fn is_slowed(&self, ip: IpAddr, now: Instant) -> bool {
        self.map
            .lock()
            .ok()
            .and_then(|m| m.get(&ip).copied())
            .is_some_and(|tat| tat > now + Self::INTERVAL * (Self::BURST - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn five_refusals_at_once_then_one_a_second() {
        let f = Failures::default();
        let t0 = Instant::now();
        for _ in 0..5 {
            assert_eq!(f.refusal_at(A, t0), t0);
        }
        assert!(f.is_slowed(A, t0));
        assert_eq!(f.refusal_at(A, t0), t0 + Duration::from_secs(1));
        assert_eq!(f.refusal_at(A, t0), t0 + Duration::from_secs(2));
        // another address is not slowed by A's failures
        assert_eq!(f.refusal_at(B, t0), t0);
        // the bucket refills: 10 s later, five at once again
        let t1 = t0 + Duration::from_secs(12);
        for _ in 0..5 {
            assert_eq!(f.refusal_at(A, t1), t1);
        }
        assert!(f.refusal_at(A, t1) > t1);
    }

    #[test]
    fn turns_are_never_held_past_the_limit_and_the_debt_is_bounded() {
        let f = Failures::default();
        let t0 = Instant::now();
        for _ in 0..1000 {
            assert!(f.refusal_at(A, t0) <= t0 + Failures::MAX_HOLD);
        }
        // a minute later the debt of 1000 failures is paid
        let t1 = t0 + Duration::from_secs(5) + Failures::MAX_HOLD + Duration::from_secs(1);
        assert_eq!(f.refusal_at(A, t1), t1);
        assert!(!f.is_slowed(B, t1));
    }
}
