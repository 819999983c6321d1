//! What a run carries besides the plan ([`Context`]), the data phase in
//! progress ([`Phase`]), and the small rules every family shares.

use std::{
    sync::{Arc, Mutex, atomic::AtomicU32},
    time::Duration,
};

use anyhow::Result;
use engine::{
    cpu,
    live::Live,
    sockopt,
    timer::{StopFlag, Timer},
};
use proto::CpuStats;

use super::sampler::{Audience, Sampler, Sampling};
use crate::{
    plan::{Length, Plan},
    report::{Observer, Rate, Sample},
};

/// What a test run needs besides the plan.
#[derive(Debug, Default)]
pub struct Context {
    /// Contents of the `-F` fill file, or empty for netperf's pattern.
    pub fill: Vec<u8>,
    /// Counters the data loop publishes, for interim samples.
    pub live: Arc<Live>,
    /// What is sampled during the test (`-D`, `--json-stream`, `--plot`).
    pub sampling: Option<Sampling>,
    /// Numbers interim samples across iterations.
    pub interim_counter: Arc<AtomicU32>,
    /// Who is told of the run as it goes.
    pub observers: Vec<Arc<dyn Observer>>,
    /// Our TCP data connections of this iteration, whose TCP_INFO the
    /// kept samples carry.
    watch: Arc<Mutex<Vec<socket2::Socket>>>,
    /// Time each call of a stream test (netperf 2.7 does when a latency
    /// selector is asked for, or with `-j`).
    pub stats: bool,
    /// Time each transaction of a request/response test: only when an
    /// output shows latency (see `run`), as netperf 2.7 keeps its
    /// statistics only when asked; `--no-latency` never.
    pub timing: bool,
    /// When the data phase of the current iteration began.
    began: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How a plan's rate is counted (interim samples, the progress line).
pub fn rate(plan: &Plan) -> Rate {
    Rate {
        units: plan.units(),
        transactions: plan.test.is_rr(),
        bytes_per_transaction: f64::from(plan.request_size) + f64::from(plan.response_size),
    }
}

impl Context {
    /// A run's context, telling `observers`. Interim samples are taken
    /// with `-D`, and every second (unprinted) for `--json-stream` and
    /// `--plot` without it.
    pub fn new(plan: &Plan, fill: Vec<u8>, observers: Vec<Arc<dyn Observer>>) -> Context {
        Context {
            fill,
            live: Arc::new(if plan.flows > 1 {
                Live::with_flows(plan.flows as usize)
            } else {
                Live::new()
            }),
            sampling: plan.interim_interval().map(|secs| Sampling {
                interval: Duration::from_secs_f64(secs.max(0.001)),
                rate: rate(plan),
                keep: plan.json || plan.plot.is_some() || plan.interim.is_some(),
            }),
            observers,
            stats: plan.histogram,
            timing: plan.latency,
            ..Context::default()
        }
    }

    /// What our own counters saw of a data phase that began, for an error
    /// that cost the netserver's figures: no result is lost without a word.
    pub(crate) fn own_figures(&self, plan: &Plan) -> Option<String> {
        let began = (*self.began.lock().ok()?)?;
        let secs = began.elapsed().as_secs_f64().max(1e-9);
        let s = self.live.snapshot();
        let what = if plan.test.is_rr() {
            format!(
                "{} transactions over {secs:.2} s ({:.2} transactions/s)",
                s.transactions,
                s.transactions as f64 / secs
            )
        } else {
            format!(
                "{} bytes in {} calls over {secs:.2} s ({:.2} 10^6bits/s)",
                s.bytes,
                s.calls,
                s.bytes as f64 * 8.0 / secs / 1e6
            )
        };
        Some(format!(
            "netperf's own figures up to then: {what}; the netserver's figures are missing"
        ))
    }

    /// A TCP data connection of this iteration, whose TCP_INFO the kept
    /// interim samples carry.
    pub(crate) fn watch_tcp(&self, sock: &impl engine::sys::Sock) {
        if self.sampling.as_ref().is_some_and(|s| s.keep)
            && let Ok(owned) = socket2::SockRef::from(sock).try_clone()
            && let Ok(mut w) = self.watch.lock()
            && w.len() < proto::test::MAX_TCP_PER_REPORT
        {
            w.push(owned);
        }
    }

    /// The iteration's connections are no longer watched (their last
    /// sample is taken).
    pub(crate) fn unwatch(&self) {
        if let Ok(mut w) = self.watch.lock() {
            w.clear();
        }
    }

    pub(crate) fn unbegun(&self) {
        self.unwatch();
        if let Ok(mut b) = self.began.lock() {
            *b = None;
        }
    }

    /// The data phase starts: reset the live counters, start sampling,
    /// tell the observers, take the first CPU snapshot (`-c`).
    pub fn begin(&self, plan: &Plan) -> Result<Phase> {
        self.live.reset();
        if let Ok(mut b) = self.began.lock() {
            *b = Some(std::time::Instant::now());
        }
        let sampler = match &self.sampling {
            Some(spec) => Some(Sampler::start(
                spec.clone(),
                self.live.clone(),
                self.interim_counter.clone(),
                Audience {
                    observers: self.observers.clone(),
                    watch: self.watch.clone(),
                },
            )?),
            None => None,
        };
        for o in &self.observers {
            o.phase_begins(&self.live);
        }
        Ok(Phase {
            cpu: if plan.local_cpu {
                cpu::snapshot()
            } else {
                None
            },
            num_cpus: plan.num_cpus,
            sampler,
            observers: self.observers.clone(),
        })
    }
}

/// A data phase in progress.
#[derive(Debug)]
pub struct Phase {
    cpu: Option<cpu::Snapshot>,
    num_cpus: u32,
    sampler: Option<Sampler>,
    observers: Vec<Arc<dyn Observer>>,
}

impl Phase {
    /// The data phase is over: the last interim sample, and our CPU
    /// utilisation over the phase if it was measured; the samples kept.
    pub fn end(mut self) -> (Option<CpuStats>, Vec<Sample>) {
        let kept = self.sampler.take().map(Sampler::stop).unwrap_or_default();
        for o in &self.observers {
            o.phase_ends();
        }
        let cpu = self.cpu.take().and_then(|start| {
            let end = cpu::snapshot()?;
            Some(cpu::utilisation(&start, &end, self.num_cpus))
        });
        (cpu, kept)
    }
}

/// What we set on our own data sockets only.
pub(crate) fn local_opts(plan: &Plan) -> sockopt::LocalOpts {
    let l = &plan.local_only;
    sockopt::LocalOpts {
        cork: l.cork,
        mss: l.mss,
        so_debug: l.so_debug,
        // `--rate` on a TCP stream we send: each flow its share, paced by
        // the kernel (a UDP sender paces itself); `-- -q` says it directly
        pacing: l.pacing.or_else(|| {
            let flows = u64::from(plan.flows.max(1));
            plan.rate_bps
                .filter(|_| plan.test == proto::TestKind::TcpStream)
                .map(|r| (r / flows / 8).max(1))
        }),
        mtu_discover: l.mtu_discover,
        fastopen: l.fastopen,
    }
}

/// The timer that ends a timed test (`-l` seconds); none for a count or
/// for `-l 0`.
pub(crate) fn length_timer(plan: &Plan, stop: &StopFlag) -> Result<Option<Timer>> {
    Ok(match plan.length {
        Length::Seconds(s) if s > 0 => Some(Timer::start(Duration::from_secs(s), stop.clone())?),
        _ => None,
    })
}

/// A count (`-l -N`) shared out among the flows, the first ones taking the
/// remainder.
pub(crate) fn share(total: u64, flows: u32, i: usize) -> u64 {
    let n = u64::from(flows.max(1));
    total / n + u64::from((i as u64) < total % n)
}

/// Our threads: `--threads`, or [`default_threads`]; never more than
/// flows.
pub fn threads(plan: &Plan) -> usize {
    let cpus = engine::cpu::count().max(1);
    let t = plan
        .threads
        .unwrap_or_else(|| default_threads(plan.test, plan.flows, cpus)) as usize;
    t.clamp(1, plan.flows.max(1) as usize)
}

/// Our threads unless `--threads` says: for a TCP stream test a flow a
/// thread up to a point (as the netserver runs them, proto's
/// stream_threads); beyond it, where the flows share event loops, a
/// thread a CPU, as for every other test. (The netserver keeps its 16
/// loop threads. On loopback, 100 flows, each end on two threads or 16,
/// TCP_STREAM and TCP_MAERTS, the netserver a daemon or not: our end on
/// two beat 16 in five of the eight cells, 1.13 to 1.30 times, was level
/// in two and behind in one; the netserver's on 16 beat two in six;
/// doc/performance.md.)
pub fn default_threads(test: proto::TestKind, flows: u32, cpus: u32) -> u32 {
    match test {
        proto::TestKind::TcpStream | proto::TestKind::TcpMaerts => {
            match proto::test::stream_threads(flows, cpus) {
                t if t >= flows => t,
                _ => cpus,
            }
        }
        _ => cpus,
    }
}

/// The soft and hard limits of open files.
pub fn open_files_limit() -> (u64, u64) {
    engine::sys::open_files_limit()
}

/// Descriptors netperf's end holds beside a connection a flow: its
/// control connection, event loops' polls and wakers, its own files.
pub const OWN_DESCRIPTORS: u64 = 64;

/// Enough descriptors for `flows` connections and some to spare, as far as
/// the hard limit allows; or why there cannot be, naming the limit.
pub fn raise_open_files(flows: u32) -> Result<(), String> {
    let need = u64::from(flows) + OWN_DESCRIPTORS;
    let have = engine::sys::set_open_files(need);
    if have >= need {
        return Ok(());
    }
    Err(format!(
        "--flows {flows}: netperf would hold about {need} file descriptors, more than its limit of {have} (ulimit -n; the hard limit is {})",
        open_files_limit().1
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tcp_streams_take_a_thread_a_flow_then_a_thread_a_cpu() {
        use proto::TestKind::{TcpMaerts, TcpRr, TcpStream};
        assert_eq!(super::default_threads(TcpStream, 1, 2), 1);
        assert_eq!(super::default_threads(TcpStream, 8, 2), 8);
        assert_eq!(super::default_threads(TcpMaerts, 16, 2), 16);
        assert_eq!(super::default_threads(TcpMaerts, 17, 2), 2);
        assert_eq!(super::default_threads(TcpStream, 100, 2), 2);
        assert_eq!(super::default_threads(TcpStream, 100, 32), 32);
        assert_eq!(super::default_threads(TcpStream, 20, 32), 20);
        assert_eq!(super::default_threads(TcpRr, 100, 2), 2);
    }

    #[test]
    fn counts_share_out_exactly() {
        let total: u64 = (0..7).map(|i| super::share(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(super::share(100, 7, 0), 15);
        assert_eq!(super::share(100, 7, 6), 14);
    }
}
