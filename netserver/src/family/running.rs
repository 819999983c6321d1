//! A test once its sockets are ready: its memory reserved, its worker
//! thread running the family's job, and the handle the session holds.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread,
    time::Instant,
};

use engine::sockopt;
use proto::{ClientDone, ErrorCode, ErrorMsg, Grant, SideResults, TestSpec};

use super::{
    ctl::TestCtl,
    setup::{Job, Prepared},
};
use crate::{admission::Refusal, config::Config};

/// Reserve `need` bytes of buffers for a test: within the per-session cap
/// and the daemon's budget, or refused naming the limit.
fn reserve(need: u64, cfg: &Config) -> Result<crate::admission::Reservation, ErrorMsg> {
    let cap = cfg.limits.memory_per_session;
    if need > cap {
        return Err(Refusal::BufferCap { need, cap }.told(&cfg.metrics));
    }
    let budget = cfg.memory_budget.limit();
    cfg.memory_budget.reserve(need).map_err(|free| {
        if need > budget {
            Refusal::BufferBudget { need, budget }
        } else {
            Refusal::BufferBusy { need, free, budget }
        }
        .told(&cfg.metrics)
    })
}

/// A test whose data sockets are set up and whose worker thread runs.
#[derive(Debug)]
pub struct RunningTest {
    pub spec: TestSpec,
    pub grant: Grant,
    ctl: Arc<TestCtl>,
    rx: mpsc::Receiver<Result<SideResults, ErrorMsg>>,
    /// Its outcome was taken (a dialect may keep the test until its
    /// results are exchanged: iperf3's).
    taken: std::cell::Cell<bool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RunningTest {
    pub fn client_done(&self, done: ClientDone) {
        self.ctl.set_client_done(done);
    }

    /// End the test now, as its natural end would (see [`TestCtl::end_now`]).
    pub fn end_now(&self) {
        self.ctl.end_now();
    }

    /// The interim reports the test took (`TestSpec::interim_ms`).
    pub fn take_interims(&self) -> Vec<proto::InterimReport> {
        self.ctl.take_interims()
    }

    /// The worker's outcome, if it has finished (once).
    pub fn try_result(&self) -> Option<Result<SideResults, ErrorMsg>> {
        if self.taken.get() {
            return None;
        }
        self.taken.set(true);
        match self.rx.try_recv() {
            Ok(r) => Some(r),
            Err(mpsc::TryRecvError::Empty) => {
                self.taken.set(false);
                None
            }
            Err(mpsc::TryRecvError::Disconnected) => Some(Err(ErrorMsg::new(
                ErrorCode::TestFailed,
                "the test's worker thread ended without a result",
            ))),
        }
    }

    /// Abort: the worker is told to stop and ends on its own, soon (its
    /// sockets are shut down under it). Nothing waits for it: the control
    /// loop serves every other session meanwhile. The test's share of the
    /// memory budget goes back when the worker ends.
    pub fn abort(mut self) {
        self.ctl.abort();
        self.thread = None;
    }

    /// Reap a worker that has finished; one still ending its last steps
    /// (after its result was sent) is left to end on its own.
    pub fn join(&mut self) {
        if let Some(t) = self.thread.take()
            && t.is_finished()
        {
            let _ = t.join();
        }
    }
}

impl Drop for RunningTest {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.ctl.abort();
        }
    }
}

/// What a test holds until its worker ends, reserved before its sockets
/// were opened: its place among the workers and its descriptors.
/// (Both are given back when dropped: nothing reads them.)
pub(crate) struct Held {
    pub _slot: crate::admission::WorkerSlot,
    pub _fds: crate::admission::FdReservation,
    /// Its sockets' share of the kernel's memory.
    pub _sockets: crate::admission::Reservation,
}

/// What a worker holds until it ends, and whom it tells then.
struct WorkerEnd {
    held: Option<(Held, crate::admission::Reservation)>,
    on_done: Box<dyn Fn() + Send>,
}

impl Drop for WorkerEnd {
    fn drop(&mut self) {
        self.held = None;
        (self.on_done)();
    }
}

/// Reserve the test's buffer memory and start its worker thread, which
/// runs the prepared job.
pub(crate) fn launch(
    spec: &TestSpec,
    prepared: Prepared,
    cfg: &Config,
    held: Held,
    on_done: Box<dyn Fn() + Send>,
) -> Result<RunningTest, ErrorMsg> {
    let Prepared { grant, job, memory } = prepared;
    let memory = reserve(memory, cfg)?;
    let ctl = Arc::new(TestCtl::default());
    let (tx, rx) = mpsc::channel();
    let c = ctl.clone();
    let cpu = spec.server.cpu_bind;
    let measure = spec.measure_cpu.then_some(cfg.num_cpus);
    let log = cfg.logger.clone();
    let interval = spec
        .interim_ms
        .map(|ms| std::time::Duration::from_millis(u64::from(ms)));
    let thread = thread::Builder::new()
        .name(format!("test {}", spec.kind))
        .spawn(move || {
            // the session is told when the worker ends, a panic included;
            // its place among the workers and its share of the memory
            // budget are given back first
            let _end = WorkerEnd {
                held: Some((held, memory)),
                on_done,
            };
            let start = measure.and_then(|_| engine::cpu::snapshot());
            // the CPU time of this test's own threads (this one and those
            // it starts), whatever else the netserver runs
            let account = std::sync::Arc::new(engine::cpu::Account::default());
            let entered = engine::cpu::Account::enter(&account);
            // a CPU this host cannot bind to leaves the test unbound, as
            // netserver 2.7 does
            if let Some(Err(e)) = cpu.map(sockopt::pin_current_thread) {
                log.warn_limited(
                    "cpu-bind",
                    &format!("the server's CPU (-T; iperf3's -A N,M): {e}: the test runs unbound"),
                );
            }
            let r = run_sampled(&c, interval, job);
            drop(entered);
            // -C: our utilisation over the test, from /proc/stat.
            let r = r.map(|mut res| {
                res.foreign_connections = c.foreign();
                res.own_cpu = account.used();
                // (read /proc/stat only when asked to)
                if let (Some(n), Some(a)) = (measure, start)
                    && let Some(b) = engine::cpu::snapshot()
                {
                    res.cpu = Some(engine::cpu::utilisation(&a, &b, n));
                }
                res
            });
            let _ = tx.send(r);
        })
        .map_err(|e| {
            ErrorMsg::new(
                ErrorCode::Resource,
                format!("netserver cannot start a test thread: {e}"),
            )
        })?;
    Ok(RunningTest {
        spec: spec.clone(),
        grant,
        ctl,
        rx,
        taken: std::cell::Cell::new(false),
        thread: Some(thread),
    })
}

/// Run the job, taking an interim report every `interval` meanwhile (on a
/// thread of its own, which the job never waits for), and a last one at
/// its end.
fn run_sampled(
    ctl: &TestCtl,
    interval: Option<std::time::Duration>,
    job: Job,
) -> Result<SideResults, ErrorMsg> {
    let Some(every) = interval else {
        return job(ctl);
    };
    let done = AtomicBool::new(false);
    // (the sampler's CPU time counts toward the test's, as its flows' do)
    let account = engine::cpu::carried();
    thread::scope(|sc| {
        let sampler = thread::Builder::new()
            .name("interim".into())
            .spawn_scoped(sc, || {
                let _in = account.as_ref().map(engine::cpu::Account::enter);
                let began = Instant::now();
                let mut next = began + every;
                while !done.load(Ordering::Acquire) {
                    let now = Instant::now();
                    if now >= next {
                        ctl.sample(began);
                        while next <= now {
                            next += every;
                        }
                        continue;
                    }
                    thread::park_timeout(next - now);
                }
                ctl.sample(began);
            });
        let r = job(ctl);
        done.store(true, Ordering::Release);
        if let Ok(h) = sampler {
            h.thread().unpark();
            let _ = h.join();
        }
        r
    })
}
