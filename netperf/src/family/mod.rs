//! The client's side of every test: one driver ([`lifecycle`]) runs each
//! of them, and each family (one file) implements the small
//! [`lifecycle::Family`] trait for what differs: how its data connections
//! open, its data phase, how its counts must agree. One flow is the case
//! N = 1 of a family's N flows.
//!
//! # Layout
//! - [`lifecycle`]: the one driver, the request built once, the prepared
//!   data socket.
//! - [`stream`]: TCP_STREAM, TCP_MAERTS, TCP_SENDFILE, TCP_MSS.
//! - [`rr`]: TCP_RR (and what request/response families share).
//! - [`crr`]: TCP_CRR, TCP_CC.
//! - [`udp`]: UDP_STREAM (we send), netperf 2.7's UDP receive test, UDP_RR.
//! - this file: what a test measured ([`Measurement`], a [`Side`] each
//!   way), what a run carries ([`Context`]), and helpers the families
//!   share.

pub mod crr;
pub mod lifecycle;
pub mod rr;
pub mod stream;
pub mod udp;

use std::{
    net::SocketAddr,
    sync::{Arc, atomic::AtomicU32},
    time::Duration,
};

use anyhow::Result;
use engine::{
    cpu,
    live::Live,
    sockopt,
    timer::{StopFlag, Timer},
};
use proto::{CpuStats, SideResults, SideSpec, TestKind};

pub use lifecycle::{preflight, run_once, spec_for};

use crate::{
    cli::{Length, Plan},
    interim,
};

/// One side of a test as it ran: its counters, and how its data sockets
/// were set up (what was asked of them, what they got).
#[derive(Clone, Debug, Default)]
pub struct Side {
    /// What the side counted (and, for the netserver, reported).
    pub counts: SideResults,
    /// What was asked for this side (`-s`, `-m`, `-a`, ...).
    pub asked: SideSpec,
    /// Socket buffer sizes when the data sockets were set up.
    pub send_buf: u32,
    pub recv_buf: u32,
    /// Message sizes the side used.
    pub send_size: u32,
    pub recv_size: u32,
    /// Buffers in its send and receive rings (netperf's *_WIDTH).
    pub send_width: u32,
    pub recv_width: u32,
    /// Its end of the data connection.
    pub addr: Option<SocketAddr>,
    /// The TOS byte its data socket kept (`-Y`), read back (ours only).
    pub tos: Option<u32>,
}

impl std::ops::Deref for Side {
    type Target = SideResults;
    fn deref(&self) -> &SideResults {
        &self.counts
    }
}

impl std::ops::DerefMut for Side {
    fn deref_mut(&mut self) -> &mut SideResults {
        &mut self.counts
    }
}

/// What one iteration of a test measured, on both sides.
#[derive(Clone, Debug, Default)]
pub struct Measurement {
    /// Our elapsed time, seconds: the interval every rate is computed over.
    pub elapsed: f64,
    pub local: Side,
    pub remote: Side,
    /// TCP maximum segment size of our data connection.
    pub mss: Option<u32>,
    /// Sends that failed with a transient error (UDP: netperf's "Errors").
    pub send_errors: u64,
    /// Round-trip latency of the transactions (_RR tests).
    pub latency: Option<engine::latency::LatencySummary>,
    /// UDP_RR: transactions with no response within the receive timeout.
    pub lost: u64,
    /// `--flows`: each flow's local port and retransmissions, in flow
    /// order (their counters are in `local.flows` and `remote.flows`).
    pub flows: Vec<FlowEnd>,
}

impl Measurement {
    /// The quantity the test's result is a rate of: bytes that arrived, or
    /// transactions.
    pub fn result_units(&self, kind: TestKind) -> f64 {
        match kind {
            // What the receiver got, as netperf: the sender's count may
            // include what was lost (UDP) and is checked against it.
            TestKind::TcpStream | TestKind::UdpStream => self.remote.bytes_received as f64,
            TestKind::TcpMaerts | TestKind::UdpMaerts => self.local.bytes_received as f64,
            TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpCrr | TestKind::TcpCc => {
                self.local.transactions as f64
            }
        }
    }
}

/// A flow's view at the end: its local port and TCP's retransmissions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowEnd {
    pub local_port: u16,
    pub retransmits: Option<u64>,
}

impl FlowEnd {
    /// A flow whose data socket is at `addr`.
    pub fn at(addr: Option<SocketAddr>) -> FlowEnd {
        FlowEnd {
            local_port: addr.map_or(0, |a| a.port()),
            retransmits: None,
        }
    }
}

/// What a test run needs besides the plan.
#[derive(Debug, Default)]
pub struct Context {
    /// Contents of the `-F` fill file, or empty for netperf's pattern.
    pub fill: Vec<u8>,
    /// Counters the data loop publishes, for interim reports.
    pub live: Arc<Live>,
    /// `-D`: what to report during the test.
    pub interim: Option<interim::Spec>,
    /// Numbers interim key=value blocks across iterations.
    pub interim_counter: Arc<AtomicU32>,
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

impl Context {
    pub fn new(plan: &Plan, fill: Vec<u8>) -> Context {
        Context {
            fill,
            live: Arc::new(if plan.flows > 1 {
                Live::with_flows(plan.flows as usize)
            } else {
                Live::new()
            }),
            interim: interim::Spec::of(plan),
            interim_counter: Arc::new(AtomicU32::new(0)),
            stats: plan.histogram,
            timing: plan.latency,
            began: std::sync::Mutex::new(None),
        }
    }

    /// The counters flow `i` publishes to.
    pub fn live_of(&self, i: usize) -> &Live {
        self.live.flow(i).unwrap_or(&self.live)
    }

    /// What our own counters saw of a data phase that began, for an error
    /// that cost the netserver's figures: no result is lost without a word.
    fn own_figures(&self, plan: &Plan) -> Option<String> {
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

    fn unbegun(&self) {
        if let Ok(mut b) = self.began.lock() {
            *b = None;
        }
    }

    /// The data phase starts: reset the live counters, start the interim
    /// reporter, take the first CPU snapshot (`-c`).
    pub fn begin(&self, plan: &Plan) -> Result<Phase> {
        self.live.reset();
        if let Ok(mut b) = self.began.lock() {
            *b = Some(std::time::Instant::now());
        }
        let reporter = match &self.interim {
            Some(spec) => Some(interim::Reporter::start(
                spec.clone(),
                self.live.clone(),
                self.interim_counter.clone(),
            )?),
            None => None,
        };
        Ok(Phase {
            cpu: if plan.local_cpu {
                cpu::snapshot()
            } else {
                None
            },
            num_cpus: plan.num_cpus,
            reporter,
        })
    }
}

/// A data phase in progress.
#[derive(Debug)]
pub struct Phase {
    cpu: Option<cpu::Snapshot>,
    num_cpus: u32,
    reporter: Option<interim::Reporter>,
}

impl Phase {
    /// The data phase is over: the last interim line, and our CPU
    /// utilisation over the phase if it was measured.
    pub fn end(mut self) -> Option<CpuStats> {
        drop(self.reporter.take());
        let start = self.cpu.take()?;
        let end = cpu::snapshot()?;
        Some(cpu::utilisation(&start, &end, self.num_cpus))
    }
}

/// What we set on our own data sockets only.
pub(crate) fn local_opts(plan: &Plan) -> sockopt::LocalOpts {
    let l = &plan.local_only;
    sockopt::LocalOpts {
        cork: l.cork,
        mss: l.mss,
        so_debug: l.so_debug,
        pacing: l.pacing,
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

/// Threads at each end: `--threads`, or the CPUs; never more than flows.
pub fn threads(plan: &Plan) -> usize {
    let t = plan
        .threads
        .map_or_else(|| engine::cpu::count().max(1) as usize, |t| t as usize);
    t.clamp(1, plan.flows.max(1) as usize)
}

/// The soft and hard limits of open files.
pub fn open_files_limit() -> (u64, u64) {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .unwrap_or((1024, 1024))
}

/// Enough descriptors for `flows` connections and some to spare, as far as
/// the hard limit allows.
pub fn raise_open_files(flows: u32) {
    let (soft, hard) = open_files_limit();
    let want = (u64::from(flows) + 64).min(hard);
    if want > soft {
        let _ =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, want, hard);
    }
}

/// The netserver's counters arrived.
pub(crate) fn got_results(r: &SideResults) {
    crate::debug::line(1, || {
        format!(
            "netserver's counters: {} bytes sent in {} calls, {} received in {} calls, {} transactions, over {:.3} s",
            r.bytes_sent,
            r.send_calls,
            r.bytes_received,
            r.recv_calls,
            r.transactions,
            r.elapsed_ns as f64 / 1e9
        )
    });
    crate::debug::line(2, || format!("results: {r:?}"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_share_out_exactly() {
        let total: u64 = (0..7).map(|i| super::share(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(super::share(100, 7, 0), 15);
        assert_eq!(super::share(100, 7, 6), 14);
    }
}
