//! Queueing delay each way, from one-way delay probes ([`Stamps`]) and
//! no common clock. A probe's up delay `t2 - t1` mixes the path's delay,
//! its queue and the offset between the two clocks; its down delay
//! `t4 - t3` the same with the offset negated. The offset is a constant
//! plus a drift (the clocks' rates differ by some parts per million): a
//! line in time, whose slope is the same each way with opposite signs.
//!
//! The drift is the slope that sets the two directions' floors highest
//! together: `f(s) = min(up - s·t) + min(down + s·t)`, concave in `s`,
//! maximised by a ternary search over ±1,000 ppm. A queue only adds
//! delay, so the floor lines run under every probe, through the quiet
//! ones (the idle phase, and all of the direction that carries no load).
//! Where the floors allow a range of slopes within [`TOLERANCE_NS`] (a
//! tie), the one nearest no drift is taken. Each probe's queueing delay is then
//! its delay above its direction's floor line.
//!
//! The error bound stated with the figures is the idle phase's 90th
//! percentile of either direction: what the probes read where there is
//! no queue to see.

use proto::stamp::Stamps;

/// How far below its best the floors may sit for a slope to count as as
/// good: a tie, well under a clock read's cost (a wider one would let the
/// slope stray by it over the shortest quiet span).
pub const TOLERANCE_NS: f64 = 100.0;
/// The largest drift looked for: 1,000 ppm (crystal clocks are within
/// 100 ppm or so of each other).
const MAX_SLOPE: f64 = 1e-3;

/// Percentiles of one direction's queueing delay in one phase,
/// microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// Probes in the phase.
    pub count: usize,
}

impl Percentiles {
    /// Nearest-rank percentiles; `None` for no values.
    pub fn of(values: &mut [f64]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
            values
                .get(rank.clamp(1, values.len()) - 1)
                .copied()
                .unwrap_or_default()
        };
        Some(Percentiles {
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            count: values.len(),
        })
    }
}

/// One direction's queueing delay, idle and loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Way {
    pub idle: Option<Percentiles>,
    pub loaded: Option<Percentiles>,
}

/// Which phase a probe was sent in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Loaded,
    /// Neither: the load ramping up or down, or the test's own setup.
    Between,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Loaded => "loaded",
            Phase::Between => "between",
        }
    }
}

/// One probe's queueing delay each way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// When it was sent, seconds since the first probe.
    pub at: f64,
    pub up_us: f64,
    pub down_us: f64,
    pub phase: Phase,
}

/// The phases, as spans of the client's monotonic clock (nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spans {
    pub idle: Option<(u64, u64)>,
    pub loaded: Option<(u64, u64)>,
}

impl Spans {
    fn phase(&self, t: u64) -> Phase {
        let within = |s: Option<(u64, u64)>| s.is_some_and(|(a, b)| a <= t && t < b);
        if within(self.loaded) {
            Phase::Loaded
        } else if within(self.idle) {
            Phase::Idle
        } else {
            Phase::Between
        }
    }
}

/// Queueing delay each way over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OneWay {
    /// Toward the netserver, and back.
    pub up: Way,
    pub down: Way,
    /// The drift found between the two clocks, parts per million (the
    /// netserver's clock faster: positive).
    pub drift_ppm: f64,
    /// The figures' error bound, microseconds (see the module's notes);
    /// `None` without an idle phase.
    pub bound_us: Option<f64>,
    /// Probes sent, and answered.
    pub sent: u64,
    pub answered: u64,
    pub samples: Vec<Sample>,
    /// When the first probe was sent: seconds since the Unix epoch (to
    /// line the series up with others).
    pub started_unix: f64,
    /// `--observer`: what a second netserver's probes to the same
    /// netserver saw, by our phases.
    pub observer: Option<Observed>,
}

/// A second vantage point's queueing delay each way to the same
/// netserver, over our phases.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// The observer, as named.
    pub host: String,
    pub up: Way,
    pub down: Way,
}

impl Observed {
    /// Another prober's samples, `(Unix seconds, up us, down us)`, by our
    /// phases (`spans`, our monotonic clock), lined up through `anchor`:
    /// one reading of both clocks, (Unix seconds, monotonic ns).
    pub fn by_our_phases(
        host: &str,
        samples: &[(f64, f64, f64)],
        spans: Spans,
        anchor: (f64, u64),
    ) -> Observed {
        let phase_of = |unix: f64| {
            let mono = anchor.1 as f64 - (anchor.0 - unix) * 1e9;
            spans.phase(mono.max(0.0) as u64)
        };
        let way = |phase: Phase, up: bool| {
            let mut v: Vec<f64> = samples
                .iter()
                .filter(|s| phase_of(s.0) == phase)
                .map(|s| if up { s.1 } else { s.2 })
                .collect();
            Percentiles::of(&mut v)
        };
        Observed {
            host: host.to_string(),
            up: Way {
                idle: way(Phase::Idle, true),
                loaded: way(Phase::Loaded, true),
            },
            down: Way {
                idle: way(Phase::Idle, false),
                loaded: way(Phase::Loaded, false),
            },
        }
    }
}

/// `f(s)`: how high the two floor lines of slope `s` (and `-s`) sit
/// together, and each one's height at time 0.
fn floors(points: &[(f64, f64, f64)], s: f64) -> (f64, f64, f64) {
    let (mut up, mut down) = (f64::INFINITY, f64::INFINITY);
    for &(x, u, d) in points {
        up = up.min(u - s * x);
        down = down.min(d + s * x);
    }
    (up + down, up, down)
}

/// The drift (nanoseconds a second of the run) that sets the floors
/// highest, nearest 0 among those within [`TOLERANCE_NS`] of the best.
fn drift(points: &[(f64, f64, f64)]) -> f64 {
    let f = |s: f64| floors(points, s).0;
    let (mut lo, mut hi) = (-MAX_SLOPE * 1e9, MAX_SLOPE * 1e9);
    for _ in 0..200 {
        let (a, b) = (lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0);
        if f(a) < f(b) {
            lo = a;
        } else {
            hi = b;
        }
    }
    let best_s = (lo + hi) / 2.0;
    let good = f(best_s) - TOLERANCE_NS;
    if f(0.0) >= good {
        return 0.0;
    }
    // the good slopes are an interval around best_s; its end nearest 0
    let (mut inside, mut outside) = (best_s, 0.0);
    for _ in 0..100 {
        let mid = (inside + outside) / 2.0;
        if f(mid) >= good {
            inside = mid;
        } else {
            outside = mid;
        }
    }
    inside
}

/// The queueing delay each way of `stamps`, by phase; `None` without
/// answers. `sent` is how many probes went out.
pub fn analyse(stamps: &[Stamps], spans: Spans, sent: u64) -> Option<OneWay> {
    let first = stamps.iter().map(|s| s.t1).min()?;
    let base_up = stamps.first().map(|s| s.t2.wrapping_sub(s.t1) as i64)?;
    let base_down = stamps.first().map(|s| s.t4.wrapping_sub(s.t3) as i64)?;
    // seconds since the first probe; each way's delay, nanoseconds, less
    // the first probe's (the clocks' offset is any number)
    let points: Vec<(f64, f64, f64)> = stamps
        .iter()
        .map(|s| {
            let x = (s.t1 - first) as f64 / 1e9;
            let up = (s.t2.wrapping_sub(s.t1) as i64).wrapping_sub(base_up) as f64;
            let down = (s.t4.wrapping_sub(s.t3) as i64).wrapping_sub(base_down) as f64;
            (x, up, down)
        })
        .collect();
    let s = drift(&points);
    let (_, up0, down0) = floors(&points, s);
    let samples: Vec<Sample> = stamps
        .iter()
        .zip(&points)
        .map(|(st, &(x, u, d))| Sample {
            at: x,
            up_us: (u - s * x - up0) / 1e3,
            down_us: (d + s * x - down0) / 1e3,
            phase: spans.phase(st.t1),
        })
        .collect();
    let way = |phase: Phase, up: bool| {
        let mut v: Vec<f64> = samples
            .iter()
            .filter(|p| p.phase == phase)
            .map(|p| if up { p.up_us } else { p.down_us })
            .collect();
        Percentiles::of(&mut v)
    };
    let up = Way {
        idle: way(Phase::Idle, true),
        loaded: way(Phase::Loaded, true),
    };
    let down = Way {
        idle: way(Phase::Idle, false),
        loaded: way(Phase::Loaded, false),
    };
    let bound_us = match (up.idle, down.idle) {
        (Some(u), Some(d)) => Some(u.p90.max(d.p90)),
        _ => None,
    };
    Some(OneWay {
        up,
        down,
        drift_ppm: s / 1e3 + 0.0,
        bound_us,
        sent,
        answered: stamps.len() as u64,
        samples,
        started_unix: 0.0,
        observer: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probes every 10 ms for `secs`: the path 200 us each way, the
    /// netserver's clock `offset` ahead and `ppm` fast, and each way's
    /// queue at time x (seconds) given by `q_up` and `q_down` (us).
    fn probes(
        secs: f64,
        offset: u64,
        ppm: f64,
        q_up: impl Fn(f64) -> f64,
        q_down: impl Fn(f64) -> f64,
    ) -> Vec<Stamps> {
        let n = (secs * 100.0) as u64;
        (0..n)
            .map(|i| {
                let x = i as f64 / 100.0;
                // a little scatter, so that no two probes are alike
                let jitter = ((i * 7919) % 13) as f64 * 1_000.0;
                let t1 = 5_000_000_000 + i * 10_000_000;
                let server = |t: f64| offset + (t * (1.0 + ppm * 1e-6)) as u64;
                let arrive = t1 as f64 + 200_000.0 + q_up(x) * 1e3 + jitter;
                let t2 = server(arrive);
                let t3 = server(arrive + 20_000.0);
                let t4 = (arrive + 20_000.0 + 200_000.0 + q_down(x) * 1e3 + jitter) as u64;
                Stamps {
                    seq: i + 1,
                    t1,
                    t2,
                    t3,
                    t4,
                }
            })
            .collect()
    }

    fn spans(idle: (f64, f64), loaded: (f64, f64)) -> Spans {
        let ns = |s: f64| 5_000_000_000 + (s * 1e9) as u64;
        Spans {
            idle: Some((ns(idle.0), ns(idle.1))),
            loaded: Some((ns(loaded.0), ns(loaded.1))),
        }
    }

    #[test]
    fn a_queue_one_way_is_seen_that_way_only() {
        let queue = |x: f64| if x >= 3.0 { 100_000.0 } else { 0.0 };
        for (up_queued, offset) in [(true, 0), (false, 86_400_000_000_000)] {
            let st = if up_queued {
                probes(10.0, offset, 0.0, queue, |_| 0.0)
            } else {
                probes(10.0, offset, 0.0, |_| 0.0, queue)
            };
            let w = analyse(&st, spans((0.0, 2.0), (3.0, 10.0)), st.len() as u64).unwrap();
            let (q, other) = if up_queued {
                (w.up, w.down)
            } else {
                (w.down, w.up)
            };
            let loaded = q.loaded.unwrap();
            assert!((loaded.p50 - 100_000.0).abs() < 20.0, "{w:?}");
            assert!(other.loaded.unwrap().p99 < 20.0, "{:?}", other);
            assert!(q.idle.unwrap().p99 < 20.0);
            assert!(w.bound_us.unwrap() < 20.0);
        }
    }

    #[test]
    fn a_drift_between_the_clocks_is_removed() {
        // 100 ppm over 30 s is 3 ms; the up queue ramps and stays, the
        // down way is quiet
        let q_up = |x: f64| {
            if x >= 5.0 {
                50_000.0 + 1_000.0 * (x - 5.0)
            } else {
                0.0
            }
        };
        for ppm in [100.0, -100.0, 0.0] {
            let st = probes(30.0, 123, ppm, q_up, |_| 0.0);
            let w = analyse(&st, spans((0.0, 4.0), (5.0, 30.0)), 3000).unwrap();
            assert!((w.drift_ppm - ppm).abs() < 2.0, "{ppm}: {}", w.drift_ppm);
            for s in &w.samples {
                let truth = q_up(s.at) / 1.0;
                assert!((s.up_us - truth).abs() < 100.0, "{ppm} {s:?}");
                assert!(s.down_us.abs() < 100.0, "{ppm} {s:?}");
            }
        }
    }

    #[test]
    fn both_ways_loaded_still_finds_the_drift_from_the_quiet_ends() {
        let q = |x: f64| {
            if (4.0..26.0).contains(&x) {
                30_000.0
            } else {
                0.0
            }
        };
        let st = probes(30.0, 0, 80.0, q, q);
        let w = analyse(&st, spans((0.0, 4.0), (4.0, 26.0)), 3000).unwrap();
        assert!((w.drift_ppm - 80.0).abs() < 5.0, "{}", w.drift_ppm);
        let up = w.up.loaded.unwrap();
        assert!((up.p50 - 30_000.0).abs() < 200.0, "{up:?}");
    }

    #[test]
    fn an_observers_samples_fall_in_our_phases_by_the_wall_clock() {
        // our monotonic clock read 5 s at Unix 1000 s: idle 5-7 s, loaded
        // 8-10 s, that is Unix 1000-1002 and 1003-1005
        let spans = Spans {
            idle: Some((5_000_000_000, 7_000_000_000)),
            loaded: Some((8_000_000_000, 10_000_000_000)),
        };
        let samples: Vec<(f64, f64, f64)> = (0..60)
            .map(|i| {
                let at = 1000.0 + f64::from(i) * 0.1;
                let up = if at >= 1003.0 { 90_000.0 } else { 10.0 };
                (at, up, 5.0)
            })
            .collect();
        let o = Observed::by_our_phases("o", &samples, spans, (1000.0, 5_000_000_000));
        assert_eq!(o.up.idle.unwrap().p99, 10.0);
        assert_eq!(o.up.loaded.unwrap().p50, 90_000.0);
        assert_eq!(o.up.loaded.unwrap().count, 20);
        assert_eq!(o.down.loaded.unwrap().p99, 5.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!((p.p50, p.p90, p.p99, p.count), (50.0, 90.0, 99.0, 100));
        assert_eq!(Percentiles::of(&mut []), None);
    }
}
