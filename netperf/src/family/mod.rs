//! The client's side of each test family: its data phase and what it
//! measured. One file per family.

pub mod rr;
pub mod stream;
pub mod udp_stream;

use std::{
    net::{IpAddr, SocketAddr},
    sync::{Arc, atomic::AtomicU32},
    time::Duration,
};

use anyhow::{Context as _, Result};
use engine::{
    cpu,
    live::Live,
    sockopt,
    timer::{StopFlag, Timer},
};
use proto::{CpuStats, Family, Grant, Limits, Protocol, SideResults, TestEnd, TestKind, TestSpec};
use socket2::{SockRef, Socket};

use crate::{
    cli::{Length, Plan},
    control::Dialect,
    interim,
};

/// What one iteration of a test measured, on both sides.
#[derive(Clone, Debug, Default)]
pub struct Measurement {
    /// Our elapsed time, seconds: the interval every rate is computed over.
    pub elapsed: f64,
    /// Our counters.
    pub local: SideResults,
    /// The netserver's counters.
    pub remote: SideResults,
    /// Socket buffer sizes when the data sockets were set up.
    pub local_send_buf: u32,
    pub local_recv_buf: u32,
    pub remote_send_buf: u32,
    pub remote_recv_buf: u32,
    /// Message sizes each side used.
    pub local_send_size: u32,
    pub local_recv_size: u32,
    pub remote_send_size: u32,
    pub remote_recv_size: u32,
    /// TCP maximum segment size of our data connection.
    pub mss: Option<u32>,
    /// Sends that failed with a transient error (UDP: netperf's "Errors").
    pub send_errors: u64,
    /// Round-trip latency of the transactions (_RR tests).
    pub latency: Option<engine::latency::LatencySummary>,
    /// UDP_RR: transactions with no response within the receive timeout.
    pub lost: u64,
    /// The data connection's ends (ours, the netserver's).
    pub local_addr: Option<std::net::SocketAddr>,
    pub remote_addr: Option<std::net::SocketAddr>,
}

impl Measurement {
    /// The quantity the test's result is a rate of: bytes that arrived, or
    /// transactions.
    pub fn result_units(&self, kind: TestKind) -> f64 {
        match kind {
            // What the receiver got, as netperf: the sender's count may
            // include what was lost (UDP) and is checked against it.
            TestKind::TcpStream | TestKind::UdpStream => self.remote.bytes_received as f64,
            TestKind::TcpMaerts => self.local.bytes_received as f64,
            TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpCrr => self.local.transactions as f64,
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
}

impl Context {
    pub fn new(plan: &Plan, fill: Vec<u8>) -> Context {
        Context {
            fill,
            live: Arc::new(Live::new()),
            interim: interim::Spec::of(plan),
            interim_counter: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The data phase starts: reset the live counters, start the interim
    /// reporter, take the first CPU snapshot (`-c`).
    pub fn begin(&self, plan: &Plan) -> Result<Phase> {
        self.live.reset();
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

/// The request that goes on the wire for this plan, with the family of the
/// control connection.
pub fn spec_for(plan: &Plan, family: Family) -> Result<TestSpec> {
    let mut spec = TestSpec::new(plan.test, family);
    spec.end = match (plan.length, plan.test) {
        (Length::Seconds(s), _) => TestEnd::Time { millis: s * 1000 },
        (Length::Count(n), TestKind::TcpStream | TestKind::TcpMaerts) => TestEnd::Bytes(n),
        (Length::Count(n), TestKind::UdpStream) => TestEnd::Datagrams(n),
        (Length::Count(n), _) => TestEnd::Transactions(n),
    };
    spec.server = plan.remote.clone();
    spec.request_size = plan.request_size;
    spec.response_size = plan.response_size;
    spec.burst = plan.effective_burst();
    spec.recv_timeout_ms = plan
        .recv_timeout
        .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1));
    spec.spin = plan.spin;
    spec.rate_bps = plan.rate_bps;
    spec.measure_cpu = plan.remote_cpu;
    spec.num_cpus = plan.num_cpus;
    spec.data_port = plan.remote_data_port.filter(|&p| p != 0);
    spec.keepalive = plan.keepalive;
    // Refuse what no netserver would run before asking one (the server
    // checks again against its own limits).
    spec.validate(&Limits {
        max_duration_ms: u64::MAX,
        ..Limits::default()
    })?;
    Ok(spec)
}

/// Check what can be checked once the control connection's family is
/// known, before anything is printed or asked of the netserver.
pub fn preflight(plan: &Plan, family: Family) -> Result<()> {
    spec_for(plan, family)?;
    if plan.test == TestKind::UdpStream
        && let Some(size) = plan.local.send_size
    {
        udp_stream::send_size(plan, size, family)?;
    }
    Ok(())
}

/// Run one iteration of the plan's test.
pub fn run_once(plan: &Plan, dialect: &mut dyn Dialect, ctx: &Context) -> Result<Measurement> {
    match plan.test {
        TestKind::TcpStream | TestKind::TcpMaerts => stream::run_once(plan, dialect, ctx),
        TestKind::UdpStream => udp_stream::run_once(plan, dialect, ctx),
        TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpCrr => rr::run_once(plan, dialect, ctx),
    }
}

/// What every family does first: the request for this plan, and our data
/// socket with its options. The socket is made before the netserver is
/// asked, so that the buffer sizes we report are the ones the kernel gave
/// before the connection (netperf does the same).
pub(crate) struct Prepared {
    /// The netserver's control address.
    pub peer: SocketAddr,
    pub family: Family,
    pub spec: TestSpec,
    pub sock: Socket,
    /// Our socket buffer sizes, send and receive.
    pub lss: u32,
    pub lsr: u32,
}

pub(crate) fn prepare(plan: &Plan, d: &dyn Dialect, protocol: Protocol) -> Result<Prepared> {
    let peer = d.peer();
    let family = sockopt::family_of(&peer);
    let spec = spec_for(plan, family)?;
    if let Some(h) = &plan.data_host {
        stream::check_data_host(h, peer)?;
    }
    let sock = sockopt::new_socket(family, protocol)?;
    sockopt::apply_side(&sock, &plan.local, family, protocol, plan.keepalive)
        .context("local data socket")?;
    let (lss, lsr) = sockopt::buffer_sizes(SockRef::from(&sock));
    Ok(Prepared {
        peer,
        family,
        spec,
        sock,
        lss,
        lsr,
    })
}

/// Ask the netserver to set up its side; then the global `-w` pause.
pub(crate) fn request(plan: &Plan, d: &mut dyn Dialect, spec: &TestSpec) -> Result<Grant> {
    let grant = d.setup(spec)?;
    if plan.wait_secs > 0 {
        std::thread::sleep(Duration::from_secs(plan.wait_secs));
    }
    Ok(grant)
}

/// `-- -P local`: bind our data socket to that port on `ip`.
pub(crate) fn bind_local_port(plan: &Plan, sock: &Socket, ip: IpAddr) -> Result<()> {
    if let Some(p) = plan.local_data_port.filter(|&p| p != 0) {
        let _ = sock.set_reuse_address(true);
        sock.bind(&SocketAddr::new(ip, p).into())
            .with_context(|| format!("-P: cannot bind the data socket to port {p}"))?;
    }
    Ok(())
}

/// `-T`: pin this thread to the local CPU asked for.
pub(crate) fn pin(plan: &Plan) -> Result<()> {
    if let Some(cpu) = plan.local.cpu_bind {
        sockopt::pin_current_thread(cpu)?;
    }
    Ok(())
}

/// The timer that ends a timed test (`-l` seconds); none for a count or
/// for `-l 0`.
pub(crate) fn length_timer(plan: &Plan, stop: &StopFlag) -> Result<Option<Timer>> {
    Ok(match plan.length {
        Length::Seconds(s) if s > 0 => Some(Timer::start(Duration::from_secs(s), stop.clone())?),
        _ => None,
    })
}

/// How long to wait for the server's results after our data phase.
pub(crate) fn results_wait(plan: &Plan) -> Duration {
    match plan.length {
        Length::Seconds(s) => Duration::from_secs(30 + s),
        Length::Count(_) => Duration::from_secs(330),
    }
}
