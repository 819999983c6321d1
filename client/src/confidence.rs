//! Confidence intervals: netperf's `-I level,width` and `-i max,min`.
//!
//! The test is repeated until the full width of the `level`% confidence
//! interval of the mean of every figure that must be confident (the result,
//! and the CPU utilisations that were measured unless `-r`) is at most
//! `width` of that mean, after at least `min` iterations and at most `max`.
//! The interval uses Student's t with n-1 degrees of freedom (Jain, *The Art
//! of Computer Systems Performance Analysis*, 13.2: mean +/- t[1-a/2; n-1]
//! s/sqrt(n)), computed with statrs, so any level from 50% to 99.9% works
//! (netperf 2.7 has a table for 95% and 99% only).

use anyhow::Result;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::plan::Confidence;

/// The two-sided quantile t[1 - (1 - level)/2; dof].
pub fn t_quantile(level_pct: f64, dof: u32) -> f64 {
    let p = 1.0 - (1.0 - level_pct / 100.0) / 2.0;
    match StudentsT::new(0.0, 1.0, f64::from(dof.max(1))) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::INFINITY,
    }
}

/// Mean and half-width of the confidence interval of the mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub mean: f64,
    pub half_width: f64,
}

impl Interval {
    /// The full width as a fraction of the mean (netperf's measure).
    pub fn relative_width(&self) -> f64 {
        if self.mean == 0.0 {
            if self.half_width == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            2.0 * self.half_width / self.mean.abs()
        }
    }
}

/// The interval of the mean of `values` at `level_pct`.
pub fn interval(values: &[f64], level_pct: f64) -> Interval {
    let n = values.len();
    let mean = if n == 0 {
        0.0
    } else {
        values.iter().sum::<f64>() / n as f64
    };
    if n < 2 {
        return Interval {
            mean,
            half_width: f64::INFINITY,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    Interval {
        mean,
        half_width: t_quantile(level_pct, (n - 1) as u32) * se,
    }
}

/// The figures of one iteration that may have to be confident.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    pub result: f64,
    pub local_cpu: Option<f64>,
    pub remote_cpu: Option<f64>,
}

/// Where an iteration loop stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    pub result: Interval,
    pub local_cpu: Option<Interval>,
    pub remote_cpu: Option<Interval>,
    /// Every figure that must be confident is.
    pub confident: bool,
}

/// Judge a series of samples against the requested confidence.
pub fn judge(samples: &[Sample], c: &Confidence) -> Verdict {
    let of = |f: fn(&Sample) -> Option<f64>| -> Option<Interval> {
        let v: Vec<f64> = samples.iter().filter_map(f).collect();
        (v.len() == samples.len() && !v.is_empty()).then(|| interval(&v, c.level))
    };
    let result = of(|s| Some(s.result)).unwrap_or(Interval {
        mean: 0.0,
        half_width: f64::INFINITY,
    });
    let local_cpu = of(|s| s.local_cpu);
    let remote_cpu = of(|s| s.remote_cpu);
    let ok = |i: &Interval| i.relative_width() <= c.width;
    let confident = samples.len() >= 2
        && ok(&result)
        && (c.result_only
            || (local_cpu.as_ref().is_none_or(ok) && remote_cpu.as_ref().is_none_or(ok)));
    Verdict {
        result,
        local_cpu,
        remote_cpu,
        confident,
    }
}

/// Run iterations until confident (after `min`) or `max` is reached.
/// `one(i)` runs iteration `i` (1-based) and returns its sample and
/// whatever else the caller keeps; `seen` is told of each as it finishes.
pub fn iterate<T>(
    c: &Confidence,
    mut one: impl FnMut(u32) -> Result<(Sample, T)>,
    mut seen: impl FnMut(u32, &Sample, &T),
) -> Result<(Vec<(Sample, T)>, Verdict)> {
    let mut done: Vec<(Sample, T)> = Vec::new();
    loop {
        let i = done.len() as u32 + 1;
        let (s, t) = one(i)?;
        seen(i, &s, &t);
        done.push((s, t));
        let samples: Vec<Sample> = done.iter().map(|(s, _)| *s).collect();
        let v = judge(&samples, c);
        let n = done.len() as u32;
        if n >= c.max_iterations || (n >= c.min_iterations && v.confident) {
            return Ok((done, v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(level: f64, width: f64, max: u32, min: u32) -> Confidence {
        Confidence {
            level,
            width,
            max_iterations: max,
            min_iterations: min,
            result_only: false,
        }
    }

    #[test]
    fn t_values_match_published_tables() {
        // t(0.995, 9) = 3.2498 and t(0.975, 4) = 2.7764 (any t table).
        assert!(
            (t_quantile(99.0, 9) - 3.2498).abs() < 1e-4,
            "{}",
            t_quantile(99.0, 9)
        );
        assert!(
            (t_quantile(95.0, 4) - 2.7764).abs() < 1e-4,
            "{}",
            t_quantile(95.0, 4)
        );
        // and netperf's own 95% table at 1 and 29 degrees of freedom
        assert!((t_quantile(95.0, 1) - 12.706).abs() < 1e-3);
        assert!((t_quantile(95.0, 29) - 2.045).abs() < 1e-3);
        // a level netperf cannot do
        assert!((t_quantile(90.0, 10) - 1.8125).abs() < 1e-4);
    }

    #[test]
    fn hand_computed_interval() {
        // 10, 12, 11, 13, 14: mean 12, s^2 = 2.5, s/sqrt(5) = 0.7071;
        // 95%: t(0.975, 4) = 2.7764 -> half-width 1.9632.
        let i = interval(&[10.0, 12.0, 11.0, 13.0, 14.0], 95.0);
        assert!((i.mean - 12.0).abs() < 1e-12);
        assert!((i.half_width - 1.96323).abs() < 1e-4, "{}", i.half_width);
        assert!((i.relative_width() - 2.0 * 1.96323 / 12.0).abs() < 1e-5);
    }

    fn stub(series: Vec<f64>) -> impl FnMut(u32) -> Result<(Sample, ())> {
        move |i| {
            Ok((
                Sample {
                    result: series[(i as usize - 1) % series.len()],
                    ..Sample::default()
                },
                (),
            ))
        }
    }

    #[test]
    fn a_constant_series_stops_at_min() {
        let (runs, v) = iterate(&conf(99.0, 0.05, 10, 3), stub(vec![100.0]), |_, _, _| {}).unwrap();
        assert_eq!(runs.len(), 3);
        assert!(v.confident);
        assert_eq!(v.result.mean, 100.0);
        assert_eq!(v.result.half_width, 0.0);
    }

    #[test]
    fn a_wide_series_runs_to_max_and_is_not_confident() {
        let (runs, v) = iterate(
            &conf(99.0, 0.05, 7, 3),
            stub(vec![50.0, 150.0]),
            |_, _, _| {},
        )
        .unwrap();
        assert_eq!(runs.len(), 7);
        assert!(!v.confident);
        assert!(v.result.relative_width() > 0.05);
    }

    #[test]
    fn a_series_that_settles_stops_when_confident() {
        let mut seen = Vec::new();
        let series = vec![
            100.0, 101.0, 99.0, 100.0, 100.5, 99.5, 100.0, 100.0, 100.0, 100.0,
        ];
        let (runs, v) = iterate(&conf(95.0, 0.02, 10, 3), stub(series), |i, s, _| {
            seen.push((i, s.result))
        })
        .unwrap();
        // n=3: +/-2.48 (4.97% full width); n=4: 2.60%; n=5: mean 100.1,
        // s = 0.742, t(0.975, 4) = 2.776: +/-0.921, 1.84% <= 2%.
        assert_eq!(runs.len(), 5);
        assert!(v.confident);
        assert!(
            (v.result.half_width - 0.9213).abs() < 1e-3,
            "{}",
            v.result.half_width
        );
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[..3], [(1, 100.0), (2, 101.0), (3, 99.0)]);
    }

    #[test]
    fn cpu_must_be_confident_too_unless_result_only() {
        let series = |i: u32| Sample {
            result: 100.0,
            local_cpu: Some(if i % 2 == 0 { 10.0 } else { 90.0 }),
            remote_cpu: None,
        };
        let (runs, v) = iterate(
            &conf(99.0, 0.05, 6, 3),
            |i| Ok((series(i), ())),
            |_, _, _| {},
        )
        .unwrap();
        assert_eq!(runs.len(), 6);
        assert!(!v.confident);
        let mut c = conf(99.0, 0.05, 6, 3);
        c.result_only = true;
        let (runs, v) = iterate(&c, |i| Ok((series(i), ())), |_, _, _| {}).unwrap();
        assert_eq!(runs.len(), 3);
        assert!(v.confident);
    }

    #[test]
    fn errors_stop_the_loop() {
        let r = iterate(
            &conf(99.0, 0.05, 10, 3),
            |i| {
                if i == 2 {
                    anyhow::bail!("boom")
                } else {
                    Ok((Sample::default(), ()))
                }
            },
            |_, _, _| {},
        );
        assert!(r.is_err());
    }
}
