//! Data sockets: where they bind, which ports they take, what a shortage
//! of descriptors or ports is called, and many flows run on the engine's
//! event loops.

use std::{
    net::{IpAddr, SocketAddr, TcpStream, UdpSocket},
    time::Duration,
};

use engine::{conventions::Conventions, sockopt, stream::udp::Drain};
use proto::{Driver, ErrorCode, ErrorMsg, Protocol, SideResults, SideSpec, TestSpec, Token};
use socket2::Socket;

use super::ctl::TestCtl;
use crate::{
    config::Config,
    error::{aborted, data_socket_error, failed},
};

/// A test of many flows: every connection on event loops (a thread per
/// CPU, at most one per flow), each flow's counters in the results.
///
/// With a window (`--warmup`/`--cooldown`) the results cover it, each end
/// by its own clock from the common start, and the whole run's counters go
/// in `totals`, for the client's check to the byte.
pub(crate) fn run_flows_on_loops(
    spec: &TestSpec,
    conns: Vec<TcpStream>,
    role: engine::evloop::Role,
    conv: &Conventions,
    ctl: &TestCtl,
) -> Result<SideResults, ErrorMsg> {
    let driver = spec.driver(engine::cpu::count());
    let threads = match driver {
        Driver::Loops { threads } | Driver::Uring { threads } => threads as usize,
        Driver::Blocking => 1,
    };
    let window = match (spec.window, spec.end) {
        (Some(w), proto::TestEnd::Time { millis }) => Some(w.bounds(Duration::from_millis(millis))),
        _ => None,
    };
    let plan = engine::evloop::Plan {
        role,
        threads,
        cpus: Vec::new(),
        linger: Duration::from_secs(60),
        silence: Duration::from_secs(120),
        window,
        rx: spec.paths.rx,
        // (iperf3's clients: see Reader::batching)
        batch_wakes: spec.iperf3.batch_wakes,
        zerocopy: false,
        end: engine::stream::tcp::SenderEnd::server(conv),
        ecn: spec.ecn.is_some(),
    };
    let report = engine::drive::flows(driver, conns, &plan, &ctl.stop, &ctl.live).map_err(|e| {
        if ctl.is_aborted() {
            aborted()
        } else {
            failed("data connections", e)
        }
    })?;
    Ok(report.results())
}

/// A test's data sockets as the listener of the session's own port hands
/// them over, proven already (iperf3's TCP streams present their session's
/// cookie there, its UDP streams' first datagram is answered there), and
/// whom to tell when they are all in.
pub(crate) struct Handed<T> {
    pub streams: std::sync::mpsc::Receiver<T>,
    pub all_in: Box<dyn Fn() + Send>,
}

/// A test's handed sockets, by protocol.
pub(crate) enum HandedSocks {
    Tcp(Handed<TcpStream>),
    Udp(Handed<UdpSocket>),
}

impl<T: engine::sys::Sock> Handed<T> {
    /// The test's `n` sockets, in the order they came, each set up as the
    /// test asks of the server's side and registered with the test; then
    /// whoever waits is told they are all in.
    pub(crate) fn take(
        self,
        spec: &TestSpec,
        n: usize,
        deadline: std::time::Instant,
        ctl: &TestCtl,
    ) -> Result<Vec<T>, ErrorMsg> {
        let protocol = spec.kind.protocol();
        let side = server_side(spec, protocol);
        let mut socks = Vec::with_capacity(n);
        while socks.len() < n {
            if ctl.is_aborted() {
                return Err(aborted());
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(ErrorMsg::new(
                    ErrorCode::Timeout,
                    format!("{} of the test's {n} streams came in time", socks.len()),
                ));
            }
            let wait = (deadline - now).min(Duration::from_millis(200));
            match self.streams.recv_timeout(wait) {
                Ok(s) => {
                    sockopt::apply_side(
                        &socket2::SockRef::from(&s),
                        &side,
                        spec.family,
                        protocol,
                        spec.keepalive,
                    )
                    .map_err(|e| ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()))?;
                    if protocol == Protocol::Tcp {
                        ctl.register_stream(&s);
                    } else {
                        ctl.register(&s);
                    }
                    socks.push(s);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(aborted()),
            }
        }
        (self.all_in)();
        Ok(socks)
    }
}

/// UDP tests of many flows on the engine's event loops (as many threads as
/// CPUs, at most one a flow), each flow on its own connected socket; a
/// receiver learns from the session when netperf is done.
pub(crate) fn run_udp_flows_on_loops(
    spec: &TestSpec,
    socks: Vec<UdpSocket>,
    role: engine::evloop::udp::UdpRole,
    conv: Conventions,
    token: &Token,
    ctl: &TestCtl,
) -> Result<Vec<engine::evloop::udp::UdpFlowEnd>, ErrorMsg> {
    run_udp_flows_counted(spec, socks, None, role, conv, token, ctl)
}

/// [`run_udp_flows_on_loops`], a sender's flows each stopping at `count`
/// bytes if given.
pub(crate) fn run_udp_flows_counted(
    spec: &TestSpec,
    socks: Vec<UdpSocket>,
    count: Option<u64>,
    role: engine::evloop::udp::UdpRole,
    conv: Conventions,
    token: &Token,
    ctl: &TestCtl,
) -> Result<Vec<engine::evloop::udp::UdpFlowEnd>, ErrorMsg> {
    let threads = match spec.driver(engine::cpu::count()) {
        Driver::Loops { threads } | Driver::Uring { threads } => threads as usize,
        Driver::Blocking => 1,
    };
    let receiving = matches!(role, engine::evloop::udp::UdpRole::Recv);
    let plan = engine::evloop::udp::UdpPlan {
        role,
        threads,
        cpus: &[],
        conv,
        fast: spec.udp_fast,
        token,
        drain: receiving.then_some(ctl as &(dyn Drain + Sync)),
        linger: Duration::from_secs(60),
        ecn: spec
            .ecn
            .filter(|e| e.count && receiving)
            .map(|e| e.interval_ms),
    };
    let flows = socks.into_iter().map(|s| (s, count)).collect();
    engine::evloop::udp::run(flows, &plan, &ctl.stop, &ctl.live).map_err(|e| {
        if ctl.is_aborted() {
            aborted()
        } else {
            failed("UDP data sockets", e)
        }
    })
}

/// Where the data sockets bind: the control connection's address, or the
/// one netperf named (`-- -H`, or a data family other than the control
/// connection's, `-- -4`/`-6`). It must be a unicast address of this host
/// (binding fails otherwise); a data connection must still present the
/// test's token, and a UDP peer at another address than the control
/// connection's must prove it receives there (see engine's UDP hello).
pub(crate) fn data_address(spec: &TestSpec, control: IpAddr) -> Result<IpAddr, ErrorMsg> {
    let Some(a) = spec.data_addr else {
        return Ok(control);
    };
    let bad = a.is_unspecified()
        || a.is_multicast()
        || matches!(a, IpAddr::V4(v4) if v4.is_broadcast())
        || sockopt::family_of(&SocketAddr::new(a, 0)) != spec.family;
    if bad {
        return Err(ErrorMsg::new(
            ErrorCode::InvalidRequest,
            format!(
                "-- -H: {a} is not a unicast address of the data family for netserver's data sockets"
            ),
        ));
    }
    Ok(a)
}

/// Bind a data socket of `protocol` on `local`, at a port the
/// administrator's range and the client's request allow; TCP sockets also
/// listen.
pub(crate) fn bind_data(
    spec: &TestSpec,
    local: IpAddr,
    cfg: &Config,
    protocol: Protocol,
) -> Result<Socket, ErrorMsg> {
    let family = sockopt::family_of(&SocketAddr::new(local, 0));
    if family != spec.family {
        return Err(ErrorMsg::new(
            ErrorCode::InvalidRequest,
            format!(
                "data family {:?} differs from the control connection's ({local}); netserver binds data sockets to the control connection's address",
                spec.family
            ),
        ));
    }
    let side = server_side(spec, protocol);
    let ports = candidate_ports(spec.data_port, cfg.data_ports)?;
    let mut last_err = None;
    for port in ports {
        let sock = sockopt::new_socket(family, protocol)
            .map_err(|e| data_socket_error("open a data socket", &e, e.io_error()))?;
        let _ = sock.set_reuse_address(true);
        sockopt::apply_side(&sock, &side, family, protocol, spec.keepalive)
            .map_err(|e| ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()))?;
        // what the kernel did not take of what the client asked (its
        // client reads the same off the results: the socket's own values)
        for why in sockopt::not_applied(&sock, &spec.server, None) {
            cfg.logger
                .warn_limited("sockopt", &format!("{}: {why}", spec.kind));
        }
        if protocol == Protocol::Tcp {
            // netperf 2.7's netserver: 5 seconds, and a queue of 5.
            if spec.defer_accept {
                sockopt::set_defer_accept(&sock, 5)
                    .map_err(|e| ErrorMsg::new(ErrorCode::Resource, format!("netserver: {e}")))?;
            }
            if spec.fastopen {
                sockopt::set_fastopen_listener(&sock, 5)
                    .map_err(|e| ErrorMsg::new(ErrorCode::Resource, format!("netserver: {e}")))?;
            }
        }
        match sock.bind(&SocketAddr::new(local, port).into()) {
            Ok(()) => {
                if protocol == Protocol::Tcp {
                    let backlog = i32::try_from(spec.flows.saturating_add(8)).unwrap_or(i32::MAX);
                    sock.listen(backlog).map_err(|e| {
                        data_socket_error("listen for data connections", &e, Some(&e))
                    })?;
                }
                return Ok(sock);
            }
            Err(e) => last_err = Some((port, e)),
        }
    }
    Err(match last_err {
        Some((port, e)) if spec.data_port.is_some() => ErrorMsg::new(
            ErrorCode::Resource,
            format!("netserver cannot bind data port {port}: {e}"),
        ),
        Some((_, e)) => ErrorMsg::new(
            ErrorCode::Resource,
            format!("netserver has no free data port: {e}"),
        ),
        None => ErrorMsg::new(ErrorCode::Resource, "netserver has no data port to offer"),
    })
}

/// What the server applies of the client's request for its side:
/// - a congestion control algorithm only if the administrator allows it to
///   unprivileged users (net.ipv4.tcp_allowed_congestion_control): running
///   as root, the daemon could otherwise load and select any. As netperf
///   2.7 does with one it cannot set, the test runs with the default, and
///   the algorithm in use is what REMOTE_CONG_CONTROL reports;
/// - the TOS byte as netperf 2.7's netserver sets it, ECN bits included,
///   but never CE: a congestion signal is a queue's to set, not an end's
///   (the byte's DSCP goes out not-ECT instead); with `--ecn`, a UDP
///   test's own sends carry the asked codepoint beside the DSCP (TCP
///   negotiates its own: the kernel keeps a TCP socket's ECN bits).
pub(crate) fn server_side(spec: &TestSpec, protocol: Protocol) -> SideSpec {
    let mut side = spec.server.clone();
    if protocol == Protocol::Tcp
        && let Some(cc) = &side.cong_control
    {
        let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
            .unwrap_or_default();
        if !allowed.split_whitespace().any(|a| a == cc) {
            side.cong_control = None;
        }
    }
    side.tos = proto::ecn::server_tos(side.tos, spec.ecn, protocol == Protocol::Udp);
    side
}

/// The port a bound socket got.
pub(crate) fn bound_port(sock: &Socket) -> Result<u16, ErrorMsg> {
    sock.local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.port())
        .ok_or_else(|| ErrorMsg::new(ErrorCode::Resource, "data socket has no port"))
}

/// The lowest data port a client may choose without `--data-ports`.
pub const MIN_CLIENT_PORT: u16 = 1024;

/// Ports to try, in order.
fn candidate_ports(
    requested: Option<u16>,
    range: Option<(u16, u16)>,
) -> Result<Vec<u16>, ErrorMsg> {
    match (requested, range) {
        (Some(0) | None, None) => Ok(vec![0]),
        // A client may choose an unprivileged port (netperf's `-- -P ,port`,
        // how Kubernetes and firewall users pin data connections).
        (Some(p), None) if p >= MIN_CLIENT_PORT => Ok(vec![p]),
        (Some(p), None) => Err(ErrorMsg::new(
            ErrorCode::InvalidRequest,
            format!(
                "data port {p} requested: ports below {MIN_CLIENT_PORT} are only allowed inside the range this netserver's administrator sets with --data-ports MIN-MAX"
            ),
        )),
        (Some(p), Some((lo, hi))) if p != 0 => {
            if (lo..=hi).contains(&p) {
                Ok(vec![p])
            } else {
                Err(ErrorMsg::new(
                    ErrorCode::InvalidRequest,
                    format!("data port {p} is outside this netserver's data port range {lo}-{hi}"),
                ))
            }
        }
        (_, Some((lo, hi))) => {
            // Start at a random point of the range so that concurrent
            // sessions do not all race for its first port.
            let n = u32::from(hi - lo) + 1;
            let mut r = [0u8; 4];
            let _ = getrandom::fill(&mut r);
            let start = u32::from_le_bytes(r) % n;
            Ok((0..n).map(|i| lo + ((start + i) % n) as u16).collect())
        }
    }
}
