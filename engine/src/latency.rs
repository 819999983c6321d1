//! Latency of transactions: a log-linear histogram (HdrHistogram, 3
//! significant digits, bounded memory whatever the test length) for the
//! percentiles, with exact minimum, maximum, mean and standard deviation
//! kept beside it.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency the histogram resolves (longer ones are clamped): 1 hour.
const MAX_NS: u64 = 3_600_000_000_000;

#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: f64,
    sum_sq: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

/// What a [`Latency`] says, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub stddev: f64,
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            // 1 ns to 1 hour at 3 significant digits: a few hundred KiB,
            // allocated once.
            hist: {
                // constant bounds and precision, which hdrhistogram accepts
                #[allow(clippy::expect_used)]
                Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid constant bounds")
            },
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0.0,
            sum_sq: 0.0,
        }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, MAX_NS));
        self.count += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        let x = ns as f64;
        self.sum += x;
        self.sum_sq += x * x;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Add another's samples: the result is exactly the histogram and
    /// moments of both sets together.
    pub fn merge(&mut self, o: &Latency) {
        let _ = self.hist.add(&o.hist);
        self.count += o.count;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = if self.count > 1 {
            ((self.sum_sq - n * mean * mean) / (n - 1.0)).max(0.0)
        } else {
            0.0
        };
        // Percentiles come from the histogram (within 0.1%), kept inside
        // the exact extremes.
        let q = |p: f64| self.hist.value_at_quantile(p).clamp(self.min, self.max);
        Some(LatencySummary {
            count: self.count,
            min: self.min,
            mean,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            max: self.max,
            stddev: var.sqrt(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let mut l = Latency::new();
        for v in 1..=1000u64 {
            l.record(v * 1000);
        }
        let s = l.summary().unwrap();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min, 1000);
        assert_eq!(s.max, 1_000_000);
        assert!((s.mean - 500_500.0).abs() < 1e-6);
        // sample standard deviation of 1..1000 (x1000) is 288.819 (x1000)
        assert!((s.stddev - 288_819.4).abs() < 1.0, "{}", s.stddev);
        let near = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.002;
        assert!(near(s.p50, 500_000), "{}", s.p50);
        assert!(near(s.p90, 900_000), "{}", s.p90);
        assert!(near(s.p99, 990_000), "{}", s.p99);
        assert!(near(s.p999, 999_000), "{}", s.p999);
        assert!(
            s.min <= s.p50
                && s.p50 <= s.p90
                && s.p90 <= s.p99
                && s.p99 <= s.p999
                && s.p999 <= s.max
        );
    }

    #[test]
    fn empty_has_no_summary() {
        assert!(Latency::new().summary().is_none());
    }

    #[test]
    fn huge_values_are_clamped_not_lost() {
        let mut l = Latency::new();
        l.record(u64::MAX);
        l.record(0);
        let s = l.summary().unwrap();
        assert_eq!(s.count, 2);
        assert_eq!(s.max, u64::MAX);
    }
}
