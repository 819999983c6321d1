//! The client's side of each test family: its data phase and what it
//! measured. One file per family.

pub mod flows;
pub mod rr;
pub mod stream;
pub mod udp_stream;

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, atomic::AtomicU32},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
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
    control::Control,
    interim,
};
use optparse::value::AddrFamily;

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
    /// Buffers in our send and receive rings (netperf's LOCAL_*_WIDTH), and
    /// in the netserver's.
    pub local_send_width: u32,
    pub local_recv_width: u32,
    pub remote_send_width: u32,
    pub remote_recv_width: u32,
    /// TCP maximum segment size of our data connection.
    pub mss: Option<u32>,
    /// The TOS byte our data socket kept (`-Y`), read back.
    pub local_tos: Option<u32>,
    /// Sends that failed with a transient error (UDP: netperf's "Errors").
    pub send_errors: u64,
    /// Round-trip latency of the transactions (_RR tests).
    pub latency: Option<engine::latency::LatencySummary>,
    /// UDP_RR: transactions with no response within the receive timeout.
    pub lost: u64,
    /// The data connection's ends (ours, the netserver's).
    pub local_addr: Option<std::net::SocketAddr>,
    pub remote_addr: Option<std::net::SocketAddr>,
    /// `--flows`: each flow's local port and retransmissions, in flow
    /// order (their counters are in `local.flows` and `remote.flows`).
    pub flows: Vec<flows::FlowEnd>,
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

/// The request that goes on the wire for this plan, with the family of the
/// data connections.
pub fn spec_for(plan: &Plan, family: Family) -> Result<TestSpec> {
    let mut spec = TestSpec::new(plan.test, family);
    spec.end = match (plan.length, plan.test.is_rr()) {
        (Length::Seconds(s), _) => TestEnd::Time { millis: s * 1000 },
        // netperf 2.7 counts bytes in every stream test, UDP's too.
        (Length::Count(n), false) => TestEnd::Bytes(n),
        (Length::Count(n), true) => TestEnd::Transactions(n),
    };
    spec.server = plan.remote.clone();
    (spec.request_size, spec.response_size) = match plan.test {
        // TCP_CC carries nothing; the sizes netperf prints are for show.
        TestKind::TcpCc => (0, 0),
        _ => (plan.request_size, plan.response_size),
    };
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
    spec.defer_accept = plan.defer_accept;
    spec.fastopen = plan.local_only.fastopen;
    spec.connected_udp = plan.remote_connected_udp;
    spec.remote_fill = plan.remote_fill;
    // Refuse what no netserver would run before asking one (the server
    // checks again against its own limits).
    spec.validate(&Limits {
        max_duration_ms: u64::MAX,
        ..Limits::default()
    })?;
    Ok(spec)
}

/// Check what can be checked once the control connection is up, before
/// anything is printed or asked of the netserver.
pub fn preflight(plan: &Plan, d: &Control) -> Result<()> {
    let family = sockopt::family_of(&d.peer());
    spec_for(plan, family)?;
    let (data_ip, ..) = data_endpoints(plan, d)?;
    if let Some(port) = shared_port(plan, data_ip) {
        let both = format!(
            "-- -P {port}: netperf's and the netserver's data sockets would both be port {port} on this host ({data_ip})"
        );
        let two = format!(
            "give two ports, -- -P {port},{}",
            port.wrapping_add(1).max(1024)
        );
        match plan.test {
            TestKind::UdpStream if plan.local_only.connected_udp => bail!(
                "{both}, and a UDP socket connected to its own address (-- -n) gets its own datagrams back; leave out -n, or {two}"
            ),
            TestKind::UdpStream => {
                if let Some(why) = d.caps().lacks(proto::Feature::SharedPort) {
                    bail!("{both}: {why}; or {two}");
                }
            }
            TestKind::UdpRr => {
                bail!("{both}: the netserver's responses would come back to its own socket; {two}")
            }
            _ => bail!("{both}: a TCP connection cannot have the same address at both ends; {two}"),
        }
    }
    if plan.test == TestKind::UdpStream
        && let Some(size) = plan.local.send_size
    {
        udp_stream::send_size(plan, size, family)?;
    }
    Ok(())
}

/// Run one iteration of the plan's test. If it fails and the netserver
/// said why (it is shutting down, it gave up on a flow), that is the error.
pub fn run_once(plan: &Plan, dialect: &mut Control, ctx: &Context) -> Result<Measurement> {
    if let Ok(mut b) = ctx.began.lock() {
        *b = None;
    }
    run_test(plan, dialect, ctx).map_err(|e| {
        // (an error that is already the netserver's word needs no wait)
        let e = if e.to_string().starts_with("netserver") {
            e
        } else {
            match dialect.server_said(Duration::from_millis(500)) {
                Some(why) => anyhow::anyhow!("netserver: {why} (here: {e:#})"),
                None => e,
            }
        };
        match ctx.own_figures(plan) {
            Some(ours) => anyhow::anyhow!("{e:#}\n{ours}"),
            None => e,
        }
    })
}

fn run_test(plan: &Plan, dialect: &mut Control, ctx: &Context) -> Result<Measurement> {
    if (plan.flows > 1 || plan.window.is_some())
        && matches!(
            plan.name,
            crate::cli::test_name::TestName::TcpSendfile | crate::cli::test_name::TestName::TcpMss
        )
    {
        anyhow::bail!(
            "--flows, --warmup, --cooldown: {} runs one flow, as netperf 2.7 does (TCP_STREAM takes them)",
            plan.name.name()
        );
    }
    if plan.flows > 1 && plan.test == TestKind::UdpStream && plan.window.is_none() {
        return udp_stream::run_flows(plan, dialect, ctx);
    }
    if plan.flows > 1 && plan.test == TestKind::UdpRr && plan.window.is_none() {
        return rr::run_udp_flows(plan, dialect, ctx);
    }
    if plan.flows > 1 && plan.test.is_connection_test() && plan.window.is_none() {
        return rr::run_crr_flows(plan, dialect, ctx);
    }
    if plan.flows > 1 || plan.window.is_some() {
        return flows::run_once(plan, dialect, ctx);
    }
    match plan.test {
        TestKind::TcpStream | TestKind::TcpMaerts => stream::run_once(plan, dialect, ctx),
        TestKind::UdpStream => udp_stream::run_once(plan, dialect, ctx),
        TestKind::UdpMaerts => udp_stream::run_maerts(plan, dialect, ctx),
        TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpCrr | TestKind::TcpCc => {
            rr::run_once(plan, dialect, ctx)
        }
    }
}

/// The one port both ends' data sockets would have: `-- -P N` (or
/// `-P N,N`) names the same port for both, and the netserver's data address
/// is one of this host's (loopback, or an address we can bind), as with two
/// host-network pods on one node. Only UDP_STREAM runs so (as netperf 2.7's
/// does): its datagrams are taken by their address and port, without the
/// hello, which would come back to the netserver's own socket.
pub(crate) fn shared_port(plan: &Plan, data_ip: IpAddr) -> Option<u16> {
    let port = plan.local_data_port.filter(|&p| p != 0)?;
    if plan.remote_data_port != Some(port) {
        return None;
    }
    let ours = data_ip.is_loopback() || std::net::UdpSocket::bind((data_ip, 0)).is_ok();
    ours.then_some(port)
}

/// What every family does first: the request for this plan, and our data
/// socket with its options. The socket is made before the netserver is
/// asked, so that the buffer sizes we report are the ones the kernel gave
/// before the connection (netperf does the same).
pub(crate) struct Prepared {
    /// The address data connections go to (the port is the grant's).
    pub data_ip: IpAddr,
    /// The address our data sockets bind to, and whether to bind (TCP
    /// binds only when asked: `-- -L` or `-- -P lport`).
    pub local: SocketAddr,
    pub bind: bool,
    pub family: Family,
    pub spec: TestSpec,
    pub sock: Socket,
    /// Our socket buffer sizes, send and receive.
    pub lss: u32,
    pub lsr: u32,
    /// The TOS byte the kernel kept, when `-Y` set one.
    pub tos: Option<u32>,
    /// Both ends' data sockets have this one port on this host (see
    /// [`shared_port`]).
    pub shared_port: Option<u16>,
}

impl Prepared {
    /// The data path's conventions for this test: the dialect's, with a
    /// UDP datagram proven by its address and port when both ends share
    /// one (no hello: its echo would reach the netserver's own socket).
    pub fn conventions(&self, d: &Control) -> engine::conventions::Conventions {
        let conv = d.conventions();
        match self.shared_port {
            Some(_) => engine::conventions::Conventions {
                proof: engine::conventions::Proof::ControlPeer,
                ..conv
            },
            None => conv,
        }
    }

    /// Where the netserver's data socket for `grant` is.
    pub fn data_addr(&self, grant: &Grant) -> SocketAddr {
        SocketAddr::new(self.data_ip, grant.data_port)
    }
}

/// The data connections' addresses: the control connection's, or what
/// `-- -H`, `-- -L` and `-- -4`/`-6` say. Returns (the netserver's data
/// address, the address we bind to, whether it must be sent to the
/// netserver, the family).
pub(crate) fn data_endpoints(plan: &Plan, d: &Control) -> Result<(IpAddr, IpAddr, bool, Family)> {
    let peer = d.peer();
    let control_family = sockopt::family_of(&peer);
    let family = match plan.data_family {
        AddrFamily::V4 => Family::V4,
        AddrFamily::V6 => Family::V6,
        AddrFamily::Unspec => control_family,
    };
    let data_ip = match (&plan.data_host, family == control_family) {
        (None, true) => peer.ip(),
        (Some(h), _) => resolve_in(h, family).with_context(|| format!("-- -H {h}"))?,
        (None, false) => {
            let h = plan.host_name();
            resolve_in(h, family).with_context(|| {
                format!(
                    "-- -{}: {h} has no address of that family",
                    fam_digit(family)
                )
            })?
        }
    };
    let local_ip = match &plan.data_local {
        Some(l) => resolve_in(l, family).with_context(|| format!("-- -L {l}"))?,
        None if family == control_family && data_ip == peer.ip() => d.local().ip(),
        None => match family {
            Family::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        },
    };
    Ok((data_ip, local_ip, data_ip != peer.ip(), family))
}

fn fam_digit(f: Family) -> char {
    match f {
        Family::V4 => '4',
        Family::V6 => '6',
    }
}

/// The first address of `host` in `family`.
pub(crate) fn resolve_in(host: &str, family: Family) -> Result<IpAddr> {
    use std::net::ToSocketAddrs;
    let want = |a: &SocketAddr| sockopt::family_of(a) == family;
    (host, 0)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .find(want)
        .map(|a| a.ip())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{host} has no {} address",
                match family {
                    Family::V4 => "IPv4",
                    Family::V6 => "IPv6",
                }
            )
        })
}

pub(crate) fn prepare(plan: &Plan, d: &Control, protocol: Protocol) -> Result<Prepared> {
    let (data_ip, local_ip, send_addr, family) = data_endpoints(plan, d)?;
    let mut spec = spec_for(plan, family)?;
    if send_addr {
        spec.data_addr = Some(data_ip);
    }
    let sock = sockopt::new_socket(family, protocol)?;
    sockopt::apply_side(&sock, &plan.local, family, protocol, plan.keepalive)
        .context("local data socket")?;
    sockopt::apply_local(&sock, &local_opts(plan), family, protocol)
        .context("local data socket")?;
    let (lss, lsr) = sockopt::buffer_sizes(SockRef::from(&sock));
    let tos = plan.local.tos.and_then(|_| sockopt::tos(&sock, family));
    let port = plan.local_data_port.unwrap_or(0);
    crate::debug::line(1, || {
        format!(
            "data socket: {protocol:?} over {family:?}, to {data_ip}, from {local_ip}; socket buffers {lss} send, {lsr} receive"
        )
    });
    // netperf 2.7 binds a UDP data socket to the wildcard unless `-- -L`
    // names an address: with one port for both ends on one host, the
    // netserver's socket, bound to its address, is then the one the
    // kernel hands the datagrams to.
    let local_ip = if protocol == Protocol::Udp && plan.data_local.is_none() {
        udp_stream::unspecified(family)
    } else {
        local_ip
    };
    let mut p = Prepared {
        data_ip,
        local: SocketAddr::new(local_ip, port),
        bind: plan.data_local.is_some() || port != 0,
        family,
        spec,
        sock,
        lss,
        lsr,
        tos,
        shared_port: shared_port(plan, data_ip),
    };
    if protocol == Protocol::Udp {
        udp_stream::bind_udp(&mut p)?;
    }
    Ok(p)
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

/// Ask the netserver to set up its side; then the global `-w` pause.
pub(crate) fn request(plan: &Plan, d: &mut Control, spec: &TestSpec) -> Result<Grant> {
    crate::debug::line(1, || {
        format!(
            "requesting {} ({:?} data, ends {:?}) of the netserver at {}",
            spec.kind,
            spec.family,
            spec.end,
            d.peer()
        )
    });
    crate::debug::line(2, || format!("request: {spec:?}"));
    let grant = d.setup(spec)?;
    crate::debug::line(1, || {
        format!(
            "granted: data port {}, netserver's socket buffers {} send, {} receive; message sizes {} send, {} receive",
            grant.data_port, grant.send_buf, grant.recv_buf, grant.send_size, grant.recv_size
        )
    });
    if plan.wait_secs > 0 {
        std::thread::sleep(Duration::from_secs(plan.wait_secs));
    }
    Ok(grant)
}

/// `-- -L addr` and `-- -P lport`: bind our data socket where asked.
pub(crate) fn bind_local(p: &Prepared) -> Result<()> {
    if p.bind {
        let _ = p.sock.set_reuse_address(true);
        p.sock
            .bind(&p.local.into())
            .with_context(|| format!("-- -L/-P: cannot bind the data socket to {}", p.local))?;
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

/// A flow's own thread (UDP and connection-per-transaction flows run one
/// each): pinned to `--cpus` in turn. `--threads` does not apply to them;
/// said once on stderr.
pub(crate) fn pin_flow(plan: &Plan, i: usize) -> Result<()> {
    if i == 0 && plan.threads.is_some() {
        eprintln!(
            "netperf: --threads: {} runs a thread per flow; --threads applies to TCP_STREAM, TCP_MAERTS and TCP_RR",
            plan.name.name()
        );
    }
    if let Some(cpu) = plan.cpus.get(i % plan.cpus.len().max(1)) {
        sockopt::pin_current_thread(*cpu)?;
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

/// How long to wait for the server's results after our data phase.
pub(crate) fn results_wait(plan: &Plan) -> Duration {
    match plan.length {
        Length::Seconds(s) => Duration::from_secs(30 + s),
        Length::Count(_) => Duration::from_secs(330),
    }
}
