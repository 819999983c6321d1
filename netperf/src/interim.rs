//! Interim results (`-D interval`): during a test, the rate over each
//! interval, in netperf 2.7's "demo" formats.
//!
//! netperf counts units in its data loop and reads the clock every so many
//! units (or on every call with a negative interval). We need neither: the
//! data loop publishes its counters with a relaxed store ([`engine::live`]),
//! and this reporter thread wakes on a fixed schedule, reads them and the
//! clock, and prints. A negative interval (netperf's "precise timing") is
//! therefore as precise as a positive one here.

use std::{
    io::Write,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::{
    cli::{Plan, SelectorStyle, Units},
    events::Events,
};
use engine::live::{Live, LiveSnapshot};

/// How interim lines look, by output style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// "Interim result: ..." (the classic tables and `-O`).
    Human,
    /// `-o`.
    Csv,
    /// `-k`: the NETPERF_INTERIM_RESULT[i] keys.
    KeyVal,
}

/// One interim sample, as `--json` keeps it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    pub index: u32,
    /// The rate over the interval, in `units` per second.
    pub rate: f64,
    pub units: String,
    /// Seconds the interval lasted.
    pub interval: f64,
    /// When it ended: seconds since the Unix epoch, to the millisecond.
    pub ending: f64,
    /// What our side moved over the interval (both ways added), and in how
    /// many calls (UDP: datagrams).
    pub bytes: u64,
    pub calls: u64,
    /// With `--flows`: each flow's rate over the interval.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<f64>,
    /// TCP_INFO of our first data connections at the interval's end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<proto::TcpSample>,
}

/// Where interim results go: any of printed on stdout as they happen (in
/// netperf's format), kept for the `--json` document and `--plot`, and
/// streamed (`--json-stream`).
#[derive(Clone, Debug, Default)]
pub struct Sink {
    pub print: bool,
    pub keep: Option<Arc<Mutex<Vec<Sample>>>>,
    pub stream: Option<Arc<Events>>,
    /// Our TCP data connections, whose TCP_INFO each kept or streamed
    /// sample carries (the first [`proto::test::MAX_TCP_PER_REPORT`]).
    pub watch: Arc<Mutex<Vec<socket2::Socket>>>,
}

impl Sink {
    /// What was kept.
    pub fn kept(&self) -> Vec<Sample> {
        self.keep
            .as_ref()
            .and_then(|v| v.lock().ok().map(|v| v.clone()))
            .unwrap_or_default()
    }
}

/// What the reporter needs to know about the test.
#[derive(Clone, Debug)]
pub struct Spec {
    pub interval: Duration,
    pub style: Style,
    pub sink: Sink,
    pub units: Units,
    /// Transactions (RR tests), or bytes.
    pub transactions: bool,
    /// Bytes per transaction, for an RR test shown in bytes or bits.
    pub bytes_per_transaction: f64,
}

impl Spec {
    /// Interim results are taken with `-D`, and every second (unprinted)
    /// for `--json-stream` and `--plot` without it.
    pub fn of(plan: &Plan, events: Option<&Arc<Events>>) -> Option<Spec> {
        let secs = plan.interim_interval()?;
        let style = match plan.selection.as_ref().map(|s| s.style) {
            Some(SelectorStyle::Csv) => Style::Csv,
            Some(SelectorStyle::KeyVal) => Style::KeyVal,
            _ => Style::Human,
        };
        Some(Spec {
            interval: Duration::from_secs_f64(secs.max(0.001)),
            style,
            sink: Sink {
                print: plan.interim.is_some() && !plan.json,
                keep: (plan.json || plan.plot.is_some() || plan.interim.is_some())
                    .then(Arc::default),
                stream: events.cloned(),
                ..Sink::default()
            },
            ..Spec::plain(plan)
        })
    }

    /// How a run's rate is counted when nothing is reported during it.
    pub fn plain(plan: &Plan) -> Spec {
        Spec {
            interval: Duration::from_secs(1),
            style: Style::Human,
            sink: Sink::default(),
            units: plan.units(),
            transactions: plan.test.is_rr(),
            bytes_per_transaction: f64::from(plan.request_size) + f64::from(plan.response_size),
        }
    }

    /// The amount done by a snapshot, in what the units count.
    pub(crate) fn amount(&self, s: &LiveSnapshot) -> f64 {
        match (self.transactions, self.units) {
            (true, Units::Transactions | Units::Usec) => s.transactions as f64,
            (true, _) => s.transactions as f64 * self.bytes_per_transaction,
            (false, _) => s.bytes as f64,
        }
    }

    /// One interim line (or block), netperf's exact format.
    pub fn format(&self, index: u32, rate: f64, interval_secs: f64, ending: SystemTime) -> String {
        let since = ending.duration_since(UNIX_EPOCH).unwrap_or_default();
        let (secs, ms) = (since.as_secs(), since.subsec_millis());
        let label = self.units.label();
        match self.style {
            Style::Human => format!(
                "Interim result: {rate:7.2} {label}/s over {interval_secs:.3} seconds ending at {secs}.{ms:03}\n"
            ),
            Style::Csv => format!("{rate:7.2},{label}/s,{interval_secs:.3},{secs}.{ms:03}\n"),
            Style::KeyVal => format!(
                "NETPERF_INTERIM_RESULT[{index}]={rate:.2}\n\
                 NETPERF_UNITS[{index}]={label}/s\n\
                 NETPERF_INTERVAL[{index}]={interval_secs:.3}\n\
                 NETPERF_ENDING[{index}]={secs}.{ms:03}\n"
            ),
        }
    }
}

/// The running reporter; dropping it prints the final, partial interval
/// (as netperf's `demo_interval_final`) and stops the thread.
#[derive(Debug)]
pub struct Reporter {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Reporter {
    /// Start reporting on `live`. `counter` numbers the key=value blocks
    /// across the iterations of a run, as netperf's does.
    pub fn start(
        spec: Spec,
        live: Arc<Live>,
        counter: Arc<AtomicU32>,
    ) -> std::io::Result<Reporter> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::Builder::new()
            .name("interim".into())
            .spawn(move || report(&spec, &live, &counter, &s))?;
        Ok(Reporter {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn report(spec: &Spec, live: &Live, counter: &AtomicU32, stop: &AtomicBool) {
    let start = Instant::now();
    let mut last_at = start;
    let (mut last, mut last_flows) = live.snapshots();
    let mut next = start + spec.interval;
    let emit = |from: Instant,
                at: Instant,
                (before, now): (&LiveSnapshot, &LiveSnapshot),
                (flows_before, flows_now): (&[LiveSnapshot], &[LiveSnapshot])| {
        let secs = at.duration_since(from).as_secs_f64();
        let amount = spec.amount(now) - spec.amount(before);
        let rate = spec.units.rate(amount, secs);
        let per_flow = |a: &LiveSnapshot, b: &LiveSnapshot| {
            spec.units.rate(spec.amount(b) - spec.amount(a), secs)
        };
        let i = counter.fetch_add(1, Ordering::Relaxed);
        let ending = SystemTime::now();
        if spec.sink.print {
            let line = spec.format(i, rate, secs, ending);
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
        if spec.sink.keep.is_none() && spec.sink.stream.is_none() {
            return;
        }
        let since = ending.duration_since(UNIX_EPOCH).unwrap_or_default();
        let sample = Sample {
            index: i,
            rate,
            units: format!("{}/s", spec.units.label()),
            interval: secs,
            ending: since.as_millis() as f64 / 1000.0,
            bytes: now.bytes.saturating_sub(before.bytes),
            calls: now.calls.saturating_sub(before.calls),
            flows: flows_before
                .iter()
                .zip(flows_now)
                .map(|(a, b)| per_flow(a, b))
                .collect(),
            tcp: spec
                .sink
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
        if let Some(events) = &spec.sink.stream
            && let Ok(v) = serde_json::to_value(&sample)
        {
            events.interim(v);
        }
        if let Some(v) = &spec.sink.keep
            && let Ok(mut v) = v.lock()
        {
            v.push(sample);
        }
    };
    loop {
        let now = Instant::now();
        if stop.load(Ordering::SeqCst) {
            let (snap, flows) = live.snapshots();
            if spec.amount(&snap) > spec.amount(&last) {
                emit(last_at, now, (&last, &snap), (&last_flows, &flows));
            }
            return;
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
    use std::time::Duration;

    fn spec(style: Style) -> Spec {
        Spec {
            interval: Duration::from_millis(200),
            style,
            sink: Sink {
                print: true,
                ..Sink::default()
            },
            units: Units::Bits('m'),
            transactions: false,
            bytes_per_transaction: 0.0,
        }
    }

    #[test]
    fn formats_match_netperf() {
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_042);
        assert_eq!(
            spec(Style::Human).format(0, 9412.5, 0.2003, at),
            "Interim result: 9412.50 10^6bits/s over 0.200 seconds ending at 1700000000.042\n"
        );
        assert_eq!(
            spec(Style::Csv).format(0, 12.0, 0.2, at),
            "  12.00,10^6bits/s,0.200,1700000000.042\n"
        );
        assert_eq!(
            spec(Style::KeyVal).format(3, 9412.5, 0.2, at),
            "NETPERF_INTERIM_RESULT[3]=9412.50\nNETPERF_UNITS[3]=10^6bits/s\nNETPERF_INTERVAL[3]=0.200\nNETPERF_ENDING[3]=1700000000.042\n"
        );
    }

    #[test]
    fn reporter_counts_intervals() {
        let live = Arc::new(Live::new());
        let counter = Arc::new(AtomicU32::new(0));
        let began = std::time::Instant::now();
        let r = Reporter::start(spec(Style::KeyVal), live.clone(), counter.clone()).unwrap();
        for i in 1..=55u64 {
            live.publish(i * 1000, i);
            thread::sleep(Duration::from_millis(10));
        }
        drop(r);
        // One report per full 200 ms interval, and a final partial one: count
        // against the time that really passed (a loaded machine sleeps long).
        let full = (began.elapsed().as_millis() / 200) as u32;
        let n = counter.load(Ordering::Relaxed);
        assert!(
            n >= 2 && n <= full + 1,
            "{n} reports in {full} full intervals"
        );
    }
}
