//! The server's side of each test family, and what they share: the data
//! listener, the token check on incoming data connections, and the control
//! block through which the session stops or aborts a running test.

pub mod proof;
pub mod rr;
pub mod stream;
pub mod udp_stream;

pub(crate) use proof::{Expect, accept_flows, udp_hello};

use std::{
    net::{IpAddr, SocketAddr, TcpStream, UdpSocket},
    os::fd::AsFd,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use engine::{
    conventions::Conventions,
    sockopt,
    stream::udp::{self, Drain},
    timer::StopFlag,
};
use proto::{
    ClientDone, ErrorCode, ErrorMsg, Grant, Protocol, SideResults, SideSpec, TestKind, TestSpec,
    Token,
};
use socket2::Socket;

use crate::Config;

/// What the session and a running test share.
#[derive(Debug)]
pub struct TestCtl {
    /// Raised to end the data loops (abort, or netperf is done).
    pub stop: StopFlag,
    aborted: AtomicBool,
    sockets: Mutex<Vec<Socket>>,
    /// The TCP data connections among them (not listeners, not UDP).
    streams: Mutex<Vec<Socket>>,
    /// Listeners that a test accepts on until netperf is done.
    listeners: Mutex<Vec<Socket>>,
    done: Mutex<Option<ClientDone>>,
    done_changed: Condvar,
    /// Datagrams netperf sent, once it has said (u64::MAX until then).
    expected_datagrams: AtomicU64,
    /// Data connections closed as not the test's: all of them, and those
    /// during the measurement.
    foreign: AtomicU64,
    foreign_measured: AtomicU64,
}

impl Default for TestCtl {
    fn default() -> Self {
        TestCtl {
            stop: StopFlag::default(),
            aborted: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            streams: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            done: Mutex::new(None),
            done_changed: Condvar::new(),
            expected_datagrams: AtomicU64::new(u64::MAX),
            foreign: AtomicU64::new(0),
            foreign_measured: AtomicU64::new(0),
        }
    }
}

impl Drain for TestCtl {
    fn expected(&self) -> Option<u64> {
        match self.expected_datagrams.load(Ordering::Relaxed) {
            u64::MAX => None,
            n => Some(n),
        }
    }

    fn aborted(&self) -> bool {
        self.is_aborted()
    }
}

impl TestCtl {
    /// Remember a data socket, so that an abort can wake a loop blocked on
    /// it. If the test was already aborted, shut it down now.
    pub fn register(&self, sock: &impl AsFd) {
        if self.is_aborted() {
            let _ = socket2::SockRef::from(sock).shutdown(std::net::Shutdown::Both);
        }
        keep(&self.sockets, sock);
    }

    /// Remember a TCP data connection (see [`TestCtl::end_now`]).
    pub fn register_stream(&self, sock: &impl AsFd) {
        self.register(sock);
        keep(&self.streams, sock);
    }

    /// Remember a listener that the test accepts on until netperf is
    /// done, so that the end wakes the accepting threads at once.
    pub fn register_listener(&self, sock: &impl AsFd) {
        self.register(sock);
        keep(&self.listeners, sock);
    }

    /// End the test as its natural end would, by the server's clock: the
    /// loops stop, a UDP receiver takes what has arrived, and a TCP
    /// connection's receive side ends as if the peer had closed (netserver
    /// 2.7's padded timer, for a netperf 2.7 client).
    pub fn end_now(&self) {
        self.set_client_done(ClientDone { datagrams_sent: 0 });
        shut_down(&self.streams, std::net::Shutdown::Read);
    }

    /// Stop the test now: raise the flag and shut down every data socket,
    /// which wakes any thread blocked on one.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.stop.set();
        shut_down(&self.sockets, std::net::Shutdown::Both);
        self.done_changed.notify_all();
    }

    /// `n` data connections that were not the test's were closed, during
    /// the measurement or before it (while the flows connected).
    pub fn saw_foreign(&self, n: u64, measured: bool) {
        self.foreign.fetch_add(n, Ordering::Relaxed);
        if measured {
            self.foreign_measured.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// What netperf is told of them.
    fn foreign(&self) -> proto::ForeignConnections {
        proto::ForeignConnections {
            closed: self.foreign.load(Ordering::Relaxed),
            measured: self.foreign_measured.load(Ordering::Relaxed),
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// netperf is done: request/response responders stop (a UDP_STREAM
    /// receiver drains what is still in flight first).
    pub fn set_client_done(&self, done: ClientDone) {
        self.expected_datagrams
            .store(done.datagrams_sent, Ordering::Relaxed);
        self.stop.set();
        // a listener shut down for reading ends a blocked accept (EINVAL)
        shut_down(&self.listeners, std::net::Shutdown::Read);
        if let Ok(mut d) = self.done.lock() {
            *d = Some(done);
        }
        self.done_changed.notify_all();
    }

    /// What netperf reported when it finished, waiting up to `limit`.
    pub fn wait_client_done(&self, limit: Duration) -> Option<ClientDone> {
        let guard = self.done.lock().ok()?;
        let (guard, _) = self
            .done_changed
            .wait_timeout_while(guard, limit, |d| d.is_none() && !self.is_aborted())
            .ok()?;
        guard.clone()
    }
}

/// Keep a descriptor of `sock` in `list`.
fn keep(list: &Mutex<Vec<Socket>>, sock: &impl AsFd) {
    if let Ok(owned) = sock.as_fd().try_clone_to_owned()
        && let Ok(mut v) = list.lock()
    {
        v.push(Socket::from(owned));
    }
}

/// Shut down every socket of `list` (`how`), waking whoever waits on one.
fn shut_down(list: &Mutex<Vec<Socket>>, how: std::net::Shutdown) {
    if let Ok(v) = list.lock() {
        for s in v.iter() {
            let _ = s.shutdown(how);
        }
    }
}

/// What every family's `prepare` works from.
pub(crate) struct Setup<'a> {
    pub spec: &'a TestSpec,
    /// Where the data sockets bind.
    pub local: IpAddr,
    /// The control connection's peer.
    pub peer: IpAddr,
    /// The data path's conventions, from the session's dialect.
    pub conv: Conventions,
    pub cfg: &'a Config,
}

impl Setup<'_> {
    /// A grant's fields that the session, not the family, decides.
    pub fn grant(&self, g: GrantSides) -> Grant {
        Grant {
            data_port: g.data_port,
            token: g.token,
            send_buf: g.bufs.0,
            recv_buf: g.bufs.1,
            send_size: g.sizes.0,
            recv_size: g.sizes.1,
            send_width: g.widths.0,
            recv_width: g.widths.1,
            measure_cpu: self.spec.measure_cpu,
            num_cpus: match self.cfg.num_cpus {
                0 => engine::cpu::count(),
                n => n,
            },
        }
    }
}

/// What a family decides of its grant: (send, receive) pairs of the
/// server's socket buffers, message sizes and ring widths.
pub(crate) struct GrantSides {
    pub data_port: u16,
    pub token: Token,
    pub bufs: (u32, u32),
    pub sizes: (u32, u32),
    pub widths: (u32, u32),
}

/// The server's side of a test, once its sockets are ready.
pub type Job = Box<dyn FnOnce(&TestCtl) -> Result<SideResults, ErrorMsg> + Send>;

/// What a family's `prepare` hands back: the grant, the job, and the
/// buffer memory the job will allocate, as resolved
/// ([`TestSpec::buffer_memory`]), which is reserved before the job runs.
pub(crate) struct Prepared {
    pub grant: Grant,
    pub job: Job,
    pub memory: u64,
}

/// Reserve `need` bytes of buffers for a test: within the per-session cap
/// and the daemon's budget, or refused naming the limit.
fn reserve(need: u64, cfg: &Config) -> Result<crate::Reservation, ErrorMsg> {
    let cap = cfg.limits.memory_per_session;
    if need > cap {
        return Err(ErrorMsg::new(
            ErrorCode::InvalidRequest,
            format!(
                "buffers: the test would need {need} bytes of buffers on the server, more than its limit of {cap} a session"
            ),
        ));
    }
    let budget = cfg.memory_budget.limit();
    cfg.memory_budget.reserve(need).map_err(|free| {
        if need > budget {
            ErrorMsg::new(
                ErrorCode::Resource,
                format!(
                    "the test needs {need} bytes of buffers on the server, more than netserver's whole budget of {budget} (netserver --memory-budget)"
                ),
            )
        } else {
            ErrorMsg::new(
                ErrorCode::Busy,
                format!(
                    "netserver's buffer memory is taken by other tests: this one needs {need} bytes, {free} of its {budget} are free (netserver --memory-budget); try again later"
                ),
            )
        }
    })
}

/// A test whose data sockets are set up and whose worker thread runs.
#[derive(Debug)]
pub struct RunningTest {
    pub spec: TestSpec,
    pub grant: Grant,
    ctl: Arc<TestCtl>,
    rx: mpsc::Receiver<Result<SideResults, ErrorMsg>>,
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

    /// The worker's outcome, if it has finished.
    pub fn try_result(&self) -> Option<Result<SideResults, ErrorMsg>> {
        match self.rx.try_recv() {
            Ok(r) => Some(r),
            Err(mpsc::TryRecvError::Empty) => None,
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

/// What a worker holds until it ends, and whom it tells then.
struct WorkerEnd {
    held: Option<(crate::WorkerSlot, crate::Reservation)>,
    on_done: Box<dyn Fn() + Send>,
}

impl Drop for WorkerEnd {
    fn drop(&mut self) {
        self.held = None;
        (self.on_done)();
    }
}

/// Set up the data sockets for `spec` and start its worker thread.
/// `local` is the control connection's local address: data sockets bind to
/// it (or to the address of this host netperf named with `-- -H`), never to
/// the wildcard.
/// `conv`: the data path's conventions of the session's dialect.
pub(crate) fn start(
    spec: &TestSpec,
    local: IpAddr,
    peer: IpAddr,
    conv: Conventions,
    cfg: &Config,
    workers: &Arc<crate::Workers>,
    on_done: Box<dyn Fn() + Send>,
) -> Result<RunningTest, ErrorMsg> {
    // Each session runs one test at a time, but the worker of an aborted
    // one may still be ending: at most as many workers as sessions.
    let slot = workers.enter(cfg.max_sessions.max(1)).map_err(|alive| {
        ErrorMsg::new(
            ErrorCode::Busy,
            format!(
                "netserver is busy: {alive} tests are running or ending (--max-sessions); try again shortly"
            ),
        )
    })?;
    let setup = Setup {
        spec,
        local: data_address(spec, local)?,
        peer,
        conv,
        cfg,
    };
    // Sizes, widths and placement resolved, data sockets bound; nothing of
    // the test's buffers allocated yet.
    let Prepared { grant, job, memory } = match spec.kind {
        TestKind::TcpStream | TestKind::TcpMaerts => stream::prepare(&setup)?,
        TestKind::UdpStream | TestKind::UdpMaerts => udp_stream::prepare(&setup)?,
        TestKind::TcpRr | TestKind::UdpRr | TestKind::TcpCrr | TestKind::TcpCc => {
            rr::prepare(&setup)?
        }
    };
    let memory = reserve(memory, cfg)?;
    let ctl = Arc::new(TestCtl::default());
    let (tx, rx) = mpsc::channel();
    let c = ctl.clone();
    let cpu = spec.server.cpu_bind;
    let measure = spec.measure_cpu.then_some(cfg.num_cpus);
    let log = cfg.logger.clone();
    let thread = thread::Builder::new()
        .name(format!("test {}", spec.kind))
        .spawn(move || {
            // the session is told when the worker ends, a panic included;
            // its place among the workers and its share of the memory
            // budget are given back first
            let _end = WorkerEnd {
                held: Some((slot, memory)),
                on_done,
            };
            let start = measure.and_then(|_| engine::cpu::snapshot());
            // a CPU this host cannot bind to leaves the test unbound, as
            // netserver 2.7 does
            if let Some(Err(e)) = cpu.map(sockopt::pin_current_thread) {
                log.warn_limited("cpu-bind", &format!("-T: {e}: the test runs unbound"));
            }
            let r = job(&c);
            // -C: our utilisation over the test, from /proc/stat.
            let r = r.map(|mut res| {
                res.foreign_connections = c.foreign();
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
        thread: Some(thread),
    })
}

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
    ctl: &TestCtl,
) -> Result<SideResults, ErrorMsg> {
    let threads = (engine::cpu::count().max(1) as usize).min(conns.len());
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
    };
    let live = engine::live::Live::new();
    let report = engine::evloop::run(conns, &plan, &ctl.stop, &live).map_err(|e| {
        if ctl.is_aborted() {
            aborted()
        } else {
            failed("data connections", e)
        }
    })?;
    Ok(report.results())
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
    let threads = (engine::cpu::count().max(1) as usize).min(socks.len());
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
    };
    let flows = socks.into_iter().map(|s| (s, None)).collect();
    engine::evloop::udp::run(flows, &plan, &ctl.stop, &engine::live::Live::new()).map_err(|e| {
        if ctl.is_aborted() {
            aborted()
        } else {
            failed("UDP data sockets", e)
        }
    })
}

/// UDP tests of many flows: a socket per flow, bound where `sock` is and
/// connected to that flow's sender once its hello arrives (see
/// [`udp::server_hellos`]), each registered for an abort.
pub(crate) fn udp_flow_sockets(
    spec: &TestSpec,
    sock: &UdpSocket,
    token: &proto::Token,
    peer: IpAddr,
    deadline: Instant,
    ctl: &TestCtl,
) -> Result<Vec<UdpSocket>, ErrorMsg> {
    let local = sock
        .local_addr()
        .map_err(|e| failed("UDP data socket", e))?;
    let side = server_side(&spec.server, Protocol::Udp);
    let new_socket = || -> std::io::Result<UdpSocket> {
        let s = sockopt::new_socket(spec.family, Protocol::Udp)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        s.set_reuse_address(true)?;
        sockopt::apply_side(&s, &side, spec.family, Protocol::Udp, false)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        s.bind(&local.into())?;
        Ok(s.into())
    };
    let socks = udp::server_hellos(
        sock,
        token,
        peer,
        spec.flows,
        &new_socket,
        deadline,
        &|| ctl.is_aborted(),
    )
    .map_err(|e| failed("UDP data sockets", e))?;
    for s in &socks {
        ctl.register(s);
    }
    Ok(socks)
}

/// What the client is told when the session aborted its test.
pub(crate) fn aborted() -> ErrorMsg {
    ErrorMsg::new(ErrorCode::TestFailed, "test aborted")
}

/// Turn an engine error into what the client is told.
pub(crate) fn failed(what: &str, e: impl std::fmt::Display) -> ErrorMsg {
    ErrorMsg::new(ErrorCode::TestFailed, format!("{what}: {e}"))
}

/// Which resource an error says ran out, and what gives more of it.
pub(crate) fn shortage(errno: Option<i32>) -> Option<String> {
    match errno? {
        libc::EMFILE => {
            let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .map_or(0, |(soft, _)| soft);
            Some(format!(
                "its limit is {limit}: raise it, e.g. LimitNOFILE= or ulimit -n"
            ))
        }
        libc::ENFILE => Some(
            "the system's table of open files is full: raise fs.file-max, or close files elsewhere"
                .to_string(),
        ),
        libc::ENOMEM | libc::ENOBUFS => Some("the kernel is short of memory".to_string()),
        _ => None,
    }
}

/// A data socket that could not be had: the resource named when one ran out.
fn data_socket_error(what: &str, e: impl std::fmt::Display, errno: Option<i32>) -> ErrorMsg {
    ErrorMsg::new(
        ErrorCode::Resource,
        match shortage(errno) {
            Some(why) => format!("netserver cannot {what}: {e} ({why})"),
            None => format!("netserver cannot {what}: {e}"),
        },
    )
}

/// Where the data sockets bind: the control connection's address, or the
/// one netperf named (`-- -H`, or a data family other than the control
/// connection's, `-- -4`/`-6`). It must be a unicast address of this host
/// (binding fails otherwise); a data connection must still present the
/// test's token, and a UDP peer at another address than the control
/// connection's must prove it receives there (see engine's UDP hello).
fn data_address(spec: &TestSpec, control: IpAddr) -> Result<IpAddr, ErrorMsg> {
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
    let side = server_side(&spec.server, protocol);
    let ports = candidate_ports(spec.data_port, cfg.data_ports)?;
    let mut last_err = None;
    for port in ports {
        let sock = sockopt::new_socket(family, protocol)
            .map_err(|e| data_socket_error("open a data socket", &e, e.raw_os_error()))?;
        let _ = sock.set_reuse_address(true);
        sockopt::apply_side(&sock, &side, family, protocol, spec.keepalive)
            .map_err(|e| ErrorMsg::new(ErrorCode::InvalidRequest, e.to_string()))?;
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
                        data_socket_error("listen for data connections", &e, e.raw_os_error())
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
/// - a TOS byte without its ECN bits: the server marks its own sends with
///   a DSCP only (the client's side may set ECN bits, for ECN and L4S tests).
pub(crate) fn server_side(asked: &SideSpec, protocol: Protocol) -> SideSpec {
    let mut side = asked.clone();
    if protocol == Protocol::Tcp
        && let Some(cc) = &side.cong_control
    {
        let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
            .unwrap_or_default();
        if !allowed.split_whitespace().any(|a| a == cc) {
            side.cong_control = None;
        }
    }
    side.tos = side.tos.map(|t| t & !0x03).filter(|&t| t > 0);
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
