//! What a log or a record may take of the disk: bytes a second, in all and
//! from the lines about one client address (token buckets), and bytes in
//! one file (until SIGHUP opens a new one). A line over the budget is
//! dropped and counted, as one the log's reader could not keep up with.

use std::{collections::HashMap, net::IpAddr, time::Instant};

/// The rates and sizes a log's lines are held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes a second from the lines of all clients, and at once.
    pub all_rate: u64,
    pub all_burst: u64,
    /// Bytes a second from the lines about one client address, and at once.
    pub address_rate: u64,
    pub address_burst: u64,
    /// Bytes written to one file at most (`--max-file-size`).
    pub file_size: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            all_rate: 1 << 20,
            all_burst: 16 << 20,
            address_rate: 64 << 10,
            address_burst: 1 << 20,
            file_size: 1 << 30,
        }
    }
}

/// A bucket of bytes, refilled at its rate up to its burst.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    bytes: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: u64, now: Instant) -> Bucket {
        Bucket {
            bytes: burst as f64,
            at: now,
        }
    }

    fn refill(&mut self, rate: u64, burst: u64, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.bytes = (self.bytes + secs * rate as f64).min(burst as f64);
        self.at = now;
    }
}

/// Addresses whose buckets are kept at most (full ones are forgotten first;
/// beyond, an unknown address shares the daemon's bucket only).
const MAX_ADDRESSES: usize = 4096;

/// The state of one log's budget.
#[derive(Debug)]
pub(crate) struct Budget {
    limits: Limits,
    all: Bucket,
    by_address: HashMap<IpAddr, Bucket>,
    /// Bytes taken since the file was opened.
    in_file: u64,
}

impl Budget {
    /// A budget for a file that holds `already` bytes.
    pub(crate) fn new(limits: Limits, already: u64) -> Budget {
        let now = Instant::now();
        Budget {
            limits,
            all: Bucket::full(limits.all_burst, now),
            by_address: HashMap::new(),
            in_file: already,
        }
    }

    /// Whether a line of `len` bytes (about `peer`, if any) may be written
    /// now; if so it is counted.
    pub(crate) fn take(&mut self, len: usize, peer: Option<IpAddr>, now: Instant) -> bool {
        let len = len as u64 + 1;
        let l = self.limits;
        if self.in_file.saturating_add(len) > l.file_size {
            return false;
        }
        if let Some(ip) = peer {
            self.all.refill(l.all_rate, l.all_burst, now);
            if self.all.bytes < len as f64 {
                return false;
            }
            if self.by_address.len() >= MAX_ADDRESSES && !self.by_address.contains_key(&ip) {
                let (rate, burst) = (l.address_rate, l.address_burst);
                self.by_address.retain(|_, b| {
                    b.refill(rate, burst, now);
                    b.bytes < burst as f64
                });
            }
            if self.by_address.len() < MAX_ADDRESSES || self.by_address.contains_key(&ip) {
                let b = self
                    .by_address
                    .entry(ip)
                    .or_insert_with(|| Bucket::full(l.address_burst, now));
                b.refill(l.address_rate, l.address_burst, now);
                if b.bytes < len as f64 {
                    return false;
                }
                b.bytes -= len as f64;
            }
            self.all.bytes -= len as f64;
        }
        self.in_file += len;
        true
    }

    /// A new file was opened (SIGHUP), holding `already` bytes.
    pub(crate) fn new_file(&mut self, already: u64) {
        self.in_file = already;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    fn small() -> Limits {
        Limits {
            all_rate: 1000,
            all_burst: 3000,
            address_rate: 100,
            address_burst: 1000,
            file_size: 10_000,
        }
    }

    #[test]
    fn an_address_has_its_share_and_all_have_theirs() {
        let t0 = Instant::now();
        let mut b = Budget::new(small(), 0);
        // 1000 bytes at once from A (lines of 99 + a newline), then no more
        assert_eq!((0..20).filter(|_| b.take(99, Some(A), t0)).count(), 10);
        // B has its own share; together they meet the daemon's 3000
        assert_eq!((0..20).filter(|_| b.take(99, Some(B), t0)).count(), 10);
        // a second later A has 100 bytes more
        let t1 = t0 + Duration::from_secs(1);
        assert!(b.take(99, Some(A), t1));
        assert!(!b.take(99, Some(A), t1));
        // lines about no client (the daemon's own) are not held back
        assert!(b.take(500, None, t1));
    }

    #[test]
    fn a_file_holds_its_size_until_a_new_one_opens() {
        let t0 = Instant::now();
        let mut b = Budget::new(small(), 0);
        assert_eq!((0..20).filter(|_| b.take(999, None, t0)).count(), 10);
        assert!(!b.take(0, None, t0));
        b.new_file(0);
        assert!(b.take(999, None, t0));
    }
}
