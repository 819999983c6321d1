//! The monotonic clock as plain nanoseconds, for per-transaction timing:
//! one vDSO `clock_gettime` and integer arithmetic, without `Instant`'s
//! checked `timespec` subtraction.

/// Nanoseconds of the monotonic clock (CLOCK_MONOTONIC; Windows'
/// performance counter).
#[inline]
pub fn now_ns() -> u64 {
    crate::sys::monotonic_ns()
}

/// Now on the wall clock, seconds since the Unix epoch (when samples
/// were read, to line them up with other hosts' and programs').
pub fn unix_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
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
