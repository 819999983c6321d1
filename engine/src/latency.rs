//! Latency of transactions: a log-linear histogram (HdrHistogram, 3
//! significant digits, bounded memory whatever the test length) for the
//! percentiles, with exact minimum, maximum, mean and standard deviation
//! kept beside it.
//!
//! The moments are integers: the sum of each sample's distance from a
//! shift (the first sample) and of its square, in 128 bits. They stay
//! exact over a day of transactions and far beyond (10^10 samples of an
//! hour each fit), and the variance has no cancellation to lose digits to:
//! netperf 2.7 printed "-nan" for the standard deviation and a negative
//! mean after 24 hours (HewlettPackard/netperf#83).

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
    /// The shift the sums are taken from, and the sums of each sample's
    /// distance from it and of its square (samples clamped to an hour).
    shift: i128,
    sum: i128,
    sum_sq: i128,
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
            shift: 0,
            sum: 0,
            sum_sq: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        let clamped = ns.min(MAX_NS);
        self.hist.saturating_record(clamped.max(1));
        if self.count == 0 {
            self.shift = i128::from(clamped);
        }
        self.count += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        let d = i128::from(clamped) - self.shift;
        self.sum = self.sum.saturating_add(d);
        self.sum_sq = self.sum_sq.saturating_add(d * d);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Add another's samples: the result is exactly the histogram and
    /// moments of both sets together.
    pub fn merge(&mut self, o: &Latency) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            self.shift = o.shift;
        }
        let _ = self.hist.add(&o.hist);
        // o's sums, moved to our shift: with k = o.shift - shift, each
        // distance grows by k, each square by 2kd + k^2
        let n = i128::from(o.count);
        let k = o.shift - self.shift;
        self.sum = self.sum.saturating_add(o.sum.saturating_add(n * k));
        self.sum_sq = self.sum_sq.saturating_add(
            o.sum_sq
                .saturating_add((2 * k).saturating_mul(o.sum))
                .saturating_add(n.saturating_mul(k * k)),
        );
        self.count += o.count;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let n = i128::from(self.count);
        let mean = self.shift as f64 + self.sum as f64 / n as f64;
        // sum of squares about the mean: sum_sq - sum^2/n, with the
        // division's remainder kept, so that no precision is lost
        let var = if self.count > 1 {
            let (q, r) = (self.sum / n, self.sum % n);
            let about_mean = self.sum_sq - q * self.sum - r * self.sum / n;
            (about_mean.max(0) as f64 / (n - 1) as f64).max(0.0)
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

    /// A day's worth and more: 2^35 (3.4 x 10^10) transactions of 40 and
    /// 60 us (doubled by exact merges): the mean, the standard deviation
    /// and the percentiles stay right, never NaN or negative (netperf 2.7
    /// #83; a histogram's counts cannot overflow either, as neper's did).
    #[test]
    fn a_day_of_transactions_and_more() {
        let mut l = Latency::new();
        l.record(40_000);
        l.record(60_000);
        for _ in 0..34 {
            let c = l.clone();
            l.merge(&c);
        }
        let s = l.summary().unwrap();
        assert_eq!(s.count, 1 << 35);
        assert_eq!(s.mean, 50_000.0);
        let n = s.count as f64;
        let want = 10_000.0 * (n / (n - 1.0)).sqrt();
        assert!((s.stddev - want).abs() < 1e-6, "{} {want}", s.stddev);
        let near = |a: u64, b: u64| (a as f64 - b as f64).abs() <= b as f64 * 0.002;
        assert!(near(s.p50, 40_000) && near(s.p90, 60_000), "{s:?}");
        // the same samples recorded one by one after a different first
        // sample merge to the same moments
        let mut a = Latency::new();
        for v in [7, 1_000_000, 50_000] {
            a.record(v);
        }
        let mut b = Latency::new();
        for v in [3_000_000_000, 12] {
            b.record(v);
        }
        a.merge(&b);
        let mut all = Latency::new();
        for v in [7, 1_000_000, 50_000, 3_000_000_000, 12] {
            all.record(v);
        }
        let (x, y) = (a.summary().unwrap(), all.summary().unwrap());
        assert_eq!(x.mean, y.mean);
        assert!((x.stddev - y.stddev).abs() < 1e-6);
    }

    /// Transactions faster than a microsecond are in the lowest bucket,
    /// and the percentiles say 0 us of them, never "missing" (netperf 2.7
    /// #50 skipped the 0 us bucket).
    #[test]
    fn sub_microsecond_latencies_are_percentiles_too() {
        let mut l = Latency::new();
        for v in [0, 300, 500, 700, 999] {
            l.record(v);
        }
        let s = l.summary().unwrap();
        assert_eq!(s.min, 0);
        assert!(s.p50 < 1000 && s.p999 < 1000 && s.p50 > 0, "{s:?}");
        assert_eq!(s.p50 / 1000, 0);
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
