//! `-d`: debug lines on stderr, never on stdout (scripts parse stdout).
//! `-d` tells what netperf does (addresses, requests, grants, results);
//! `-dd` adds every control message.

use std::sync::atomic::{AtomicU8, Ordering};

static LEVEL: AtomicU8 = AtomicU8::new(0);

/// Set from `-d` (once per `-d`).
pub fn set_level(n: u8) {
    LEVEL.store(n, Ordering::Relaxed);
}

pub fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Print one debug line at `at` or above.
pub fn line(at: u8, text: impl FnOnce() -> String) {
    if level() >= at {
        eprintln!("netperf: debug: {}", text());
    }
}
