//! Progress on a terminal: while a run longer than a few seconds goes on,
//! one line on stderr that updates in place (which iteration, how long of
//! how long, the rate over the last half second). Never when stderr is not
//! a terminal, never on stdout, and never beside interim lines printed on
//! the same terminal.

use std::{
    io::{IsTerminal, Write},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use engine::live::Live;

use crate::{
    plan::{Length, Plan},
    report::{Observer, Rate},
};

/// A run is this long before its progress shows.
const QUIET_FOR: Duration = Duration::from_secs(2);
/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(500);

/// What the progress line says of the run, decided once.
#[derive(Clone, Debug)]
pub struct Spec {
    test: &'static str,
    /// `-l` seconds; `None` for a count.
    seconds: Option<f64>,
    /// `-i max,min`: the most iterations.
    max_iterations: Option<u32>,
    /// The iteration running now (from 1).
    pub iteration: Arc<AtomicU32>,
    /// How the rate is counted and shown, as the interim results do.
    rate: Rate,
}

impl Spec {
    /// A progress line for this run, if stderr is a terminal and the run
    /// is long enough to want one.
    pub fn of(plan: &Plan) -> Option<Spec> {
        if !std::io::stderr().is_terminal() || plan.json_stream {
            return None;
        }
        // interim lines on a terminal stdout would be torn by ours
        if plan.interim.is_some() && !plan.json && std::io::stdout().is_terminal() {
            return None;
        }
        let seconds = match plan.length {
            Length::Seconds(s) => Some(s as f64),
            Length::Count(_) => None,
        };
        let max_iterations = plan.confidence.map(|c| c.max_iterations);
        if seconds.is_some_and(|s| s < 3.0) && max_iterations.is_none() {
            return None;
        }
        Some(Spec {
            test: plan.name.name(),
            seconds,
            max_iterations,
            iteration: Arc::new(AtomicU32::new(1)),
            rate: crate::family::context::rate(plan),
        })
    }

    /// The line, as of `elapsed` into the data phase at `rate`.
    pub fn line(&self, elapsed: f64, rate: f64) -> String {
        let mut s = format!("netperf: {}", self.test);
        if let Some(max) = self.max_iterations {
            s.push_str(&format!(
                ", iteration {} of up to {max}",
                self.iteration.load(Ordering::Relaxed)
            ));
        }
        match self.seconds {
            Some(total) => s.push_str(&format!(", {elapsed:.0} s of {total:.0} s")),
            None => s.push_str(&format!(", {elapsed:.0} s")),
        }
        s.push_str(&format!(", {rate:.2} {}/s", self.rate.units.label()));
        s
    }
}

/// The progress line of a run: drawn during each data phase.
#[derive(Debug)]
pub struct Progress {
    spec: Spec,
    drawing: Mutex<Option<Drawing>>,
}

impl Progress {
    pub fn new(spec: Spec) -> Progress {
        Progress {
            spec,
            drawing: Mutex::new(None),
        }
    }
}

impl Observer for Progress {
    fn iteration_begins(&self, i: u32) {
        self.spec.iteration.store(i, Ordering::Relaxed);
    }

    fn phase_begins(&self, live: &Arc<Live>) {
        let (spec, live) = (self.spec.clone(), live.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&spec, &live, &s))
            .ok();
        if let Ok(mut d) = self.drawing.lock() {
            *d = Some(Drawing { stop, thread });
        }
    }

    fn phase_ends(&self) {
        if let Ok(mut d) = self.drawing.lock() {
            d.take();
        }
    }
}

/// The line being drawn during one data phase; dropping it clears it.
#[derive(Debug)]
struct Drawing {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for Drawing {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn draw(spec: &Spec, live: &Live, stop: &AtomicBool) {
    let start = Instant::now();
    let mut last = (start, spec.rate.amount(&live.snapshot()));
    let mut drawn = false;
    while !stop.load(Ordering::SeqCst) {
        thread::park_timeout(EVERY);
        let now = Instant::now();
        let amount = spec.rate.amount(&live.snapshot());
        let secs = now.duration_since(last.0).as_secs_f64();
        if now.duration_since(start) >= QUIET_FOR && secs > 0.0 {
            let rate = spec.rate.units.rate(amount - last.1, secs);
            let line = spec.line(now.duration_since(start).as_secs_f64(), rate);
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K{line}");
            let _ = err.flush();
            drawn = true;
        }
        last = (now, amount);
    }
    if drawn {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K");
        let _ = err.flush();
    }
}
