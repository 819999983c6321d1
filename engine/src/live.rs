//! Counters a test publishes while it runs, for interim reports.
//!
//! The data loop owns plain integers and stores them here with a relaxed
//! store after each call: on x86-64 and aarch64 that is an ordinary store, no
//! lock and no fence. A reporter thread reads them whenever it likes.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Live {
    bytes: AtomicU64,
    calls: AtomicU64,
    transactions: AtomicU64,
    /// With many flows, each flow's own counters (its loop stores into
    /// them); the snapshot is then their sum.
    flows: Box<[Live]>,
}

/// A snapshot of [`Live`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveSnapshot {
    pub bytes: u64,
    pub calls: u64,
    pub transactions: u64,
}

impl Live {
    pub fn new() -> Live {
        Live::default()
    }

    /// Counters for a test of `n` flows: one set per flow.
    pub fn with_flows(n: usize) -> Live {
        Live {
            flows: (0..n).map(|_| Live::default()).collect(),
            ..Live::default()
        }
    }

    /// Flow `i`'s counters, if this has counters per flow.
    pub fn flow(&self, i: usize) -> Option<&Live> {
        self.flows.get(i)
    }

    /// The totals and each flow's counters (empty without counters per
    /// flow), read once: the totals are the flows' sum.
    pub fn snapshots(&self) -> (LiveSnapshot, Vec<LiveSnapshot>) {
        let flows: Vec<LiveSnapshot> = self.flows.iter().map(Live::snapshot).collect();
        let own = LiveSnapshot {
            bytes: self.bytes.load(Ordering::Relaxed),
            calls: self.calls.load(Ordering::Relaxed),
            transactions: self.transactions.load(Ordering::Relaxed),
        };
        let total = flows.iter().fold(own, |a, f| LiveSnapshot {
            bytes: a.bytes + f.bytes,
            calls: a.calls + f.calls,
            transactions: a.transactions + f.transactions,
        });
        (total, flows)
    }

    #[inline]
    pub fn publish(&self, bytes: u64, calls: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
        self.calls.store(calls, Ordering::Relaxed);
    }

    #[inline]
    pub fn publish_transactions(&self, transactions: u64) {
        self.transactions.store(transactions, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LiveSnapshot {
        if self.flows.is_empty() {
            LiveSnapshot {
                bytes: self.bytes.load(Ordering::Relaxed),
                calls: self.calls.load(Ordering::Relaxed),
                transactions: self.transactions.load(Ordering::Relaxed),
            }
        } else {
            self.snapshots().0
        }
    }

    /// Add to the counters: for many flows on several threads, each
    /// adding what it did since it last added.
    #[inline]
    pub fn add(&self, bytes: u64, calls: u64, transactions: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.calls.fetch_add(calls, Ordering::Relaxed);
        self.transactions.fetch_add(transactions, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        self.publish(0, 0);
        self.publish_transactions(0);
        for f in self.flows.iter() {
            f.reset();
        }
    }
}
