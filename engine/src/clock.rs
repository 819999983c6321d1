//! The monotonic clock as plain nanoseconds, for per-transaction timing:
//! one vDSO `clock_gettime` and integer arithmetic, without `Instant`'s
//! checked `timespec` subtraction.

/// Nanoseconds of the monotonic clock (CLOCK_MONOTONIC; Windows'
/// performance counter).
#[inline]
pub fn now_ns() -> u64 {
    crate::sys::monotonic_ns()
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
