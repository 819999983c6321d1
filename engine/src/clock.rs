//! The monotonic clock as plain nanoseconds, for per-transaction timing:
//! one vDSO `clock_gettime` and integer arithmetic, without `Instant`'s
//! checked `timespec` subtraction.

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds of CLOCK_MONOTONIC.
#[inline]
pub fn now_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => (ts.tv_sec() as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec() as u64),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn advances() {
        let a = super::now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = super::now_ns();
        assert!(b - a >= 2_000_000, "{a} {b}");
    }
}
