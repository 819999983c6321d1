//! `-t RPM`: responsiveness under working conditions, after the IETF IPPM
//! draft (draft-ietf-ippm-responsiveness-08), on netperf's transport (no
//! HTTP, no TLS).
//!
//! - Idle: probes alone for [`IDLE`] (the idle latency and idle RPM).
//! - Loaded: bulk TCP flows load the path (TCP_STREAM up, TCP_MAERTS
//!   down, or both, `--flows` a direction, at most 16), each on a control
//!   connection of its own to the same netserver; after [`WARMUP`] the
//!   probes run for the test's length, and the load ends after them.
//! - A probe is a TCP_CRR transaction: a new connection (its handshake is
//!   the draft's `tcp_f`) and one small request/response on it (`http_f`),
//!   one at a time, at most one every [`PROBE_EVERY`]. The draft's self
//!   probes (a request on a loaded connection) become the load
//!   connections' own round-trip time, TCP_INFO's smoothed RTT sampled
//!   every [`SELF_EVERY`] at the sending end, as the draft allows where a
//!   loaded connection cannot carry a request (a netperf data connection
//!   carries one test's bytes one way).
//! - RPM as the draft computes it: each set's 95% single-sided trimmed
//!   mean (the slowest 5% left out), foreign RPM = 60000 / ((TM(tcp_f) +
//!   TM(http_f)) / 2), loaded RPM = 60000 / TM(self), RPM their mean.
//!   The stability rule is the draft's too: the RPM of each second's
//!   moving window of 4 intervals, stable when the last 4 vary by less
//!   than 5% (standard deviation over the latest); the confidence is High
//!   (stable), Medium (not stable) or Low (fewer than 4 intervals).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use engine::{clock, crr::Probe, live::Live};

use crate::{
    control::Control,
    family::{self, Context, crr::Probes},
    one_way,
    plan::{Length, Plan, UnderLoad},
    report::{
        LoadFigures, Measurement, RpmFigures, Scenario,
        one_way::Spans,
        scenario::{Confidence, SelfSample},
    },
    under_load::{self, unix_now},
};

/// The idle phase.
const IDLE: Duration = Duration::from_secs(2);
/// How long the load runs before the loaded probes begin.
const WARMUP: Duration = Duration::from_secs(2);
/// The most probes a second: one at a time, at most one every this.
const PROBE_EVERY: Duration = Duration::from_millis(50);
/// How often the load connections' TCP_INFO is read (their self probes).
const SELF_EVERY: f64 = 0.1;
/// The draft's moving average: intervals in it, their length, and the
/// standard deviation it calls stable.
const MAD: usize = 4;
const INTERVAL_NS: u64 = 1_000_000_000;
const SDT: f64 = 0.05;

/// The 95% single-sided trimmed mean: the mean of all but the largest 5%.
pub fn trimmed_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let keep = ((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len());
    let kept = v.get(..keep)?;
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Foreign RPM of a set of probes: 60000 over the mean of the two round
/// trips' trimmed means (milliseconds).
pub fn foreign_rpm(probes: &[Probe]) -> Option<f64> {
    let tcp: Vec<f64> = probes.iter().map(|p| ms(p.connect_ns)).collect();
    let req: Vec<f64> = probes.iter().map(|p| ms(p.response_ns)).collect();
    let rtt = (trimmed_mean(&tcp)? + trimmed_mean(&req)?) / 2.0;
    (rtt > 0.0).then(|| 60_000.0 / rtt)
}

/// Self RPM of the load connections' round-trip times (microseconds).
pub fn self_rpm(rtt_us: &[u32]) -> Option<f64> {
    let v: Vec<f64> = rtt_us
        .iter()
        .filter(|r| **r > 0)
        .map(|r| f64::from(*r) / 1000.0)
        .collect();
    let tm = trimmed_mean(&v)?;
    (tm > 0.0).then(|| 60_000.0 / tm)
}

/// The result of foreign and (if any) self RPM.
fn combined(foreign: f64, own: Option<f64>) -> f64 {
    match own {
        Some(s) => (foreign + s) / 2.0,
        None => foreign,
    }
}

/// The RPM of the probes and self samples in `[lo, hi)` (ns since the
/// loaded probes began).
fn rpm_within(
    loaded: &[Probe],
    own: &[SelfSample],
    lo: u64,
    hi: u64,
) -> Option<(f64, Option<f64>)> {
    let window: Vec<Probe> = loaded
        .iter()
        .filter(|p| (lo..hi).contains(&p.at_ns))
        .copied()
        .collect();
    let rtts: Vec<u32> = own
        .iter()
        .filter(|s| (lo..hi).contains(&s.at_ns))
        .map(|s| s.rtt_us)
        .collect();
    Some((foreign_rpm(&window)?, self_rpm(&rtts)))
}

/// The loaded phase's one-second intervals: how many.
fn intervals_of(loaded: &[Probe]) -> u64 {
    loaded
        .iter()
        .map(|p| p.at_ns / INTERVAL_NS + 1)
        .max()
        .unwrap_or(0)
}

/// The result as the draft takes it: foreign and self RPM over the last
/// [`MAD`] intervals of the loaded phase.
pub fn final_rpm(loaded: &[Probe], own: &[SelfSample]) -> Option<(f64, Option<f64>)> {
    let n = intervals_of(loaded);
    let lo = n.saturating_sub(MAD as u64) * INTERVAL_NS;
    rpm_within(loaded, own, lo, u64::MAX)
}

/// Each second's RPM over the moving window of the [`MAD`] intervals that
/// end with it (full windows only), and the draft's confidence in the
/// last: Low with fewer than [`MAD`] such windows.
pub fn stability(loaded: &[Probe], own: &[SelfSample]) -> (Vec<f64>, Confidence) {
    let n = intervals_of(loaded);
    let mut series = Vec::new();
    for k in (MAD as u64 - 1)..n {
        let lo = (k + 1 - MAD as u64) * INTERVAL_NS;
        let hi = (k + 1) * INTERVAL_NS;
        if let Some((f, s)) = rpm_within(loaded, own, lo, hi) {
            series.push(combined(f, s));
        }
    }
    let c = if series.len() < MAD {
        Confidence::Low
    } else if steady(&series) {
        Confidence::High
    } else {
        Confidence::Medium
    };
    (series, c)
}

/// The self samples read while the probes ran (`from` to `to`, Unix
/// seconds), in time order, timed from `from`.
fn while_probing(rtt_at: &[(f64, u32)], from: f64, to: f64) -> Vec<SelfSample> {
    let mut v: Vec<SelfSample> = rtt_at
        .iter()
        .filter(|(at, rtt)| *at >= from && *at <= to && *rtt > 0)
        .map(|(at, rtt)| SelfSample {
            at_ns: ((at - from) * 1e9) as u64,
            rtt_us: *rtt,
        })
        .collect();
    v.sort_by_key(|s| s.at_ns);
    v
}

/// One phase of probes: a paced TCP_CRR on `d` for `secs`.
fn probe_phase(
    plan: &Plan,
    secs: u64,
    d: &mut Control,
    ctx: &Context,
) -> Result<(Measurement, Vec<Probe>)> {
    let mut p = plan.clone();
    p.length = Length::Seconds(secs);
    let probes = Probes::new(PROBE_EVERY);
    let fam = Box::new(family::crr::Crr::probing(probes.clone()));
    let m = family::lifecycle::run_once(&p, d, ctx, fam)?;
    Ok((m, probes.take()))
}

/// What the load did while the probes ran.
struct LoadDone {
    /// Flows a direction (at the end of a ramp).
    flows: u32,
    up_mbps: Option<f64>,
    down_mbps: Option<f64>,
    /// The sending ends' TCP_INFO round trips read while the probes ran
    /// (self probes).
    own: Vec<SelfSample>,
    /// When the loaded probes ran (our monotonic clock, nanoseconds).
    span: (u64, u64),
    /// Each load flow's TCP_INFO readings, for its bloat.
    readings: Vec<under_load::Readings>,
}

type Probed = (Measurement, Vec<Probe>);

/// `--flows N`: N flows a direction at once, as one test each way, for
/// the warm-up and the probes; the goodput as the receivers counted it
/// while the probes ran (the load's `--warmup` and `--cooldown` keep its
/// slow start out).
fn fixed(
    plan: &Plan,
    load: UnderLoad,
    d: &mut Control,
    ctx: &Context,
    secs: u64,
) -> Result<(Probed, LoadDone)> {
    // measured while the probes run, where the netserver can
    let span = under_load::Span {
        before: WARMUP.as_secs(),
        during: secs,
        after: 1,
    };
    let plans = under_load::load_plans(plan, d, load, span, Some(SELF_EVERY));
    let (probed, loads) = under_load::beside(&plans, WARMUP, || {
        let (from, mono) = (unix_now(), clock::now_ns());
        probe_phase(plan, secs, d, ctx).map(|m| (m, from, unix_now(), (mono, clock::now_ns())))
    });
    let (probed, from, to, span) = probed?;
    let g = under_load::gather(loads).map_err(|e| anyhow!("-t RPM: {e:#}"))?;
    let done = LoadDone {
        flows: load.flows,
        up_mbps: g.up_mbps,
        down_mbps: g.down_mbps,
        own: while_probing(&g.rtt_at, from, to),
        span,
        readings: g.readings,
    };
    Ok((probed, done))
}

/// How often the load's bytes are read while the probes run.
const LOAD_EVERY: Duration = Duration::from_millis(100);

/// The load's bytes (up, down) at each [`LOAD_EVERY`] while `probing`.
fn load_while(lives: &[(bool, Arc<Live>)], probing: &AtomicBool) -> Vec<(Instant, u64, u64)> {
    let moved = |up: bool| -> u64 {
        lives
            .iter()
            .filter(|(u, _)| *u == up)
            .map(|(_, l)| l.snapshot().bytes)
            .sum()
    };
    let mut seen = Vec::new();
    loop {
        seen.push((Instant::now(), moved(true), moved(false)));
        if !probing.load(Ordering::Relaxed) {
            return seen;
        }
        thread::sleep(LOAD_EVERY);
    }
}

/// Mbit/s up and down from the readings of [`load_while`], over the time
/// the load moved bytes: from the first reading to the last one at which
/// its bytes still grew.
pub fn goodput_of(seen: &[(Instant, u64, u64)]) -> (f64, f64) {
    let (Some(first), Some(end)) = (
        seen.first(),
        seen.windows(2)
            .rev()
            .find(|w| w[1].1 + w[1].2 > w[0].1 + w[0].2)
            .map(|w| w[1]),
    ) else {
        return (0.0, 0.0);
    };
    let dt = end.0.duration_since(first.0).as_secs_f64().max(1e-9);
    let rate = |b: u64, b0: u64| b.saturating_sub(b0) as f64 * 8.0 / dt / 1e6;
    (rate(end.1, first.1), rate(end.2, first.2))
}

/// The longest the ramp may take before the probes begin anyway.
const RAMP_MAX: Duration = Duration::from_secs(10);

/// What the ramp's load flows read: round-trip times (Unix seconds,
/// microseconds) and each flow's TCP_INFO readings.
type LoadReadings = (Vec<(f64, u32)>, Vec<under_load::Readings>);

/// The ramp's load flows, ended: their round-trip times and TCP_INFO
/// readings (each flow a test of its own, numbered in start order, `dirs`
/// a round), or the first failure.
fn joined(
    loads: impl Iterator<Item = thread::Result<Result<under_load::Load>>>,
    dirs: usize,
) -> Result<LoadReadings> {
    let mut failed = None;
    let (mut rtt_at, mut readings) = (Vec::new(), Vec::new());
    for (n, load) in loads.enumerate() {
        match load {
            Ok(Ok(l)) => {
                rtt_at.extend(l.rtt_at);
                readings.extend(l.readings.into_iter().map(|mut r| {
                    r.flow = n / dirs.max(1);
                    r
                }));
            }
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(_) => failed = failed.or(Some(anyhow!("the load's thread failed"))),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok((rtt_at, readings)),
    }
}

/// The draft's ramp: a flow a direction, then another each second (each
/// flow a test of its own) until the goodput's moving average is stable
/// ([`saturated`]), the flows reach their limit or [`RAMP_MAX`] passes;
/// then the probes, until the load ends. Every flow ends at the same
/// moment, [`RAMP_MAX`] and `secs` after the first began (a netserver
/// sending TCP_MAERTS ends on its own timer), so the probes run `secs` or,
/// after a shorter ramp, longer. The goodput is what the load moved while
/// the probes ran.
fn ramped(
    plan: &Plan,
    load: UnderLoad,
    d: &mut Control,
    ctx: &Context,
    secs: u64,
) -> Result<(Probed, LoadDone)> {
    let dirs = under_load::directions(load);
    let span = RAMP_MAX.as_secs() + secs + 1;
    let began = Instant::now();
    thread::scope(|sc| {
        let mut flows = Vec::new();
        // a flow a direction, each a test whose length ends it with the rest
        let start = |flows: &mut Vec<(bool, Arc<Live>, _)>, d: &Control| -> Result<()> {
            let left = span.saturating_sub(began.elapsed().as_secs()).max(2);
            for (up, test) in &dirs {
                let span = under_load::Span {
                    before: 0,
                    during: left,
                    after: 0,
                };
                let lp = under_load::load_plan(
                    plan,
                    under_load::at(d),
                    *test,
                    1,
                    span,
                    Some(SELF_EVERY),
                );
                let c = Context::new(&lp, Vec::new(), Vec::new());
                let live = c.live.clone();
                flows.push((*up, live, sc.spawn(move || under_load::run_load_in(&lp, c))));
            }
            Ok(())
        };
        let moved = |flows: &Vec<(bool, Arc<Live>, _)>, up: bool| -> u64 {
            flows
                .iter()
                .filter(|(u, _, _)| *u == up)
                .map(|(_, l, _)| l.snapshot().bytes)
                .sum()
        };
        let ramp = (|| -> Result<u32> {
            start(&mut flows, d)?;
            let (mut at, mut was) = (began, 0);
            let mut goodput = Vec::new();
            let mut per_dir = 1;
            loop {
                thread::sleep(Duration::from_secs(1));
                let now = Instant::now();
                let b = moved(&flows, true) + moved(&flows, false);
                let dt = now.duration_since(at).as_secs_f64();
                goodput.push(b.saturating_sub(was) as f64 * 8.0 / dt);
                (at, was) = (now, b);
                if saturated(&goodput) || now.duration_since(began) >= RAMP_MAX {
                    return Ok(per_dir);
                }
                if per_dir < load.flows {
                    start(&mut flows, d)?;
                    per_dir += 1;
                }
            }
        })();
        // the probes, until the load ends; the load's goodput over the
        // time both ran (the probe test's setup and results can outlast
        // the load, whose bytes must not be divided by that)
        let probed = ramp.and_then(|per_dir| {
            let left = span.saturating_sub(began.elapsed().as_secs() + 1).max(secs);
            let lives: Vec<(bool, Arc<Live>)> =
                flows.iter().map(|(u, l, _)| (*u, l.clone())).collect();
            let probing = Arc::new(AtomicBool::new(true));
            let p = probing.clone();
            let watch = sc.spawn(move || load_while(&lives, &p));
            let (from, mono) = (unix_now(), clock::now_ns());
            let probed = probe_phase(plan, left, d, ctx);
            let (to, span) = (unix_now(), (mono, clock::now_ns()));
            probing.store(false, Ordering::Relaxed);
            let seen = watch.join().unwrap_or_default();
            let probed = probed?;
            let (up, down) = goodput_of(&seen);
            Ok((
                probed,
                (from, to),
                LoadDone {
                    flows: per_dir,
                    up_mbps: load.up.then_some(up),
                    down_mbps: load.down.then_some(down),
                    own: Vec::new(),
                    span,
                    readings: Vec::new(),
                },
            ))
        });
        let loads = flows.into_iter().map(|(_, _, h)| h.join());
        let joined = joined(loads, dirs.len());
        let (probed, (from, to), mut done) = probed?;
        let (rtt_at, readings) = joined.map_err(|e| anyhow!("-t RPM: {e:#}"))?;
        done.own = while_probing(&rtt_at, from, to);
        done.readings = readings;
        Ok((probed, done))
    })
}

/// The draft's saturation: the moving averages of the last [`MAD`]
/// intervals' goodput, [`MAD`] of them, vary by less than [`SDT`] of the
/// latest.
pub fn saturated(goodput: &[f64]) -> bool {
    if goodput.len() < 2 * MAD - 1 {
        return false;
    }
    let ma: Vec<f64> = goodput
        .windows(MAD)
        .map(|w| w.iter().sum::<f64>() / MAD as f64)
        .collect();
    steady(&ma)
}

/// The draft's stability: the last [`MAD`] values' standard deviation is
/// less than [`SDT`] of the latest.
fn steady(values: &[f64]) -> bool {
    let Some(tail) = values.len().checked_sub(MAD).and_then(|i| values.get(i..)) else {
        return false;
    };
    let mean = tail.iter().sum::<f64>() / MAD as f64;
    let sd = (tail.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / MAD as f64).sqrt();
    tail.last().is_some_and(|l| sd < SDT * l)
}

/// The idle probes' median handshake, microseconds: the path's idle
/// round trip.
fn idle_handshake_us(idle: &[Probe]) -> Option<u32> {
    let mut v: Vec<u64> = idle.iter().map(|p| p.connect_ns / 1000).collect();
    v.sort_unstable();
    v.get(v.len() / 2)
        .map(|u| u32::try_from(*u).unwrap_or(u32::MAX))
}

/// The test: idle probes, then loaded ones; the loaded measurement, with
/// the idle phase's, the load's and the RPM figures.
pub fn run(plan: &Plan, load: UnderLoad, d: &mut Control, ctx: &Context) -> Result<Measurement> {
    let Length::Seconds(secs) = plan.length else {
        return Err(anyhow!("-t RPM: a timed test (-l seconds)"));
    };
    if !d.caps().flows && !load.ramp && load.flows > 1 {
        return Err(anyhow!(
            "--flows {}: netperf 2.7's netserver runs one flow a test: leave --flows out (the ramp runs a test a flow) or give --flows 1",
            load.flows
        ));
    }
    let loaded_secs = if load.ramp {
        RAMP_MAX.as_secs() + secs + 1
    } else {
        WARMUP.as_secs() + secs + 1
    };
    let phases_secs = IDLE.as_secs() + loaded_secs;
    let (phases, probed) = one_way::beside(plan, one_way::at(d), phases_secs, || -> Result<_> {
        let idle_from = clock::now_ns();
        let (idle_m, idle) = probe_phase(plan, IDLE.as_secs(), d, ctx)?;
        let idle_span = (idle_from, clock::now_ns());
        let loaded = if load.ramp {
            ramped(plan, load, d, ctx, secs)?
        } else {
            fixed(plan, load, d, ctx, secs)?
        };
        Ok((idle_m, idle, idle_span, loaded))
    })?;
    let (idle_m, idle, idle_span, ((mut m, probes), done)) = phases?;
    m.one_way = probed.and_then(|p| {
        p.analyse(Spans {
            idle: Some(idle_span),
            loaded: Some(done.span),
        })
    });
    let figures = LoadFigures {
        idle: idle_m.latency,
        idle_rate: idle_m.local.transactions as f64 / idle_m.elapsed.max(1e-9),
        flows: done.flows,
        up_mbps: done.up_mbps,
        down_mbps: done.down_mbps,
        ecn: (None, None),
        // the path's idle round trip: the idle probes' handshakes
        bloat: under_load::Readings::bloat(&done.readings, idle_handshake_us(&idle)),
    };
    let own_samples = done.own;
    let idle_rpm = foreign_rpm(&idle).ok_or_else(|| anyhow!("-t RPM: no idle probe ended"))?;
    let (foreign, own) =
        final_rpm(&probes, &own_samples).ok_or_else(|| anyhow!("-t RPM: no loaded probe ended"))?;
    let (intervals, confidence) = stability(&probes, &own_samples);
    let final_from_ns = intervals_of(&probes).saturating_sub(MAD as u64) * INTERVAL_NS;
    m.interim.splice(0..0, idle_m.interim);
    m.scenario = Some(Scenario::Rpm(RpmFigures {
        load: figures,
        idle,
        loaded: probes,
        self_samples: own_samples,
        idle_rpm,
        foreign_rpm: foreign,
        self_rpm: own,
        rpm: combined(foreign, own),
        final_from_ns,
        intervals,
        confidence,
    }));
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::scenario::category;

    fn probe(at_s: f64, tcp_ms: f64, req_ms: f64) -> Probe {
        Probe {
            at_ns: (at_s * 1e9) as u64,
            connect_ns: (tcp_ms * 1e6) as u64,
            response_ns: (req_ms * 1e6) as u64,
        }
    }

    #[test]
    fn the_drafts_arithmetic() {
        // the slowest 5% are left out: of 20 values, the largest
        let mut v: Vec<f64> = (1..=19).map(f64::from).collect();
        v.push(1000.0);
        assert_eq!(trimmed_mean(&v), Some(10.0));
        // 20 ms and 40 ms round trips: 30 ms, 2000 RPM
        let p: Vec<Probe> = (0..10).map(|i| probe(i as f64 * 0.1, 20.0, 40.0)).collect();
        assert!((foreign_rpm(&p).unwrap() - 2000.0).abs() < 1e-6);
        // self probes of 100 ms: 600 RPM; the result their mean
        assert!((self_rpm(&[100_000; 5]).unwrap() - 600.0).abs() < 1e-6);
        assert!((combined(2000.0, Some(600.0)) - 1300.0).abs() < 1e-9);
        assert_eq!(category(250.0), "Poor");
        assert_eq!(category(1300.0), "Good");
    }

    #[test]
    fn the_result_is_the_last_four_seconds() {
        // slow at first, then 10 ms round trips: the result is the latter's
        let p: Vec<Probe> = (0..80)
            .map(|i| {
                let t = if i < 40 { 100.0 } else { 10.0 };
                probe(i as f64 * 0.1, t, t)
            })
            .collect();
        let own: Vec<SelfSample> = (0..80)
            .map(|i| SelfSample {
                at_ns: i * 100_000_000,
                rtt_us: if i < 40 { 100_000 } else { 20_000 },
            })
            .collect();
        let (f, s) = final_rpm(&p, &own).unwrap();
        assert!((f - 6000.0).abs() < 1e-6, "{f}");
        assert!((s.unwrap() - 3000.0).abs() < 1e-6);
        // self samples read outside the probes' time are left out
        let at = |s: f64| 1000.0 + s;
        let kept = while_probing(
            &[(at(-1.0), 5), (at(0.5), 7), (at(3.0), 9)],
            at(0.0),
            at(2.0),
        );
        assert_eq!(
            kept,
            [SelfSample {
                at_ns: 500_000_000,
                rtt_us: 7
            }]
        );
    }

    #[test]
    fn the_loads_goodput_is_over_the_time_it_moved() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // 1,000,000 bytes up in the first second, then nothing for three
        // (the load ended before the probes did)
        let seen = [
            (at(0), 0, 0),
            (at(500), 500_000, 0),
            (at(1000), 1_000_000, 0),
            (at(2000), 1_000_000, 0),
            (at(4000), 1_000_000, 0),
        ];
        let (up, down) = goodput_of(&seen);
        assert!((up - 8.0).abs() < 1e-9, "{up}");
        assert_eq!(down, 0.0);
        assert_eq!(goodput_of(&seen[..1]), (0.0, 0.0));
    }

    #[test]
    fn saturation_by_the_moving_average() {
        // 7 intervals at least (4 moving averages of 4)
        assert!(!saturated(&[100.0; 6]));
        assert!(saturated(&[100.0; 7]));
        // still growing: not saturated
        let growing: Vec<f64> = (1..=10).map(|i| f64::from(i) * 10.0).collect();
        assert!(!saturated(&growing));
        // grew, then flat
        let flat: Vec<f64> = [10.0, 50.0, 90.0].into_iter().chain([100.0; 7]).collect();
        assert!(saturated(&flat));
    }

    #[test]
    fn stability_by_the_moving_window() {
        let steady: Vec<Probe> = (0..90).map(|i| probe(i as f64 * 0.1, 10.0, 10.0)).collect();
        let (series, c) = stability(&steady, &[]);
        // 9 intervals: full windows end at the 4th to the 9th
        assert_eq!(series.len(), 6);
        assert_eq!(c, Confidence::High);
        // 6 intervals: 3 full windows, fewer than the draft asks
        let (series, c) = stability(&steady[..60], &[]);
        assert_eq!((series.len(), c), (3, Confidence::Low));
        // the round trips double every second: never stable
        let growing: Vec<Probe> = (0..90)
            .map(|i| {
                let t = 2f64.powi(i / 10);
                probe(i as f64 * 0.1, t, t)
            })
            .collect();
        assert_eq!(stability(&growing, &[]).1, Confidence::Medium);
        let short: Vec<Probe> = (0..20).map(|i| probe(i as f64 * 0.1, 10.0, 10.0)).collect();
        assert_eq!(stability(&short, &[]).1, Confidence::Low);
    }
}
