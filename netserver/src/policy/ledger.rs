//! What each client address, prefix and token (and the daemon) has used of
//! its budget: tests an hour and a day, bytes and test seconds a day, and
//! control sessions open now. An hour (or a day) runs from the first test
//! counted in it; times are the wall clock's seconds, so that counts kept
//! across a restart ([`super::state`]) still mean the same. At most
//! `max` entries are remembered, the least recently seen forgotten first.

use std::{collections::HashMap, fmt, net::IpAddr};

use serde::{Deserialize, Serialize};

use super::file::Budget;

const HOUR: u64 = 3600;
const DAY: u64 = 86_400;

/// Whose use is counted.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scope {
    Daemon,
    Address(IpAddr),
    Prefix(IpAddr, u8),
    /// A token's, by its id.
    Token(u64),
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Daemon => f.write_str("this netserver"),
            Scope::Address(a) => write!(f, "address {a}"),
            Scope::Prefix(p, len) => write!(f, "prefix {p}/{len}"),
            Scope::Token(id) => write!(f, "token {id:016x}"),
        }
    }
}

/// One scope's use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub hour_start: u64,
    pub hour_tests: u64,
    pub day_start: u64,
    pub day_tests: u64,
    pub day_bytes: u64,
    pub day_seconds: u64,
    /// When it was last counted.
    pub seen: u64,
}

impl Usage {
    /// Start a new hour or day where the last has run out, or where
    /// nothing is counted in it yet (a window runs from its first count).
    fn roll(&mut self, now: u64) {
        if self.hour_tests == 0 {
            self.hour_start = now;
        }
        if self.day_tests == 0 && self.day_bytes == 0 && self.day_seconds == 0 {
            self.day_start = now;
        }
        if now >= self.hour_start.saturating_add(HOUR) || now < self.hour_start {
            self.hour_start = now;
            self.hour_tests = 0;
        }
        if now >= self.day_start.saturating_add(DAY) || now < self.day_start {
            self.day_start = now;
            self.day_tests = 0;
            self.day_bytes = 0;
            self.day_seconds = 0;
        }
    }

    /// The first of `budget`'s limits this use has reached, if any.
    fn reached(&self, budget: &Budget, now: u64) -> Option<(&'static str, u64, u64)> {
        let hour_left = self.hour_start.saturating_add(HOUR).saturating_sub(now);
        let day_left = self.day_start.saturating_add(DAY).saturating_sub(now);
        [
            (
                "tests_per_hour",
                budget.tests_per_hour,
                self.hour_tests,
                hour_left,
            ),
            (
                "tests_per_day",
                budget.tests_per_day,
                self.day_tests,
                day_left,
            ),
            (
                "bytes_per_day",
                budget.bytes_per_day,
                self.day_bytes,
                day_left,
            ),
            (
                "test_seconds_per_day",
                budget.test_seconds_per_day,
                self.day_seconds,
                day_left,
            ),
        ]
        .into_iter()
        .find_map(|(name, limit, used, left)| {
            let limit = limit?;
            (used >= limit).then_some((name, limit, left))
        })
    }
}

/// A test or session refused by a budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverBudget {
    pub scope: Scope,
    /// The policy file's key.
    pub budget: &'static str,
    pub limit: u64,
    /// Seconds until the budget's hour or day starts again (0 for sessions).
    pub again_in: u64,
}

impl fmt::Display for OverBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.budget {
            "tests_per_hour" => format!("its {} tests an hour", self.limit),
            "tests_per_day" => format!("its {} tests a day", self.limit),
            "bytes_per_day" => format!("its {} bytes a day", self.limit),
            "test_seconds_per_day" => format!("its {} test seconds a day", self.limit),
            "sessions" => format!("its {} sessions at once", self.limit),
            "tests" => format!("the {} tests it allows", self.limit),
            "max_entries" => format!(
                "no room: {} tokens are counted already (max_entries)",
                self.limit
            ),
            other => format!("its {other} of {}", self.limit),
        };
        write!(
            f,
            "netserver policy: {} has used {what} ({})",
            self.scope, self.budget
        )?;
        match self.again_in {
            0 => Ok(()),
            s if s < 120 => write!(f, "; again in {s} s"),
            s if s < 7200 => write!(f, "; again in {} min", s.div_ceil(60)),
            s => write!(f, "; again in {} h", s.div_ceil(3600)),
        }
    }
}

/// Every scope's use.
#[derive(Debug)]
pub struct Ledger {
    uses: HashMap<Scope, Usage>,
    sessions: HashMap<Scope, usize>,
    /// Tests each token has started, by id, and when it expires (a token
    /// is forgotten once expired).
    tokens: HashMap<u64, (u64, u64)>,
    max: usize,
}

impl Ledger {
    pub fn new(max: usize) -> Ledger {
        Ledger {
            uses: HashMap::new(),
            sessions: HashMap::new(),
            tokens: HashMap::new(),
            max: max.max(1),
        }
    }

    pub fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
        self.make_room(0);
    }

    /// Scopes remembered now.
    pub fn len(&self) -> usize {
        self.uses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uses.is_empty()
    }

    /// A test asks to start: refused by the first budget any of its scopes
    /// has used up, else counted in every one of them at once (so that a
    /// burst is counted as it comes, not as its tests end).
    pub fn admit(&mut self, scopes: &[(Scope, Budget)], now: u64) -> Result<(), OverBudget> {
        for (scope, budget) in scopes {
            let mut u = self.uses.get(scope).copied().unwrap_or_default();
            u.roll(now);
            if let Some((name, limit, again_in)) = u.reached(budget, now) {
                return Err(OverBudget {
                    scope: *scope,
                    budget: name,
                    limit,
                    again_in,
                });
            }
        }
        for (scope, _) in scopes {
            let u = self.entry(*scope, now);
            u.hour_tests += 1;
            u.day_tests += 1;
        }
        Ok(())
    }

    /// A test [`Ledger::admit`] counted was refused after all (its token):
    /// counted nowhere.
    pub fn unadmit(&mut self, scopes: &[(Scope, Budget)]) {
        for (scope, _) in scopes {
            if let Some(u) = self.uses.get_mut(scope) {
                u.hour_tests = u.hour_tests.saturating_sub(1);
                u.day_tests = u.day_tests.saturating_sub(1);
            }
        }
    }

    /// A test ended: its bytes and seconds counted where it was.
    pub fn done(&mut self, scopes: &[Scope], bytes: u64, seconds: u64, now: u64) {
        for scope in scopes {
            let u = self.entry(*scope, now);
            u.day_bytes = u.day_bytes.saturating_add(bytes);
            u.day_seconds = u.day_seconds.saturating_add(seconds);
        }
    }

    fn entry(&mut self, scope: Scope, now: u64) -> &mut Usage {
        if !self.uses.contains_key(&scope) {
            self.make_room(1);
        }
        let u = self.uses.entry(scope).or_default();
        u.roll(now);
        u.seen = now;
        u
    }

    /// Forget the least recently seen until `more` fit (an eighth at a
    /// time, so that a flood of new scopes costs one sort in many).
    fn make_room(&mut self, more: usize) {
        if self.uses.len() + more <= self.max {
            return;
        }
        let mut by_age: Vec<(u64, Scope)> = self
            .uses
            .iter()
            .filter(|(s, _)| **s != Scope::Daemon)
            .map(|(s, u)| (u.seen, *s))
            .collect();
        by_age.sort_unstable();
        let excess = (self.uses.len() + more).saturating_sub(self.max);
        let drop = excess.max(self.max / 8);
        for (_, s) in by_age.into_iter().take(drop) {
            self.uses.remove(&s);
        }
    }

    /// A test under a token that allows `allowed` (0: no count of its
    /// own) and expires at `expires`: refused once it has started as many,
    /// else counted. Expired tokens are forgotten, so that what is
    /// remembered is bounded by the tokens alive (and by `max`).
    pub fn admit_token(
        &mut self,
        id: u64,
        (allowed, expires): (u64, u64),
        now: u64,
    ) -> Result<(), OverBudget> {
        if !self.tokens.contains_key(&id) && self.tokens.len() >= self.max {
            self.tokens.retain(|_, (_, e)| *e > now);
        }
        let used = self.tokens.get(&id).map_or(0, |(u, _)| *u);
        if allowed > 0 && used >= allowed {
            return Err(OverBudget {
                scope: Scope::Token(id),
                budget: "tests",
                limit: allowed,
                again_in: 0,
            });
        }
        if self.tokens.len() >= self.max && !self.tokens.contains_key(&id) {
            return Err(OverBudget {
                scope: Scope::Token(id),
                budget: "max_entries",
                limit: self.max as u64,
                again_in: 0,
            });
        }
        self.tokens.insert(id, (used + 1, expires));
        Ok(())
    }

    /// Tokens' tests, for the state file: (id, tests, expires).
    pub fn token_uses(&self) -> Vec<(u64, u64, u64)> {
        let mut v: Vec<_> = self.tokens.iter().map(|(i, (u, e))| (*i, *u, *e)).collect();
        v.sort_unstable();
        v
    }

    /// Tokens' tests kept across a restart, the expired left out.
    pub fn restore_tokens(&mut self, kept: Vec<(u64, u64, u64)>, now: u64) {
        for (id, used, expires) in kept {
            if expires > now && self.tokens.len() < self.max {
                self.tokens.insert(id, (used, expires));
            }
        }
    }

    /// A control session opens: refused where a scope holds its sessions
    /// already, else counted.
    pub fn open_session(&mut self, scopes: &[(Scope, Option<usize>)]) -> Result<(), OverBudget> {
        for (scope, cap) in scopes {
            if let Some(cap) = cap
                && self.sessions.get(scope).copied().unwrap_or(0) >= *cap
            {
                return Err(OverBudget {
                    scope: *scope,
                    budget: "sessions",
                    limit: *cap as u64,
                    again_in: 0,
                });
            }
        }
        for (scope, _) in scopes {
            *self.sessions.entry(*scope).or_insert(0) += 1;
        }
        Ok(())
    }

    pub fn close_session(&mut self, scopes: &[Scope]) {
        for scope in scopes {
            if let Some(n) = self.sessions.get_mut(scope) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.sessions.remove(scope);
                }
            }
        }
    }

    /// Every scope's use, for the state file.
    pub fn snapshot(&self) -> Vec<(Scope, Usage)> {
        let mut v: Vec<_> = self.uses.iter().map(|(s, u)| (*s, *u)).collect();
        v.sort_unstable_by_key(|(s, _)| *s);
        v
    }

    /// Counts kept across a restart, those a day old or more left out.
    pub fn restore(&mut self, kept: Vec<(Scope, Usage)>, now: u64) {
        for (scope, mut u) in kept {
            u.roll(now);
            if u.day_tests > 0 || u.day_bytes > 0 {
                self.make_room(1);
                self.uses.insert(scope, u);
            }
        }
    }

    /// The use of `scope` now (for metrics and tests).
    pub fn usage(&self, scope: Scope) -> Usage {
        self.uses.get(&scope).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_prefix_runs_out_while_another_goes_on() {
        let mut l = Ledger::new(100);
        let b = Budget {
            tests_per_hour: Some(3),
            ..Budget::default()
        };
        let p1 = Scope::Prefix(ip("127.0.1.0"), 24);
        let p2 = Scope::Prefix(ip("127.0.2.0"), 24);
        for _ in 0..3 {
            l.admit(&[(p1, b)], 1000).unwrap();
        }
        let e = l.admit(&[(p1, b)], 1010).unwrap_err();
        assert_eq!(e.budget, "tests_per_hour");
        assert_eq!(e.again_in, 3590);
        assert!(
            e.to_string()
                .contains("prefix 127.0.1.0/24 has used its 3 tests an hour"),
            "{e}"
        );
        l.admit(&[(p2, b)], 1010).unwrap();
        // an hour on, the prefix may test again
        l.admit(&[(p1, b)], 4600).unwrap();
    }

    #[test]
    fn a_refused_test_counts_nowhere() {
        let mut l = Ledger::new(100);
        let a = Scope::Address(ip("10.0.0.1"));
        let p = Scope::Prefix(ip("10.0.0.0"), 24);
        let open = Budget::default();
        let one = Budget {
            tests_per_day: Some(1),
            ..Budget::default()
        };
        l.admit(&[(a, open), (p, one)], 5).unwrap();
        assert!(l.admit(&[(a, open), (p, one)], 6).is_err());
        assert_eq!(l.usage(a).day_tests, 1);
    }

    #[test]
    fn bytes_and_seconds_count_at_the_end() {
        let mut l = Ledger::new(100);
        let a = Scope::Address(ip("10.0.0.1"));
        let b = Budget {
            bytes_per_day: Some(1000),
            ..Budget::default()
        };
        l.admit(&[(a, b)], 0).unwrap();
        l.done(&[a], 999, 10, 5);
        l.admit(&[(a, b)], 6).unwrap();
        l.done(&[a], 1, 10, 7);
        let e = l.admit(&[(a, b)], 8).unwrap_err();
        assert_eq!((e.budget, e.limit), ("bytes_per_day", 1000));
        assert_eq!(l.usage(a).day_seconds, 20);
    }

    #[test]
    fn memory_is_bounded_by_forgetting_the_oldest() {
        let mut l = Ledger::new(1000);
        let b = Budget::default();
        for i in 0..100_000u32 {
            let s = Scope::Address(IpAddr::V4(i.into()));
            l.admit(&[(s, b)], u64::from(i)).unwrap();
            assert!(l.len() <= 1000);
        }
        // the newest are remembered
        assert_eq!(
            l.usage(Scope::Address(IpAddr::V4(99_999u32.into())))
                .day_tests,
            1
        );
        assert_eq!(
            l.usage(Scope::Address(IpAddr::V4(0u32.into()))).day_tests,
            0
        );
    }

    #[test]
    fn a_token_starts_what_it_allows_and_expired_ones_are_forgotten() {
        let mut l = Ledger::new(3);
        l.admit_token(7, (2, 100), 10).unwrap();
        l.admit_token(7, (2, 100), 11).unwrap();
        let e = l.admit_token(7, (2, 100), 12).unwrap_err();
        assert!(
            e.to_string().contains("has used the 2 tests it allows"),
            "{e}"
        );
        // no count of its own
        for _ in 0..10 {
            l.admit_token(8, (0, 50), 12).unwrap();
        }
        l.admit_token(9, (0, 50), 12).unwrap();
        // full: a new token finds room once the expired are forgotten
        assert!(l.admit_token(10, (0, 500), 20).is_err());
        l.admit_token(10, (0, 500), 60).unwrap();
        assert_eq!(l.token_uses(), vec![(7, 2, 100), (10, 1, 500)]);
        let mut m = Ledger::new(3);
        m.restore_tokens(l.token_uses(), 200);
        assert_eq!(m.token_uses(), vec![(10, 1, 500)]);
    }

    #[test]
    fn sessions_are_capped_per_scope() {
        let mut l = Ledger::new(10);
        let p = Scope::Prefix(ip("10.0.0.0"), 24);
        l.open_session(&[(p, Some(2))]).unwrap();
        l.open_session(&[(p, Some(2))]).unwrap();
        let e = l.open_session(&[(p, Some(2))]).unwrap_err();
        assert!(e.to_string().contains("its 2 sessions at once"), "{e}");
        l.close_session(&[p]);
        l.open_session(&[(p, Some(2))]).unwrap();
    }

    #[test]
    fn counts_survive_a_snapshot_within_the_day() {
        let mut l = Ledger::new(10);
        let a = Scope::Address(ip("10.0.0.1"));
        l.admit(&[(a, Budget::default())], 100).unwrap();
        l.done(&[a], 5000, 3, 101);
        let kept = l.snapshot();
        let mut m = Ledger::new(10);
        m.restore(kept.clone(), 200);
        assert_eq!(m.usage(a).day_bytes, 5000);
        let mut old = Ledger::new(10);
        old.restore(kept, 100 + DAY + 1);
        assert_eq!(old.usage(a), Usage::default());
    }
}
