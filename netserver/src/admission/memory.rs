//! The buffer memory all running tests share.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

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

    /// What the kernel's socket buffers of all tests together may hold:
    /// half of what all TCP sockets of the host may (net.ipv4.tcp_mem),
    /// so that tests leave the rest to every other program; where that is
    /// not known, a quarter of the host's memory as for buffers.
    pub fn for_sockets() -> MemoryBudget {
        match engine::sys::tcp_memory_limit() {
            Some(bytes) => MemoryBudget::new((bytes / 2).max(64 << 20)),
            None => MemoryBudget::for_this_host(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
