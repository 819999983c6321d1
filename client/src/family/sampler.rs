//! Interim samples (`-D interval`, and every second for `--json-stream`
//! and `--plot`): during a data phase, the rate over each interval, told
//! to the run's observers and kept for the measurement.
//!
//! netperf counts units in its data loop and reads the clock every so many
//! units (or on every call with a negative interval). We need neither: the
//! data loop publishes its counters with a relaxed store ([`engine::live`]),
//! and this sampler thread wakes on a fixed schedule, reads them and the
//! clock, and tells. A negative interval (netperf's "precise timing") is
//! therefore as precise as a positive one here.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use engine::live::{Live, LiveSnapshot};

use crate::report::{Observer, Rate, Sample};

/// What a run samples, decided once.
#[derive(Clone, Debug)]
pub struct Sampling {
    pub interval: Duration,
    pub rate: Rate,
    /// Samples are kept in the measurement (`--json`, `--plot`, `-D`'s
    /// RTT selectors), with TCP_INFO of the watched connections.
    pub keep: bool,
}

/// Who a sampler tells, and the TCP data connections whose TCP_INFO each
/// kept sample carries (the first [`proto::test::MAX_TCP_PER_REPORT`]).
#[derive(Clone, Debug)]
pub struct Audience {
    pub observers: Vec<Arc<dyn Observer>>,
    pub watch: Arc<Mutex<Vec<socket2::Socket>>>,
}

/// The running sampler; [`Sampler::stop`] takes the final, partial
/// interval (as netperf's `demo_interval_final`) and the kept samples.
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    /// Start sampling `live`. `counter` numbers the samples across the
    /// iterations of a run, as netperf numbers its key=value blocks.
    pub fn start(
        spec: Sampling,
        live: Arc<Live>,
        counter: Arc<AtomicU32>,
        to: Audience,
    ) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::Builder::new()
            .name("interim".into())
            .spawn(move || sample(&spec, &live, &counter, &to, &s))?;
        Ok(Sampler {
            stop,
            thread: Some(thread),
        })
    }

    /// The phase is over: its last sample, and what was kept.
    pub fn stop(mut self) -> Vec<Sample> {
        self.halt().unwrap_or_default()
    }

    fn halt(&mut self) -> Option<Vec<Sample>> {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.take()?;
        t.thread().unpark();
        t.join().ok()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

fn sample(
    spec: &Sampling,
    live: &Live,
    counter: &AtomicU32,
    to: &Audience,
    stop: &AtomicBool,
) -> Vec<Sample> {
    let mut kept = Vec::new();
    let start = Instant::now();
    let mut last_at = start;
    let (mut last, mut last_flows) = live.snapshots();
    let mut next = start + spec.interval;
    let rate = spec.rate;
    let mut emit =
        |from: Instant,
         at: Instant,
         (before, now): (&LiveSnapshot, &LiveSnapshot),
         (flows_before, flows_now): (&[LiveSnapshot], &[LiveSnapshot])| {
            let secs = at.duration_since(from).as_secs_f64();
            let per = |a: &LiveSnapshot, b: &LiveSnapshot| {
                rate.units.rate(rate.amount(b) - rate.amount(a), secs)
            };
            let since = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let s = Sample {
                index: counter.fetch_add(1, Ordering::Relaxed),
                rate: per(before, now),
                units: format!("{}/s", rate.units.label()),
                interval: secs,
                ending: since.as_millis() as f64 / 1000.0,
                bytes: now.bytes.saturating_sub(before.bytes),
                calls: now.calls.saturating_sub(before.calls),
                flows: flows_before
                    .iter()
                    .zip(flows_now)
                    .map(|(a, b)| per(a, b))
                    .collect(),
                tcp: to
                    .watch
                    .lock()
                    .map(|w| {
                        w.iter()
                            .take(proto::test::MAX_TCP_PER_REPORT)
                            .filter_map(engine::sockopt::tcp_sample)
                            .collect()
                    })
                    .unwrap_or_default(),
            };
            for o in &to.observers {
                o.sample(&s);
            }
            if spec.keep {
                kept.push(s);
            }
        };
    loop {
        let now = Instant::now();
        if stop.load(Ordering::SeqCst) {
            let (snap, flows) = live.snapshots();
            if rate.amount(&snap) > rate.amount(&last) {
                emit(last_at, now, (&last, &snap), (&last_flows, &flows));
            }
            return kept;
        }
        if now >= next {
            let (snap, flows) = live.snapshots();
            emit(last_at, now, (&last, &snap), (&last_flows, &flows));
            last = snap;
            last_flows = flows;
            last_at = now;
            // Stay on the schedule; skip intervals missed while descheduled.
            while next <= now {
                next += spec.interval;
            }
            continue;
        }
        thread::park_timeout(next - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_counts_intervals() {
        let live = Arc::new(Live::new());
        let counter = Arc::new(AtomicU32::new(0));
        let spec = Sampling {
            interval: Duration::from_millis(200),
            rate: Rate {
                units: crate::plan::Units::Bits('m'),
                transactions: false,
                bytes_per_transaction: 0.0,
            },
            keep: true,
        };
        let to = Audience {
            observers: Vec::new(),
            watch: Arc::default(),
        };
        let began = std::time::Instant::now();
        let r = Sampler::start(spec, live.clone(), counter.clone(), to).unwrap();
        for i in 1..=55u64 {
            live.publish(i * 1000, i);
            thread::sleep(Duration::from_millis(10));
        }
        let kept = r.stop();
        // One sample per full 200 ms interval, and a final partial one: count
        // against the time that really passed (a loaded machine sleeps long).
        let full = (began.elapsed().as_millis() / 200) as u32;
        let n = counter.load(Ordering::Relaxed);
        assert!(
            n >= 2 && n <= full + 1,
            "{n} reports in {full} full intervals"
        );
        assert_eq!(kept.len() as u32, n);
    }
}
