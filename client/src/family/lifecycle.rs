//! The one driver of every test: prepare our data socket, resolve our side,
//! build the request once (validated, never patched), ask, connect the
//! family's flows, pin, start the timer and the interrupt handler, begin,
//! the family's data phase, finish, check both ends agree, and put the
//! measurement together. A family implements [`Family`] for what differs.

use engine::drive::Driver;
use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use engine::{conventions::Conventions, sockopt, timer::StopFlag, timer::Timer};
use optparse::value::AddrFamily;
use proto::{
    Capabilities, ClientDone, Direction, Family as AddrFam, Feature, Grant, Limits, Paths,
    Protocol, RxPath, SideResults, TestEnd, TestKind, TestSpec, UdpFast, test::Resolved,
};
use socket2::{SockRef, Socket};
use std::sync::atomic::{AtomicBool, Ordering};

use super::context::{self, Context};
use crate::{
    control::{Control, ServerError},
    debug, interrupt,
    plan::{Length, Plan},
    report::{FlowEnd, Measurement, Side},
};

/// What our side of a test is, resolved before the netserver is asked.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ours {
    /// Our message sizes and ring widths (a direction we do not use: 0).
    pub sizes: Resolved,
    /// UDP_STREAM's fast paths, told to the netserver.
    pub udp_fast: UdpFast,
}

/// What a family's data phase counted, on our side.
#[derive(Debug, Default)]
pub struct Local {
    pub counts: SideResults,
    pub elapsed: Duration,
    pub latency: Option<engine::latency::LatencySummary>,
    pub mss: Option<u32>,
    pub lost: u64,
    pub send_errors: u64,
    pub flows: Vec<FlowEnd>,
    /// Our end of the (first) data connection.
    pub addr: Option<SocketAddr>,
    /// Our sizes, when they could only be known once granted (netperf
    /// 2.7's UDP receive test receives the netserver's send size).
    pub sizes: Option<Resolved>,
}

/// What the data phase runs with.
#[derive(Debug)]
pub struct Run<'a> {
    pub plan: &'a Plan,
    pub ctx: &'a Context,
    pub grant: &'a Grant,
    /// The netserver's data address.
    pub to: SocketAddr,
    pub conv: Conventions,
    pub stop: &'a StopFlag,
    /// The driver our flows run on ([`driver_for`]).
    pub driver: Driver,
}

/// What differs between test families; [`run_once`] does the rest.
pub(crate) trait Family {
    /// What the family needs of the netserver, besides what every test
    /// needs.
    fn needs(&self, _plan: &Plan) -> Vec<Feature> {
        Vec::new()
    }
    /// Our side, from the plan and our prepared data socket.
    fn resolve(&self, plan: &Plan, p: &Prepared) -> Result<Ours>;
    /// The netserver's side as the measurement shows it: what it granted.
    fn remote_sizes(&self, _plan: &Plan, g: &Grant) -> Resolved {
        Resolved {
            send_size: g.send_size,
            recv_size: g.recv_size,
            send_width: g.send_width,
            recv_width: g.recv_width,
        }
    }
    /// Open the data connections to the granted port and prove them (the
    /// prepared socket is the first one's).
    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()>;
    /// The timer that ends the data phase on our side (none when the
    /// netserver's clock ends it: `caps` says whether its sender stops by
    /// itself).
    fn timer(&self, plan: &Plan, stop: &StopFlag, _caps: &Capabilities) -> Result<Option<Timer>> {
        context::length_timer(plan, stop)
    }
    /// The data phase, until `r.stop` or its count.
    fn run(&mut self, r: &Run<'_>, ours: &Ours) -> Result<Local>;
    /// What we tell the netserver when our data phase is over.
    fn done(&self, _local: &Local) -> ClientDone {
        ClientDone::default()
    }
    /// Both ends' counts agree, as the family's transport promises.
    fn check(
        &self,
        plan: &Plan,
        local: &Local,
        remote: &SideResults,
        caps: &Capabilities,
    ) -> Result<()>;
}

/// Run one iteration of the plan's test. If it fails and the netserver
/// said why (it is shutting down, it gave up on a flow), that is the error.
pub(crate) fn run_once(
    plan: &Plan,
    d: &mut Control,
    ctx: &Context,
    fam: Box<dyn Family>,
) -> Result<Measurement> {
    ctx.unbegun();
    run_test(plan, d, ctx, fam).map_err(|e| {
        // (an error that is already the netserver's word needs no wait)
        let e = if e.is::<ServerError>() {
            e
        } else {
            match d.server_said(Duration::from_millis(500)) {
                Some(why) => ServerError::Said(format!("{why} (here: {e:#})")).into(),
                None => e,
            }
        };
        match ctx.own_figures(plan) {
            Some(ours) => anyhow::anyhow!("{e:#}\n{ours}"),
            None => e,
        }
    })
}

/// What the plan's test needs of the other end that `caps` says it lacks,
/// or a test it does not run: refused in one line naming the option.
pub(crate) fn refuse_lacking(plan: &Plan, fam: &dyn Family, caps: &Capabilities) -> Result<()> {
    if let Some(why) = caps.refuses_kind(plan.test) {
        let name = plan.name.name();
        let kind = plan.test.name();
        match name == kind {
            true => bail!("-t {name}: {why}"),
            false => bail!("-t {name} (as {kind}): {why}"),
        }
    }
    let mut needs = fam.needs(plan);
    if plan.flows > 1 {
        needs.push(Feature::Flows);
    }
    if plan.window.is_some() {
        needs.push(Feature::Window);
    }
    if paths_of(plan).is_on() {
        needs.push(Feature::Paths);
    }
    if plan.ecn.is_some() {
        needs.push(Feature::Ecn);
    }
    if let Some(why) = needs.into_iter().find_map(|f| caps.lacks(f)) {
        bail!("{why}");
    }
    Ok(())
}

/// What the other end would refuse of the request, where its dialect
/// cannot say what it asks (iperf3's parameters): the option named.
pub(crate) fn refuse_spec(spec: &TestSpec, caps: &Capabilities) -> Result<()> {
    match caps.refuses(spec) {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

fn run_test(
    plan: &Plan,
    d: &mut Control,
    ctx: &Context,
    mut fam: Box<dyn Family>,
) -> Result<Measurement> {
    refuse_lacking(plan, &*fam, d.caps())?;
    if plan.flows > 1 {
        context::raise_open_files(plan.flows).map_err(|why| anyhow::anyhow!(why))?;
    }
    let protocol = plan.test.protocol();
    let p = prepare(plan, d, protocol)?;
    let ours = fam.resolve(plan, &p)?;
    let trace = Trace::new(plan, &p, &ours);
    let spec = request_of(plan, &p, &ours, d.caps())?;
    refuse_spec(&spec, d.caps())?;
    let grant = request(plan, d, &spec)?;
    debug::hp(|| format!("remote listen done.\nremote port is {}", grant.data_port));
    let to = SocketAddr::new(p.data_ip, grant.data_port);
    let local_setup = (p.lss, p.lsr, p.tos);
    let stop = StopFlag::new();
    let r = Run {
        plan,
        ctx,
        grant: &grant,
        to,
        conv: p.conventions(d),
        stop: &stop,
        driver: p.driver,
    };
    fam.connect(&r, p)?;
    d.start()?;
    if let Some(cpu) = plan.local.cpu_bind {
        sockopt::pin_current_thread(cpu)?;
    }
    if let Length::Seconds(s) = plan.length {
        debug::hp(|| format!("About to start a timer for {s} seconds."));
    }
    let _timer = fam.timer(plan, &stop, d.caps())?;
    let _int = interrupt::stop_on_interrupt(&stop);
    if let Some(g) = &plan.stop_group {
        g.join(&stop);
    }
    let phase = ctx.begin(plan)?;
    let zc = plan.zerocopy.then(engine::stream::zc::figures);
    let mut local = data_phase(&mut *fam, &r, &ours, d)?;
    if let Some(before) = zc {
        local.counts.tx = engine::stream::zc::since(before);
    }
    let interim;
    (local.counts.cpu, interim) = phase.end();
    ctx.unwatch();
    trace.ended(plan, protocol);
    let remote = d.finish(fam.done(&local), &local.counts, results_wait(plan))?;
    let remote_interim = d.take_interims();
    let remote_facts = d.take_facts();
    debug::hp(|| "remote results obtained".into());
    fam.check(plan, &local, &remote, d.caps())?;
    if d.caps().summary {
        d.summary(summary_of(
            &local.counts,
            local.latency.as_ref(),
            local.lost,
        ));
    }
    let (lss, lsr, tos) = local_setup;
    let rs = fam.remote_sizes(plan, &grant);
    let ours = Ours {
        sizes: local.sizes.unwrap_or(ours.sizes),
        ..ours
    };
    Ok(Measurement {
        elapsed: local.elapsed.as_secs_f64(),
        local: Side {
            counts: local.counts,
            asked: plan.local.clone(),
            send_buf: lss,
            recv_buf: lsr,
            send_size: ours.sizes.send_size,
            recv_size: ours.sizes.recv_size,
            send_width: ours.sizes.send_width,
            recv_width: ours.sizes.recv_width,
            addr: local.addr,
            tos,
            rtt_over_time: rtts(interim.iter().map(|s| &s.tcp)),
        },
        remote: Side {
            counts: remote,
            asked: spec.server,
            addr: Some(to),
            rtt_over_time: rtts(remote_interim.iter().map(|r| &r.tcp)),
            ..granted(&grant, &rs)
        },
        mss: local.mss,
        send_errors: local.send_errors,
        latency: local.latency,
        lost: local.lost,
        flows: local.flows,
        remote_interim,
        remote_facts,
        interim,
        scenario: None,
        one_way: None,
        stamp: None,
    })
}

/// The netserver's side as its grant and the family's sizes say.
fn granted(grant: &Grant, rs: &Resolved) -> Side {
    Side {
        send_buf: grant.send_buf,
        recv_buf: grant.recv_buf,
        send_size: rs.send_size,
        recv_size: rs.recv_size,
        send_width: rs.send_width,
        recv_width: rs.recv_width,
        tos: None,
        ..Side::default()
    }
}

/// The family's data phase. Where the other end sends until it is told
/// the end (its sender does not stop by itself: an iperf3 server) and we
/// receive, the end is told on the control connection once our time is up
/// or we are interrupted (the stop flag), while our receivers read what is
/// still on its way, up to the server's end of its streams.
fn data_phase(fam: &mut dyn Family, r: &Run<'_>, ours: &Ours, d: &mut Control) -> Result<Local> {
    if d.caps().stops_itself || r.plan.test.direction() != Direction::Receive {
        return fam.run(r, ours);
    }
    let over = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (stop, over) = (r.stop.clone(), &over);
        let teller = s.spawn(move || -> Result<()> {
            while !stop.is_set() {
                if over.load(Ordering::Relaxed) {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            debug::line(1, || "our time is up: telling the server the end".into());
            d.tell_end()
        });
        let local = fam.run(r, ours);
        over.store(true, Ordering::Relaxed);
        let told = teller
            .join()
            .map_err(|_| anyhow::anyhow!("the thread telling the server the end panicked"))?;
        let local = local?;
        told?;
        Ok(local)
    })
}

/// The round-trip times of TCP_INFO samples, in time order.
fn rtts<'a>(samples: impl Iterator<Item = &'a Vec<proto::TcpSample>>) -> Vec<u32> {
    samples.flatten().map(|t| t.rtt_us).collect()
}

/// What we made of a test, for the netserver's `--record`.
fn summary_of(
    counts: &SideResults,
    latency: Option<&engine::latency::LatencySummary>,
    lost: u64,
) -> proto::ClientSummary {
    let us = |ns: f64| ns / 1000.0;
    proto::ClientSummary {
        local: counts.clone(),
        latency: latency.map(|l| proto::LatencyFigures {
            min_us: us(l.min as f64),
            mean_us: us(l.mean),
            p50_us: us(l.p50 as f64),
            p90_us: us(l.p90 as f64),
            p99_us: us(l.p99 as f64),
            max_us: us(l.max as f64),
        }),
        lost,
    }
}

/// netperf 2.7's `-d` lines about our first data socket: made, its
/// buffers, our rings; at the end, the buffers a TCP connection grew to
/// (when `-s`/`-S` left them to the kernel), and its close.
struct Trace {
    /// The socket's descriptor, as netperf 2.7 prints it.
    fd: i64,
    /// Another handle on the first data connection, read once the data
    /// phase is over (TCP's stream and request/response tests; TCP_CRR's
    /// first connection is long closed by then).
    probe: Option<Socket>,
}

impl Trace {
    fn new(plan: &Plan, p: &Prepared, ours: &Ours) -> Trace {
        if debug::level() == 0 {
            return Trace {
                fd: -1,
                probe: None,
            };
        }
        let fd = debug::descriptor(&p.sock);
        debug::hp(|| format!("create_data_socket: socket {fd} obtained..."));
        debug::socket_size("send", p.lss);
        debug::socket_size("receive", p.lsr);
        let s = ours.sizes;
        if s.send_width > 0 {
            debug::hp(|| {
                format!(
                    "send_omni_inner: {} entry send_ring obtained...",
                    s.send_width
                )
            });
        }
        if s.recv_width > 0 {
            debug::hp(|| {
                format!(
                    "send_omni_inner: {} entry recv_ring obtained...",
                    s.recv_width
                )
            });
        }
        let connected = matches!(
            plan.test,
            TestKind::TcpStream | TestKind::TcpMaerts | TestKind::TcpRr
        );
        Trace {
            fd,
            probe: connected.then(|| p.sock.try_clone().ok()).flatten(),
        }
    }

    fn ended(self, plan: &Plan, protocol: Protocol) {
        if debug::level() == 0 {
            return;
        }
        if let Some(sock) = &self.probe {
            let (send, recv) = sockopt::buffer_sizes(SockRef::from(sock));
            if plan.local.recv_buf.is_none() {
                debug::socket_size("receive", recv);
            }
            if plan.local.send_buf.is_none() {
                debug::socket_size("send", send);
            }
        }
        let number = match protocol {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
        };
        debug::hp(|| {
            format!(
                "disconnect_data_socket sock {} init 1 do_close 1 protocol {number}",
                self.fd
            )
        });
    }
}

/// The request that goes on the wire for this plan, before our data socket
/// exists (only what the plan says), with the family of the data
/// connections; refused here if no netserver would run it.
pub fn spec_for(plan: &Plan, family: AddrFam) -> Result<TestSpec> {
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
    spec.flows = plan.flows;
    spec.window = plan.window;
    spec.paths = paths_of(plan);
    spec.ecn = plan.ecn.map(|mark| proto::ecn::EcnAsk {
        mark,
        // the netserver counts what it receives of a UDP test
        count: matches!(plan.test, TestKind::UdpStream | TestKind::UdpRr),
        interval_ms: ecn_interval_ms(plan),
    });
    validate(&spec)?;
    Ok(spec)
}

/// The interval ECN's codepoints are counted by: the interim interval
/// (`-D`) where there is one, else a second.
pub(crate) fn ecn_interval_ms(plan: &Plan) -> u32 {
    plan.interim
        .map_or(1000.0, |(secs, _)| (secs * 1000.0).round())
        .clamp(10.0, 3_600_000.0) as u32
}

/// The driver our flows run on: the request's choice, as the netserver
/// makes it (proto's `TestSpec::driver`: io_uring when asked, event loops
/// for many flows or a window, one flow's blocking calls otherwise), on
/// our threads (`--threads`, or our default).
pub(crate) fn driver_for(plan: &Plan, family: AddrFam) -> Result<Driver> {
    let threads = u32::try_from(context::threads(plan)).unwrap_or(u32::MAX);
    Ok(match spec_for(plan, family)?.driver(1) {
        Driver::Blocking => Driver::Blocking,
        Driver::Loops { .. } => Driver::Loops { threads },
        Driver::Uring { .. } => Driver::Uring { threads },
    })
}

/// The data path's calls the netserver is told: its receive path where it
/// receives a TCP stream, io_uring at both ends.
pub(crate) fn paths_of(plan: &Plan) -> Paths {
    Paths {
        rx: if plan.test == TestKind::TcpStream {
            plan.rx
        } else {
            RxPath::Copy
        },
        uring: plan.uring,
    }
}

/// How our end receives a TCP stream (TCP_MAERTS's receiver).
pub(crate) fn local_rx(plan: &Plan) -> RxPath {
    if plan.test == TestKind::TcpMaerts {
        plan.rx
    } else {
        RxPath::Copy
    }
}

/// Refuse what no netserver would run before asking one (the server checks
/// again against its own limits).
fn validate(spec: &TestSpec) -> Result<()> {
    spec.validate(&Limits {
        max_duration_ms: u64::MAX,
        ..Limits::default()
    })?;
    Ok(())
}

/// The request, once, from the plan, our prepared socket and our resolved
/// side: where our data comes from, netperf 2.7's rule that the netserver's
/// send ring is as wide as ours when a stream test sends, the fast paths.
fn request_of(plan: &Plan, p: &Prepared, ours: &Ours, caps: &Capabilities) -> Result<TestSpec> {
    let mut spec = spec_for(plan, p.family)?;
    // the netserver's figures every interval, where it reports them
    spec.interim_ms = plan.interim_interval().filter(|_| caps.interim).map(|s| {
        (s * 1000.0)
            .round()
            .clamp(f64::from(proto::test::MIN_INTERIM_MS), 3_600_000.0) as u32
    });
    if p.names_data_addr {
        spec.data_addr = Some(p.data_ip);
    }
    spec.peer_data_port = p.udp_port;
    if matches!(plan.test, TestKind::TcpStream | TestKind::UdpStream)
        && spec.server.send_width.is_none()
    {
        spec.server.send_width = Some(ours.sizes.send_width);
    }
    spec.udp_fast = ours.udp_fast;
    // what we send a call, for a server whose parameters carry one size
    // for both ends (iperf3's `len`: its datagrams' size)
    if plan.test.direction() == Direction::Send {
        spec.iperf3.client_send_size = Some(ours.sizes.send_size).filter(|&n| n > 0);
    }
    validate(&spec)?;
    Ok(spec)
}

/// Check what can be checked once the control connection is up, before
/// anything is printed or asked of the netserver; the request each
/// iteration sends, as far as it is known before our data socket exists.
pub fn preflight(plan: &Plan, d: &Control) -> Result<TestSpec> {
    let family = sockopt::family_of(&d.peer());
    let spec = spec_for(plan, family)?;
    if plan.test == TestKind::UdpStream
        && let Some(size) = plan.local.send_size
    {
        check_send_size(size, family)?;
    }
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
                if let Some(why) = d.caps().lacks(Feature::SharedPort) {
                    bail!("{both}: {why}; or {two}");
                }
            }
            TestKind::UdpRr => {
                bail!("{both}: the netserver's responses would come back to its own socket; {two}")
            }
            _ => bail!("{both}: a TCP connection cannot have the same address at both ends; {two}"),
        }
    }
    Ok(spec)
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

/// Our first data socket and where data goes, made before the netserver is
/// asked, so that the buffer sizes we report are the ones the kernel gave
/// before the connection (netperf does the same).
pub(crate) struct Prepared {
    /// The address data connections go to (the port is the grant's).
    pub data_ip: IpAddr,
    /// The request names it (not the control connection's).
    pub names_data_addr: bool,
    /// The address our data sockets bind to, and whether to bind (TCP
    /// binds only when asked: `-- -L` or `-- -P lport`).
    pub local: SocketAddr,
    pub bind: bool,
    pub family: AddrFam,
    pub sock: Socket,
    /// Our socket buffer sizes, send and receive.
    pub lss: u32,
    pub lsr: u32,
    /// The TOS byte the kernel kept, when `-Y` set one.
    pub tos: Option<u32>,
    /// A UDP socket's port, bound before the request (which names it).
    pub udp_port: Option<u16>,
    /// Both ends' data sockets have this one port on this host.
    pub shared_port: Option<u16>,
    /// The driver our flows run on ([`driver_for`]).
    pub driver: Driver,
}

impl Prepared {
    /// The data path's conventions for this test: the netserver's, with a
    /// UDP datagram proven by its address and port when both ends share
    /// one (no hello: its echo would reach the netserver's own socket).
    pub fn conventions(&self, d: &Control) -> Conventions {
        let conv = d.conventions();
        match self.shared_port {
            Some(_) => Conventions {
                proof: engine::conventions::Proof::ControlPeer,
                ..conv
            },
            None => conv,
        }
    }

    /// A socket like the prepared one, for another flow: options applied,
    /// bound as the first is.
    pub fn another(&self, plan: &Plan, protocol: Protocol) -> Result<Socket> {
        let s = new_data_socket(plan, self.family, protocol)?;
        if self.bind || protocol == Protocol::Udp {
            // (no SO_REUSEADDR: on an ephemeral port it lets the kernel
            // give two UDP flows one port, and the netserver's socket of
            // one would take the other's datagrams)
            let local = SocketAddr::new(self.local.ip(), 0);
            s.bind(&local.into())
                .with_context(|| format!("-- -L: cannot bind a data socket to {local}"))?;
        }
        Ok(s)
    }
}

/// A data socket with our side's options.
fn new_data_socket(plan: &Plan, family: AddrFam, protocol: Protocol) -> Result<Socket> {
    let sock = sockopt::new_socket(family, protocol)?;
    sockopt::apply_side(&sock, &plan.local, family, protocol, plan.keepalive)
        .context("local data socket")?;
    let local = context::local_opts(plan);
    sockopt::apply_local(&sock, &local, family, protocol).context("local data socket")?;
    // what our kernel did not take of what was asked, said once a run
    // (the socket's own values are what the output reports)
    static SAID: std::sync::Once = std::sync::Once::new();
    let mut refused = sockopt::not_applied(&sock, &plan.local, Some(&local));
    // (a congestion control refused is said after the test, both ends')
    refused.retain(|w| !w.starts_with("-K"));
    if !refused.is_empty() {
        SAID.call_once(|| {
            for w in refused {
                eprintln!("netperf: warning: {w}");
            }
        });
    }
    Ok(sock)
}

/// The data connections' addresses: the control connection's, or what
/// `-- -H`, `-- -L` and `-- -4`/`-6` say. Returns (the netserver's data
/// address, the address we bind to, whether it must be sent to the
/// netserver, the family).
pub(crate) fn data_endpoints(plan: &Plan, d: &Control) -> Result<(IpAddr, IpAddr, bool, AddrFam)> {
    let peer = d.peer();
    let control_family = sockopt::family_of(&peer);
    let family = match plan.data_family {
        AddrFamily::V4 => AddrFam::V4,
        AddrFamily::V6 => AddrFam::V6,
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
                    match family {
                        AddrFam::V4 => '4',
                        AddrFam::V6 => '6',
                    }
                )
            })?
        }
    };
    let local_ip = match &plan.data_local {
        Some(l) => resolve_in(l, family).with_context(|| format!("-- -L {l}"))?,
        None if family == control_family && data_ip == peer.ip() => d.local().ip(),
        None => unspecified(family),
    };
    Ok((data_ip, local_ip, data_ip != peer.ip(), family))
}

fn unspecified(f: AddrFam) -> IpAddr {
    match f {
        AddrFam::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AddrFam::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// The first address of `host` in `family`.
pub(crate) fn resolve_in(host: &str, family: AddrFam) -> Result<IpAddr> {
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
                    AddrFam::V4 => "IPv4",
                    AddrFam::V6 => "IPv6",
                }
            )
        })
}

fn prepare(plan: &Plan, d: &Control, protocol: Protocol) -> Result<Prepared> {
    let (data_ip, local_ip, names_data_addr, family) = data_endpoints(plan, d)?;
    let sock = new_data_socket(plan, family, protocol)?;
    let (lss, lsr) = sockopt::buffer_sizes(SockRef::from(&sock));
    let tos = plan.local.tos.and_then(|_| sockopt::tos(&sock, family));
    let port = plan.local_data_port.unwrap_or(0);
    debug::line(1, || {
        format!(
            "data socket: {protocol:?} over {family:?}, to {data_ip}, from {local_ip}; socket buffers {lss} send, {lsr} receive"
        )
    });
    // netperf 2.7 binds a UDP data socket to the wildcard unless `-- -L`
    // names an address: with one port for both ends on one host, the
    // netserver's socket, bound to its address, is then the one the
    // kernel hands the datagrams to.
    let local_ip = if protocol == Protocol::Udp && plan.data_local.is_none() {
        unspecified(family)
    } else {
        local_ip
    };
    let mut p = Prepared {
        data_ip,
        names_data_addr,
        local: SocketAddr::new(local_ip, port),
        bind: plan.data_local.is_some() || port != 0,
        family,
        sock,
        lss,
        lsr,
        tos,
        udp_port: None,
        shared_port: shared_port(plan, data_ip),
        driver: driver_for(plan, family)?,
    };
    if protocol == Protocol::Udp {
        // bound before the test is asked for, as netperf 2.7 does: as `-- -L`
        // and `-P` ask, or to the wildcard on an ephemeral port; the request
        // names the port (netperf 2.7's netserver sends a UDP receive test's
        // datagrams there)
        let local = if p.bind {
            p.local
        } else {
            SocketAddr::new(unspecified(family), 0)
        };
        let _ = p.sock.set_reuse_address(p.bind);
        p.sock
            .bind(&local.into())
            .with_context(|| format!("-- -L/-P: cannot bind the UDP data socket to {local}"))?;
        p.udp_port = p
            .sock
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.port());
    }
    Ok(p)
}

/// Ask the netserver to set up its side; then the global `-w` pause.
fn request(plan: &Plan, d: &mut Control, spec: &TestSpec) -> Result<Grant> {
    debug::line(1, || {
        format!(
            "requesting {} ({:?} data, ends {:?}) of the netserver at {}",
            spec.kind,
            spec.family,
            spec.end,
            d.peer()
        )
    });
    debug::line(2, || format!("request: {spec:?}"));
    let grant = d.setup(spec)?;
    debug::line(1, || {
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

/// How long to wait for the server's results after our data phase.
fn results_wait(plan: &Plan) -> Duration {
    match plan.length {
        Length::Seconds(s) => Duration::from_secs(30 + s),
        Length::Count(_) => Duration::from_secs(330),
    }
}

/// A TCP socket connected to `to` (bound to `bind` first, when given),
/// within 10 s.
pub(crate) fn connect_tcp(
    sock: Socket,
    bind: Option<SocketAddr>,
    to: SocketAddr,
    what: &str,
) -> Result<std::net::TcpStream> {
    if let Some(local) = bind {
        let _ = sock.set_reuse_address(true);
        sock.bind(&local.into())
            .with_context(|| format!("-- -L/-P: cannot bind the data socket to {local}"))?;
    }
    sock.connect_timeout(&to.into(), Duration::from_secs(10))
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EMFILE) {
                anyhow::anyhow!(
                    "{what}: out of file descriptors (ulimit -n; the hard limit is {})",
                    context::open_files_limit().1
                )
            } else {
                anyhow::anyhow!("{what} to {to}: {e}")
            }
        })?;
    Ok(sock.into())
}

/// Every flow's TCP connection, connected and proven (its token and flow
/// number, by the conventions) before any data moves: the prepared socket
/// is flow 0's. With them, flow 0's segment size right after connect,
/// before any byte (TCP_MSS's figure, as netperf 2.7 reads it).
pub(crate) fn connect_flows(
    r: &Run<'_>,
    p: Prepared,
) -> Result<(Vec<std::net::TcpStream>, Option<u32>)> {
    let mut mss = None;
    let n = r.plan.flows.max(1);
    let mut conns = Vec::with_capacity(n as usize);
    for i in 0..n {
        let (sock, bind) = if i == 0 {
            (p.sock.try_clone()?, p.bind.then_some(p.local))
        } else {
            (p.another(r.plan, Protocol::Tcp)?, None)
        };
        let what = if n > 1 {
            format!("data connection {i}")
        } else {
            "data connection".to_string()
        };
        let c = connect_tcp(sock, bind, r.to, &what)?;
        if i == 0 {
            mss = sockopt::mss(SockRef::from(&c));
        }
        r.conv.present(&c, &r.grant.token, i)?;
        r.ctx.watch_tcp(&c);
        conns.push(c);
    }
    Ok((conns, mss))
}

/// A message size that must go out as one datagram.
pub(crate) fn check_send_size(size: u32, family: AddrFam) -> Result<u32> {
    let max = family.max_udp_payload();
    let fam = match family {
        AddrFam::V4 => "IPv4",
        AddrFam::V6 => "IPv6",
    };
    if size == 0 || size > max {
        bail!(
            "-m: a UDP message of {size} bytes cannot be sent as one datagram over {fam} (1 to {max} bytes)"
        );
    }
    Ok(size)
}
